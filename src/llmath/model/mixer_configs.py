"""Config readers for families whose layers are not (only) attention: the mixer widths and the per-layer
mixer kinds are data read from the file, as transformers' config classes read them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.spec import MixerSpec, ModelSpec, SharedBlockSpec

Getter = Callable[..., int]


def mamba(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """Mamba-1 (``mamba``, ``falcon_mamba``): every layer is norm, mixer, residual; no attention, no FFN.

    ``time_step_rank="auto"`` is ceil(hidden_size / 16), as ``MambaConfig`` resolves it.
    """
    d = get("hidden_size")
    rank = cfg.get("time_step_rank")
    mixer = MixerSpec(
        kind="mamba",
        d_inner=get("intermediate_size", int(cfg.get("expand", 2) * d)),
        dt_rank=math.ceil(d / 16) if rank in (None, "auto") else get("time_step_rank"),
        **_ssm_keys(cfg, get),
    )
    return _ssm_only(get, mixer, **common)


def mamba2(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """Mamba-2 (``mamba2``): every layer is norm, SSD mixer, residual; I = expand · hidden_size = H · P."""
    mixer = MixerSpec(
        kind="mamba2",
        d_inner=int(cfg.get("expand", 2) * get("hidden_size")),
        n_heads=get("num_heads"),
        head_dim=get("head_dim"),
        n_groups=get("n_groups", 1),
        chunk_size=get("chunk_size", 256),
        **_ssm_keys(cfg, get),
    )
    return _ssm_only(get, mixer, **common)


def _ssm_keys(cfg: Mapping[str, Any], get: Getter) -> dict[str, Any]:
    """The state, conv width and bias keys MambaConfig and Mamba2Config share."""
    return dict(
        d_state=get("state_size"),
        d_conv=get("conv_kernel"),
        conv_bias=bool(cfg.get("use_conv_bias", True)),
        proj_bias=bool(cfg.get("use_bias", False)),
    )


def _ssm_only(get: Getter, mixer: MixerSpec, **common: Any) -> ModelSpec:
    """A model of ``mixer`` layers only (norm, mixer, residual); the attention fields are placeholders (1): no
    layer attends."""
    n = get("num_hidden_layers")
    return ModelSpec(
        d_model=get("hidden_size"), n_layers=n, vocab_size=get("vocab_size"), n_heads=1, n_kv_heads=1, head_dim=1,
        d_ff=0, ffn="mlp", norm="rms", position="none", mixer=mixer, layer_mixers=(mixer.kind,) * n, mixer_ffn=False,
        norms_per_layer=1, **common,
    )  # fmt: skip


def mamba2_keys(
    prefix: str, cfg: Mapping[str, Any], get: Getter, d: int, d_inner: int = 0, conv: int = 0, **fields: Any
) -> MixerSpec:
    """A Mamba-2 mixer read from a hybrid's ``{prefix}d_state``, ``{prefix}n_heads``, ... keys; ``d_inner``
    where the family derives it otherwise (else expand · d), ``conv`` the conv width when the file has none (else
    required), ``fields`` further MixerSpec fields."""
    heads = get(prefix + "n_heads")
    head_dim = get(prefix + "d_head") if cfg.get(prefix + "d_head") not in (None, "auto") else None
    d_inner = d_inner or int(cfg.get(prefix + "expand", 2) * d)
    return MixerSpec(
        kind="mamba2",
        d_inner=d_inner,
        d_state=get(prefix + "d_state"),
        d_conv=get(prefix + "d_conv", conv) if conv else get(prefix + "d_conv"),
        n_heads=heads,
        head_dim=head_dim or d_inner // heads,
        n_groups=get(prefix + "n_groups", 1),
        chunk_size=get(prefix + "chunk_size", 256),
        conv_bias=bool(cfg.get(prefix + "conv_bias", True)),
        proj_bias=bool(cfg.get(prefix + "proj_bias", False)),
        **fields,
    )


def bamba(cfg: Mapping[str, Any], get: Getter, n: int) -> tuple[MixerSpec, tuple[str, ...]]:
    """Bamba: attention at ``attn_layer_indices`` (none by default), Mamba-2 elsewhere; every layer has the FFN."""
    attn = set(cfg.get("attn_layer_indices") or [])
    kinds = tuple("attention" if i in attn else "mamba2" for i in range(n))
    return mamba2_keys("mamba_", cfg, get, get("hidden_size")), kinds


def granite_hybrid(cfg: Mapping[str, Any], get: Getter, n: int) -> tuple[MixerSpec, tuple[str, ...]]:
    """GraniteMoeHybrid: ``layer_types`` names each layer 'linear_attention' (Mamba-2) or 'attention'."""
    types = cfg.get("layer_types") or ["linear_attention"] * n
    kinds = tuple("mamba2" if t in ("mamba", "linear_attention") else "attention" for t in types[:n])
    return mamba2_keys("mamba_", cfg, get, get("hidden_size")), kinds


def jamba(cfg: Mapping[str, Any], get: Getter, n: int) -> tuple[MixerSpec, tuple[str, ...]]:
    """Jamba: attention where i % attn_layer_period == attn_layer_offset, Mamba-1 (with its dt/B/C
    norms) elsewhere; every layer has the FFN (MoE by ``expert_layer_period`` / ``expert_layer_offset``)."""
    period, offset = get("attn_layer_period"), get("attn_layer_offset")
    kinds = tuple("attention" if i % period == offset else "mamba" for i in range(n))
    d = get("hidden_size")
    rank = cfg.get("mamba_dt_rank")
    mixer = MixerSpec(
        kind="mamba",
        d_inner=int(cfg.get("mamba_expand", 2) * d),
        d_state=get("mamba_d_state"),
        d_conv=get("mamba_d_conv"),
        dt_rank=math.ceil(d / 16) if rank in (None, "auto") else get("mamba_dt_rank"),
        conv_bias=bool(cfg.get("mamba_conv_bias", True)),
        proj_bias=bool(cfg.get("mamba_proj_bias", False)),
        inner_norms=True,
    )
    return mixer, kinds


def jamba_moe_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    period, offset = cfg.get("expert_layer_period", 2), cfg.get("expert_layer_offset", 1)
    return [i % period == offset for i in range(n)]


# ---- Nemotron-H: one mixer per layer (Mamba-2, attention, FFN or MoE), as a pattern string or a list --------

NEMOTRON_H_PATTERN = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}
NEMOTRON_H_KINDS = {"linear_attention": "mamba2", "mamba": "mamba2", "full_attention": "attention",
                    "attention": "attention", "mlp": "none", "moe": "none"}  # fmt: skip


def nemotron_h_types(cfg: Mapping[str, Any], where: str = "nemotron_h") -> list[str]:
    """Each layer's block type: ``layers_block_type`` (``layer_types``), else ``hybrid_override_pattern``
    with M = Mamba-2, * = attention, - = MLP, E = MoE, as ``NemotronHConfig`` reads them (5.23)."""
    types = cfg.get("layers_block_type") or cfg.get("layer_types")
    if types is None:
        pattern = cfg.get("hybrid_override_pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f"{where}: nemotron_h needs 'hybrid_override_pattern' or 'layers_block_type'")
        bad = sorted(set(pattern) - set(NEMOTRON_H_PATTERN))
        if bad:
            raise ConfigError(
                f"{where}: hybrid_override_pattern has {bad}; each layer is one of M (Mamba-2), * (attention), "
                "- (MLP), E (MoE)"
            )
        types = [NEMOTRON_H_PATTERN[c] for c in pattern]
        n = cfg.get("num_hidden_layers")
        if n is not None and n != len(pattern):
            raise ConfigError(
                f"{where}: hybrid_override_pattern has {len(pattern)} layers but num_hidden_layers={n!r}; "
                "give one pattern character per layer"
            )
    bad = sorted({str(t) for t in types} - set(NEMOTRON_H_KINDS))
    if bad:
        raise ConfigError(f"{where}: layers_block_type has {bad}; each must be one of {sorted(NEMOTRON_H_KINDS)}")
    return list(types)


def nemotron_h_prepare(cfg: Mapping[str, Any], where: str = "nemotron_h") -> dict[str, Any]:
    """The layer count is the pattern's length (``NemotronHConfig.num_hidden_layers`` is derived from it)."""
    types = nemotron_h_types(cfg, where)
    return dict(cfg, layers_block_type=types, num_hidden_layers=len(types))


def nemotron_h_moe_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    return [t == "moe" for t in cfg["layers_block_type"][:n]]


def nemotron_h(cfg: Mapping[str, Any], get: Getter, n: int) -> dict[str, Any]:
    """Nemotron-H: each layer is norm, one block, residual. Mamba-2 (I = mamba_num_heads · mamba_head_dim;
    in/out projections biased by ``use_bias``), attention without FFN, or an FFN / MoE without mixer."""
    heads, head_dim = get("mamba_num_heads"), get("mamba_head_dim")
    mixer = MixerSpec(
        kind="mamba2",
        d_inner=heads * head_dim,
        d_state=get("ssm_state_size"),
        d_conv=get(("conv_kernel", "mamba_d_conv"), 4),
        n_heads=heads,
        head_dim=head_dim,
        n_groups=get(("n_groups", "mamba_n_groups"), 1),
        chunk_size=get(("chunk_size", "mamba_chunk_size"), 128),
        conv_bias=bool(cfg.get("use_conv_bias", cfg.get("mamba_conv_bias", True))),
        proj_bias=bool(cfg.get("use_bias", False)),
    )
    kinds = tuple(NEMOTRON_H_KINDS[t] for t in cfg["layers_block_type"][:n])
    return dict(mixer=mixer, layer_mixers=kinds, mixer_ffn=False, attention_ffn=False)


def falcon_h1(cfg: Mapping[str, Any], get: Getter, n: int) -> dict[str, Any]:
    """Falcon-H1: every layer runs attention and a Mamba-2 mixer side by side on one normed input (their
    outputs summed into the residual), then the gated MLP. I = ``mamba_d_ssm`` (else expand · hidden_size),
    head width ``mamba_d_head`` ("auto": I / heads); the gated RMSNorm only with ``mamba_rms_norm``;
    out_proj biased by ``projectors_bias``; ``ssm_multipliers`` scale the in_proj channels (µP). The attention
    multipliers (embedding, key, attention in/out, MLP, lm_head) are scalars: no parameters, no matmul FLOPs."""
    d = get("hidden_size")
    # FalconH1Config (5.23): mamba_d_ssm defaults to 1024 when absent; an explicit null means expand · hidden
    d_inner = int(cfg.get("mamba_expand", 2) * d) if "mamba_d_ssm" in cfg else 1024
    mixer = mamba2_keys(
        "mamba_",
        cfg,
        get,
        d,
        d_inner=get("mamba_d_ssm", d_inner),
        conv=4,
        gated_norm=bool(cfg.get("mamba_rms_norm", False)),
        out_bias=bool(cfg.get("projectors_bias", False)),
        multipliers=tuple(float(x) for x in cfg.get("ssm_multipliers") or (1.0,) * 5),
    )
    return dict(mixer=mixer, layer_mixers=("attention+mamba2",) * n)


# ---- Zamba / Zamba2: Mamba layers, some of them ("hybrid") preceded by a shared transformer block -------


def _zamba_kinds(cfg: Mapping[str, Any], n: int, kind: str, default: list[str]) -> tuple[str, ...]:
    """``layers_block_type``: "hybrid" layers run the shared block then their mixer, the others ("mamba",
    "linear_attention") the mixer only; ``default`` when the file has none (as the config class derives it)."""
    types = cfg.get("layers_block_type") or cfg.get("layer_types") or default
    if len(types) < n:
        raise ConfigError(f"layers_block_type has {len(types)} entries for {n} layers")
    return tuple(f"shared+{kind}" if t == "hybrid" else kind for t in types[:n])


def zamba(cfg: Mapping[str, Any], get: Getter, n: int) -> dict[str, Any]:
    """Zamba (v1): multi-head Mamba-1 layers (``n_mamba_heads`` groups of channels: the same weights and
    FLOPs as one Mamba-1 of width I), hybrid layers where ``ZambaConfig`` puts them (layers 2, then
    i − 3 ≡ ``attn_layer_offset`` mod ``attn_layer_period``), one shared block over W = attention_hidden_size
    (2·D) with heads of ``attention_head_dim`` (2·D / N)."""
    d, heads = get("hidden_size"), get("num_attention_heads")
    rank = cfg.get("mamba_dt_rank")
    mixer = MixerSpec(
        kind="mamba",
        d_inner=int(cfg.get("mamba_expand", 2) * d),
        d_state=get("mamba_d_state"),
        d_conv=get("mamba_d_conv", 4),
        dt_rank=math.ceil(d / 16) if rank in (None, "auto") else get("mamba_dt_rank"),
        conv_bias=bool(cfg.get("mamba_conv_bias", True)),
        proj_bias=bool(cfg.get("mamba_proj_bias", False)),
    )
    period, offset = get("attn_layer_period", 6), get("attn_layer_offset", 4)
    default = ["mamba", "mamba", "hybrid"] + ["hybrid" if i % period == offset else "mamba" for i in range(n - 3)]
    kinds = _zamba_kinds(cfg, n, "mamba", default)
    shared = SharedBlockSpec(n_blocks=1, d_in=get("attention_hidden_size", 2 * d))
    return dict(mixer=mixer, layer_mixers=kinds, mixer_ffn=False, head_dim=get("attention_head_dim", 2 * d // heads),
                shared_block=shared if "shared+mamba" in kinds else None)  # fmt: skip


ZAMBA2_DEFAULT = (
    ["mamba"]
    + (["mamba"] * 5 + ["hybrid"]) * 7
    + ["mamba"] * 4
    + ["hybrid"]
    + ["mamba"] * 3
    + ["hybrid"]
    + ["mamba"] * 2
)  # Zamba2Config's layers_block_type when the file has none (54 layers)


def zamba2(cfg: Mapping[str, Any], get: Getter, n: int) -> dict[str, Any]:
    """Zamba2: Mamba-2 layers (conv always biased, I = expand · D in ``n_mamba_heads`` heads), hybrid layers
    from ``layers_block_type``; ``num_mem_blocks`` shared blocks used in turn, W = 2·D, attention heads of
    2·D / N (``Zamba2Config`` derives both from hidden_size whatever the file says), LoRA adapters of rank
    ``adapter_rank`` per hybrid layer on the MLP (always) and on q, k, v (``use_shared_attention_adapter``)."""
    d, heads = get("hidden_size"), get("num_attention_heads")
    d_inner, m_heads = int(cfg.get("mamba_expand", 2) * d), get("n_mamba_heads")
    mixer = MixerSpec(
        kind="mamba2",
        d_inner=d_inner,
        d_state=get("mamba_d_state"),
        d_conv=get("mamba_d_conv", 4),
        n_heads=m_heads,
        head_dim=d_inner // m_heads,
        n_groups=get("mamba_ngroups", 1),
        chunk_size=get("chunk_size", 256),
        conv_bias=True,
        proj_bias=bool(cfg.get("add_bias_linear", False)),
    )
    shared = SharedBlockSpec(
        n_blocks=get("num_mem_blocks", 1), d_in=2 * d, adapter_rank=get("adapter_rank", 128),
        attention_adapters=bool(cfg.get("use_shared_attention_adapter", False)),
    )  # fmt: skip
    kinds = _zamba_kinds(cfg, n, "mamba2", ZAMBA2_DEFAULT if n == len(ZAMBA2_DEFAULT) else [])
    return dict(mixer=mixer, layer_mixers=kinds, mixer_ffn=False, head_dim=2 * d // heads,
                shared_block=shared if "shared+mamba2" in kinds else None)  # fmt: skip
