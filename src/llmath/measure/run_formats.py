"""The formats a measured serving run's engine executed (:mod:`llmath.measure.serving_runs`, module docstring:
``gemm_quant_mode`` / ``moe_quant_mode``, the KV cache, the modules the checkpoint keeps unquantised). A model whose
published checkpoint in the GEMM mode's format the registry bundles (``checkpoints`` in ``data/models/index.json``:
the NVFP4 checkpoints InferenceX's FP4 scripts load) runs that checkpoint's per-module formats and KV format."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

BLOCK_FP8 = "fp8-block"
QUANT = {"fp8": ("fp8", "fp8"), "fp8_block": (BLOCK_FP8, "fp8"), "nvfp4": ("nvfp4", "nvfp4")}
# the checkpoint's own list of modules its quantisation leaves unconverted (vLLM and TensorRT-LLM load them
# unquantised whatever the run's GEMM mode: llmath.model.quant)
KEPT_UNQUANTISED = "quantization_config.modules_to_not_convert"


def _as_stored(quant: tuple[str, str] | None, stored: str) -> tuple[str, str] | None:
    """A row's FP8 mode as the checkpoint stores those weights: ``fp8`` reads as block-scaled FP8 where the
    model's bundled config.json quantises them in 128 × 128 blocks (``quantization_config.weight_block_size``:
    DeepSeek-R1, MiniMax-M2.5; the engines load such weights block-scaled whatever the collection's label)."""
    return (BLOCK_FP8, quant[1]) if quant is not None and quant[0] == "fp8" and stored == BLOCK_FP8 else quant


def precision(run: Any):
    """The formats the run's engine executed (module docstring)."""
    from llmath.model.checkpoint import precision_for

    p = precision_for(run.model)
    auto = dict(run.engine_settings).get("kv_cache_dtype") == "auto"  # the launcher left the model's dtype
    kv = "fp8" if run.precision in ("fp8", "fp4") and not auto else None
    own = dict(run.engine_settings).get("checkpoint_formats")  # the engine reads the checkpoint's (trt_launchers)
    gemm, moe = QUANT.get(run.gemm), QUANT.get(run.moe)
    gemm, moe = (None, None) if own else (_as_stored(gemm, p.weights), _as_stored(moe, p.weight_format("experts")))
    if gemm is None and moe is None:
        return p.override(kv=kv)
    w, a = gemm or (p.weights, p.act_quant or p.activations)
    kept = {m: p.weight_format(m) for m, src in p.sources if src == KEPT_UNQUANTISED}
    p = precision_for(run.model, weights=w).override(kv=kv)  # a bundled published checkpoint in w: its formats
    mods = {**dict(p.modules), **({"experts": moe[0]} if moe is not None and moe[0] != w else {}), **kept}
    act = a if gemm is not None else moe[1] if moe is not None else None
    return replace(p, act_quant=act, modules=tuple(sorted(mods.items())))
