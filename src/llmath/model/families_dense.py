"""Adapter rows of the decoders with an unusual feature: ALiBi (MPT), differential attention (DiffLlama), a
learned-position BioGPT, GPT-NeoX-Japanese's last-layer output bias, GIT's image encoder (counted as towers),
TrOCR (the decoder of an image encoder's model: an external encoder), Flint's sinks and ungated shared
expert. Merged into :data:`llmath.model.families.ADAPTERS`; see :mod:`llmath.model.hf` for what a row's keys
mean.

Each row follows what transformers 5.23 builds from the same config.json (tests/test_oracle_causal_lm.py
proves parameters by component, eager FLOPs and cache bytes on the meta device).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import (
    GPT_LIKE,
    LLAMA_LIKE,
    LLAMA_QK_NORM,
    _all_bias,
    _attn_bias,
    _k,
    _qwen_moe_layers,
    moe_keys,
)


def _mpt_widths(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """MPT states its FFN as ``expansion_ratio`` × d_model (MosaicML's llm-foundry ``MPTMLP``). transformers
    5.23 (modeling_mpt.py ``MptMLP``) hard-codes 4 × hidden_size; every published MPT has expansion_ratio 4
    (mosaicml/mpt-7b, mpt-30b config.json), so the two agree on them."""
    d = int(cfg.get("d_model") or cfg.get("hidden_size") or 0)
    ratio = cfg.get("expansion_ratio") or 4
    return dict(cfg, intermediate_size=int(d * ratio)) if d and cfg.get("intermediate_size") is None else dict(cfg)


def _neox_japanese_widths(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """GPT-NeoX-Japanese: the FFN is ``int(hidden_size · intermediate_multiple_size)`` wide
    (modeling_gpt_neox_japanese.py ``GPTNeoXJapaneseMLP``)."""
    d, mult = cfg.get("hidden_size"), cfg.get("intermediate_multiple_size") or 4
    return dict(cfg, intermediate_size=int(d * mult)) if d else dict(cfg)


ADAPTERS: dict[str, dict[str, Any]] = {
    # MPT (MosaicML): ALiBi, no biases anywhere, LayerNorms without bias, GELU MLP, tied embeddings.
    # transformers builds neither the learned position table nor q/k LayerNorms (attn_config is not read
    # beyond the softmax scale and clip_qkv, which have no parameters).
    "mpt": dict(
        GPT_LIKE, norm_bias=False, position="alibi", **_all_bias(False), activation="gelu", prepare=_mpt_widths
    ),
    # BioGPT (Microsoft): GPT-2-like pre-LN with biases, OPT-style learned positions (2 extra rows), token
    # embeddings scaled by sqrt(d) when scale_embedding (modeling_biogpt.py)
    "biogpt": dict(
        GPT_LIKE, position="learned", position_offset=2, activation="gelu", embedding_scale=_k("scale_embedding", True)
    ),
    # GPT-NeoX-Japanese (ABEJA): sequential pre-LN blocks, fused bias-free QKV, rotary over
    # partial_rotary_factor of each head, bias-free MLP of hidden_size · intermediate_multiple_size, and a
    # bias on the attention output of the last layer only (``dense_bias``)
    "gpt_neox_japanese": dict(
        GPT_LIKE,
        position="rotary",
        **_all_bias(False),
        activation="gelu",
        last_o_bias=True,
        prepare=_neox_japanese_widths,
    ),
    # GIT (Microsoft, generative image-to-text): a BERT-style post-LN text decoder (learned positions and an
    # embedding LayerNorm, biases everywhere, no final norm, untied output with a bias) beside a CLIP image
    # encoder (vision_config) and a projection into the text width; the encoder and projection are counted as
    # towers (model/towers.py), the stages analyse the text decoder (the image tokens' prefix is not modelled)
    "git": dict(
        GPT_LIKE,
        position="learned",
        activation="gelu",
        embedding_norm=True,
        final_norm=False,
        lm_head_bias=True,
        towers=True,
    ),
    # TrOCR (Microsoft): the text decoder of a VisionEncoderDecoderModel (BEiT/DeiT/ViT image encoder, not in this
    # config). BART-like post-LN layers (self-attention, cross-attention over the image patches whose K/V read
    # cross_attention_hidden_size-wide encoder outputs, FFN), learned positions (2 extra rows) or sinusoidal,
    # optional embedding LayerNorm and sqrt(d) scale, no final norm, tied output projection. Analysed as an
    # encoder-decoder whose encoder is external: prompt = the image's patch positions, cross-attended
    "trocr": dict(
        GPT_LIKE,
        position=lambda c: "learned" if c.get("use_learned_position_embeddings", True) else "sinusoidal",
        position_offset=2,
        activation="gelu",
        norms_per_layer=3,
        embedding_norm=_k("layernorm_embedding", True),
        embedding_scale=_k("scale_embedding", False),
        final_norm=False,
        encdec="external",
        external="the image encoder of a VisionEncoderDecoderModel (its encoder config), not in this config",
    ),
    # Flint: Llama-like attention with per-head q/k RMSNorms and learned sink logits, sliding and full layers
    # (layer_types), Qwen2-MoE-style sparse layers whose shared expert has no gate (modeling_flint.py)
    "flint": dict(
        LLAMA_QK_NORM,
        attn_sinks=True,
        moe=moe_keys(
            "num_experts",
            "moe_intermediate_size",
            shared_width="shared_expert_intermediate_size",
            layers=_qwen_moe_layers,
        ),
    ),
    # DiffLlama: Llama with differential attention (Ye et al. 2024, arXiv:2410.05258), see ops/variants.py
    "diffllama": dict(LLAMA_LIKE, diff_attention=True),
}


def _modernbert_decoder_windows(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """ModernBERT-decoder (configuration_modernbert_decoder.py ``__post_init__``): without a ``sliding_window``
    in the file the window is ``local_attention // 2`` (none without local_attention; a file's own value wins,
    as transformers 5.23 loads it), and without ``layer_types`` every ``global_attn_every_n_layers``-th layer
    (default 3, from layer 0) is global."""
    out = dict(cfg)
    local = cfg.get("local_attention", 128)
    if out.get("sliding_window") is None:
        out["sliding_window"] = local // 2 if local else None
    if out.get("layer_types") is None:
        every = int(cfg.get("global_attn_every_n_layers") or 3)
        n = int(cfg.get("num_hidden_layers") or 0)
        out["layer_types"] = ["sliding_attention" if i % every else "full_attention" for i in range(n)]
    return out


ADAPTERS["modernbert-decoder"] = dict(
    # ModernBERT-decoder (Ettin decoders, jhu-clsp): pre-LN blocks whose first layer has no attention norm,
    # an embedding LayerNorm, bias-free GeGLU (Wi D -> 2F) and attention, sliding layers of local_attention // 2,
    # and a prediction head norm(gelu(dense(x))) before the tied decoder with its bias (decoder_bias)
    # (modeling_modernbert_decoder.py)
    norm="layer",
    norm_bias=_k("norm_bias", False),
    ffn="gated",
    activation="gelu",
    position="rotary",
    **_attn_bias(_k("attention_bias", False)),
    ffn_bias=_k("mlp_bias", False),
    embedding_norm=True,
    first_attn_norm=False,
    head_dense=True,
    head_dense_bias=_k("classifier_bias", False),
    lm_head_bias=_k("decoder_bias", True),
    prepare=_modernbert_decoder_windows,
)


def _doge_dense(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Doge with ``is_moe`` swaps every FFN for a cross-domain MoE (modeling_doge.py ``DogeCDMoE``: product-key
    routing over num_experts single-neuron experts) that llmath does not model: refused, not miscounted."""
    if cfg.get("is_moe"):
        raise ConfigError(
            "doge: is_moe=true (DogeCDMoE, product-key routed single-neuron experts) is not modelled by llmath; "
            "only dense Doge configs (is_moe false) can be read"
        )
    return dict(cfg)


ADAPTERS["doge"] = dict(
    # Doge (SmallDoge): Llama-like with per-head q/k RMSNorms, dynamic-mask attention (dt_proj and A, see
    # ops/variants.py) and residual adds that scale the skip stream by a learned vector (modeling_doge.py)
    LLAMA_LIKE,
    qk_norm="head",
    dynamic_mask=True,
    residual_scale=True,
    prepare=_doge_dense,
)
