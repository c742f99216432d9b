"""Adapter rows of the language models of multimodal families (Aria, Gemma-3n, Gemma 4, Phi-4-multimodal):
the same kind of rows as :mod:`llmath.model.families` (which merges this table into its own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from llmath.errors import ConfigError
from llmath.model.families_gemma3n import kv_shared_layers
from llmath.model.family_facts import GEMMA3_LIKE, LLAMA_LIKE, LLAMA_NO_BIAS, QWEN2_LIKE, QWEN3_LIKE, moe_keys


def _full_layers(cfg: Mapping[str, Any], n_layers: int) -> set[int]:
    """Gemma 4's full-attention layers: ``layer_types``, else every 6th (configuration_gemma4.py); the last
    layer is always full (transformers forces it)."""
    types = cfg.get("layer_types") or [
        "sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n_layers)
    ]
    return {i for i, t in enumerate(types[:n_layers]) if t == "full_attention"} | {n_layers - 1}


def gemma4_layers(cfg: Mapping[str, Any], get: Callable[..., int], n_layers: int, ple: bool = True) -> dict[str, Any]:
    """Gemma 4's per-layer widths and per-layer embeddings, read as transformers 5.23's Gemma4TextConfig
    reads them: ``per_layer_config`` (layer index -> overrides) as written by ``to_dict``, else its
    ``__post_init__`` default: the full-attention layers get ``global_head_dim`` (default 512). PLE:
    ``hidden_size_per_layer_input`` (default 256; 0 none) and ``vocab_size_per_layer_input`` (default 262144);
    ``ple=False``: Gemma 4 unified, which has none (modular_gemma4_unified.py)."""
    if cfg.get("use_bidirectional_attention") == "all":  # "vision": causal over text, as analysed here
        raise ConfigError(
            "gemma4: use_bidirectional_attention='all' (every token attends both ways) is not modelled yet; "
            "open an issue with the config.json"
        )
    full = _full_layers(cfg, n_layers)
    over = cfg.get("per_layer_config")
    if over is None:
        k_eq_v = cfg.get("num_global_key_value_heads") if cfg.get("attention_k_eq_v") else None
        one = {"head_dim": get("global_head_dim", 512)} | ({"num_key_value_heads": k_eq_v} if k_eq_v else {})
        over = {i: one for i in full}
    if not isinstance(over, Mapping):
        raise ConfigError(f"gemma4_text: per_layer_config={over!r} must map layer indices to overrides")
    rows = {int(k): dict(v) for k, v in over.items() if int(k) < n_layers}
    if set(rows) - full or len({tuple(sorted(v.items())) for v in rows.values()}) > 1:
        raise ConfigError(
            "gemma4_text: per_layer_config overrides other than one set for the full-attention layers are not "
            "modelled yet; open an issue with the config.json"
        )
    one = next(iter(rows.values()), {})
    if set(one) - {"head_dim", "num_key_value_heads"}:
        raise ConfigError(
            f"gemma4_text: per_layer_config keys {sorted(one)} are not modelled yet (head_dim, num_key_value_heads are)"
        )
    P = get("hidden_size_per_layer_input", 256) if ple else 0
    return dict(
        full_head_dim=one.get("head_dim"),
        full_kv_heads=one.get("num_key_value_heads"),
        per_layer_width=P,
        per_layer_vocab=get("vocab_size_per_layer_input", 262144) if P else 0,
        **_gemma4_sharing(cfg, n_layers),
    )


def _gemma4_sharing(cfg: Mapping[str, Any], n_layers: int) -> dict[str, Any]:
    """KV sharing (the last ``num_kv_shared_layers`` reuse K/V; in eager prefill transformers runs them on the
    logit rows only; ``use_double_wide_mlp`` doubles their FFN), ``attention_k_eq_v`` (full-attention layers
    take V from the K projection) and ``enable_moe_block`` (the MoE beside the FFN), modeling_gemma4.py."""
    return dict(
        layer_kv_shared=kv_shared_layers(cfg, n_layers),
        kv_shared_last_only=True,
        kv_shared_ffn_mult=2 if cfg.get("use_double_wide_mlp") else 1,
        full_k_eq_v=bool(cfg.get("attention_k_eq_v")),
        moe_beside_ffn=bool(cfg.get("enable_moe_block")),
    )


def _gemma4_moe_layers(cfg: Mapping[str, Any], n_layers: int) -> list[bool]:
    return [bool(cfg.get("enable_moe_block"))] * n_layers


ADAPTERS: dict[str, dict[str, Any]] = {
    # Qwen2 / Qwen3 language models as the Qwen-VL wrappers build them (multimodal rotary positions: the same
    # weights and products as the text families' rows)
    "qwen2_vl_text": QWEN2_LIKE,
    "qwen2_5_vl_text": QWEN2_LIKE,
    "qwen3_vl_text": QWEN3_LIKE,
    "qwen3_vl_moe_text": dict(QWEN3_LIKE, moe="qwen3_moe"),
    # Aria's language model: every layer a MoE of SiLU-gated experts of intermediate_size plus
    # moe_num_shared_experts shared experts fused into one FFN (modeling_aria.py AriaTextMoELayer)
    "aria_text": dict(
        LLAMA_NO_BIAS,
        moe=moe_keys("moe_num_experts", "intermediate_size", top_k="moe_topk", shared_count="moe_num_shared_experts"),
    ),
    # Gemma 4's language model (modeling_gemma4.py): Gemma 3's layer (four norms, q/k norms per head, GELU-tanh
    # gated FFN, embeddings × √D, 5:1 sliding) with wider full-attention heads and per-layer embeddings
    # (gemma4_layers); its v_norm has no weight; KV sharing, k = v and the MoE beside the FFN (_gemma4_sharing).
    "gemma4_text": dict(
        GEMMA3_LIKE,
        windows="every",
        mixers=gemma4_layers,
        moe=moe_keys("num_experts", "moe_intermediate_size", top_k="top_k_experts", layers=_gemma4_moe_layers),
    ),
    # Phi-4-multimodal: Phi-3's language model (fused qkv and gate_up, no biases) whose config also holds
    # the vision and audio towers' configs (model/towers_phi4mm.py counts them)
    "phi4_multimodal": dict(LLAMA_NO_BIAS, towers=True),
}
ADAPTERS["gemma4_unified_text"] = dict(ADAPTERS["gemma4_text"], mixers=partial(gemma4_layers, ple=False))
# Emu3's language model (modeling_emu3.py Emu3Attention / Emu3MLP / Emu3RMSNorm): Llama's layers exactly; the
# wrapper's VQ-VAE image tokenizer (vq_config) is named in towers_not_counted
ADAPTERS["emu3_text_model"] = dict(LLAMA_LIKE)


def _mllama_layers(cfg: Mapping[str, Any], get: Callable[..., int], n_layers: int) -> dict[str, Any]:
    """Llama 3.2 Vision's language model (MllamaTextConfig): Llama layers, with ``cross_attention_layers``
    (indices) cross-attending the image (ops/vision_cross.py: skipped in text-only requests), and 8 token-table
    rows beyond vocab_size (MllamaTextModel.embed_tokens has vocab_size + 8 rows; the LM head vocab_size)."""
    cross = {int(i) for i in cfg.get("cross_attention_layers") or ()}
    if any(not 0 <= i < n_layers for i in cross):
        raise ConfigError(f"mllama: cross_attention_layers={sorted(cross)} must be layer indices below {n_layers}")
    return dict(layer_mixers=tuple("xattn" if i in cross else "attention" for i in range(n_layers)), extra_token_rows=8)


ADAPTERS["mllama_text_model"] = dict(LLAMA_LIKE, mixers=_mllama_layers)
