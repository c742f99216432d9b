"""Adapter row of Beam (Reflection AI; merged into :mod:`llmath.model.families`' ``ADAPTERS`` by one line
there), read as transformers 5.23's modeling_beam.py builds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import LLAMA_QK_NORM, _dense_prefix, _mlp_types_else, moe_keys, router_groups


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
        LLAMA_QK_NORM,
        attn_out_gate=True,
        attn_gate_bias=True,
        nope_full=True,
        nope_query_scale=True,
        norms_per_layer=4,
        softcap=True,
        prepare=_beam_prepare,
        windows=_beam_types,
        moe=moe_keys(
            "num_experts",
            "moe_intermediate_size",
            layers=_mlp_types_else(_dense_prefix(3)),
            **router_groups(8),  # n_group: int | None = 8 (configuration_beam.py)
        ),
    ),
}
