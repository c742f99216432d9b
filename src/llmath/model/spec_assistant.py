"""A draft model that runs on its target's cache (Gemma 4's assistants, transformers 5.23
``models/gemma4_assistant``, ``models/gemma4_unified_assistant``).

Such an assistant has no prefill and no KV cache of its own: every layer reuses K/V the target cached (its
config forces ``num_kv_shared_layers = num_hidden_layers``; the target hands over, per attention kind, the K/V
of its last layer of that kind that computes them: ``shared_kv_states``). One draft step takes the target's
embedding of the last seen token concatenated with the target's last hidden state (2·Db wide), projects it to
the assistant's width D (``pre_projection``), runs the layers with queries only (the keys and values are read
from the target's cache), and returns the logits plus a hidden state projected back to Db
(``post_projection``) that feeds the next draft step (generation/candidate_generator.py
``SinglePositionMultiTokenCandidateGenerator``). All draft steps of a round sit at the same position (the
last seen token's) and read the same cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from llmath.errors import SpecError


@dataclass(frozen=True)
class AssistantSpec:
    """``backbone_d``: the target's width Db (``backbone_hidden_size``); ``centroids`` / ``centroid_top_k``:
    the ordered-embedding head (``use_ordered_embeddings``: a D × centroids projection picks the top-k
    centroids, and only their ``vocab / centroids`` tokens each get a logit); 0 / 0: the full LM head."""

    # execution trait (model/traits.py): no prefill and no cache of its own, it runs on its target's cache
    reads_target_cache: ClassVar[bool] = True

    backbone_d: int
    centroids: int = 0
    centroid_top_k: int = 0

    def target_problem(self, draft: Any, target: Any) -> str | None:
        """Why the assistant ``draft`` (a ModelSpec) cannot run on ``target``'s cache, or None: it reads the
        target's last hidden state (width ``backbone_d``) and its K/V per attention kind, in the target's shape."""
        if self.backbone_d != target.d_model:
            return (
                f"assistant {draft.name!r} was trained on a target of width {self.backbone_d} (backbone_hidden_size), "
                f"{target.name!r} has {target.d_model}: pick the assistant made for this target"
            )
        for w in sorted(set(draft.layer_windows), key=str):
            own = [x for x, shared in zip(target.layer_windows, target.layer_kv_shared, strict=True) if not shared]
            if w not in own or _kv_shape(draft, w) != _kv_shape(target, w):
                kind = "full" if w is None else f"window {w}"
                return (
                    f"assistant {draft.name!r} reads the target's {kind} K/V as (heads, width) = {_kv_shape(draft, w)};"
                    f" {target.name!r} caches no such layer: pick the assistant made for this target"
                )
        return None

    def validate(self, name: str, vocab: int) -> None:
        if self.backbone_d <= 0:
            raise SpecError(f"{name!r}: backbone_hidden_size={self.backbone_d} must be positive")
        if self.centroids == 0 and self.centroid_top_k == 0:
            return
        if not 0 < self.centroid_top_k <= self.centroids or vocab % self.centroids:
            raise SpecError(
                f"{name!r}: num_centroids={self.centroids} must divide vocab_size={vocab} and "
                f"centroid_intermediate_top_k={self.centroid_top_k} must lie in 1..num_centroids"
            )

    def head_rows(self, vocab: int) -> int:
        """Vocabulary rows the head scores per token: all, or top_k · vocab / centroids."""
        return self.centroid_top_k * (vocab // self.centroids) if self.centroids else vocab


def _kv_shape(spec: Any, window: int | None) -> tuple[int, int]:
    """(K/V heads, head width) of the layers of ``window`` (Gemma 4's full layers have their own)."""
    if window is None and spec.full_head_dim is not None:
        return spec.full_kv_heads or spec.n_kv_heads, spec.full_head_dim
    return spec.n_kv_heads, spec.head_dim
