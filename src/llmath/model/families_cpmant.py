"""Adapter row of CPM-Ant (OpenBMB; merged into :mod:`llmath.model.families`' ``ADAPTERS`` by one line there),
following what transformers 5.23 builds from the same config.json (tests/test_oracle_causal_lm.py proves
parameters by component, eager FLOPs and cache bytes on meta)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.model.family_facts import _all_bias


def _cpmant_fields(cfg: Mapping[str, Any], n_layers: int) -> dict[str, Any]:
    """CPM-Ant (modeling_cpmant.py): heads of ``dim_head``; ``prompt_length`` prompt positions prepended to
    every sequence (their rows, ``prompt_types`` × ``prompt_length``, extend the token table); a segment table
    of ``segment_types`` rows; one relative-position bias table of ``segment_types``² +
    ``position_bias_num_buckets`` rows × heads for the model; the LM head is its own Linear whatever
    ``tie_word_embeddings`` says (``CpmAntForCausalLM._tied_weights_keys`` is empty)."""
    prompt, segments = int(cfg.get("prompt_length") or 0), int(cfg.get("segment_types") or 0)
    return dict(
        head_dim=int(cfg["dim_head"]),
        prefix_positions=prompt,
        extra_token_rows=int(cfg.get("prompt_types") or 0) * prompt,
        segment_rows=segments,
        relative_buckets=segments * segments + int(cfg.get("position_bias_num_buckets") or 0),
        tie_embeddings=False,
    )


ADAPTERS: dict[str, dict[str, Any]] = {
    # CPM-Ant (OpenBMB): pre-norm RMSNorms without bias, GELU-gated FFN (w_0 gate, w_1 up, w_out), no biases,
    # relative-position bias instead of rotary; the encoder's final norm
    "cpmant": dict(
        norm="rms",
        norm_bias=False,
        ffn="gated",
        activation="gelu",
        position="relative",
        **_all_bias(False),
        ffn_keys=("dim_ff",),
        fields=_cpmant_fields,
    ),
}
