"""Hugging Face ``config.json`` -> :class:`ModelSpec`.

One adapter table per ``model_type`` (data, not code paths per model). Each table gives the fixed
architecture facts of the family (norm kind, gated FFN, parallel block, ...) and, where the family
reads them from its config, the config key to read. Configs come in many vintages: keys are read
through alias lists, ``null`` means "not set", and both ``torch_dtype`` and ``dtype`` are accepted.

The semantics follow what transformers builds from the same file (the oracle tests prove it), e.g.
sliding-window layer patterns are derived exactly as the transformers config classes derive them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, overload

from llmath.errors import ConfigError, SpecError
from llmath.model import derive
from llmath.model.config_check import check_config, load_config_file
from llmath.model.derive import fact
from llmath.model.spec import ModelSpec, MoESpec

_MISSING = object()

# Config key aliases, first match wins.
HIDDEN = ("hidden_size", "n_embd", "n_embed", "d_model")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "decoder_layers")
HEADS = ("num_attention_heads", "n_head", "num_heads", "decoder_attention_heads")
FFN = ("intermediate_size", "n_inner", "ffn_hidden_size", "d_ff", "ffn_dim", "decoder_ffn_dim")
POSITIONS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def _key(cfg: Mapping[str, Any], keys: tuple[str, ...] | str, default: Any = _MISSING, *, where: str = ""):
    keys = (keys,) if isinstance(keys, str) else keys
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    if default is _MISSING:
        raise ConfigError(
            f"{where}: required field {' / '.join(repr(k) for k in keys)} is missing or null; "
            "add it to the config.json (see the model's hub page) or pass a complete config"
        )
    return default


@overload
def _int(cfg: Mapping[str, Any], keys: tuple[str, ...] | str, default: int = ..., *, where: str) -> int: ...
@overload
def _int(cfg: Mapping[str, Any], keys: tuple[str, ...] | str, default: None, *, where: str) -> int | None: ...
def _int(cfg, keys, default=_MISSING, *, where):
    """An integer field under the first of ``keys`` set (floats equal to an int accepted), else ``default``."""
    v = _key(cfg, keys, default, where=where)
    if v is None:
        return v
    if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
        raise ConfigError(f"{where}: field {keys if isinstance(keys, str) else keys[0]!r}={v!r} must be an integer")
    return int(v)


# ---- per-family facts -----------------------------------------------------------------------------
# Values are constants, or ("key", default) to read a bool from the config, or a callable(cfg).


def _k(name: str, default: Any) -> tuple[str, Any]:
    return (name, default)


def _attn_bias(value: Any) -> dict[str, Any]:
    """The same bias fact for the q, k, v and o projections."""
    return dict(q_bias=value, k_bias=value, v_bias=value, o_bias=value)


def _falcon_kv_heads(cfg: Mapping[str, Any], n_heads: int) -> int:
    """Falcon: the new decoder architecture reads num_kv_heads; the old one is multi-query or MHA."""
    if cfg.get("new_decoder_architecture"):
        v = cfg.get("num_kv_heads") or cfg.get("n_head_kv")
        return int(v) if v else n_heads
    return 1 if cfg.get("multi_query", True) else n_heads


LLAMA_LIKE = dict(
    norm="rms",
    ffn="gated",
    position="rotary",
    **_attn_bias(_k("attention_bias", False)),
    ffn_bias=_k("mlp_bias", False),
    norms_per_layer=2,
)

ADAPTERS: dict[str, dict[str, Any]] = {
    "llama": LLAMA_LIKE,
    "granite": LLAMA_LIKE,
    "mistral": dict(LLAMA_LIKE, **_attn_bias(False), ffn_bias=False),
    "mixtral": dict(LLAMA_LIKE, **_attn_bias(False), ffn_bias=False, moe="mixtral"),
    "phi3": dict(LLAMA_LIKE, **_attn_bias(False), ffn_bias=False),
    "qwen2": dict(
        LLAMA_LIKE, q_bias=True, k_bias=True, v_bias=True, o_bias=False, ffn_bias=False, windows="from_layer"
    ),
    "qwen2_moe": dict(
        LLAMA_LIKE,
        q_bias=_k("qkv_bias", True),
        k_bias=_k("qkv_bias", True),
        v_bias=_k("qkv_bias", True),
        o_bias=False,
        ffn_bias=False,
        moe="qwen2_moe",
        windows="from_layer",
    ),
    "qwen3": dict(LLAMA_LIKE, ffn_bias=False, qk_norm="head", windows="from_layer"),
    "qwen3_moe": dict(LLAMA_LIKE, ffn_bias=False, qk_norm="head", moe="qwen3_moe", windows="from_layer"),
    "gemma": dict(LLAMA_LIKE, ffn_bias=False, embedding_scale=True, activation="gelu_tanh"),
    "gemma2": dict(
        LLAMA_LIKE,
        ffn_bias=False,
        embedding_scale=True,
        norms_per_layer=4,
        activation="gelu_tanh",
        softcap=True,
        windows="alternate",
    ),
    "gemma3_text": dict(
        LLAMA_LIKE,
        ffn_bias=False,
        embedding_scale=True,
        norms_per_layer=4,
        qk_norm="head",
        activation="gelu_tanh",
        softcap=True,
        windows="every",
    ),
    "olmo": dict(LLAMA_LIKE, norm="layer_noparam", ffn_bias=False),
    "olmo2": dict(LLAMA_LIKE, ffn_bias=False, qk_norm="full"),
    "cohere": dict(
        LLAMA_LIKE,
        norm="layer",
        norm_bias=False,
        parallel=True,
        norms_per_layer=1,
        ffn_bias=False,
        qk_norm=lambda c: "full" if c.get("use_qk_norm") else "none",
    ),
    "phi": dict(
        norm="layer",
        ffn="mlp",
        position="rotary",
        **_attn_bias(True),
        ffn_bias=True,
        parallel=True,
        norms_per_layer=1,
        lm_head_bias=True,
        activation="gelu_new",
        qk_norm=lambda c: "full" if c.get("qk_layernorm") else "none",
    ),
    "starcoder2": dict(
        norm="layer",
        ffn="mlp",
        position="rotary",
        **_attn_bias(_k("use_bias", True)),
        ffn_bias=_k("use_bias", True),
        norms_per_layer=2,
        activation="gelu_tanh",
    ),
    "gpt2": dict(
        norm="layer",
        ffn="mlp",
        position="learned",
        **_attn_bias(True),
        ffn_bias=True,
        norms_per_layer=2,
        activation="gelu_new",
        ffn_default=4,
    ),
    "gpt_neox": dict(
        norm="layer",
        ffn="mlp",
        position="rotary",
        **_attn_bias(_k("attention_bias", True)),
        ffn_bias=True,
        parallel=_k("use_parallel_residual", True),
        norms_per_layer=2,
        activation="gelu",
    ),
    "gptj": dict(
        norm="layer",
        ffn="mlp",
        position="rotary",
        **_attn_bias(False),
        ffn_bias=True,
        parallel=True,
        norms_per_layer=1,
        lm_head_bias=True,
        activation="gelu_new",
        ffn_default=4,
    ),
    "opt": dict(
        norm="layer",
        ffn="mlp",
        position="learned",
        position_offset=2,
        **_attn_bias(_k("enable_bias", True)),
        ffn_bias=_k("enable_bias", True),
        norms_per_layer=2,
        activation="relu",
        final_norm=_k("do_layer_norm_before", True),
    ),
    "bloom": dict(
        norm="layer",
        ffn="mlp",
        position="alibi",
        **_attn_bias(True),
        ffn_bias=True,
        norms_per_layer=2,
        embedding_norm=True,
        activation="gelu_tanh",
        ffn_default=4,
    ),
    "falcon": dict(
        norm="layer",
        ffn="mlp",
        **_attn_bias(_k("bias", False)),
        ffn_bias=_k("bias", False),
        parallel=_k("parallel_attn", True),
        norms_per_layer="falcon",
        activation="gelu",
        ffn_default=4,
        kv_heads=_falcon_kv_heads,
        position=lambda c: "alibi" if c.get("alibi") else "rotary",
    ),
    "deepseek_v2": dict(LLAMA_LIKE, **_attn_bias(False), ffn_bias=False, moe="deepseek", mla=True),
    "deepseek_v3": dict(LLAMA_LIKE, **_attn_bias(False), ffn_bias=False, moe="deepseek", mla=True),
    "gpt_oss": dict(
        LLAMA_LIKE,
        **_attn_bias(True),
        ffn_bias=False,
        moe="gpt_oss",
        attn_sinks=True,
        windows="alternate",
    ),
    "t5": dict(
        norm="rms",
        norm_bias=False,
        ffn="t5",
        position="relative",
        **_attn_bias(False),
        ffn_bias=False,
        norms_per_layer=3,
        encdec="t5",
    ),
    # The original Transformer (Vaswani et al. 2017): post-LN, no final stack norms, shared embeddings.
    "transformer": dict(
        norm="layer",
        ffn="mlp",
        position="sinusoidal",
        **_attn_bias(True),
        ffn_bias=True,
        norms_per_layer=3,
        encdec="transformer",
        activation="relu",
    ),
    "bart": dict(
        norm="layer",
        ffn="mlp",
        position="learned",
        position_offset=2,
        **_attn_bias(True),
        ffn_bias=True,
        norms_per_layer=3,
        encdec="bart",
        activation="gelu",
    ),
}

# model_types whose transformers config class defaults to tie_word_embeddings=True (5.23).
TIED_BY_DEFAULT = {
    "bart",
    "bloom",
    "cohere",
    "falcon",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gpt2",
    "opt",
    "starcoder2",
    "t5",
    "transformer",
}

# Config aliases that older hub files use for the same family.
MODEL_TYPE_ALIASES = {"RefinedWeb": "falcon", "RefinedWebModel": "falcon", "gemma3": "gemma3_text"}


def supported_model_types() -> list[str]:
    return sorted(ADAPTERS)


def _layer_windows(cfg: Mapping[str, Any], pattern: str, n_layers: int, where: str) -> tuple[int | None, ...]:
    """Sliding windows per layer, derived as the transformers config classes derive ``layer_types``.

    ``pattern`` (the family's table fact ``windows``) applies when the file has no ``layer_types``:
    ``all`` layers slide; ``alternate`` (layer 0 slides, then every other); ``every`` (all but every
    ``sliding_window_pattern``-th, default 6); ``from_layer`` (layers from ``max_window_layers`` on, and
    only when ``use_sliding_window`` is set).
    """
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if pattern == "from_layer" and not cfg.get("use_sliding_window", False):
        window = None
    if window is None:
        return (None,) * n_layers
    window = _int(cfg, "sliding_window", where=where)
    if types is None:
        if pattern == "alternate":
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
        elif pattern == "every":
            every = cfg.get("sliding_window_pattern") or 6
            types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)]
        elif pattern == "from_layer":
            first = cfg.get("max_window_layers") or 0
            types = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
        else:
            types = ["sliding_attention"] * n_layers
    if len(types) < n_layers:
        raise ConfigError(f"{where}: layer_types has {len(types)} entries for {n_layers} layers")
    return tuple(window if t == "sliding_attention" else None for t in types[:n_layers])


def _moe(kind: str, cfg: Mapping[str, Any], n_layers: int, where: str) -> tuple[MoESpec, tuple[bool, ...]]:
    if kind == "mixtral":
        moe = MoESpec(
            n_experts=_int(cfg, ("num_local_experts", "num_experts"), where=where),
            top_k=_int(cfg, "num_experts_per_tok", where=where),
            d_ff_expert=_int(cfg, "intermediate_size", where=where),
        )
        return moe, (True,) * n_layers
    if kind in ("qwen2_moe", "qwen3_moe"):
        shared = _int(cfg, "shared_expert_intermediate_size", 0, where=where) if kind == "qwen2_moe" else 0
        moe = MoESpec(
            n_experts=_int(cfg, "num_experts", where=where),
            top_k=_int(cfg, "num_experts_per_tok", where=where),
            d_ff_expert=_int(cfg, "moe_intermediate_size", where=where),
            d_ff_shared=shared,
            shared_gate=kind == "qwen2_moe" and shared > 0,
        )
        step = _int(cfg, "decoder_sparse_step", 1, where=where)
        dense = set(cfg.get("mlp_only_layers") or [])
        layers = tuple(i not in dense and moe.n_experts > 0 and (i + 1) % step == 0 for i in range(n_layers))
        return moe, layers
    if kind == "deepseek":
        per = _int(cfg, "moe_intermediate_size", where=where)
        moe = MoESpec(
            n_experts=_int(cfg, "n_routed_experts", where=where),
            top_k=_int(cfg, "num_experts_per_tok", where=where),
            d_ff_expert=per,
            d_ff_shared=per * _int(cfg, "n_shared_experts", 0, where=where),
        )
        first = _int(cfg, "first_k_dense_replace", 0, where=where)
        freq = _int(cfg, "moe_layer_freq", 1, where=where)
        return moe, tuple(i >= first and i % freq == 0 for i in range(n_layers))
    if kind == "gpt_oss":
        moe = MoESpec(
            n_experts=_int(cfg, ("num_local_experts", "num_experts"), where=where),
            top_k=_int(cfg, ("num_experts_per_tok", "experts_per_token"), where=where),
            d_ff_expert=_int(cfg, "intermediate_size", where=where),
            router_bias=True,
            expert_bias=True,
        )
        return moe, (True,) * n_layers
    raise AssertionError(kind)


def _moe_layers(
    table: Mapping[str, Any], cfg: Mapping[str, Any], n_layers: int, where: str
) -> tuple[MoESpec | None, tuple[bool, ...]]:
    """The family's MoE spec and which layers use it (none when no layer does)."""
    if not table.get("moe"):
        return None, ()
    moe, layers = _moe(table["moe"], cfg, n_layers, where)
    return (moe, layers) if any(layers) else (None, ())


def spec_from_config(cfg: Mapping[str, Any], name: str | None = None, source: str = "") -> ModelSpec:
    """Build a :class:`ModelSpec` from a parsed config.json mapping."""
    where = source or name or "config"
    cfg = check_config(cfg, where, ADAPTERS, MODEL_TYPE_ALIASES)  # kinds, ranges, aliases: config_check.py
    if "text_config" in cfg and "model_type" in cfg and cfg["model_type"] not in ADAPTERS:
        cfg = dict(cfg["text_config"])
    raw_type: Any = cfg.get("model_type")
    if raw_type is None:
        raise ConfigError(
            f"{where}: field 'model_type' is missing; llmath needs it to pick the architecture "
            f"(supported: {', '.join(supported_model_types())})"
        )
    model_type = MODEL_TYPE_ALIASES.get(raw_type, raw_type)
    table = ADAPTERS.get(model_type)
    if table is None:
        raise ConfigError(
            f"{where}: model_type={raw_type!r} is not supported; supported: {', '.join(supported_model_types())}. "
            "Describe the model as a spec (llmath.ModelSpec) or open an issue with its config.json"
        )
    name = name or cfg.get("_name_or_path") or model_type
    try:
        return _build(cfg, model_type, table, name, where, source)
    except SpecError as e:
        raise ConfigError(f"{where}: {e}") from None


def _build(cfg, model_type, table, name, where, source) -> ModelSpec:
    def get(key: tuple[str, ...] | str, default: Any = _MISSING) -> int:
        return _int(cfg, key, default, where=where)

    d = get(HIDDEN)
    n_layers = get(LAYERS)
    n_heads = get(HEADS)
    vocab = get("vocab_size")
    kv_rule = table.get("kv_heads")
    if kv_rule is not None:
        n_kv = kv_rule(cfg, n_heads)
    else:
        n_kv = get(("num_key_value_heads", "num_kv_heads"), n_heads)
    head_dim = derive.head_dim(cfg, d, n_heads, where)
    ffn, activation, d_ff = derive.ffn_shape(cfg, table, d, FFN, where)
    moe, layer_moe = _moe_layers(table, cfg, n_layers, where)
    mla = derive.mla(table, cfg, get)
    if mla is not None:
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    norms, parallel, hf_cache_kv = derive.norm_layout(table, cfg, n_heads)
    position = fact(table, cfg, "position", "rotary")
    max_pos = next((cfg[k] for k in POSITIONS if cfg.get(k)), None)
    softcap = table.get("softcap")
    stacks = derive.stacks(table, cfg, get, n_layers, d_ff)
    tie = cfg.get("tie_word_embeddings")
    if tie is None:  # each transformers config class has its own default
        tie = model_type in TIED_BY_DEFAULT
    return ModelSpec(
        name=name,
        model_type=model_type,
        d_model=d,
        vocab_size=vocab,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        ffn=ffn,
        norm=table["norm"],
        position=position,
        activation=activation,
        attention="mla" if mla is not None else "mha",
        mla=mla,
        moe=moe,
        layer_moe=layer_moe,
        layer_windows=_layer_windows(cfg, table.get("windows", "all"), stacks["n_layers"], where),
        norms_per_layer=norms,
        max_positions=int(max_pos) if max_pos else None,
        rotary_dim=derive.rotary_dim(cfg, position, head_dim, mla),
        tie_embeddings=bool(tie),
        parallel_block=parallel,
        attn_softcap=cfg.get("attn_logit_softcapping") if softcap else None,
        final_softcap=cfg.get("final_logit_softcapping") if softcap else None,
        hf_cache_kv_heads=hf_cache_kv,
        source=source,
        **stacks,
        **derive.flags(table, cfg),
    )


def read_config(path: str | Path) -> dict[str, Any]:
    """Read a config.json (a file, or a directory holding one) with clear errors (see config_check.py)."""
    return load_config_file(path)


def spec_from_file(path: str | Path, name: str | None = None) -> ModelSpec:
    p = Path(path)
    cfg = read_config(p)
    return spec_from_config(cfg, name=name or (p.parent.name if p.name == "config.json" else p.stem), source=str(p))
