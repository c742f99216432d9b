"""What a device executes: the tensor-core format of each GEMM, with the fallback where it lacks one.

A GEMM asks for :meth:`~llmath.model.dtypes.Precision.module_compute` (fp8 for FP8 W8A8, fp4 for
NVFP4/MXFP4 W4A4, the activations' format for weight-only formats). A device without that peak runs what
the engines really run there, never an error: fp8/fp4/int8 weights are dequantised and the GEMM runs in
16 bit (W8A16/W4A16: vLLM's Marlin fp8/fp4 kernels on Ampere and Hopper,
https://docs.vllm.ai/en/latest/features/quantization/fp8.html), and bf16 on a device without bf16
(Apple GPUs before M2 in Metal, V100, T4) runs in fp16 (llama.cpp and MLX compute in fp16 there). Each
fallback is stated in the report.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

import numpy as np

from llmath.errors import HardwareError
from llmath.hardware.registry import Hardware
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops import Attention, Table, table
from llmath.ops.params import weight_bytes, weight_bytes_per_element
from llmath.ops.ssm_state import SSM_STATE_OPS, ssm_state_format
from llmath.ops.table import by_kinds

FALLBACK = {
    "fp4": ("bf16", "fp16", "fp32"),
    "fp8": ("bf16", "fp16", "fp32"),
    "int8": ("fp16", "bf16", "fp32"),
    "bf16": ("fp16", "fp32"),
    "fp16": ("bf16", "fp32"),
    "fp32": ("bf16", "fp16"),
}
DEQUANTISED = ("fp4", "fp8", "int8")


def executed(hw: Hardware, fmt: str) -> tuple[str, str | None]:
    """(format run, note) for a GEMM asking for ``fmt`` on ``hw``; the note says what fell back and why."""
    peaks = hw.peak_flops_per_s
    if fmt in peaks:
        return fmt, None
    how = "weights dequantised, " if fmt in DEQUANTISED else ""
    for f in FALLBACK.get(fmt, ()):
        if f in peaks:
            return f, f"{hw.name} has no {fmt} peak: {fmt} GEMMs run in {f} ({how}its {f} peak)"
    if len(peaks) == 1:  # a device given by one peak (custom flags, a one-dtype profile) runs everything there
        (only,) = peaks
        return only, f"{hw.name} lists only a {only} peak: {fmt} GEMMs timed at it"
    hw.peak(fmt)  # raises HardwareError naming the peaks it has
    raise HardwareError(f"hardware {hw.name!r} has no {fmt} peak")  # pragma: no cover


def _is_weight_gemm(op) -> bool:
    return op.kind == "matmul" and bool(op.terms("weight"))


@lru_cache(maxsize=1024)
def op_formats(table: Table, p: Precision) -> tuple[str, ...]:
    """The format each op's matmul FLOPs ask for: weight GEMMs by their module, attention products KV × act.
    Shared by the tables whose ops are alike (:func:`llmath.ops.table.by_kinds`: the module and whether an op is
    a weight GEMM follow from its name, component, kind and weight terms)."""
    return cast(tuple[str, ...], by_kinds(_op_formats, table, p))


def _op_formats(table: Table, p: Precision) -> tuple[str, ...]:
    memo: dict[str | None, str] = {}  # per module: a table's ops share a few
    out = []
    for op in table.ops:
        m = op.module if _is_weight_gemm(op) else None
        if m not in memo:
            memo[m] = p.module_compute(m)
        out.append(memo[m])
    return tuple(out)


@lru_cache(maxsize=1024)
def op_executed(table: Table, hw: Hardware, p: Precision) -> tuple[str, ...]:
    """The format each op's matmul FLOPs run in on ``hw`` (after fallbacks), shared as :func:`op_formats` is."""
    return cast(tuple[str, ...], by_kinds(_op_executed, table, hw, p))


def _op_executed(table: Table, hw: Hardware, p: Precision) -> tuple[str, ...]:
    memo: dict[str, str] = {}
    out = []
    for f in op_formats(table, p):
        if f not in memo:
            memo[f] = executed(hw, f)[0]
        out.append(memo[f])
    return tuple(out)


@lru_cache(maxsize=1024)
def op_peaks(table: Table, hw: Hardware, p: Precision) -> np.ndarray:
    """(n_ops,) dense matmul peak FLOP/s each op runs at on ``hw`` (read-only: asked per serving iteration),
    shared as :func:`op_formats` is."""
    return cast(np.ndarray, by_kinds(_op_peaks, table, hw, p))


def _op_peaks(table: Table, hw: Hardware, p: Precision) -> np.ndarray:
    out = np.array([hw.peak_flops_per_s[f] for f in op_executed(table, hw, p)], dtype=float)
    out.setflags(write=False)
    return out


def notes(tables: tuple[Table, ...], hw: Hardware, p: Precision) -> list[str]:
    """One line per fallback the ops of ``tables`` take on ``hw``."""
    asked = sorted({f for t in tables for f in op_formats(t, p)})
    return [n for n in (executed(hw, f)[1] for f in asked) if n]


def summary(tables: tuple[Table, ...], hw: Hardware, p: Precision) -> dict[str, str]:
    """Requested format -> executed format over the GEMMs of ``tables``."""
    return {f: executed(hw, f)[0] for f in sorted({f for t in tables for f in op_formats(t, p)})}


# ---- the precision an analysis runs at, and its report ----------------------------------------------


def checkpoint_precision(model, precision: Precision | None) -> tuple[Precision, list[str]]:
    """``precision`` if given; else the formats the checkpoint states (bf16 if none) and what reading noted."""
    if precision is not None:
        return precision, []
    from llmath.model.checkpoint import Checkpoint, load, precision_for

    if isinstance(model, str | Checkpoint):
        return precision_for(model), list((load(model) if isinstance(model, str) else model).notes)
    return precision_for(model), []


def _tables(spec: ModelSpec, attention: str) -> tuple[Table, Table]:
    a = cast(Attention, attention)
    return table(spec, "prefill", a), table(spec, "decode", a)


def fallback_notes(spec: ModelSpec, attention: str, p: Precision, hw: Hardware | None) -> list[str]:
    """A format the device lacks runs as the engines run it there: one line each, never an error."""
    return notes(_tables(spec, attention), hw, p) if hw is not None else []


def precision_report(
    spec: ModelSpec, p: Precision, hw: Hardware | None, attention: str, engine: str = "vllm"
) -> dict[str, Any]:
    """Formats per module with bytes per element and sources, and (with hardware) what each GEMM format
    runs as on the device and the kernel class the default weights' GEMMs run in, with why (the ``precision``
    key of ``analyze --json``)."""
    wb = weight_bytes(spec, p)
    bpe = weight_bytes_per_element(spec, p)
    d = p.to_dict()
    d["module_bytes_per_element"] = {m: bpe[m] for m in wb}
    d["weight_bytes_by_module"] = wb
    d["modules"] = {m: p.weight_format(m) for m in wb}
    d["module_sources"] = {m: p.weight_source(m) for m in wb}
    d["ssm_state"] = None  # Mamba / Mamba-2 / Gated DeltaNet state: its own format (llmath.ops.ssm_state)
    if spec.mixer is not None and spec.mixer.kind in SSM_STATE_OPS:
        f, src = ssm_state_format(spec, p)
        d["ssm_state"] = {"format": f, "bytes_per_element": p.bytes_per_element(f), "source": src}
    if hw is not None:
        d["compute"] = summary(_tables(spec, attention), hw, p)
    from llmath.hardware.kernels import kernel_report

    d["kernel"] = kernel_report(p, hw, engine)
    return d
