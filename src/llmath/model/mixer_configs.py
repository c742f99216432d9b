"""Config readers for families whose layers are not (only) attention: the mixer widths and the per-layer
mixer kinds are data read from the file, as transformers' config classes read them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from llmath.model.spec import MixerSpec, ModelSpec

Getter = Callable[..., int]


def mamba(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """Mamba-1 (``mamba``, ``falcon_mamba``): every layer is norm, mixer, residual; no attention, no FFN.

    ``time_step_rank="auto"`` is ceil(hidden_size / 16), as ``MambaConfig`` resolves it. The attention
    fields are placeholders (1): no layer attends.
    """
    d = get("hidden_size")
    n = get("num_hidden_layers")
    rank = cfg.get("time_step_rank")
    mixer = MixerSpec(
        kind="mamba",
        d_inner=get("intermediate_size", int(cfg.get("expand", 2) * d)),
        d_state=get("state_size"),
        d_conv=get("conv_kernel"),
        dt_rank=math.ceil(d / 16) if rank in (None, "auto") else get("time_step_rank"),
        conv_bias=bool(cfg.get("use_conv_bias", True)),
        proj_bias=bool(cfg.get("use_bias", False)),
    )
    return ModelSpec(
        d_model=d, n_layers=n, vocab_size=get("vocab_size"), n_heads=1, n_kv_heads=1, head_dim=1, d_ff=0,
        ffn="mlp", norm="rms", position="none", mixer=mixer, layer_mixers=("mamba",) * n, mixer_ffn=False,
        norms_per_layer=1, **common,
    )  # fmt: skip


def mamba2(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """Mamba-2 (``mamba2``): every layer is norm, SSD mixer, residual; I = expand · hidden_size = H · P."""
    d = get("hidden_size")
    n = get("num_hidden_layers")
    mixer = MixerSpec(
        kind="mamba2",
        d_inner=int(cfg.get("expand", 2) * d),
        d_state=get("state_size"),
        d_conv=get("conv_kernel"),
        n_heads=get("num_heads"),
        head_dim=get("head_dim"),
        n_groups=get("n_groups", 1),
        chunk_size=get("chunk_size", 256),
        conv_bias=bool(cfg.get("use_conv_bias", True)),
        proj_bias=bool(cfg.get("use_bias", False)),
    )
    return ModelSpec(
        d_model=d, n_layers=n, vocab_size=get("vocab_size"), n_heads=1, n_kv_heads=1, head_dim=1, d_ff=0,
        ffn="mlp", norm="rms", position="none", mixer=mixer, layer_mixers=("mamba2",) * n, mixer_ffn=False,
        norms_per_layer=1, **common,
    )  # fmt: skip


def mamba2_keys(prefix: str, cfg: Mapping[str, Any], get: Getter, d: int) -> MixerSpec:
    """A Mamba-2 mixer read from a hybrid's ``{prefix}d_state``, ``{prefix}n_heads``, ... keys."""
    heads = get(prefix + "n_heads")
    head_dim = get(prefix + "d_head") if cfg.get(prefix + "d_head") not in (None, "auto") else None
    d_inner = int(cfg.get(prefix + "expand", 2) * d)
    return MixerSpec(
        kind="mamba2",
        d_inner=d_inner,
        d_state=get(prefix + "d_state"),
        d_conv=get(prefix + "d_conv"),
        n_heads=heads,
        head_dim=head_dim or d_inner // heads,
        n_groups=get(prefix + "n_groups", 1),
        chunk_size=get(prefix + "chunk_size", 256),
        conv_bias=bool(cfg.get(prefix + "conv_bias", True)),
        proj_bias=bool(cfg.get(prefix + "proj_bias", False)),
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
