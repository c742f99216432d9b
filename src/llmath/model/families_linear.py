"""Adapter rows of the linear-attention hybrids (merged into :data:`llmath.model.families.ADAPTERS`) and the
readers of their mixer widths and per-layer kinds, as transformers' config classes (5.23) read them.

Each hybrid names its layers in ``layer_types`` ('linear_attention' / 'full_attention'); where a file has
none, the config class's own default pattern applies (each reader says which). The attention layers are
read by the ordinary adapter path; the linear ones become the spec's mixer (:mod:`llmath.ops.linear_attn`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmath.model.family_facts import (
    LLAMA_NO_BIAS,
    LLAMA_QK_NORM,
    _dense_prefix,
    _mlp_types_else,
    moe_keys,
    router_groups,
)
from llmath.model.spec import MixerSpec

Getter = Callable[..., int]
Mixers = tuple[MixerSpec, tuple[str, ...]]


def _kinds(cfg: Mapping[str, Any], n: int, kind: str, default: Callable[[int], bool]) -> tuple[str, ...]:
    """Per layer: 'attention' where ``layer_types`` says full attention, else ``kind``; without
    ``layer_types``, ``default(i)`` tells whether layer i attends."""
    types = cfg.get("layer_types")
    if types:
        return tuple("attention" if t == "full_attention" else kind for t in types[:n])
    return tuple("attention" if default(i) else kind for i in range(n))


def _gated_delta(get: Getter, heads: int, key_heads: int, key_dim: int, value_dim: int) -> MixerSpec:
    return MixerSpec(
        kind="gated_delta", d_inner=heads * value_dim, d_state=key_dim, d_conv=get("linear_conv_kernel_dim", 4),
        n_heads=heads, head_dim=value_dim, n_groups=key_heads, chunk_size=64, conv_bias=False,
    )  # fmt: skip


def qwen3_next(cfg: Mapping[str, Any], get: Getter, n: int) -> Mixers:
    """Qwen3-Next / Qwen3.5: Gated DeltaNet layers, full attention where (i + 1) % full_attention_interval
    == 0 (default interval 4) unless ``layer_types`` is given."""
    every = get("full_attention_interval", 4)
    mixer = _gated_delta(
        get, get("linear_num_value_heads"), get("linear_num_key_heads"), get("linear_key_head_dim"),
        get("linear_value_head_dim"),
    )  # fmt: skip
    return mixer, _kinds(cfg, n, "gated_delta", lambda i: (i + 1) % every == 0)


def olmo_hybrid(cfg: Mapping[str, Any], get: Getter, n: int) -> Mixers:
    """OLMo-Hybrid: Gated DeltaNet layers, full attention at i % 4 == 3 (the last layer when none is);
    key and value heads default to the attention heads, key width to int(0.75·D / key heads), value width
    to twice that (``OlmoHybridConfig.__post_init__``)."""
    heads = get("num_attention_heads")
    kh, vh = get("linear_num_key_heads", heads), get("linear_num_value_heads", heads)
    kd = get("linear_key_head_dim", int(0.75 * get("hidden_size") / kh))
    kinds = _kinds(cfg, n, "gated_delta", lambda i: i % 4 == 3)
    if "attention" not in kinds and not cfg.get("layer_types"):
        kinds = kinds[:-1] + ("attention",)
    return _gated_delta(get, vh, kh, kd, get("linear_value_head_dim", 2 * kd)), kinds


def _kda(get: Getter, heads: int, width: int, conv: int, rank: int) -> MixerSpec:
    return MixerSpec(
        kind="kda", d_inner=heads * width, d_state=width, d_conv=conv, n_heads=heads, head_dim=width,
        n_groups=heads, chunk_size=64, conv_bias=False, gate_rank=rank,
    )  # fmt: skip


def kimi_linear(cfg: Mapping[str, Any], get: Getter, n: int) -> Mixers:
    """Kimi-Linear: KDA layers (low-rank forget and output gates of rank head_dim) and MLA layers.

    As ``KimiLinearConfig.__post_init__`` reads them: the checkpoint's ``linear_attn_config`` sub-dict
    (``num_heads``, ``head_dim``, ``short_conv_kernel_size``, 1-based ``full_attn_layers`` / ``kda_layers``)
    wins over the ``linear_*`` keys; then ``layer_types``; else full attention at layers i > 0, i % 4 == 0."""
    sub = cfg.get("linear_attn_config") or {}
    heads = int(sub.get("num_heads") or get("linear_num_heads", 32))
    width = int(sub.get("head_dim") or get("linear_head_dim", 128))
    conv = int(sub.get("short_conv_kernel_size") or get("linear_conv_kernel_dim", 4))
    mixer = _kda(get, heads, width, conv, width)
    full = set(sub.get("full_attn_layers") or [])
    if not cfg.get("layer_types") and full and sub.get("kda_layers"):
        return mixer, tuple("attention" if i + 1 in full else "kda" for i in range(n))
    return mixer, _kinds(cfg, n, "kda", lambda i: i > 0 and i % 4 == 0)


def _dense_first(default: int) -> Callable[[Mapping[str, Any], int], list[bool]]:
    """MoE layers per ``mlp_layer_types``, else dense below ``first_k_dense_replace`` (the config class's
    default: 1 for Kimi-Linear, 2 for Ling hybrid)."""

    def layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
        first = cfg.get("first_k_dense_replace")
        return _dense_prefix(default if first is None else first)(cfg, n)

    return _mlp_types_else(layers)


def bailing_hybrid(cfg: Mapping[str, Any], get: Getter, n: int) -> Mixers:
    """Ling hybrid (``bailing_hybrid``): KDA layers with full-rank gates; MLA (with a per-head output gate)
    every ``layer_group_size``-th layer. ``BailingHybridConfig.__post_init__`` sets the linear widths from
    ``num_attention_heads``, ``head_dim`` and ``short_conv_kernel_size``; ``linear_*`` keys in the file win."""
    group = get("layer_group_size", 6)
    heads = get(("linear_num_heads", "num_attention_heads"))
    conv = get(("linear_conv_kernel_dim", "short_conv_kernel_size"), 4)
    mixer = _kda(get, heads, get(("linear_head_dim", "head_dim")), conv, 0)
    return mixer, _kinds(cfg, n, "kda", lambda i: (i + 1) % group == 0)


def minimax(cfg: Mapping[str, Any], get: Getter, n: int) -> Mixers:
    """MiniMax-01: lightning attention (the attention heads and head width, blocks of ``block_size``) and
    full attention at even layers (``MiniMaxConfig``'s default) unless ``layer_types`` is given."""
    heads = get("num_attention_heads")
    width = get("head_dim", get("hidden_size") // heads)
    mixer = MixerSpec(
        kind="lightning", d_inner=heads * width, d_state=width, d_conv=0, n_heads=heads, head_dim=width,
        n_groups=heads, chunk_size=get("block_size", 256),
    )  # fmt: skip
    return mixer, _kinds(cfg, n, "lightning", lambda i: i % 2 == 0)


_QWEN_NEXT = dict(LLAMA_QK_NORM, attn_gate="full", mixers=qwen3_next)
_KDA_MOE = moe_keys(
    ("num_experts", "num_local_experts"),
    "moe_intermediate_size",
    top_k=("num_experts_per_token", "num_experts_per_tok"),
    shared_count=("num_shared_experts", "n_shared_experts"),
)

ADAPTERS: dict[str, dict[str, Any]] = {
    "qwen3_next": dict(_QWEN_NEXT, moe="qwen2_moe"),
    "qwen3_5_text": _QWEN_NEXT,
    # every Qwen3.5-MoE layer is sparse and the file has no dense width: the expert width stands in (unused)
    "qwen3_5_moe_text": dict(_QWEN_NEXT, moe="qwen2_moe", ffn_keys=("intermediate_size", "moe_intermediate_size")),
    "olmo_hybrid": dict(LLAMA_NO_BIAS, qk_norm="full", mixers=olmo_hybrid),
    "kimi_linear": dict(
        LLAMA_NO_BIAS,
        mla=True,
        position="none",
        # n_group: int = 1 (configuration_kimi_linear.py)
        moe=dict(_KDA_MOE, layers=_dense_first(1), **router_groups(1)),
        mixers=kimi_linear,
        # Kimi-K3's text_config (remote code, moonshotai/Kimi-K3) is a kimi_linear config with three architecture
        # keys transformers 5.23's KimiLinear has no code for: read as kimi_linear they would count its experts
        # at the model width (5.49T; the K3 technical report, arXiv:2607.24653, gives 2.8T)
        refuse={
            "routed_expert_hidden_size": "Kimi-K3's routed experts in a latent, with projections around them",
            "latent_moe_use_norm": "a norm on Kimi-K3's MoE latent",
            "attn_res_block_size": "Kimi-K3's attention-residual blocks",
        },
    ),  # fmt: skip
    "bailing_hybrid": dict(
        LLAMA_NO_BIAS,
        mla=True,
        attn_gate="head",
        # n_group: int = 8 (configuration_bailing_hybrid.py)
        moe=dict(_KDA_MOE, layers=_dense_first(2), **router_groups(8)),
        mixers=bailing_hybrid,
    ),
    "minimax": dict(LLAMA_NO_BIAS, moe="mixtral", mixers=minimax),
}
