"""Config readers for the short-convolution and recurrent families (LFM2, RecurrentGemma, RWKV, xLSTM):
mixer widths and per-layer mixer kinds are data read from the file, as transformers' config classes
read them (5.23). The operators are in :mod:`llmath.ops.recurrent`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from llmath.model import derive
from llmath.model.spec import MixerSpec, ModelSpec

Getter = Callable[..., int]


def lfm2_ffn_width(cfg: Mapping[str, Any]) -> int:
    """LFM2's FFN width as ``Lfm2MLP`` derives it: with ``block_auto_adjust_ff_dim`` (default on),
    int(2·F / 3), times ``block_ffn_dim_multiplier``, rounded up to a multiple of ``block_multiple_of``;
    F is ``block_ff_dim`` where the file has it (transformers reads it over ``intermediate_size``)."""
    width = int(cfg.get("block_ff_dim") or cfg.get("intermediate_size") or 12288)
    if not cfg.get("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    mult = cfg.get("block_ffn_dim_multiplier", 1.0)
    if mult is not None:
        of = int(cfg.get("block_multiple_of") or 256)
        width = of * ((int(mult * width) + of - 1) // of)
    return width


def _lfm2_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    types = cfg.get("layer_types")
    if types is None:  # older files: the attention layers' indices (default: every layer attends)
        full = cfg.get("full_attn_idxs")
        full = set(range(n) if full is None else full)
        types = ["full_attention" if i in full else "conv" for i in range(n)]
    return list(types)


def lfm2(cfg: Mapping[str, Any], get: Getter, n: int) -> tuple[MixerSpec, tuple[str, ...]]:
    """LFM2 / LFM2-MoE: ``layer_types`` names each layer 'conv' (the gated short conv) or an attention
    layer; ``conv_bias`` sets the biases of the conv and both of its projections."""
    bias = bool(cfg.get("conv_bias", False))
    mixer = MixerSpec(kind="shortconv", d_inner=get("hidden_size"), d_state=0, d_conv=get("conv_L_cache", 3),
                      conv_bias=bias, proj_bias=bias)  # fmt: skip
    return mixer, tuple("shortconv" if t == "conv" else "attention" for t in _lfm2_types(cfg, n)[:n])


def lfm2_moe_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """LFM2-MoE: the first ``num_dense_layers`` layers have a dense FFN, the rest the MoE."""
    first = cfg.get("num_dense_layers", 2)
    return [i >= first for i in range(n)]


def recurrent_gemma(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """RecurrentGemma (Griffin): ``block_types`` repeated over the layers names each 'recurrent' (the
    RG-LRU block) or 'attention' (local MQA over ``attention_window_size`` positions, partial rotary);
    every layer has the gated GeLU MLP of width intermediate_size / 2 (with biases); embeddings scaled
    by √D, logits soft-capped at ``logits_soft_cap``."""
    d, n, heads = get("hidden_size"), get("num_hidden_layers"), get("num_attention_heads")
    types = (list(cfg.get("block_types") or ["recurrent", "recurrent", "attention"]) * n)[:n]
    kinds = tuple("attention" if t == "attention" else "rglru" for t in types)
    window = get("attention_window_size", 2048)
    head_dim = d // heads  # RecurrentGemmaConfig derives it so, whatever the file says
    mixer = MixerSpec(kind="rglru", d_inner=get("lru_width", d), d_state=0, d_conv=get("conv1d_width", 4),
                      n_heads=heads)  # fmt: skip
    bias = bool(cfg.get("attention_bias", False))
    return ModelSpec(
        d_model=d, n_layers=n, vocab_size=get("vocab_size"), n_heads=heads,
        n_kv_heads=get("num_key_value_heads", heads), head_dim=head_dim, d_ff=get("intermediate_size") // 2,
        ffn="gated", activation="gelu_tanh", ffn_bias=True, norm="rms", position="rotary",
        rotary_dim=derive.rotary_dim(cfg, "rotary", head_dim, None), q_bias=bias, k_bias=bias, v_bias=bias,
        o_bias=True, embedding_scale=True, final_softcap=cfg.get("logits_soft_cap"), mixer=mixer,
        layer_mixers=kinds, layer_windows=tuple(window if k == "attention" else None for k in kinds), **common,
    )  # fmt: skip


def rwkv(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """RWKV-4: every layer is LayerNorm, time mix (attention_hidden_size A, default D), residual,
    LayerNorm, channel mix (intermediate_size F, default 4·D), residual; layer 0 first normalises the
    embeddings (``pre_ln``). No attention, no positions. The attention fields are placeholders (1)."""
    d, n = get("hidden_size"), get("num_hidden_layers")
    mixer = MixerSpec(kind="rwkv", d_inner=get("attention_hidden_size", d), d_state=0, d_conv=0,
                      d_ff=get("intermediate_size", 4 * d))  # fmt: skip
    return ModelSpec(
        d_model=d, n_layers=n, vocab_size=get("vocab_size"), n_heads=1, n_kv_heads=1, head_dim=1, d_ff=0,
        ffn="mlp", norm="layer", position="none", mixer=mixer, layer_mixers=("rwkv",) * n, mixer_ffn=False,
        norms_per_layer=1, embedding_norm=True, **common,
    )  # fmt: skip


def xlstm(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """xLSTM-7b style (``xlstm``): every block is RMSNorm, mLSTM layer, residual, RMSNorm, SwiGLU FFN,
    residual. q/k width int(D · qk_dim_factor), v width int(D · v_dim_factor) (as ``xLSTMLayer`` sizes
    them), FFN width D · ffn_proj_factor rounded up to ``ffn_round_up_to_multiple_of``; logits
    soft-capped at ``output_logit_soft_cap``. The attention fields are placeholders (1)."""
    d, n = get(("hidden_size", "embedding_dim")), get(("num_blocks", "num_hidden_layers"))  # xLSTMModel: num_blocks
    of = get("ffn_round_up_to_multiple_of", 64)
    mixer = MixerSpec(kind="mlstm", d_inner=int(d * cfg.get("v_dim_factor", 1.0)), d_state=0, d_conv=0,
                      d_key=int(d * cfg.get("qk_dim_factor", 0.5)), n_heads=get("num_heads"),
                      chunk_size=get("chunk_size", 64))  # fmt: skip
    return ModelSpec(
        d_model=d, n_layers=n, vocab_size=get("vocab_size"), n_heads=1, n_kv_heads=1, head_dim=1,
        d_ff=math.ceil(d * cfg.get("ffn_proj_factor", 2.667) / of) * of, ffn="gated", norm="rms", position="none",
        mixer=mixer, layer_mixers=("mlstm",) * n, final_softcap=cfg.get("output_logit_soft_cap"),
        eager_all_logits=True, **common,
    )  # fmt: skip
