"""Adapter row of HRM-Text, the hierarchical reasoning model (merged into :mod:`llmath.model.families`'
``ADAPTERS`` by one line there), read as transformers 5.23's modeling_hrm_text.py builds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import LLAMA_LIKE, _k


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


ADAPTERS: dict[str, dict[str, Any]] = {
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
