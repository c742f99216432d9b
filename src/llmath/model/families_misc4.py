"""Adapter rows of the session-4 families Beam, ZAYA, HRM-Text and Cohere Compass (merged into
:mod:`llmath.model.families`' ``ADAPTERS`` by one line there). Each row states what its transformers 5.23
modeling file builds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import LLAMA_LIKE, _k, _mlp_layer_types


def _beam_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    """Beam: every sixth layer and the last one full attention, the others sliding (configuration_beam.py)."""
    types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    return types[:-1] + ["full_attention"] if types else types


def _beam_prepare(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """Beam's rope_parameters are keyed by layer type; a type mapped to null runs without positions. llmath
    models the checkpoint's split (rotary on the sliding layers, NoPE on the full ones) and refuses others."""
    rope = cfg.get("rope_parameters")
    rope = rope if isinstance(rope, Mapping) else {}
    full, sliding = rope.get("full_attention"), rope.get("sliding_attention", {})
    if cfg.get("sliding_window") is None or full is not None or sliding is None:
        raise ConfigError(
            f"beam: sliding_window={cfg.get('sliding_window')!r}, rope_parameters={dict(rope)!r}: llmath models "
            "Beam with sliding layers that use RoPE and full-attention layers without (its defaults); "
            "open an issue with the config.json"
        )
    return cfg


ADAPTERS: dict[str, dict[str, Any]] = {
    # Beam (Reflection AI): per-head q/k norms; a sigmoid gate (D -> N·H, plus one bias per head) on the
    # attention output; sliding layers with RoPE, every sixth (and the last) full attention without positions
    # and a position-scaled query; four norms per layer (sandwich) with depth-scaled residuals; the first three
    # layers dense, then sigmoid-routed grouped experts whose e_score_correction_bias is a buffer, no shared
    # expert; final logit soft-capping (modeling_beam.py)
    "beam": dict(
        LLAMA_LIKE,
        ffn_bias=False,
        qk_norm="head",
        attn_out_gate=True,
        attn_gate_bias=True,
        nope_full=True,
        nope_query_scale=True,
        norms_per_layer=4,
        softcap=True,
        prepare=_beam_prepare,
        windows=_beam_types,
        moe=dict(
            experts="num_experts",
            top_k="num_experts_per_tok",
            d_ff="moe_intermediate_size",
            layers=lambda c, n: _mlp_layer_types(c, n) if c.get("mlp_layer_types") else [i >= 3 for i in range(n)],
        ),
    ),
}


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


ADAPTERS.update(
    {
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
            moe=dict(
                experts="num_experts",
                top_k="num_experts_per_tok",
                d_ff="moe_intermediate_size",
                router_mlp="router_hidden_size",
            ),
        ),
    }
)


def _hrm_prepare(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """HRM-Text: ``num_layers_per_stack`` layers per stack (a file without it gives the per-stack count as
    num_hidden_layers, which the config class then inflates); llmath's layers are the M·H·(L+1) layer runs
    (configuration_hrm_text.py)."""
    per = cfg.get("num_layers_per_stack") or cfg.get("num_hidden_layers")
    h, lo = cfg.get("H_cycles", 2), cfg.get("L_cycles", 3)
    for key, v in (("num_layers_per_stack", per), ("H_cycles", h), ("L_cycles", lo)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"hrm_text: {key}={v!r} must be a positive integer (layers per stack, cycles)")
    return dict(cfg, num_hidden_layers=per * h * (lo + 1), H_cycles=h, L_cycles=lo)


ADAPTERS.update(
    {
        # HRM-Text (hierarchical reasoning model): two stacks of Llama-style layers (MHA, a sigmoid output gate
        # D -> N·H with attention_bias, weightless RMSNorms) run as H_cycles × (L_cycles runs of the low-level
        # stack, one of the high-level stack): ops/cycles.py; embeddings times embedding_scale; no final norm
        # beyond each stack run's (modeling_hrm_text.py)
        "hrm_text": dict(
            LLAMA_LIKE,
            norm="rms_noparam",
            kv_heads=lambda c, n: n,
            attn_out_gate=True,
            gate_proj_bias=_k("attention_bias", False),
            embedding_scale=True,
            final_norm=False,
            prepare=_hrm_prepare,
            fields=lambda c, n: dict(recurrence=(int(c["H_cycles"]), int(c["L_cycles"]))),
        ),
    }
)


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


ADAPTERS.update(
    {
        # Cohere Compass (North-Micro) text decoder: Cohere2's parallel block (one LayerNorm without bias, attention
        # and the gated MLP on it), sliding layers with (multimodal) rotary, full layers without positions where
        # rope_parameters says so; logits times logit_scale (modeling_cohere_compass.py). Its vision tower (a
        # Qwen3-VL one) belongs to the cohere_compass wrapper
        "cohere_compass_text": dict(
            LLAMA_LIKE,
            norm="layer",
            norm_bias=False,
            parallel=True,
            norms_per_layer=1,
            ffn_bias=False,
            nope_full=_compass_nope,
            prepare=_compass_prepare,
        ),
    }
)
