"""Roofline times per operator, and whole generations in closed form.

An operator's time is ``max(compute, memory) + kernels × overhead`` with
``compute = matmul FLOPs / (peak(dtype) · η_mm) + vector FLOPs / (vector peak · η_vec)`` and
``memory = bytes / (bandwidth · η_mem)``; it is compute-bound when the first term wins. ``ideal``
efficiency is the pure roofline of the seeds (η = 1, no overhead); ``expected`` uses achievable fractions
measured on real hardware (``data/efficiency.json``, justified in docs/hardware.md), all overridable.

A decode step at context S costs, per operator, an affine function of u = min(S + 1, W) (the positions
its layer attends), so its time is the max of two affine functions of u. A generation's decode steps
are summed per operator in closed form, split where the bound flips: a 10⁶-token generation costs what
one step costs, with no Python loop over steps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

import numpy as np

from .dtypes import Precision
from .errors import WorkloadError
from .hardware import Hardware
from .ops import CLASSES, Scenario, Table

I_FLOPS, I_VFLOPS = CLASSES.index("flops"), CLASSES.index("vflops")
SKINNY_ROWS = 64  # weight GEMMs with at most this many token rows stream weights like a GEMV


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
    engines capture decode).
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

    def __post_init__(self) -> None:
        for f in ("matmul", "vector", "memory", "skinny", "attention_decode"):
            v = getattr(self, f)
            if not (0 < v <= 1):
                raise WorkloadError(f"efficiency {f}={v!r} must be a fraction in (0, 1]")
        if self.overhead_s < 0 or self.decode_overhead_s < 0:
            raise WorkloadError("kernel overheads must be >= 0 seconds")

    def matmul_for(self, dtype: str) -> float:
        return self.matmul_fp8 if (dtype == "fp8" and self.matmul_fp8) else self.matmul


IDEAL = Efficiency(name="ideal")


def expected(hw: Hardware | None = None) -> Efficiency:
    """The ``expected`` defaults, with the vendor's matmul fraction where one was measured.

    A calibrated profile (``llmath calibrate``) carries its own measured ceilings as its peaks and
    bandwidth, and its measured fractions in ``measured["efficiency"]``: those are used instead.
    """
    if hw is not None and isinstance(hw.measured, dict) and hw.measured.get("efficiency"):
        e = dict(hw.measured["efficiency"])
        if "skinny_rows" in e:
            e["skinny_rows"] = tuple((int(r), float(f)) for r, f in e["skinny_rows"])
        return replace(IDEAL, name="expected", **e)
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
    )


def efficiency(mode: str | Efficiency, hw: Hardware | None = None, **overrides) -> Efficiency:
    if isinstance(mode, Efficiency):
        base = mode
    elif mode == "ideal":
        base = IDEAL
    elif mode == "expected":
        base = expected(hw)
    else:
        raise WorkloadError(f"efficiency={mode!r} must be 'ideal' or 'expected'")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return replace(base, **overrides) if overrides else base


@dataclass(frozen=True)
class Rates:
    """Per-op rate vectors for a (table, hardware, precision, efficiency, stage) combination."""

    byte_weights: np.ndarray  # bytes per element for each class (0 for FLOP classes)
    mm_rate: float  # matmul FLOP/s achieved
    vec_rate: float
    bw: np.ndarray  # (n_ops,) or broadcast: bytes/s per op (skinny handled by caller)
    overhead: float


def byte_weights(p: Precision) -> np.ndarray:
    per = {
        "weight": p.weight_bytes,
        "act_in": p.act_bytes,
        "act_out": p.act_bytes,
        "kv_read": p.kv_bytes,
        "kv_write": p.kv_bytes,
    }
    return np.array([per.get(c, 0.0) for c in CLASSES])


def op_bandwidth(table: Table, hw: Hardware, eff: Efficiency, tokens, decode: bool) -> np.ndarray:
    """(…, n_ops) achievable bandwidth per op: skinny weight GEMMs and decode attention get their own."""
    bw = hw.memory_bandwidth_bytes_per_s
    n = len(table.ops)
    is_weight_mm = np.array([op.kind == "matmul" and op.n_params > 0 for op in table.ops])
    is_attn = np.array(
        [
            op.kind == "matmul"
            and op.component == "attention"
            and op.n_params == 0
            and any(c == "kv_read" for c, _ in op.costs)
            for op in table.ops
        ]
    )
    base = np.full(n, eff.memory)
    if decode:
        base = np.where(is_attn, eff.attention_decode, base)
    tok = np.asarray(tokens, dtype=float)[..., None]
    if eff.skinny_rows:
        rows = np.array([r for r, _ in eff.skinny_rows], dtype=float)
        fr = np.array([f for _, f in eff.skinny_rows], dtype=float)
        skinny = np.interp(np.log(np.maximum(tok, 1)), np.log(rows), fr)
        frac = np.where(is_weight_mm & (tok <= rows.max()), skinny, base)
    else:
        frac = np.where(is_weight_mm & (tok <= SKINNY_ROWS), eff.skinny, base)
    return bw * frac


def op_times(
    values: np.ndarray, table: Table, hw: Hardware, p: Precision, eff: Efficiency, tokens, decode: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(time, compute time, memory time, bytes) per op from evaluated class totals ``values``."""
    mm_rate = hw.peak(p.compute) * eff.matmul_for(p.compute)
    vec_rate = hw.vector_peak * eff.vector
    bytes_ = values @ byte_weights(p)
    compute = values[..., I_FLOPS] / mm_rate + values[..., I_VFLOPS] / vec_rate
    memory = bytes_ / op_bandwidth(table, hw, eff, tokens, decode)
    ov = eff.decode_overhead_s if decode else eff.overhead_s
    return np.maximum(compute, memory) + table.kernels * ov, compute, memory, bytes_


# ---- decode steps as affine functions of u = min(S + 1, W) -----------------------------------------


def _affine(table: Table, B) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op and class: constant and slope in u for a decode step (T = 1); and each op's window."""
    B = np.asarray(B, dtype=float)[..., None, None]
    const_sc = Scenario(B=1, T=1, S0=0)
    m_const = np.zeros(len(table.monos))
    m_slope = np.zeros(len(table.monos))
    u_mono = np.zeros(len(table.monos), dtype=bool)
    for i, m in enumerate(table.monos):
        if m in ("B", "BT", "BL"):
            m_const[i] = 1.0
        elif m == "1":
            m_const[i] = 0.0  # handled below (not scaled by B)
        elif m[0] in "KPE":
            m_slope[i] = 1.0
            u_mono[i] = True
    one = np.array([1.0 if m == "1" else 0.0 for m in table.monos])
    const = np.einsum("ocm,m->oc", table.coef, m_const) * B + np.einsum("ocm,m->oc", table.coef, one)
    if "U:moe" in table.monos:
        j = table.monos.index("U:moe")
        from .ops import experts_hit

        spec = table.spec
        hit = experts_hit(np.asarray(B)[..., 0, 0], spec.moe.n_experts, spec.moe.top_k)[..., None, None]
        const = const + table.coef[:, :, j] * hit
    slope = np.einsum("ocm,m->oc", table.coef, m_slope) * B
    del const_sc, u_mono
    windows = np.array([np.inf if op.window is None else op.window for op in table.ops])
    return const, slope, windows


def _prefix_u_sum(j, u0, w):
    """Σ_{i<j} min(u0 + i, w) for integer-valued arrays (w may be inf)."""
    m = np.clip(w - u0 + 1, 0, j)
    return m * u0 + m * (m - 1) / 2 + (j - m) * np.where(np.isinf(w), 0.0, w)


@dataclass(frozen=True)
class DecodeSummary:
    first_s: np.ndarray  # step 0 time
    last_s: np.ndarray  # last step time
    total_s: np.ndarray  # all steps
    per_op_total_s: np.ndarray  # (…, n_ops)
    steps: np.ndarray


def decode_generation(table: Table, hw: Hardware, p: Precision, eff: Efficiency, B, P, N) -> DecodeSummary:
    """N − 1 decode steps after a P-token prompt (contexts S = P … P+N−2), summed in closed form."""
    const, slope, w = _affine(table, B)
    bwv = byte_weights(p)
    mm_rate = hw.peak(p.compute) * eff.matmul_for(p.compute)
    vec_rate = hw.vector_peak * eff.vector
    bw = op_bandwidth(table, hw, eff, B, decode=True)
    # compute(u) = c0 + c1 u ; memory(u) = m0 + m1 u   (…, n_ops)
    c0 = const[..., I_FLOPS] / mm_rate + const[..., I_VFLOPS] / vec_rate
    c1 = slope[..., I_FLOPS] / mm_rate + slope[..., I_VFLOPS] / vec_rate
    m0 = (const @ bwv) / bw
    m1 = (slope @ bwv) / bw
    P = np.asarray(P, dtype=float)[..., None]
    n = np.maximum(np.asarray(N, dtype=float)[..., None] - 1, 0)
    u0 = P + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        ustar = np.where(c1 != m1, (m0 - c0) / (c1 - m1), np.inf)
    # j*: steps (from 0) whose u is below u*; u_j = min(u0 + j, w) is nondecreasing in j
    jstar = np.clip(np.ceil(ustar - u0), 0, n)
    jstar = np.where(np.isfinite(w) & (w < ustar), n, jstar)
    jstar = np.where(np.isnan(jstar), n, jstar)
    sum_lo = _prefix_u_sum(jstar, u0, w)
    sum_all = _prefix_u_sum(n, u0, w)
    sum_hi = sum_all - sum_lo
    n_lo, n_hi = jstar, n - jstar
    # below u*: the side with the smaller slope is larger; if slopes are equal, compare constants
    comp_lo = c0 * n_lo + c1 * sum_lo
    mem_lo = m0 * n_lo + m1 * sum_lo
    comp_hi = c0 * n_hi + c1 * sum_hi
    mem_hi = m0 * n_hi + m1 * sum_hi
    lo = np.where(c1 < m1, comp_lo, mem_lo)
    hi = np.where(c1 < m1, mem_hi, comp_hi)
    equal = c1 == m1
    lo = np.where(equal, np.maximum(comp_lo, mem_lo), lo)
    hi = np.where(equal, np.maximum(comp_hi, mem_hi), hi)
    per_op = lo + hi + n * table.kernels * eff.decode_overhead_s
    ulast = np.minimum(u0 + np.maximum(n - 1, 0), w)
    u_first = np.minimum(u0, w)
    t_first = np.maximum(c0 + c1 * u_first, m0 + m1 * u_first) + table.kernels * eff.decode_overhead_s
    t_last = np.maximum(c0 + c1 * ulast, m0 + m1 * ulast) + table.kernels * eff.decode_overhead_s
    return DecodeSummary(t_first.sum(-1), t_last.sum(-1), per_op.sum(-1), per_op, n[..., 0])
