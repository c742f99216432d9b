"""Adapter rows of MoE and sparse-attention families (merged into :mod:`llmath.model.families`' ``ADAPTERS`` by
one line there). Each row states what its transformers 5.23 modeling file builds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import (
    COHERE_LIKE,
    LLAMA_LIKE,
    LLAMA_NO_BIAS,
    _attn_bias,
    _dense_prefix,
    _mlp_types_else,
    moe_keys,
    router_groups,
)


def _dots1_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    """dots.llm1: layers from ``max_window_layers`` on slide whenever ``sliding_window`` is set
    (configuration_dots1.py; no ``use_sliding_window`` switch, unlike Qwen2)."""
    first = cfg.get("max_window_layers")
    first = n if first is None else int(first)
    return ["sliding_attention" if i >= first else "full_attention" for i in range(n)]


def _dense_first(default_k: int):
    """MoE layers from ``mlp_layer_types``, else as the config classes derive them from the legacy keys: layer
    i is MoE when i >= ``first_k_dense_replace`` (the family's default when absent) and i % ``moe_layer_freq``
    == 0 (configuration_axk1.py; configuration_glm_moe_dsa.py, whose hub files give moe_layer_freq 1)."""

    def layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
        k = cfg.get("first_k_dense_replace")
        k, freq = default_k if k is None else int(k), cfg.get("moe_layer_freq")
        freq = freq if isinstance(freq, int) and freq > 0 else 1
        return [i >= k and i % freq == 0 for i in range(n)]

    return _mlp_types_else(layers)


def _deepseek_moe(default_k: int, groups: int | None) -> dict[str, Any]:
    """DeepSeek-V3's MoE keys with the family's default dense prefix and its config class's default ``n_group``
    (:func:`~llmath.model.family_facts.router_groups`)."""
    return moe_keys(
        "n_routed_experts",
        "moe_intermediate_size",
        shared_count="n_shared_experts",
        layers=_dense_first(default_k),
        **router_groups(groups),
    )


ADAPTERS: dict[str, dict[str, Any]] = {
    # dots.llm1 (rednote-hilab): Qwen3's attention (per-head q/k RMSNorm) with DeepSeek-V3's MoE (sigmoid
    # router, shared experts, the first first_k_dense_replace layers dense)
    "dots1": dict(LLAMA_LIKE, ffn_bias=False, qk_norm="head", moe="deepseek", windows=_dots1_types),
    # A.X K1 (SK Telecom): DeepSeek-V3 (MLA + MoE) with an RMSNorm on each MoE block's output
    # (modeling_axk1.py AXK1MoE.post_mlp_layernorm); n_group: int = 8 (configuration_axk1.py)
    "axk1": dict(LLAMA_LIKE, ffn_bias=False, mla=True, moe=dict(_deepseek_moe(1, 8), output_norm=True)),
}


def _glm_dsa_indexer(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """GLM-5 (glm_moe_dsa): which layers run their own DSA indexer. ``indexer_types`` ("full" / "shared"),
    else the config class's derivation from ``index_topk_pattern`` ("F"/"S" per layer) or
    ``index_topk_freq`` / ``index_skip_topk_offset`` (configuration_glm_moe_dsa.py)."""
    types = cfg.get("indexer_types")
    if types is None:
        pattern = cfg.get("index_topk_pattern")
        if pattern is not None:
            types = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
        else:
            freq = max(int(cfg.get("index_topk_freq") or 1), 1)
            offset = int(cfg.get("index_skip_topk_offset", 2))
            types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
    return [t != "shared" for t in types[:n]]


def _cohere2_moe_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    """Command A MoE: the first ``first_k_dense_replace`` (dense) layers slide except every
    ``prefix_dense_sliding_window_pattern``-th, the rest except every ``sliding_window_pattern``-th
    (configuration_cohere2_moe.py)."""
    k = int(cfg.get("first_k_dense_replace") or 0)
    pre, rest = int(cfg.get("prefix_dense_sliding_window_pattern") or 1), int(cfg.get("sliding_window_pattern") or 4)
    slide = [(i + 1) % pre != 0 for i in range(k)] + [(i + 1) % rest != 0 for i in range(n - k)]
    return ["sliding_attention" if x else "full_attention" for x in slide]


def _cohere2_dense_prefix(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """Dense for the first ``first_k_dense_replace`` layers."""
    return _dense_prefix(int(cfg.get("first_k_dense_replace") or 0))(cfg, n)


def _mimo_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    """MiMo-V2-Flash: layer 0 and every 6th layer full, the others sliding, as configuration_mimo_v2_flash.py
    derives them (the hub file's ``hybrid_layer_pattern``, 1 = sliding, must agree: see :func:`_mimo_agree`)."""
    types = ["full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    _mimo_agree(cfg, "hybrid_layer_pattern", [t == "sliding_attention" for t in types])
    return types


def _mimo_dense_first(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """Layer 0 dense and the rest MoE (the config class's derivation; the hub file's ``moe_layer_freq`` flags
    must agree)."""
    layers = [i > 0 for i in range(n)]
    _mimo_agree(cfg, "moe_layer_freq", layers)
    return layers


def _mimo_agree(cfg: Mapping[str, Any], key: str, derived: list[bool]) -> None:
    """transformers 5.23 derives MiMo's per-layer pattern and ignores the hub file's 0/1 flags, which vLLM and
    SGLang read: where both are given and differ, which one the checkpoint runs is unknown, so refuse."""
    flags = cfg.get(key)
    if isinstance(flags, list) and [bool(x) for x in flags[: len(derived)]] != derived:
        raise ConfigError(
            f"{key}={flags!r} differs from the pattern transformers derives for mimo_v2_flash (layer 0 and every "
            "6th layer full; layer 0 dense); set layer_types / mlp_layer_types to say which layers are which"
        )


def _mimo_fields(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    """MiMo-V2-Flash's attention (modeling_mimo_v2_flash.py): values of v_head_dim, twice the K/V heads and
    learned sinks on the sliding layers; a hub file's ``sliding_window_size`` attends that many earlier
    positions plus the query (window = size + 1, as the config class derives)."""
    out: dict[str, Any] = dict(v_head_dim=int(cfg.get("v_head_dim") or cfg["head_dim"]))
    kv = cfg.get("swa_num_key_value_heads") or 2 * int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    out["window_kv_heads"] = int(kv)
    if cfg.get("sliding_window_size") is not None:
        types = cfg.get("layer_types") or _mimo_types(cfg, n)
        w = int(cfg["sliding_window_size"]) + 1
        out["layer_windows"] = tuple(w if t == "sliding_attention" else None for t in types[:n])
    return out


def _afmoe_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    """AFMoE: every ``global_attn_every_n_layers``-th layer full, the others sliding (configuration_afmoe.py)."""
    every = int(cfg.get("global_attn_every_n_layers") or 4)
    return ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n)]


# DBRX's ffn_config keys (configuration_dbrx.py defaults) -> the keys of Mixtral's MoE, which its experts are
_DBRX_FFN = {"ffn_hidden_size": ("intermediate_size", 3584), "moe_num_experts": ("num_local_experts", 4),
             "moe_top_k": ("num_experts_per_tok", 1)}  # fmt: skip


def _dbrx_flatten(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """DBRX keeps the K/V heads in ``attn_config`` and the expert sizes in ``ffn_config``: lift them to the
    top level under Mixtral's names (the config class's defaults where a sub-config leaves them out)."""
    attn, ffn = cfg.get("attn_config") or {}, cfg.get("ffn_config") or {}
    out = dict(cfg, num_key_value_heads=attn.get("kv_n_heads", 1))
    for key, (name, default) in _DBRX_FFN.items():
        out[name] = ffn.get(key, default)
    return out


def _laguna_heads(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """Laguna may give each layer its own query-head count (``num_attention_heads_per_layer``); llmath's
    layers share one, so a file whose layers differ is refused rather than counted with one of them."""
    heads = cfg.get("num_attention_heads_per_layer")
    if isinstance(heads, list) and set(heads) - {cfg.get("num_attention_heads")}:
        raise ConfigError(
            f"num_attention_heads_per_layer={sorted(set(heads))} differs between layers (or from num_attention_heads);"
            " per-layer query-head counts are not modelled yet: open an issue with the config.json"
        )
    return cfg


ADAPTERS.update(
    {
        # Laguna (poolside): per-head q/k norms, a softplus gate on the attention output (per head with gating
        # true / "per-head", else per element), sigmoid-routed experts with a learned e_score_correction_bias
        # (a parameter in transformers) and one shared expert of shared_expert_intermediate_size; layer 0
        # dense by default (modeling_laguna.py)
        "laguna": dict(
            LLAMA_LIKE,
            ffn_bias=False,
            qk_norm="head",
            attn_out_gate=True,
            attn_gate_per_head=lambda c: c.get("gating", True) is True or c.get("gating") == "per-head",
            prepare=_laguna_heads,
            windows=lambda c, n: ["full_attention"] * n,
            moe=moe_keys(
                "num_experts",
                "moe_intermediate_size",
                shared_width="shared_expert_intermediate_size",
                layers=_mlp_types_else(_dense_prefix(1)),
                router_score_bias=True,
            ),
        ),
        # JetMoE: a mixture of attention (each of num_local_experts experts owns a query projection D -> K·H and
        # an output projection back; a token uses num_experts_per_tok of them, so N = top-k·K heads share the
        # one K/V projection; a bias after the output) and a MoE FFN of the same count and top-k with a bias
        # after it (modeling_jetmoe.py JetMoeMoA, JetMoeMoE)
        "jetmoe": dict(
            LLAMA_LIKE,
            **_attn_bias(False, o=True),
            ffn_bias=False,
            attn_experts=True,
            moe=moe_keys("num_local_experts", "intermediate_size", output_bias=True),
        ),
        # DBRX (Databricks): LayerNorms without bias, one fused Wqkv (counted as q, k, v), 16 experts top-4
        # with no shared expert (modeling_dbrx.py)
        "dbrx": dict(LLAMA_NO_BIAS, norm="layer", norm_bias=False, prepare=_dbrx_flatten, moe="mixtral"),
        # AFMoE (Arcee Trinity): per-head q/k norms, a sigmoid output gate on attention, four norms per layer,
        # the first num_dense_layers dense, then sigmoid-routed experts (learned expert_bias: a parameter in
        # transformers, requires_grad=False) plus num_shared_experts shared ones (modeling_afmoe.py)
        "afmoe": dict(
            LLAMA_LIKE,
            ffn_bias=False,
            qk_norm="head",
            attn_out_gate=True,
            norms_per_layer=4,
            windows=_afmoe_types,
            moe=moe_keys(
                "num_experts",
                "moe_intermediate_size",
                shared_count="num_shared_experts",
                layers=lambda c, n: _dense_prefix(int(c.get("num_dense_layers") or 0))(c, n),
                router_score_bias=True,
            ),
        ),
        # MiMo-V2-Flash (Xiaomi): hybrid sliding / full attention (sliding layers: 2x K/V heads and sinks),
        # value heads narrower than query/key heads, DeepSeek-style sigmoid-routed experts without shared ones
        "mimo_v2_flash": dict(
            LLAMA_LIKE,
            ffn_bias=False,
            o_bias=False,
            attn_sinks=True,
            window_sinks_only=True,
            windows=_mimo_types,
            fields=_mimo_fields,
            moe=moe_keys(
                "n_routed_experts",
                "moe_intermediate_size",
                layers=_mlp_types_else(_mimo_dense_first),
                **router_groups(1),  # n_group: int = 1 (configuration_mimo_v2_flash.py)
            ),
        ),
        # Command A MoE (Cohere): Cohere2's parallel block (one norm: RMSNorm when rms_norm_eps is set, else a
        # LayerNorm without bias) with routed experts of intermediate_size, num_shared_experts shared ones
        # of that width (summed or averaged with the routed output), and dense prefix layers of
        # prefix_dense_intermediate_size (modeling_cohere2_moe.py)
        "cohere2_moe": dict(
            COHERE_LIKE,
            norm=lambda c: "rms" if c.get("rms_norm_eps") is not None else "layer",
            ffn_keys=("prefix_dense_intermediate_size",),
            ffn_default=0,
            windows=_cohere2_moe_types,
            moe=moe_keys(
                "num_experts",
                "intermediate_size",
                shared_count="num_shared_experts",
                layers=_mlp_types_else(_cohere2_dense_prefix),
            ),
        ),
        # GLM-5 (zai-org): DeepSeek-V3.2's MLA + DSA + MoE; layers marked "shared" in indexer_types reuse the
        # previous indexer layer's top-k (modeling_glm_moe_dsa.py GlmMoeDsaAttention.skip_topk)
        "glm_moe_dsa": dict(
            LLAMA_NO_BIAS,
            mla=True,
            dsa=True,
            fields=lambda c, n: dict(layer_indexer=tuple(_glm_dsa_indexer(c, n))),
            moe=_deepseek_moe(3, 1),  # n_group: int = 1 (configuration_glm_moe_dsa.py)
        ),
    }
)


def _longcat_sublayers(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """LongCat-Flash: each of ``num_layers`` layers runs two (MLA attention, dense MLP) blocks, which llmath
    counts as two layers (the config class's ``num_hidden_layers`` is 2 · num_layers too; num_layers defaults
    to 28 there: configuration_longcat_flash.py)."""
    return dict(cfg, num_hidden_layers=2 * int(cfg.get("num_layers", 28)))


ADAPTERS.update(
    {
        # LongCat-Flash (Meituan): per layer two MLA blocks, each followed by a dense MLP of ffn_hidden_size,
        # and one shortcut MoE read from the first block's normed output and added at the layer's end. As
        # llmath layers: 2i = MLA + MoE whose always-on FFN is mlps[0], 2i+1 = MLA + mlps[1]. The router
        # (softmax, no bias) scores n_routed_experts real experts plus zero_expert_num identity ones; its
        # e_score_correction_bias is a buffer (modeling_longcat_flash.py LongcatFlashDecoderLayer,
        # LongcatFlashTopkRouter, LongcatFlashExperts)
        "longcat_flash": dict(
            LLAMA_NO_BIAS,
            mla=True,
            prepare=_longcat_sublayers,
            ffn_keys=("ffn_hidden_size",),
            moe=moe_keys(
                "n_routed_experts",
                "expert_ffn_hidden_size",
                top_k="moe_topk",
                shared_width="ffn_hidden_size",
                zero_experts="zero_expert_num",
                layers=lambda c, n: [i % 2 == 0 for i in range(n)],
            ),
        ),
    }
)
