"""MiniMax-M3's vision tower and projector (transformers 5.23 ``modeling_minimax_m3_vl.py``), counted exactly;
``tests/test_multimodal.py`` proves them against the meta-device module.

Vision (MiniMaxM3VLVisionModel): a 3-D patch conv (temporal × patch × patch, no bias), ``pre_layrnorm``
(LayerNorm), then CLIP encoder layers (two LayerNorms, q/k/v/out with biases, fc1/fc2 with biases); no post
norm. Projector (MiniMaxM3VLMultiModalProjector): Linear(Dv, P) → GELU → Linear(P, Dt) per patch, then the
s² neighbouring patches concatenated (Dt·s², the config's ``merged_hidden_size``) → Linear(Dt·s², P) → GELU →
Linear(P, Dt), all with biases; P = ``projector_hidden_size`` (default 6144).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Cfg = Mapping[str, Any]


def minimax_m3_vision(v: Cfg) -> dict[str, int]:
    D, F, L = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    C, p, t = v["num_channels"], v["patch_size"], v["temporal_patch_size"]
    layer = 2 * 2 * D + 4 * (D * D + D) + D * F + F + F * D + D
    return {"vision.embeddings": C * t * p * p * D, "vision.layers": L * layer, "vision.norm": 2 * D}


def minimax_m3_projector(cfg: Cfg, v: Cfg, dt: int) -> int:
    P, s = cfg.get("projector_hidden_size") or 6144, v["spatial_merge_size"]
    return (v["hidden_size"] * P + P) + (P * dt + dt) + (dt * s * s * P + P) + (P * dt + dt)


# MiniMaxM3VLVisionConfig's defaults (configuration_minimax_m3_vl.py), for keys a hub file leaves out
DEFAULTS: dict[str, dict[str, Any]] = {
    "minimax_m3_vl_vision": dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_channels=3,
                                 patch_size=14, temporal_patch_size=2, spatial_merge_size=2),
}  # fmt: skip
VISION: dict[str, Callable[[Cfg], dict[str, int]]] = {"minimax_m3_vl_vision": minimax_m3_vision}
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {"minimax_m3_vl": minimax_m3_projector}
