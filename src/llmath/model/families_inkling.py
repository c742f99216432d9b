"""Adapter rows of Inkling and Inkling-2 (Thinking Machines; merged by :mod:`llmath.model.families`).

Each builds the whole spec from its config.json as the transformers 5.23 config classes read it
(``configuration_inkling.py`` ``InklingTextConfig``, ``configuration_inkling2.py`` ``Inkling2TextConfig``):
the layer pattern from ``layer_types`` (``hybrid_sliding``: sliding-window attention, ``hybrid``: full),
else derived as their ``__post_init__`` derives it. The layers' operators are in :mod:`llmath.ops.inkling`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.spec import InklingSpec, ModelSpec
from llmath.model.spec_moe import MoESpec

Getter = Callable[..., int]


def _types(cfg: Mapping[str, Any], n: int, default: Callable[[int], bool]) -> tuple[bool, ...]:
    """Per layer: True where the layer slides (``hybrid_sliding``)."""
    types = cfg.get("layer_types")
    if types is None:
        return tuple(default(i) for i in range(n))
    if len(types) < n or any(t not in ("hybrid", "hybrid_sliding") for t in types[:n]):
        raise ConfigError(
            f"layer_types={types!r} must name each of the {n} layers 'hybrid' (full attention) or "
            "'hybrid_sliding' (sliding window); fix the config.json or remove layer_types to derive it"
        )
    return tuple(t == "hybrid_sliding" for t in types[:n])


def _inkling1_sliding(cfg: Mapping[str, Any], n: int) -> tuple[bool, ...]:
    """``local_layer_ids`` when set, else every layer but each sixth (i + 1 ≡ 0 mod 6) slides."""
    local = cfg.get("local_layer_ids")
    ids = set(local) if local is not None else {i for i in range(n) if (i + 1) % 6}
    return _types(cfg, n, lambda i: i in ids)


def _inkling1_moe(cfg: Mapping[str, Any], n: int) -> tuple[bool, ...]:
    """``mlp_layer_types`` ('dense' / 'sparse'), else dense below ``dense_mlp_idx`` (default 0)."""
    kinds = cfg.get("mlp_layer_types")
    if kinds is None:
        first = int(cfg.get("dense_mlp_idx") or 0)
        return tuple(i >= first for i in range(n))
    if len(kinds) < n or any(k not in ("dense", "sparse") for k in kinds[:n]):
        raise ConfigError(f"mlp_layer_types={kinds!r} must name each of the {n} layers 'dense' or 'sparse'")
    return tuple(k == "sparse" for k in kinds[:n])


# The config classes' defaults (transformers 5.23 InklingTextConfig / Inkling2TextConfig) of the keys only
# these families have, for a file that leaves one out: (sliding heads, K/V heads, head width, d_rel,
# rel_extent, conv width, window)
DEFAULTS = {"inkling_text": (64, 16, 128, 16, 1024, 4, 512), "inkling2_text": (48, 8, 128, 16, 1024, 4, 1024)}


def _widths(get: Getter, model_type: str) -> dict[str, Any]:
    heads, kv, width, rel, extent, conv, _ = DEFAULTS[model_type]
    return dict(
        window_heads=get("swa_num_attention_heads", heads),
        window_kv_heads=get("swa_num_key_value_heads", kv),
        window_head_dim=get("swa_head_dim", width),
        d_rel=get("d_rel", rel),
        rel_extent=get("rel_extent", extent),
        conv=get(("conv_kernel_size", "sconv_kernel_size"), conv),
    )


def _common(get: Getter, n: int, sliding: tuple[bool, ...], model_type: str) -> dict[str, Any]:
    window = get(("sliding_window_size", "sliding_window"), DEFAULTS[model_type][-1])
    return dict(
        n_layers=n,
        d_model=get("hidden_size"),
        vocab_size=get("vocab_size"),
        n_heads=get("num_attention_heads"),
        n_kv_heads=get("num_key_value_heads"),
        head_dim=get("head_dim"),
        norm="rms",
        position="relative",
        ffn="gated",
        embedding_norm=True,  # InklingNormedEmbedding: an RMSNorm (with weight) over the looked-up rows
        layer_windows=tuple(window if s else None for s in sliding),
    )


def _untied(common: dict[str, Any]) -> dict[str, Any]:
    """Both ForCausalLM classes declare ``_tied_weights_keys = {}``: the head is never the token table."""
    return dict(common, tie_embeddings=False)


def inkling(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """Inkling: sliding and full attention layers, dense or MoE FFNs with two shared experts scored by the
    router. A hub file's ``dense_intermediate_size`` is the dense FFN's width and its ``intermediate_size``
    the experts' (as the config class swaps them)."""
    n = get("num_hidden_layers")
    expert, dense = get("moe_intermediate_size"), get("intermediate_size")
    if cfg.get("dense_intermediate_size") is not None:
        expert, dense = dense, get("dense_intermediate_size")
    shared = get("n_shared_experts", 2)  # the config class default
    moe = MoESpec(
        n_experts=get(("n_routed_experts", "num_local_experts")),
        top_k=get("num_experts_per_tok"),
        d_ff_expert=expert,
        d_ff_shared=shared * expert,
    )
    if shared < 1:
        raise ConfigError(
            f"n_shared_experts={shared}: Inkling's router scores its shared experts as softmax sinks, so it "
            "needs at least one; fix the config.json"
        )
    return ModelSpec(
        **_common(get, n, _inkling1_sliding(cfg, n), "inkling_text"),
        d_ff=dense,
        moe=moe,
        layer_moe=_inkling1_moe(cfg, n),
        inkling=InklingSpec(**_widths(get, "inkling_text"), shared_sink=True),
        **_untied(common),
    )


def inkling2(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """Inkling-2: MoE in every layer (no shared experts), block attention residuals, gated attention with
    sinks, dynamic K/V convs in the full layers; every sixth layer (i + 1 ≡ 0 mod 6) is full by default."""
    n = get("num_hidden_layers")
    moe = MoESpec(
        n_experts=get(("n_routed_experts", "num_local_experts")),
        top_k=get("num_experts_per_tok"),
        d_ff_expert=get(("moe_intermediate_size", "intermediate_size")),
    )
    soft = cfg.get("final_logit_softcapping")
    return ModelSpec(
        **_common(get, n, _types(cfg, n, lambda i: (i + 1) % 6 != 0), "inkling2_text"),
        d_ff=0,
        moe=moe,
        layer_moe=(True,) * n,
        final_softcap=float(soft) if soft else None,
        inkling=InklingSpec(
            **_widths(get, "inkling2_text"),
            gated=True,
            dynamic_conv=True,
            block_size=get("n_layers_per_attn_res_block", 6),
        ),
        **_untied(common),
    )


ADAPTERS: dict[str, dict[str, Any]] = {
    "inkling_text": dict(norm="rms", build=inkling),
    "inkling2_text": dict(norm="rms", build=inkling2),
}
