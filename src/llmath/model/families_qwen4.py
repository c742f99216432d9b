"""Adapter row of Qwen4-Exp's language model (``qwen4_exp_text``; merged into ``families.ADAPTERS``), read as
transformers 5.23's ``Qwen4ExpTextConfig`` reads it (``models/qwen4_exp/configuration_qwen4_exp.py``).

Qwen3.5-MoE's layers (Gated DeltaNet and gated attention with per-head q/k norms, MoE with a gated shared
expert) with: hyper-connection residual streams instead of the layer norms and the final norm
(``hc_count``, ``hc_lowrank``), the QSA indexer on every attention layer (``indexer_*``; transformers
builds it on every attention layer, so a file with attention layers must state it), and hashed n-gram
embeddings on the 1-based ``ple_layer_ids`` (linear-attention layers only; ``ple_embed_dim`` defaults to
``hidden_size``). ``layer_types`` names 'linear_attention' and 'indexed_attention' (the hub file's
'full_attention' means the same); without it, attention every ``full_attention_interval`` (4) layers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.families_linear import _QWEN_NEXT, _gated_delta
from llmath.model.spec_hyper import HyperSpec, NGramSpec, QSASpec

Getter = Callable[..., int]
QSA_KEYS = ("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio")


def _kinds(cfg: Mapping[str, Any], get: Getter, n: int) -> tuple[str, ...]:
    every = get("full_attention_interval", 4)
    types = cfg.get("layer_types") or ["linear_attention" if (i + 1) % every else "indexed_attention" for i in range(n)]
    ple = set(cfg.get("ple_layer_ids") or [])
    out = []
    for i, t in enumerate(types[:n]):
        if t not in ("linear_attention", "indexed_attention", "full_attention"):
            raise ConfigError(f"layer_types[{i}]={t!r}: Qwen4-Exp layers are 'linear_attention' or 'indexed_attention'")
        if t != "linear_attention" and i + 1 in ple:
            raise ConfigError(
                f"qwen4_exp_text: ple_layer_ids names layer {i + 1}, an attention layer; PLE is on linear layers only"
            )
        out.append("attention" if t != "linear_attention" else "ple+gated_delta" if i + 1 in ple else "gated_delta")
    return tuple(out)


def _qsa(cfg: Mapping[str, Any], get: Getter) -> QSASpec:
    missing = [k for k in QSA_KEYS if cfg.get(k) is None]
    if missing:
        raise ConfigError(
            f"qwen4_exp_text: {', '.join(missing)} not set: Qwen4-Exp's attention layers always carry the QSA indexer "
            "(transformers cannot build them without it); add the fields from the checkpoint's config.json"
        )
    if get("indexer_kv_heads") != 1:
        raise ConfigError(f"qwen4_exp_text: indexer_kv_heads={cfg['indexer_kv_heads']!r}: QSA has one key head")
    return QSASpec(get("indexer_n_heads"), get("indexer_head_dim"), get("indexer_budget"),
                   get("indexer_compress_ratio"))  # fmt: skip


def qwen4_exp(cfg: Mapping[str, Any], get: Getter, n: int) -> dict[str, Any]:
    """The spec fields of Qwen4-Exp's layers (the mixer, per-layer kinds, streams, QSA, n-grams)."""
    kinds = _kinds(cfg, get, n)
    mixer = _gated_delta(
        get, get("linear_num_value_heads"), get("linear_num_key_heads"), get("linear_key_head_dim"),
        get("linear_value_head_dim"),
    )  # fmt: skip
    ngram = NGramSpec(
        embed_dim=get("ple_embed_dim", get("hidden_size")), ngram_size=get("ngram_size", 3),
        heads_per_ngram=get("heads_per_ngram", 8), vocab_base=get("ngram_vocab_size_base", 20_000_000),
        divisor=get("make_ngram_vocab_size_divisible_by", 128), conv_kernel=get("ple_conv_kernel_size", 4),
    )  # fmt: skip
    return dict(
        mixer=mixer,
        layer_mixers=kinds,
        hyper=HyperSpec(get("hc_count", 4), get("hc_lowrank", 320)),
        qsa=_qsa(cfg, get) if "attention" in kinds else None,
        ngram=ngram if any(k.startswith("ple+") for k in kinds) else None,
        norms_per_layer=0,
        final_norm=False,
    )


ADAPTERS: dict[str, dict[str, Any]] = {
    "qwen4_exp_text": dict(
        _QWEN_NEXT, moe="qwen2_moe", ffn_keys=("intermediate_size", "moe_intermediate_size"), mixers=qwen4_exp
    ),
}
