"""Adapter rows of decoders with a structure of their own (see :mod:`llmath.model.families`, which merges
them): CPM-Ant, Phi-4-multimodal, Moshi. Each row follows what transformers 5.23 builds from the same config.json
(tests/test_oracle_causal_lm.py proves parameters by component, eager FLOPs and cache bytes on meta)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.model.family_facts import LLAMA_LIKE, _attn_bias


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
        q_bias=False,
        k_bias=False,
        v_bias=False,
        o_bias=False,
        ffn_bias=False,
        ffn_keys=("dim_ff",),
        fields=_cpmant_fields,
    ),
    # Phi-4-multimodal: Phi-3's language model (fused qkv and gate_up, no biases) whose config also holds
    # the vision and audio towers' configs (model/towers_phi4mm.py counts them)
    "phi4_multimodal": dict(LLAMA_LIKE, **_attn_bias(False), ffn_bias=False, towers=True),
    # Moshi (Kyutai): MoshiForCausalLM is the temporal transformer with its text head only (modeling_moshi.py);
    # the depth decoder over the audio codebooks and the Mimi codec (depth_decoder_config,
    # audio_encoder_config) belong to MoshiForConditionalGeneration and are not built. Unbiased q/k/v/o,
    # a gated FFN whose fc1 is gate and up fused (ffn_dim = 2 × the hidden width), a token table of
    # vocab_size + 1 rows, every layer's cache a sliding window of sliding_window
    "moshi": dict(
        LLAMA_LIKE,
        **_attn_bias(False),
        ffn_bias=False,
        d_ff=lambda cfg: int(cfg["ffn_dim"]) // 2,
        fields=lambda cfg, n: dict(extra_token_rows=1),
        towers=True,  # the depth decoder and Mimi: named in towers_not_counted, with the report's note
    ),
}
