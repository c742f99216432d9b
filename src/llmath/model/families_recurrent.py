"""Adapter rows of the short-convolution and recurrent families (see :mod:`llmath.model.families`, which
merges them): LFM2 and LFM2-MoE (gated short convs among attention layers), RecurrentGemma (RG-LRU and
local attention), RWKV-4 and xLSTM (mLSTM)."""

from __future__ import annotations

from typing import Any

from llmath.model import recurrent_configs as rc
from llmath.model.family_facts import LLAMA_NO_BIAS, _attn_bias, _k, moe_keys

_LFM2 = dict(LLAMA_NO_BIAS, qk_norm="head", mixers=rc.lfm2)

ADAPTERS: dict[str, dict[str, Any]] = {
    # LFM2: per-head q/k RMSNorms in the attention layers, a SwiGLU FFN of the derived width everywhere
    "lfm2": dict(_LFM2, d_ff=rc.lfm2_ffn_width),
    # LFM2-MoE: sigmoid-routed experts after num_dense_layers dense layers (expert_bias is a buffer)
    "lfm2_moe": dict(_LFM2, moe=moe_keys("num_experts", "moe_intermediate_size", layers=rc.lfm2_moe_layers)),
    # LFM3: LFM2's short convs (width conv_L_cache) among sliding- and full-attention layers (layer_types),
    # sandwich norms around mixer and FFN in every layer, a per-head sigmoid gate on the attention output;
    # the FFN width is intermediate_size as is. (Full-attention layers rotate half of each head: rotary
    # is vector FLOPs, counted over the whole head here.)
    "lfm3": dict(
        _LFM2,
        **_attn_bias(_k("attention_bias", False)),
        norms_per_layer=lambda cfg: 4 if cfg.get("use_sandwich_norm", True) else 2,
        attn_head_gate=_k("use_attention_gate", True),
    ),
    # Griffin: RG-LRU blocks and local attention (model/recurrent_configs.py builds the whole spec)
    "recurrent_gemma": dict(norm="rms", build=rc.recurrent_gemma),
    # RWKV-4: time mix and channel mix in every layer
    "rwkv": dict(norm="layer", build=rc.rwkv),
    # xLSTM-7b: mLSTM layers and SwiGLU FFNs; its norms and projections have no bias option modelled
    "xlstm": dict(norm="rms", build=rc.xlstm, refuse={"use_bias": "biases in every projection and norm"}),
}
