"""Adapter row of Cohere Compass's text decoder (merged into :mod:`llmath.model.families`' ``ADAPTERS`` by
one line there), read as transformers 5.23's modeling_cohere_compass.py builds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import COHERE_LIKE


def _compass_prepare(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """Cohere Compass: the config class sets head_dim = hidden_size // num_attention_heads whatever the file
    says (configuration_cohere_compass.py, as Cohere2's), and all layers full attention without layer_types."""
    d, n = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    out = dict(cfg)
    if isinstance(d, int) and isinstance(n, int) and n > 0:
        out["head_dim"] = d // n
    if out.get("layer_types") is None and isinstance(cfg.get("num_hidden_layers"), int):
        out["layer_types"] = ["full_attention"] * cfg["num_hidden_layers"]
    if "sliding_attention" in (out.get("layer_types") or ()) and out.get("sliding_window") is None:
        raise ConfigError(
            "cohere_compass_text: layer_types has sliding_attention layers but sliding_window is null; "
            "set the window (North-Micro: 4096)"
        )
    return out


def _compass_nope(cfg: Mapping[str, Any]) -> bool:
    """Full-attention layers without positions: rope_parameters keyed by layer type with full_attention null
    (the North-Micro checkpoint); a rotary entry for them (or flat rope_parameters) keeps rotary everywhere."""
    rope = cfg.get("rope_parameters")
    return isinstance(rope, Mapping) and "full_attention" in rope and rope["full_attention"] is None


ADAPTERS: dict[str, dict[str, Any]] = {
    # Cohere Compass (North-Micro) text decoder: Cohere2's parallel block (one LayerNorm without bias, attention
    # and the gated MLP on it), sliding layers with (multimodal) rotary, full layers without positions where
    # rope_parameters says so; logits times logit_scale (modeling_cohere_compass.py). Its vision tower (a
    # Qwen3-VL one) belongs to the cohere_compass wrapper
    "cohere_compass_text": dict(COHERE_LIKE, nope_full=_compass_nope, prepare=_compass_prepare),
}
