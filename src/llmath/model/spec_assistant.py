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

from llmath.errors import SpecError


@dataclass(frozen=True)
class AssistantSpec:
    """``backbone_d``: the target's width Db (``backbone_hidden_size``); ``centroids`` / ``centroid_top_k``:
    the ordered-embedding head (``use_ordered_embeddings``: a D × centroids projection picks the top-k
    centroids, and only their ``vocab / centroids`` tokens each get a logit); 0 / 0: the full LM head."""

    backbone_d: int
    centroids: int = 0
    centroid_top_k: int = 0

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
