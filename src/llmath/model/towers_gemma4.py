"""Gemma 4's vision tower (``gemma4_vision``, transformers 5.23 models/gemma4/modeling_gemma4.py), counted exactly.

Gemma4VisionPatchEmbedder: ``input_proj`` Linear(3·p², D) without bias and a (2, P, D) table of x and y
position rows (P = ``position_embedding_size``). Each Gemma4VisionEncoderLayer: q/k/v/o without bias
(Gemma4ClippableLinear; ``use_clipped_linears`` adds clamp bounds as buffers, not parameters), per-head q and k
RMSNorms of ``head_dim``, a gated GELU FFN (gate/up/down, no bias) and four RMSNorms of D. The pooler and the
``standardize`` bias/scale are buffers or parameter-free. The wrapper's ``embed_vision`` (Gemma4MultimodalEmbedder)
is a norm without scale and Linear(D, text width) without bias: the projector.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Cfg = Mapping[str, Any]

# Gemma4VisionConfig's defaults (transformers 5.23 configuration_gemma4.py)
DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma4_vision": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=16, num_attention_heads=12,
                          num_key_value_heads=12, head_dim=64, patch_size=16, position_embedding_size=10240),
}  # fmt: skip


def gemma4_vision(v: Cfg) -> dict[str, int]:
    D, F, L = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    H, K, hd = v["num_attention_heads"], v["num_key_value_heads"], v["head_dim"]
    p, P = v["patch_size"], v["position_embedding_size"]
    layer = 2 * D * H * hd + 2 * D * K * hd + 2 * hd + 3 * D * F + 4 * D
    return {"vision.embeddings": 3 * p * p * D + 2 * P * D, "vision.layers": L * layer}


VISION: dict[str, Callable[[Cfg], dict[str, int]]] = {"gemma4_vision": gemma4_vision}

# wrapper model_type -> projector parameters (wrapper config, vision config, text width)
# (gemma4_unified embeds image patches without a vision tower: a different module, not counted here)
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {"gemma4": lambda c, v, dt: v["hidden_size"] * dt}
