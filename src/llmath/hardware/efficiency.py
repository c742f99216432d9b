"""Efficiency: the achievable fractions of the roofline, by the first rule that applies to a device.

``ideal`` is the datasheet roofline (η = 1, no overhead). ``expected`` is, in order: a calibrated profile
(``llmath calibrate``); kernel models fitted to public measurements (:mod:`.efficiency_fit`, inherited by
devices of the same or the nearest measured architecture); else the defaults of ``data/efficiency.json``
(justified in docs/hardware.md). Every field can be overridden.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from importlib import resources

from llmath.errors import WorkloadError
from llmath.hardware import Hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.execution import executed
from llmath.validation import check_float


@lru_cache(maxsize=1)
def _defaults() -> dict:
    return json.loads((resources.files("llmath") / "data" / "efficiency.json").read_text())["defaults"]


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of peak and per-kernel overheads.

    ``matmul``: fraction of the dense matmul peak; ``memory``: of the bandwidth for large streams;
    ``skinny``: of the bandwidth for weight GEMMs with ≤ 64 token rows (decode); ``attention_decode``:
    of the bandwidth for decode attention reading the KV cache; ``overhead_s``: per kernel launch in
    prefill (eager launches); ``decode_overhead_s``: per kernel in decode (CUDA graphs, as serving
    engines capture decode). ``rule``: where the fractions came from (datasheet defaults, a calibrated
    profile, or kernel models fitted to measured GPU kernels and which device they were measured on).
    ``gemm_fit``: per format, the fitted GEMM model (:mod:`llmath.hardware.efficiency_fit`) that gives weight
    GEMMs their compute fraction by rows and n·k and their memory fraction by weight bytes;
    ``attention_overhead_s``: per-kernel overhead of decode attention (``None``: ``decode_overhead_s``).
    ``kernel_fits``: (class, format, coefficients) of the other fitted classes (``attn_context``,
    ``attn_decode``, ``moe``), applied per operator by :mod:`llmath.hardware.fitted_ops`;
    ``fit_overheads``: whether the fits' per-kernel times replace the overheads (off once an overhead is given).
    ``fp8_gemm_overhead_s``: per-kernel time of weight GEMMs that run in fp8: the fp8 GEMM fit's ``t0`` less the
    activation quantiser it measured (:func:`llmath.hardware.efficiency_fit.fp8_static_gemm_overhead`; ``None``:
    the general overheads); in prefill at least ``overhead_s``. ``tile_rows``: rows of the device's tensor-core
    tile, the fitted GEMM and MoE models' compute floor (:func:`llmath.hardware.efficiency_fit.tile_rows`).
    ``engine_matmul``: fraction of the dense peak the engine's own matrix-multiplication op was measured to reach
    on this device (:func:`llmath.hardware.kernels.engine_efficiency`): weight GEMMs compute at it at every row
    count, in place of ``matmul_rows`` and the fitted GEMM model's compute fraction (whose memory fraction and
    per-kernel time stay); ``None``: no such measurement. ``engine_stream``: fraction of the bandwidth the
    engine's own one-token mat-vec op was measured to stream weights at on this device or its sibling: weight
    GEMMs' weight streams use it in place of the fitted or default memory fraction; ``None``: not measured.
    ``fp4_gemm``: (per-kernel seconds, fraction of the bandwidth, reduction elements per second, large-GEMM share
    of the dense FP4 peak) of the engine's NVFP4 weight GEMMs (:func:`llmath.hardware.efficiency_fit.fp4_gemm`):
    weight GEMMs that run in fp4 take ``t0 + max(k / rate, bytes / (bandwidth · mem))`` at a few rows and compute
    at that share where the 16-bit fit's ``c`` would be (:func:`llmath.hardware.fitted_ops.apply_fp4`);
    ``None``: the general fractions and overheads. ``fp8_decode_gemm``: the GEMM-form coefficients of FP8 weight
    GEMMs in decode steps (:func:`llmath.hardware.efficiency_fit.fp8_decode_gemm`, fitted without the
    activation quantiser at up to 64 rows): their memory fraction and per-kernel time there; ``None``: the fp8 GEMM
    fit's, with ``fp8_gemm_overhead_s``. ``fused_gemms``: in decode passes, projections reading the same activation
    run as one GEMM, as the serving engines load them (:mod:`llmath.hardware.gemm_runs`): the fitted fractions at
    the run's weight size, one per-kernel time per run (on with the fitted kernels, off for an engine that runs
    them one by one: :func:`llmath.hardware.kernels.engine_fp4_gemm`).
    """

    name: str = "expected"
    matmul: float = 1.0
    matmul_fp8: float | None = None
    vector: float = 1.0
    memory: float = 1.0
    skinny: float = 1.0
    attention_decode: float = 1.0
    overhead_s: float = 0.0
    decode_overhead_s: float = 0.0
    # measured bandwidth fraction of weight GEMMs by token rows, e.g. ((1, 0.3), (8, 0.5), (64, 0.9)):
    # interpolated in log(rows) for GEMMs with at most the largest rows listed (replaces ``skinny``)
    skinny_rows: tuple[tuple[int, float], ...] = ()
    # measured matmul fraction of weight GEMMs by token rows, e.g. ((128, 0.6), (1024, 0.9)): their compute
    # time uses it up to the largest rows listed (beyond: the large-GEMM rate); calibrated profiles only
    matmul_rows: tuple[tuple[int, float], ...] = ()
    rule: str = ""
    gemm_fit: tuple[tuple[str, tuple[float, ...]], ...] = ()
    attention_overhead_s: float | None = None
    kernel_fits: tuple[tuple[str, str, tuple[float, ...]], ...] = ()
    fit_overheads: bool = True
    fp8_gemm_overhead_s: float | None = None
    tile_rows: int = 0  # rows of one tensor-core tile: the fitted GEMM and MoE models' floor (0: none)
    engine_matmul: float | None = None
    engine_stream: float | None = None
    fp4_gemm: tuple[float, float, float, float] | None = None  # (t0 s, memory share, k-loop /s, compute share)
    fp8_decode_gemm: tuple[float, ...] | None = None  # GEMM-form coefficients of FP8 weight GEMMs in decode steps
    fused_gemms: bool = False  # projections reading the same activation run as one GEMM (hardware/gemm_runs.py)
    moe_aligned_rows: int = 0  # a grouped MoE kernel padding every local expert to this many rows (aligned_moe.py)

    def __post_init__(self) -> None:
        for f in ("matmul", "vector", "memory", "skinny", "attention_decode"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int | float) or not (0 < v <= 1):
                raise WorkloadError(f"efficiency {f}={v!r} must be a fraction in (0, 1]")
        for f in ("matmul_fp8", "engine_matmul", "engine_stream"):
            if getattr(self, f) is not None:
                check_float(f"efficiency {f}", getattr(self, f), 0, 1, lo_open=True)
        for f in ("overhead_s", "decode_overhead_s", "attention_overhead_s", "fp8_gemm_overhead_s"):
            if f in ("overhead_s", "decode_overhead_s") or getattr(self, f) is not None:
                check_float(f"kernel {f}", getattr(self, f), 0, 1.0)

    def __hash__(self) -> int:  # hashed on every roofline cache lookup: computed once (the fits are long tuples)
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f) for f in self.__dataclass_fields__))
            object.__setattr__(self, "_hash", h)
        return h

    def matmul_for(self, dtype: str) -> float:
        return self.matmul_fp8 if (dtype == "fp8" and self.matmul_fp8) else self.matmul

    def gemm_coef(self, dtype: str | None) -> tuple[float, ...] | None:
        """The fitted GEMM coefficients for matmuls in ``dtype`` (fp16 uses bf16's; a calibrated profile's own
        format, e.g. fp32, its own), or ``None``."""
        key = ef.FORMAT_ALIASES.get(dtype or "", dtype)
        return next((c for f, c in self.gemm_fit if f == key), None)

    def fit(self, cls: str, dtype: str | None) -> tuple[float, ...] | None:
        """The fitted coefficients of ``cls`` (``attn_context``, ``attn_decode``, ``moe``) in ``dtype`` (``moe``
        also by the experts' storage format, :data:`llmath.hardware.efficiency_fit.MOE_STORAGE`)."""
        key = ef.FORMAT_ALIASES.get(dtype or "") or ef.MOE_STORAGE.get(dtype or "")
        return next((c for k, f, c in self.kernel_fits if k == cls and f == key), None)


IDEAL = Efficiency(name="ideal", rule="ideal: datasheet roofline")


@lru_cache(maxsize=256)
def expected(hw: Hardware | None = None) -> Efficiency:
    """The ``expected`` efficiency of ``hw``, by the first rule that applies.

    1. A calibrated profile (``llmath calibrate``) carries its own measured ceilings as its peaks and
       bandwidth, and its measured fractions in ``measured["efficiency"]``: those are used.
    2. A GPU with kernel models fitted to measured kernels, its own or inherited by architecture
       (:func:`llmath.hardware.efficiency_fit.resolve`): :func:`fitted`.
    3. Otherwise the defaults of ``data/efficiency.json``, with the vendor's matmul fraction where one was
       measured.
    """
    if hw is not None and isinstance(hw.measured, dict) and hw.measured.get("efficiency"):
        e = dict(hw.measured["efficiency"])
        for key in ("skinny_rows", "matmul_rows"):
            if key in e:
                e[key] = tuple((int(r), float(f)) for r, f in e[key])
        if "gemm_fit" in e:  # calibrate's GEMM model, the fitted tables' form (llmath.measure.gemm_fit)
            e["gemm_fit"] = tuple((str(f), tuple(float(c) for c in coef)) for f, coef in e["gemm_fit"])
        rule = "calibrated profile" + (
            " (weight GEMMs: the fitted GEMM model of its own timings)" if e.get("gemm_fit") else ""
        )
        return replace(IDEAL, name="expected", rule=rule, **e)
    fit = fitted(hw) if hw is not None else None
    if fit is not None:
        return fit
    d = _defaults()
    mm = d["matmul_compute_fraction"]
    if hw is not None:
        vendor = {"intel": "intel_gaudi"}.get(hw.vendor, hw.vendor)
        mm = d.get("matmul_compute_fraction_by_vendor", {}).get(vendor, mm)
    return Efficiency(
        name="expected",
        matmul=mm,
        matmul_fp8=d.get("matmul_compute_fraction_fp8"),
        vector=d["memory_bandwidth_fraction"],
        memory=d["memory_bandwidth_fraction"],
        skinny=d["skinny_gemm_bandwidth_fraction"],
        attention_decode=d["decode_attention_bandwidth_fraction"],
        overhead_s=d["kernel_overhead_s"],
        decode_overhead_s=d["kernel_overhead_cuda_graph_s"],
        rule="defaults: data/efficiency.json",
    )


def fitted(hw: Hardware) -> Efficiency | None:
    """``expected`` from kernel models fitted to measured GPU kernels (``data/efficiency_fit.json``, see
    docs/efficiency.md), at ``hw``'s own peaks; ``None`` where no fit applies (rule ``none``).

    Weight GEMMs: the GEMM fit per op (compute fraction by rows and n·k, memory fraction by bytes);
    other matmuls: the GEMM fit's large-GEMM fraction ``c``; decode attention: the decode-attention fit's
    bandwidth fraction for large reads (``mem``) and its per-kernel ``t0``; other kernels in decode (CUDA
    graphs, as the tables were timed): the GEMM fit's ``t0``; in prefill: the larger of that and the eager
    launch default. Large streams and vector ops keep the defaults.
    """
    gemm: dict[str, list[float]] = {}
    for f in ("bf16", "fp8"):
        c = ef.coefficients(hw.name, "gemm", f)[0]
        if c is not None:
            gemm[f] = c
    if "bf16" not in gemm:
        return None
    attn, r = ef.coefficients(hw.name, "attn_decode", "bf16")
    kernel = [
        (cls, f, tuple(c))
        for cls in ("attn_context", "attn_decode", "moe", "attn_mla_context")
        # the weight-only MoE kernels are engine-specific: added per engine (kernels.engine_fp4_gemm)
        for f in (
            "bf16",
            "fp8",
            *(sorted(set(ef.MOE_STORAGE.values()) - set(ef.MOE_WEIGHT_ONLY)) if cls == "moe" else ()),
        )
        if (c := ef.coefficients(hw.name, cls, f)[0]) is not None
    ]
    d = _defaults()
    t0 = gemm["bf16"][8]
    fp8 = ef.fp8_static_gemm_overhead(hw.name) if ("fp8" in gemm and executed(hw, "fp8")[0] == "fp8") else None
    return Efficiency(
        name="expected",
        matmul=gemm["bf16"][0],
        matmul_fp8=gemm["fp8"][0] if "fp8" in gemm else d.get("matmul_compute_fraction_fp8"),
        vector=d["memory_bandwidth_fraction"],
        memory=d["memory_bandwidth_fraction"],
        skinny=gemm["bf16"][5],
        attention_decode=attn[5] if attn else d["decode_attention_bandwidth_fraction"],
        overhead_s=max(d["kernel_overhead_s"], t0),
        decode_overhead_s=t0,
        rule=f"fitted kernels ({r.rule})",
        gemm_fit=tuple((f, tuple(c)) for f, c in sorted(gemm.items())),
        attention_overhead_s=attn[8] if attn else None,
        kernel_fits=tuple(kernel),
        fp8_gemm_overhead_s=fp8[0] if fp8 else None,
        fp8_decode_gemm=tuple(c) if (fp8 and (c := ef.fp8_decode_gemm(hw.name))) else None,
        tile_rows=ef.tile_rows(hw.arch),
        fp4_gemm=ef.fp4_gemm(hw.name) if executed(hw, "fp4")[0] == "fp4" else None,
        fused_gemms=True,  # as llmath's default engine runs them (kernels.FUSED_PROJECTION_ENGINES)
    )


OVERRIDES = tuple(f.name for f in fields(Efficiency) if f.name != "name")


def check_overrides(overrides: dict, where: str, positional: tuple[str, ...] = ()) -> None:
    """Unknown keyword arguments are an error listing the accepted names."""
    bad = sorted(k for k in overrides if k not in OVERRIDES)
    if bad:
        raise WorkloadError(
            f"{where} got unknown argument{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))}; accepted: "
            f"{', '.join(positional) + '; efficiency overrides: ' if positional else ''}{', '.join(OVERRIDES)}"
        )


def efficiency(mode: str | Efficiency, hw: Hardware | None = None, **overrides) -> Efficiency:
    check_overrides(overrides, "efficiency()")
    if isinstance(mode, Efficiency):
        base = mode
    elif not isinstance(mode, str):
        raise WorkloadError(f"efficiency={mode!r} must be 'ideal' or 'expected' (or a llmath Efficiency)")
    elif mode == "ideal":
        base = IDEAL
    elif mode == "expected":
        base = expected(hw)
    else:
        raise WorkloadError(f"efficiency={mode!r} must be 'ideal' or 'expected' (or a llmath Efficiency)")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "matmul" in overrides:  # a fraction the user gives applies to every matmul, fitted kernels included
        overrides.setdefault("gemm_fit", ())
        overrides.setdefault("kernel_fits", tuple(k for k in base.kernel_fits if k[0] == "attn_decode"))
    if "decode_overhead_s" in overrides or "overhead_s" in overrides:  # and an overhead to every kernel
        overrides.setdefault("fit_overheads", False)
    if "decode_overhead_s" in overrides:
        overrides.setdefault("attention_overhead_s", None)
    return replace(base, **overrides) if overrides else base
