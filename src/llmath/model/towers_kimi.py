"""Kimi-K2.5's vision tower (MoonViT, ``kimi_k25_vision``) and patch-merger projector, counted exactly as transformers
5.23 builds them (models/kimi_k25/modeling_kimi_k25.py).

The hub file (moonshotai/Kimi-K2.5, remote code) names the tower's widths ``vt_hidden_size``,
``vt_intermediate_size``, ``vt_num_hidden_layers``, ``vt_num_attention_heads``, ``init_pos_emb_height`` /
``_width`` and gives no ``model_type``; transformers' Kimi_K25VisionConfig names them ``hidden_size``, ... and
ignores the hub spellings (its defaults equal K2.5's values). llmath reads the hub spelling first, then
transformers'. Tower: a patch Conv2d(3, D, p, p) with bias, a (height, width, D) position table (the time axis is
parameter-free), layers of two biased LayerNorms, biased q/k/v/proj and a biased fc1/fc2 MLP, a final LayerNorm.
Projector (``mm_projector``): a LayerNorm over the P-wide features (``mm_hidden_size``, else
``projection_hidden_size``), ``in_proj`` Linear(P·m, P·m) and ``out_proj`` Linear(P·m, text width), both biased,
m = the merge kernel's area.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from math import prod
from typing import Any

Cfg = Mapping[str, Any]

# Kimi_K25VisionConfig's defaults (transformers 5.23 configuration_kimi_k25.py)
DEFAULTS: dict[str, dict[str, Any]] = {
    "kimi_k25_vision": dict(patch_size=14, pos_emb_height=64, pos_emb_width=64, num_hidden_layers=27, hidden_size=1152,
                            intermediate_size=4304, merge_kernel_size=[2, 2]),
}  # fmt: skip
# wrapper model_type -> the tower kind of its vision_config when the hub file states none
UNTYPED = {"kimi_k25": "kimi_k25_vision"}


def _get(v: Cfg, hub: str, hf: str) -> Any:
    return v[hub] if v.get(hub) is not None else v[hf]


def moonvit(v: Cfg) -> dict[str, int]:
    D, F = _get(v, "vt_hidden_size", "hidden_size"), _get(v, "vt_intermediate_size", "intermediate_size")
    L, p = _get(v, "vt_num_hidden_layers", "num_hidden_layers"), v["patch_size"]
    rows = _get(v, "init_pos_emb_height", "pos_emb_height") * _get(v, "init_pos_emb_width", "pos_emb_width")
    layer = 4 * D + 4 * D * D + 4 * D + 2 * D * F + F + D
    return {"vision.embeddings": 3 * p * p * D + D + rows * D, "vision.layers": L * layer, "vision.norm": 2 * D}


def _patch_merger(c: Cfg, v: Cfg, dt: int) -> int:
    P = v.get("mm_hidden_size") or c.get("projection_hidden_size") or 1152
    m = prod(v.get("merge_kernel_size") or (2, 2))
    return 2 * P + (P * m) ** 2 + P * m + P * m * dt + dt


VISION: dict[str, Callable[[Cfg], dict[str, int]]] = {"kimi_k25_vision": moonvit}
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {"kimi_k25": _patch_merger}
