"""Adapter row of ZAYA1 (Zyphra; merged into :mod:`llmath.model.families`' ``ADAPTERS`` by one line there),
read as transformers 5.23's modeling_zaya.py builds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import LLAMA_LIKE, _k, moe_keys

ZAYA_TYPES = {"hybrid": "full_attention", "hybrid_sliding": "sliding_attention"}


def _zaya_prepare(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """ZAYA names its layer types ``hybrid`` (full attention) and ``hybrid_sliding`` (configuration_zaya.py);
    every layer is a CCA attention layer with a MoE, so read them as the usual full / sliding types."""
    types = cfg.get("layer_types")
    if types is None:
        return cfg
    unknown = sorted(set(types) - set(ZAYA_TYPES))
    if unknown:
        raise ConfigError(f"zaya: layer_types names {unknown}; ZAYA's layers are {sorted(ZAYA_TYPES)}")
    return dict(cfg, layer_types=[ZAYA_TYPES[t] for t in types])


def _zaya_fields(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The CCA kernel widths (cca_time0, cca_time1; 2 and 2 by default), the residual scaling, and the partial
    rotary width from the per-layer-type rope_parameters (both types must agree: llmath has one width)."""
    rope = cfg.get("rope_parameters") or {}
    factors = {float(v.get("partial_rotary_factor", 1.0)) for k, v in rope.items() if k in ZAYA_TYPES and v}
    if len(factors) > 1:
        raise ConfigError(
            f"zaya: rope_parameters give partial_rotary_factor {sorted(factors)} for different layer types; "
            "llmath models one rotary width: open an issue with the config.json"
        )
    head_dim = int(cfg.get("head_dim") or 128)
    factor = factors.pop() if factors else 1.0
    kernels = (int(cfg.get("cca_time0") or 2), int(cfg.get("cca_time1") or 2))
    return dict(cca_kernels=kernels, residual_affine=True, rotary_dim=int(head_dim * factor))


ADAPTERS: dict[str, dict[str, Any]] = {
    # ZAYA1 (Zyphra): compressed convolutional attention (ops/cca.py: q/k through two causal convs, value
    # heads half current / half delayed, an L2 q/k norm with a learned key scale per K/V head), learned
    # affine residual adds, a partial rotary per layer type, and in every layer a MoE whose router is an MLP
    # (router_hidden_size wide, one skip class) carrying its state to the next layer; top-1 experts without
    # a shared one (modeling_zaya.py)
    "zaya": dict(
        LLAMA_LIKE,
        ffn_bias=False,
        qk_norm="l2",
        lm_head_bias=_k("lm_head_bias", False),
        prepare=_zaya_prepare,
        ffn_keys=("moe_intermediate_size",),
        fields=_zaya_fields,
        moe=moe_keys("num_experts", "moe_intermediate_size", router_mlp="router_hidden_size"),
    ),
}
