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

from llmath.model.family_facts import LLAMA_LIKE, _attn_bias, _k


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


def _qwen_moe_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """MoE in every ``decoder_sparse_step``-th layer except ``mlp_only_layers`` (Qwen2-MoE's rule, Flint's too:
    configuration_flint.py)."""
    step, dense = int(cfg.get("decoder_sparse_step") or 1), set(cfg.get("mlp_only_layers") or [])
    return [i not in dense and (i + 1) % step == 0 for i in range(n)]


ADAPTERS: dict[str, dict[str, Any]] = {
    # MPT (MosaicML): ALiBi, no biases anywhere, LayerNorms without bias, GELU MLP, tied embeddings.
    # transformers builds neither the learned position table nor q/k LayerNorms (attn_config is not read
    # beyond the softmax scale and clip_qkv, which have no parameters).
    "mpt": dict(
        norm="layer",
        norm_bias=False,
        ffn="mlp",
        position="alibi",
        **_attn_bias(False),
        ffn_bias=False,
        activation="gelu",
        prepare=_mpt_widths,
    ),
    # BioGPT (Microsoft): GPT-2-like pre-LN with biases, OPT-style learned positions (2 extra rows), token
    # embeddings scaled by sqrt(d) when scale_embedding (modeling_biogpt.py)
    "biogpt": dict(
        norm="layer",
        ffn="mlp",
        position="learned",
        position_offset=2,
        **_attn_bias(True),
        ffn_bias=True,
        activation="gelu",
        embedding_scale=_k("scale_embedding", True),
    ),
    # GPT-NeoX-Japanese (ABEJA): sequential pre-LN blocks, fused bias-free QKV, rotary over
    # partial_rotary_factor of each head, bias-free MLP of hidden_size · intermediate_multiple_size, and a
    # bias on the attention output of the last layer only (``dense_bias``)
    "gpt_neox_japanese": dict(
        norm="layer",
        ffn="mlp",
        position="rotary",
        **_attn_bias(False),
        ffn_bias=False,
        activation="gelu",
        last_o_bias=True,
        prepare=_neox_japanese_widths,
    ),
    # GIT (Microsoft, generative image-to-text): a BERT-style post-LN text decoder (learned positions and an
    # embedding LayerNorm, biases everywhere, no final norm, untied output with a bias) beside a CLIP image
    # encoder (vision_config) and a projection into the text width; the encoder and projection are counted as
    # towers (model/towers.py), the stages analyse the text decoder (the image tokens' prefix is not modelled)
    "git": dict(
        norm="layer",
        ffn="mlp",
        position="learned",
        **_attn_bias(True),
        ffn_bias=True,
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
        norm="layer",
        ffn="mlp",
        position=lambda c: "learned" if c.get("use_learned_position_embeddings", True) else "sinusoidal",
        position_offset=2,
        **_attn_bias(True),
        ffn_bias=True,
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
        LLAMA_LIKE,
        **_attn_bias(_k("attention_bias", False)),
        ffn_bias=False,
        qk_norm="head",
        attn_sinks=True,
        moe=dict(
            experts="num_experts",
            top_k="num_experts_per_tok",
            d_ff="moe_intermediate_size",
            shared_width="shared_expert_intermediate_size",
            layers=_qwen_moe_layers,
        ),
    ),
    # DiffLlama: Llama with differential attention (Ye et al. 2024, arXiv:2410.05258), see ops/variants.py
    "diffllama": dict(LLAMA_LIKE, diff_attention=True),
}
