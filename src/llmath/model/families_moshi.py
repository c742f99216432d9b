"""Adapter row of Moshi's temporal transformer (Kyutai; merged into :mod:`llmath.model.families`' ``ADAPTERS`` by
one line there), following what transformers 5.23 builds from the same config.json (tests/test_oracle_causal_lm.py
proves parameters by component, eager FLOPs and cache bytes on meta)."""

from __future__ import annotations

from typing import Any

from llmath.model.family_facts import LLAMA_NO_BIAS

ADAPTERS: dict[str, dict[str, Any]] = {
    # Moshi (Kyutai): MoshiForCausalLM is the temporal transformer with its text head only (modeling_moshi.py);
    # the depth decoder over the audio codebooks and the Mimi codec (depth_decoder_config,
    # audio_encoder_config) belong to MoshiForConditionalGeneration and are not built. Unbiased q/k/v/o,
    # a gated FFN whose fc1 is gate and up fused (ffn_dim = 2 × the hidden width), a token table of
    # vocab_size + 1 rows, every layer's cache a sliding window of sliding_window
    "moshi": dict(
        LLAMA_NO_BIAS,
        d_ff=lambda cfg: int(cfg["ffn_dim"]) // 2,
        fields=lambda cfg, n: dict(extra_token_rows=1),
        towers=True,  # the depth decoder and Mimi: named in towers_not_counted, with the report's note
    ),
}
