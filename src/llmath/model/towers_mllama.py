"""Llama 3.2 Vision's image tower (``mllama_vision_model``), counted the way transformers 5.23 builds it
(modeling_mllama.py ``MllamaVisionModel``), and its projector; :mod:`llmath.model.towers` merges these rows
and ``tests/test_mllama.py`` proves them against the meta-device module.

With D the width, F the MLP width, p the patch, N = (image_size / p)² + 1 positions per tile (the class
token), T = max_num_tiles and R = len(supported_aspect_ratios) + 1 aspect-ratio ids:

* patch conv 3·p²·D (no bias), class embedding D;
* gated positions: N·D + a gate + a tile table of R rows × T·N·D;
* pre- and post-tile aspect-ratio embeddings: R rows × T·D + a gate, each;
* LayerNorms before and after the local layers (2·D each);
* ``num_hidden_layers`` local layers and ``num_global_layers`` gated global ones: LayerNorms, q/k/v/o without
  biases, fc1/fc2 with biases (+ two scalar gates per global layer);
* projector: Linear(vision_output_dim, text width) with bias.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.spec_vision import VisionSpec

Counts = dict[str, int]
Cfg = Mapping[str, Any]

# MllamaVisionConfig's defaults (transformers 5.23 configuration_mllama.py), for keys a file leaves out
DEFAULTS: dict[str, dict[str, Any]] = {
    "mllama_vision_model": dict(
        hidden_size=1280, num_hidden_layers=32, num_global_layers=8, num_channels=3, intermediate_size=5120,
        vision_output_dim=7680, image_size=448, patch_size=14, max_num_tiles=4,
        supported_aspect_ratios=[[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]],
    )
}  # fmt: skip


def _layer(D: int, F: int) -> int:
    """One encoder layer: two LayerNorms, q/k/v/o without biases, fc1/fc2 with biases."""
    return 2 * 2 * D + 4 * D * D + 2 * D * F + F + D


def mllama_vision(v: Cfg) -> Counts:
    D, F, p, T = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["max_num_tiles"]
    N = (v["image_size"] // p) ** 2 + 1
    R = len(v["supported_aspect_ratios"]) + 1
    embeddings = v["num_channels"] * p * p * D + D + (N * D + 1 + R * T * N * D) + 2 * (R * T * D + 1) + 2 * 2 * D
    layers = v["num_hidden_layers"] * _layer(D, F) + v["num_global_layers"] * (_layer(D, F) + 2)
    return {"vision.embeddings": embeddings, "vision.layers": layers}


VISION = {"mllama_vision_model": mllama_vision}
PROJECTORS = {"mllama": lambda c, v, dt: v["vision_output_dim"] * dt + dt}  # Linear(..., bias=True)


def vision_spec(cfg: Cfg) -> VisionSpec | None:
    """The encoder's shape for requests with images (model/spec_vision.py), from ``vision_config`` with
    MllamaVisionConfig's defaults; None for a wrapper other than mllama."""
    if cfg.get("model_type") != "mllama":
        return None
    v = {**DEFAULTS["mllama_vision_model"], "attention_heads": 16, **(cfg.get("vision_config") or {})}
    if not all(isinstance(v[k], int) for k in ("image_size", "patch_size")):
        raise ConfigError(
            f"mllama: image_size={v['image_size']!r} and patch_size={v['patch_size']!r} must be integers (square)"
        )
    return VisionSpec(
        d_model=v["hidden_size"], d_ff=v["intermediate_size"], n_heads=v["attention_heads"],
        n_layers=v["num_hidden_layers"], n_global_layers=v["num_global_layers"], patch=v["patch_size"],
        image_size=v["image_size"], channels=v["num_channels"], tiles=v["max_num_tiles"],
        output_dim=v["vision_output_dim"],
    )  # fmt: skip
