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
