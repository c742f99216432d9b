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
from dataclasses import replace
from pathlib import Path
from typing import Any, overload

from llmath.errors import ConfigError, SpecError, WorkloadError
from llmath.model import derive
from llmath.model import formats as fmt
from llmath.model.config_check import check_config, fix_advice, load_config_file
from llmath.model.derive import fact
from llmath.model.families import ADAPTERS
from llmath.model.family_facts import (
    ARCHITECTURE_TYPES,
    ENCODERS,
    MODEL_TYPE_ALIASES,
    MOE_KINDS,
    TIED_BY_DEFAULT,
    _all_layers,
)
from llmath.model.length_config import length_config
from llmath.model.spec import ModelSpec
from llmath.model.spec_moe import MoESpec
from llmath.model.towers_vl import FLAT_WRAPPERS

__all__ = ["ADAPTERS", "ENCODERS", "TIED_BY_DEFAULT", "read_config", "spec_from_config", "spec_from_file"]

_MISSING = object()

# Config key aliases, first match wins.
HIDDEN = ("hidden_size", "n_embd", "n_embed", "d_model")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "decoder_layers")
HEADS = ("num_attention_heads", "n_head", "num_heads", "decoder_attention_heads", "attention_heads")
FFN = ("intermediate_size", "n_inner", "ffn_hidden_size", "d_ff", "ffn_dim", "decoder_ffn_dim", "dff")
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
            + (
                fix_advice(where)
                if where.lower().endswith(".gguf")
                else "add it to the config.json (see the model's hub page) or pass a complete config"
            )
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


def supported_model_types() -> list[str]:
    return sorted(ADAPTERS)


def _layer_windows(
    cfg: Mapping[str, Any], pattern: Any, n_layers: int, where: str, key: str = "sliding_window"
) -> tuple[int | None, ...]:
    """Sliding windows per layer, derived as the transformers config classes derive ``layer_types``.

    ``pattern`` (the family's table fact ``windows``) applies when the file has no ``layer_types``:
    ``all`` layers slide; ``alternate`` (layer 0 slides, then every other); ``every`` (all but every
    ``sliding_window_pattern``-th, default 6); ``from_layer`` (layers from ``max_window_layers`` on, and
    only when ``use_sliding_window`` is set).
    """
    window = cfg.get(key)
    types = cfg.get("layer_types")
    if pattern == "from_layer" and not cfg.get("use_sliding_window", False):
        window = None
    if window is None:
        return (None,) * n_layers
    window = _int(cfg, key, where=where)
    if types is None:
        if callable(pattern):
            types = pattern(cfg, n_layers)
        elif pattern == "alternate":
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
    # a chunked layer (Llama-4) is a window of the chunk size: transformers caches it as one (cache_utils.py,
    # "chunked_attention": DynamicSlidingWindowLayer); only the mask differs (see ops/attention.py)
    return tuple(window if t in ("sliding_attention", "chunked_attention") else None for t in types[:n_layers])


def _moe_from_keys(t: Mapping[str, Any], cfg: Mapping[str, Any], n: int, where: str):
    """A MoE described by the config keys a family uses (the table's ``moe``: its own dict or a name in
    :data:`~llmath.model.family_facts.MOE_KINDS`): ``experts``, ``top_k``, ``d_ff`` (each routed expert's
    width), optionally ``shared_width`` (the shared FFN's width) or ``shared_count`` (shared experts of width
    ``d_ff``; with ``shared_width``: of that width), ``zero_experts`` (identity experts), ``shared_gate``
    (a gated shared expert), ``router_bias`` / ``expert_bias``, ``expert_groups`` (the router's expert groups:
    :func:`_expert_groups`), and ``layers`` (cfg, n) -> MoE flags."""
    per = _int(cfg, t["d_ff"], where=where)
    shared = 0
    if "shared_width" in t:
        shared = _int(cfg, t["shared_width"], 0, where=where)
        shared *= _int(cfg, t["shared_count"], 1, where=where) if "shared_count" in t else 1
    elif "shared_count" in t:
        shared = per * _int(cfg, t["shared_count"], 0, where=where)
    moe = MoESpec(
        n_experts=_int(cfg, t["experts"], where=where),
        top_k=_int(cfg, t["top_k"], where=where),
        d_ff_expert=per,
        d_ff_shared=shared,
        shared_gate=bool(t.get("shared_gate", False)) and shared > 0,
        router_bias=bool(t.get("router_bias", False)),
        expert_bias=bool(t.get("expert_bias", False)),
        router_score_bias=bool(t.get("router_score_bias", False)),
        dense_eager=bool(t.get("dense_eager", False)),
        output_norm=bool(t.get("output_norm", False)),
        output_bias=bool(t.get("output_bias", False)),
        shared_bias=bool(cfg.get(t["shared_bias"], False)) if "shared_bias" in t else False,
        zero_experts=_int(cfg, t["zero_experts"], 0, where=where) if "zero_experts" in t else 0,
        router_mlp=_int(cfg, t["router_mlp"], where=where) if "router_mlp" in t else 0,
        latent=(_int(cfg, t["latent"], 0, where=where) or 0) if "latent" in t else 0,
        expert_groups=_expert_groups(t, cfg, where),
    )
    layers = t.get("layers", _all_layers)(cfg, n)
    return moe, tuple(bool(x) for x in layers)


def _expert_groups(t: Mapping[str, Any], cfg: Mapping[str, Any], where: str) -> int:
    """The router's expert groups: the table's ``expert_groups`` (key, the config class's default; absent: 1, a
    plain top-k), where its ``groups_only_when`` (key, value, default) holds (:func:`~llmath.model.family_facts.
    router_groups`)."""
    if "expert_groups" not in t:
        return 1
    if "groups_only_when" in t:
        key, value, default = t["groups_only_when"]
        if cfg.get(key, default) != value:
            return 1
    key, default = t["expert_groups"]
    return _int(cfg, key, default, where=where) or 1


def _moe_layers(
    table: Mapping[str, Any], cfg: Mapping[str, Any], n_layers: int, where: str
) -> tuple[MoESpec | None, tuple[bool, ...]]:
    """The family's MoE spec and which layers use it (none when no layer does)."""
    kind = table.get("moe")
    keys = MOE_KINDS[kind] if isinstance(kind, str) else kind
    if not keys or ("layers" in keys and not any(keys["layers"](cfg, n_layers))):
        return None, ()  # no MoE layer (Nemotron-H without E): its expert keys are not needed
    moe, layers = _moe_from_keys(keys, cfg, n_layers, where)
    return (moe, layers) if any(layers) else (None, ())


#: Config keys counting a checkpoint's multi-token-prediction modules, as vLLM's MTP drafts read them:
#: num_nextn_predict_layers (vllm/model_executor/models/deepseek_mtp.py, glm4_moe_mtp.py, mimo_mtp.py),
#: mtp_num_hidden_layers (qwen3_next_mtp.py), num_mtp_modules (MiniMax-M2's config.json).
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")


def mtp_modules(cfg: Mapping[str, Any]) -> int:
    """The multi-token-prediction modules a config declares (0: none, so no MTP speculation)."""
    return max((int(v) for k in MTP_KEYS if isinstance(v := cfg.get(k), int) and not isinstance(v, bool)), default=0)


def spec_from_config(cfg: Mapping[str, Any], name: str | None = None, source: str = "") -> ModelSpec:
    """Build a :class:`ModelSpec` from a parsed config.json mapping."""
    where = source or name or "config"
    cfg = check_config(cfg, where, ADAPTERS, MODEL_TYPE_ALIASES, unwrap=False)  # config_check.py: kinds, ranges
    outer = cfg
    cfg, wrapper, towers = _unwrap(cfg)
    cfg = check_config(cfg, where, ADAPTERS, MODEL_TYPE_ALIASES)  # the language model's own fields and aliases
    raw_type: Any = cfg.get("model_type")
    if raw_type is None:
        raise ConfigError(
            f"{where}: field 'model_type' is missing; llmath needs it to pick the architecture "
            f"(supported: {', '.join(supported_model_types())})"
        )
    model_type = _resolve_type(cfg, raw_type)
    if model_type in ENCODERS:
        raise ConfigError(
            f"{where}: model_type={raw_type!r} is a BERT-style encoder, not a decoder; llmath analyses decoder "
            "language models (prefill and decode). Pass a decoder or encoder-decoder config.json"
        )
    table = ADAPTERS.get(model_type)
    if table is None:
        raise ConfigError(
            f"{where}: model_type={raw_type!r} is not supported; supported: {', '.join(supported_model_types())}. "
            "Describe the model as a spec (llmath.ModelSpec) or open an issue with its config.json"
        )
    name = name or cfg.get("_name_or_path") or model_type
    _refuse_unmodelled(cfg, table, where)
    if "prepare" in table:  # keys a family states another way (MPT's expansion_ratio, Nemotron-H's pattern)
        cfg = table["prepare"](cfg)
    try:
        build = _build_mixers if "build" in table else _build
        spec = build(cfg, model_type, table, name, where, source)
        if "mixers" in table:  # a hybrid: attention layers as read above, the others' mixer from the file
            got = table["mixers"](cfg, lambda k, d=_MISSING: _int(cfg, k, d, where=where), spec.n_layers)
            spec = replace(spec, **(got if isinstance(got, Mapping) else dict(mixer=got[0], layer_mixers=got[1])))
        if "fields" in table:  # spec fields a family reads its own way (GLM-5's indexer layers, MiMo's widths)
            spec = replace(spec, **table["fields"](cfg, spec.n_layers))
        if spec.mixer is not None and (ssm := ssm_state_dtype(cfg, model_type)):
            spec = replace(spec, ssm_state_dtype=ssm)
        if mtp := mtp_modules(cfg):
            spec = replace(spec, mtp_modules=mtp)
    except SpecError as e:
        raise ConfigError(f"{where}: {e}") from None
    if not wrapper:
        if not table.get("towers"):
            return spec
        wrapper = model_type  # a decoder that carries its own image encoder (GIT): counted as a wrapper's towers
    from llmath.model.towers import tower_params, wrapper_ties  # a wrapper's towers: their modules on first use
    from llmath.model.towers_mllama import vision_spec

    counted, towers = tower_params(outer, spec.d_model)
    tie = wrapper_ties(outer, spec.tie_embeddings)
    spec = replace(spec, wrapper=wrapper, towers_not_counted=towers, tower_params=counted, tie_embeddings=tie)
    return replace(spec, vision=vision_spec(outer)) if outer.get("model_type") == "mllama" else spec


def _unwrap(cfg: Mapping[str, Any]) -> tuple[Mapping[str, Any], str, tuple[str, ...]]:
    """A multimodal wrapper (a ``text_config`` under a model_type llmath has no table for) -> its language
    model's config, the wrapper's model_type and the other sub-configs (towers) that are not counted."""
    outer = cfg.get("model_type")
    if outer in FLAT_WRAPPERS and not isinstance(cfg.get("text_config"), Mapping):
        # Qwen2-VL / Qwen2.5-VL hub files: the language model's keys at the top level beside vision_config
        text = {k: v for k, v in cfg.items() if not k.endswith("_config")}
        cfg = dict(cfg, text_config=dict(text, model_type=FLAT_WRAPPERS[outer]))
    if not isinstance(cfg.get("text_config"), Mapping) or outer in ADAPTERS:
        return cfg, "", ()
    towers = tuple(sorted(k for k, v in cfg.items() if k.endswith("_config") and k != "text_config" and v))
    return dict(cfg["text_config"]), str(outer or "wrapper"), towers


def _resolve_type(cfg: Mapping[str, Any], raw_type: str) -> str:
    """model_type -> adapter table: aliases first, then (for a model_type without a table) the transformers
    class the file names in ``architectures``, whose config keys the checkpoint must then use."""
    model_type = MODEL_TYPE_ALIASES.get(raw_type, raw_type)
    if model_type in ADAPTERS:
        return model_type
    for arch in cfg.get("architectures") or []:
        if arch in ARCHITECTURE_TYPES:
            return ARCHITECTURE_TYPES[arch]
    return model_type


def _refuse_unmodelled(cfg, table, where) -> None:
    """Options of a family that llmath does not model yet: an error, never a silently different count."""
    for key, what in table.get("refuse", {}).items():
        if cfg.get(key):
            raise ConfigError(
                f"{where}: {key}={cfg[key]!r} ({what}) is not modelled yet; set it false to analyse the "
                "model without it, or open an issue with the config.json"
            )


def _build_mixers(cfg, model_type, table, name, where, source) -> ModelSpec:
    """A family whose layers are not (only) attention: its table's ``build`` (model/mixer_configs.py)."""

    def get(key: tuple[str, ...] | str, default: Any = _MISSING) -> int:
        return _int(cfg, key, default, where=where)

    tie = cfg.get("tie_word_embeddings")
    tie = model_type in TIED_BY_DEFAULT if tie is None else tie
    return table["build"](cfg, get, name=name, model_type=model_type, source=source, tie_embeddings=bool(tie))


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
    head_dim = derive.head_dim(cfg, d, n_heads, where, floor=bool(table.get("head_dim_floor") or table.get("mla")))
    ffn, activation, d_ff = derive.ffn_shape(cfg, table, d, table.get("ffn_keys", FFN), where)
    moe, layer_moe = _moe_layers(table, cfg, n_layers, where)
    mla = derive.mla(table, cfg, get)
    if mla is not None:
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    norms, parallel, hf_cache_kv = derive.norm_layout(table, cfg, n_heads)
    position = fact(table, cfg, "position", "rotary")
    max_pos = next((cfg[k] for k in table.get("positions_keys", POSITIONS) if cfg.get(k)), None)
    softcap = table.get("softcap")
    stacks = derive.stacks(table, cfg, get, n_layers, d_ff)
    tie = cfg.get("tie_word_embeddings")
    if tie is None:  # each transformers config class has its own default
        tie = model_type in TIED_BY_DEFAULT
    windows = table.get("windows", "all"), stacks["n_layers"], where, table.get("window_key", "sliding_window")
    return ModelSpec(  # by concern: identity, widths, attention, FFN / MoE, norms and positions, the stacks
        name=name, model_type=model_type, source=source, d_model=d, vocab_size=vocab, tie_embeddings=bool(tie),
        n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim, hf_cache_kv_heads=hf_cache_kv, mla=mla,
        attention="mla" if mla is not None else "mha", layer_windows=_layer_windows(cfg, *windows),
        attn_softcap=cfg.get("attn_logit_softcapping") if softcap else None,
        ffn=ffn, activation=activation, activation_params=int(table.get("activation_params", 0)), moe=moe,
        layer_moe=layer_moe, final_softcap=cfg.get("final_logit_softcapping") if softcap else None,
        norm=fact(table, cfg, "norm", "rms"), norms_per_layer=norms, parallel_block=parallel, position=position,
        max_positions=int(max_pos) if max_pos else None, length_config=length_config(cfg),
        rotary_dim=derive.rotary_dim(cfg, position, head_dim, mla),
        **stacks, **derive.flags(table, cfg),
    )  # fmt: skip


# Nemotron-H's default when its config.json omits the key: "float32" in transformers 5.23's NemotronHConfig
# (models/nemotron_h/configuration_nemotron_h.py) and in vLLM's NemotronHForCausalLMConfig hook
# (vllm/model_executor/models/config.py, DEFAULT_MAMBA_SSM_CACHE_DTYPE: "Only float32 is known to have no
# accuracy issues"); vLLM's CacheConfig otherwise defaults the SSM state to the model dtype ("auto")
SSM_STATE_DEFAULTS = {"nemotron_h": "float32"}


def ssm_state_dtype(cfg: Mapping[str, Any], model_type: str) -> str | None:
    """The config's ``mamba_ssm_cache_dtype`` as a format name (``float32`` -> ``fp32``); None for ``auto``
    or absent (the state is then kept as the KV cache is)."""
    v = cfg.get("mamba_ssm_cache_dtype", SSM_STATE_DEFAULTS.get(model_type))
    if v is None or v == "auto":
        return None
    try:
        return fmt.canonical(str(v), "kv")
    except WorkloadError:
        raise ConfigError(
            f"mamba_ssm_cache_dtype={v!r} is not a state format; use auto, float32, bfloat16 or float16"
        ) from None


def read_config(path: str | Path) -> dict[str, Any]:
    """Read a config.json (a file, or a directory holding one) with clear errors (see config_check.py)."""
    return load_config_file(path)


def spec_from_file(path: str | Path, name: str | None = None) -> ModelSpec:
    p = Path(path)
    cfg = read_config(p)
    return spec_from_config(cfg, name=name or (p.parent.name if p.name == "config.json" else p.stem), source=str(p))
