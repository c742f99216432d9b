"""Adapter rows of the language models of multimodal families (Aria, Gemma-3n, Gemma 4, Phi-4-multimodal):
the same kind of rows as :mod:`llmath.model.families` (which merges this table into its own)."""

from __future__ import annotations

from typing import Any

from llmath.model.family_facts import LLAMA_LIKE, _attn_bias

# Qwen2 / Qwen3 language models as the Qwen-VL wrappers build them (multimodal rotary positions: the same
# weights and products as the text families' rows)
_QWEN2 = dict(LLAMA_LIKE, q_bias=True, k_bias=True, v_bias=True, o_bias=False, ffn_bias=False, windows="from_layer")
_QWEN3 = dict(LLAMA_LIKE, ffn_bias=False, qk_norm="head", windows="from_layer")

ADAPTERS: dict[str, dict[str, Any]] = {
    "qwen2_vl_text": _QWEN2,
    "qwen2_5_vl_text": _QWEN2,
    "qwen3_vl_text": _QWEN3,
    "qwen3_vl_moe_text": dict(_QWEN3, moe="qwen3_moe"),
    # Aria's language model: every layer a MoE of SiLU-gated experts of intermediate_size plus
    # moe_num_shared_experts shared experts fused into one FFN (modeling_aria.py AriaTextMoELayer)
    "aria_text": dict(
        LLAMA_LIKE,
        **_attn_bias(False),
        ffn_bias=False,
        moe=dict(
            experts="moe_num_experts",
            top_k="moe_topk",
            d_ff="intermediate_size",
            shared_count="moe_num_shared_experts",
        ),
    ),
}
