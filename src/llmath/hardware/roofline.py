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

from functools import lru_cache

import numpy as np

from llmath.hardware import Hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware import fitted_ops as fo
from llmath.hardware.efficiency import IDEAL, Efficiency, efficiency, expected  # noqa: F401 (re-exported)
from llmath.hardware.execution import executed, op_executed, op_peaks
from llmath.model import formats as fmt
from llmath.model.dtypes import Precision
from llmath.model.traits import traits
from llmath.ops import CLASSES, Scenario, Table, one_hot
from llmath.ops.table import byte_key, matmul_rows

I_FLOPS, I_VFLOPS = CLASSES.index("flops"), CLASSES.index("vflops")
# Weight GEMMs with at most this many token rows stream weights like a GEMV (decode); above it they are
# compute-bound enough that max(compute, memory) at the large-GEMM rates describes them. A calibrated
# skinny_rows curve is used up to this cut as well.
SKINNY_ROWS = 64
# Rows of one tensor-core GEMM tile for weight-only quantised GEMMs: Hopper's wgmma instructions are m64
# (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"); CUTLASS tiles are 64 or 128 rows.
TILE_ROWS = 64
LARGE_ROWS = 4096  # rows at which the fitted GEMM fractions are compute-identified (far above every ridge)


def byte_weights_key(table: Table, p: Precision) -> tuple[tuple[float, ...], ...]:
    """Hashable (n_ops, n_classes) bytes per element (weights by each op's module)."""
    return byte_key(table, p)


def byte_weights(table: Table, p: Precision) -> np.ndarray:
    """(n_ops, n_classes) bytes per element of each op's classes (weights by the op's module)."""
    return table.byte_matrix(p)


@lru_cache(maxsize=1024)
def run_format(hw: Hardware, p: Precision) -> str:
    """The format the default weights' GEMMs run in on ``hw`` (after fallbacks): the fitted models' key."""
    return executed(hw, p.compute)[0]


def _base_inv(table: Table, hw: Hardware, eff: Efficiency, decode: bool) -> np.ndarray:
    """(n_ops,) seconds per byte before the skinny-GEMM adjustment (decode attention has its own)."""
    frac = (
        np.where(table.is_kv_attention, eff.attention_decode, eff.memory)
        if decode
        else np.full(len(table.ops), eff.memory)
    )
    return 1.0 / (hw.memory_bandwidth_bytes_per_s * frac)


def _curve(pairs: tuple[tuple[int, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    """A measured (rows, fraction) curve as arrays, for interpolation in log(rows)."""
    return np.array([x for x, _ in pairs], dtype=float), np.array([f for _, f in pairs], dtype=float)


def _per_row_kind(table: Table, f_tokens, f_batch, other):
    """(…, n_ops): ``f_tokens`` for weight GEMMs over the B·T tokens, ``f_batch`` for the LM head's B logit
    rows, ``other`` for every other op (each broadcast over the leading axes)."""
    return np.where(table.weight_token_rows, f_tokens, np.where(table.weight_logit_rows, f_batch, other))


@lru_cache(maxsize=1024)
def _inv_variants(table: Table, hw: Hardware, eff: Efficiency, decode: bool) -> np.ndarray:
    """(4, n_ops) seconds per byte for [token rows skinny?] × [logit rows skinny?] (default efficiency)."""
    bw = hw.memory_bandwidth_bytes_per_s
    base = _base_inv(table, hw, eff, decode)
    skinny = 1.0 / (bw * eff.skinny)
    out = np.stack(
        [_per_row_kind(table, skinny if t else base, skinny if lg else base, base) for t in (0, 1) for lg in (0, 1)]
    )
    out.setflags(write=False)
    return out


@lru_cache(maxsize=512)
def _gemm_shapes(table: Table) -> tuple[np.ndarray, np.ndarray]:
    """(n·k, rows share) of each op for the fitted GEMM model: its weight elements per run (per expert for
    routed experts), and the share of the token rows one of its GEMMs sees (top-k / E for routed experts)."""
    nk = np.array([max(op.n_params, 1) for op in table.ops], dtype=float)
    share = np.ones(len(table.ops))
    moe = table.spec.moe
    if moe is not None:
        routed = np.array([any(t.mono == "U:moe" for t in op.terms("weight")) for op in table.ops], dtype=bool)
        share[routed] = moe.top_k / moe.n_experts
        nk[routed] /= moe.n_experts  # a routed op's parameters are those of all its experts
    nk.setflags(write=False)
    share.setflags(write=False)
    return nk, share


@lru_cache(maxsize=1024)
def _fitted_inv(table: Table, hw: Hardware, eff: Efficiency, p: Precision, decode: bool) -> np.ndarray | None:
    """(n_ops,) seconds per byte with a fitted GEMM model: weight GEMMs at its memory fraction for their
    weight bytes per run, the other ops as :func:`_base_inv`; ``None`` without a fit for ``p``'s format."""
    coef = eff.gemm_coef(run_format(hw, p))
    if coef is None:
        return None
    nk, _ = _gemm_shapes(table)
    em = ef.fractions(coef, 1.0, 1.0, nk * p.weight_bytes)[1]
    out = np.where(table.is_weight_mm, 1.0 / (hw.memory_bandwidth_bytes_per_s * em), _base_inv(table, hw, eff, decode))
    out.setflags(write=False)
    return out


def inv_bandwidth(
    table: Table, hw: Hardware, eff: Efficiency, batch, tokens, decode: bool, p: Precision | None = None
) -> np.ndarray:
    """(…, n_ops) seconds per byte of each op: 1 / (bandwidth × achievable fraction).

    Weight GEMMs with few rows stream their weights like a GEMV and get the ``skinny`` fraction (or the
    calibrated ``skinny_rows`` curve, interpolated in log rows); their rows are the B·T tokens, or the B
    logit rows for the LM head. Decode attention reading the KV cache gets ``attention_decode``. With a
    fitted GEMM model for ``p``'s format, weight GEMMs get its memory fraction at any rows instead.
    """
    fit = _fitted_inv(table, hw, eff, p, decode) if (eff.gemm_fit and p is not None) else None
    if fit is not None:
        return fit
    if not eff.skinny_rows:
        v = _inv_variants(table, hw, eff, decode)
        idx = 2 * (np.asarray(tokens) <= SKINNY_ROWS) + (np.asarray(batch) <= SKINNY_ROWS)
        return v[idx]
    bw = hw.memory_bandwidth_bytes_per_s
    base = _base_inv(table, hw, eff, decode)
    xs, fr = _curve(eff.skinny_rows)
    cap = min(xs.max(), SKINNY_ROWS)

    def inv(rows):
        r = np.asarray(rows, dtype=float)[..., None]
        return np.where(r <= cap, 1.0 / (bw * np.interp(np.log(np.maximum(r, 1)), np.log(xs), fr)), base)

    return _per_row_kind(table, inv(tokens), inv(batch), base)


def op_bandwidth(
    table: Table, hw: Hardware, eff: Efficiency, batch, tokens, decode: bool, p: Precision | None = None
) -> np.ndarray:
    """(…, n_ops) achievable bytes/s of each op (see :func:`inv_bandwidth`)."""
    return 1.0 / inv_bandwidth(table, hw, eff, batch, tokens, decode, p)


def rates(hw: Hardware, p: Precision, eff: Efficiency, table: Table) -> tuple[np.ndarray, float]:
    """Achievable matmul FLOP/s per op (each in the format the device executes it in) and vector FLOP/s."""
    return _mm_rates(table, hw, p, eff), hw.vector_peak * eff.vector


@lru_cache(maxsize=1024)
def _mm_rates(table: Table, hw: Hardware, p: Precision, eff: Efficiency) -> np.ndarray:
    fmts = op_executed(table, hw, p)
    out = op_peaks(table, hw, p) * np.array([eff.matmul_for(f) for f in fmts])
    out.setflags(write=False)
    return out


def mm_factor(
    table: Table, eff: Efficiency, batch, tokens, dtype: str | None = None, weight_only: bool = False
) -> np.ndarray | None:
    """(…, n_ops) factor on weight GEMMs' compute time at the ``matmul`` rate, 1 for the other ops; ``None``
    when there is none (the default efficiencies).

    With a fitted GEMM model for ``dtype``: η_matmul / ηc(rows, n·k) per op (the compute time becomes
    FLOPs / (peak · ηc)); else 1 / η(rows) from a calibrated ``matmul_rows`` curve.

    ``weight_only`` (weights narrower than the activations: W8A16, W4A16): the fit was measured with weights
    in the compute format, and below the ridge its compute and weight-streaming terms cannot be told apart
    (the fitted ηc follows the memory roof there). The dequantising kernel streams the narrow weights and
    computes whole TILE_ROWS-row tiles at the large-GEMM fraction, so ηc is at least
    ηc(LARGE_ROWS) · m / (TILE_ROWS · ⌈m / TILE_ROWS⌉)."""
    coef = eff.gemm_coef(dtype)
    if coef is not None:
        nk, share = _gemm_shapes(table)
        mm = eff.matmul_for(dtype or "")

        def eta(x, cols):
            return ef.fractions(coef, x, nk[cols], 1.0)[0]

        def ratio(rows, cols):  # (…, len(cols)); the rows' saturation once per share, not per column
            r = np.asarray(rows, dtype=float)[..., None]
            vals = np.empty(r.shape[:-1] + (len(cols),))
            sh = share[cols]
            for s in np.unique(sh) if sh.size and (sh != sh[0]).any() else sh[:1]:  # routed: top-k / E of the rows
                sel = sh == s
                x = np.maximum(r * s, 1.0)
                e = eta(x, cols[sel])
                if weight_only:
                    e = np.maximum(e, eta(LARGE_ROWS, cols[sel]) * x / (TILE_ROWS * np.ceil(x / TILE_ROWS)))
                vals[..., sel] = mm / e
            return vals

        out = np.ones(np.broadcast_shapes(np.shape(tokens), np.shape(batch)) + (len(table.ops),))
        for rows, mask in ((tokens, table.weight_token_rows), (batch, table.weight_logit_rows)):
            cols = np.flatnonzero(mask)
            out[..., cols] = ratio(rows, cols)
        return out
    if not eff.matmul_rows:
        return None
    xs, fr = _curve(eff.matmul_rows)

    def inv_eta(rows):
        r = np.asarray(rows, dtype=float)[..., None]
        return np.where(r <= xs.max(), 1.0 / np.interp(np.log(np.maximum(r, 1)), np.log(xs), fr), 1.0)

    return _per_row_kind(table, inv_eta(tokens), inv_eta(batch), 1.0)


@lru_cache(maxsize=1024)
def _weight_only(p: Precision, hw: Hardware) -> bool:
    """Quantised default weights whose GEMMs run in 16/32 bit on ``hw`` (W4A16, W8A16, fp8 on a device
    without fp8): dequantised, not a low-precision tensor-core GEMM."""
    return fmt.get(p.weights).quantised and run_format(hw, p) in ("bf16", "fp16", "fp32")


def overheads(table: Table, eff: Efficiency, decode: bool, p: Precision | None = None) -> np.ndarray:
    """(n_ops,) overhead seconds of each op per pass: its kernels × the per-kernel overhead (in decode, decode
    attention's own where one was fitted; with ``p``, context attention's and MoE layers' fitted ones)."""
    ov = eff.decode_overhead_s if decode else eff.overhead_s
    if decode and eff.attention_overhead_s is not None:
        base = table.kernels * np.where(table.is_kv_attention, eff.attention_overhead_s, ov)
    else:
        base = table.kernels * ov
    return base if p is None else fo.overheads(table, p, eff, decode, base)


def _fitted(table: Table, hw: Hardware, p: Precision, eff: Efficiency, batch, tokens, decode: bool, context):
    """(compute factor or None, seconds per byte) per op, the fitted attention and MoE columns included. A decode
    step of a model that reruns its context (model/traits.py, BLT) runs all S + 1 positions: its GEMMs have the
    rows of a prefill of S + 1 tokens."""
    if decode and context is not None and traits(table.spec).reruns_context:
        tokens, decode = batch * (context + 1), False
    f = mm_factor(table, eff, batch, tokens, run_format(hw, p), _weight_only(p, hw))
    inv = inv_bandwidth(table, hw, eff, batch, tokens, decode, p)
    if not eff.kernel_fits:
        return f, inv
    rts = (rates(hw, p, eff, table)[0], op_peaks(table, hw, p), run_format(hw, p))
    return fo.apply(table, hw, p, eff, batch, tokens, decode, f, inv, context, rts)


def times(
    flops,
    vflops,
    bytes_,
    table: Table,
    hw: Hardware,
    p: Precision,
    eff: Efficiency,
    batch,
    tokens,
    decode: bool,
    context=None,
):
    """(time, compute time, memory time) per op from its matmul FLOPs, vector FLOPs and bytes; ``context``:
    a decode step's S (its attention's fitted fractions depend on it)."""
    mm_rate, vec_rate = rates(hw, p, eff, table)
    f, inv = _fitted(table, hw, p, eff, batch, tokens, decode, context)
    compute = (flops / mm_rate if f is None else flops / mm_rate * f) + vflops / vec_rate
    memory = bytes_ * inv
    return np.maximum(compute, memory) + overheads(table, eff, decode, p), compute, memory


def op_times(
    values: np.ndarray,
    table: Table,
    hw: Hardware,
    p: Precision,
    eff: Efficiency,
    batch,
    tokens,
    decode: bool,
    context=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(time, compute time, memory time, bytes) per op from evaluated class totals ``values``."""
    bytes_ = (values * byte_weights(table, p)).sum(-1)
    fl, vfl = values[..., I_FLOPS], values[..., I_VFLOPS]
    t, c, m = times(fl, vfl, bytes_, table, hw, p, eff, batch, tokens, decode, context)
    return t, c, m, bytes_


@lru_cache(maxsize=1024)
def _compute_rhs(table: Table, hw: Hardware, p: Precision, eff: Efficiency) -> np.ndarray:
    """(n_monos, n_ops): compute seconds per monomial (matmul FLOPs at the matmul rate, vector at the vector rate)."""
    mm_rate, vec_rate = rates(hw, p, eff, table)
    out = np.ascontiguousarray(table.rhs(one_hot("flops")) / mm_rate + table.rhs(one_hot("vflops")) / vec_rate)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=1024)
def _time_rhs(table: Table, hw: Hardware, p: Precision, eff: Efficiency) -> np.ndarray:
    """(n_monos, 3·n_ops): matmul seconds at the matmul rate, vector seconds and bytes per monomial, side by side
    (one product per block of a sweep)."""
    mm_rate, vec_rate = rates(hw, p, eff, table)
    fl, vfl = table.rhs(one_hot("flops")) / mm_rate, table.rhs(one_hot("vflops")) / vec_rate
    out = np.ascontiguousarray(np.concatenate([fl, vfl, table.rhs(byte_weights_key(table, p))], axis=1))
    out.setflags(write=False)
    return out


@lru_cache(maxsize=4096)
def _stage_matrices(
    table: Table, hw: Hardware, p: Precision, eff: Efficiency, batch: int, tokens: int, decode: bool, context=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute seconds, memory seconds) right-hand sides (n_monos, n_ops), and the overheads, for scalars."""
    f, inv = _fitted(table, hw, p, eff, batch, tokens, decode, context)
    if f is None:
        comp = _compute_rhs(table, hw, p, eff)
    else:
        mm_rate, vec_rate = rates(hw, p, eff, table)
        comp = table.rhs(one_hot("flops")) / mm_rate * f + table.rhs(one_hot("vflops")) / vec_rate
    mem = table.rhs(byte_weights_key(table, p)) * inv
    ov = overheads(table, eff, decode, p)
    return comp, mem, ov


def stage_times(table: Table, scenario: Scenario, hw: Hardware, p: Precision, eff: Efficiency, decode: bool):
    """Fast path: (time, compute, memory) per op of a scenario, by matrix products with cached tables."""
    mv = table.monomial_matrix(scenario)
    B = scenario.B
    if mv.ndim == 1:
        ctx = int(scenario.S0) if decode else None
        comp, mem, ov = _stage_matrices(table, hw, p, eff, int(B), int(B * scenario.T), decode, ctx)
        c, m = mv @ comp, mv @ mem
        return np.maximum(c, m) + ov, c, m
    B = np.asarray(B)
    return monomial_times(table, mv, hw, p, eff, B, B * np.asarray(scenario.T), decode, scenario.S0 if decode else None)


def monomial_times(
    table: Table, mv: np.ndarray, hw: Hardware, p: Precision, eff: Efficiency, batch, tokens, decode: bool, context=None
):
    """(time, compute, memory) per op from monomial values ``mv`` (…, n_monos): the array path of
    :func:`stage_times`, and the entry for callers that compose a pass from several scenarios (a serving
    iteration mixing decode and prefill tokens); ``batch``/``tokens`` are the pass's logit rows and tokens;
    ``context``: a decode pass's S (``None``: decode attention at its scalar fitted fraction)."""
    f, inv = _fitted(table, hw, p, eff, batch, tokens, decode, context)
    n = len(table.ops)
    prod = matmul_rows(mv, _time_rhs(table, hw, p, eff))  # one product: [matmul, vector] seconds and bytes
    fl, vfl, bytes_ = prod[..., :n], prod[..., n : 2 * n], prod[..., 2 * n :]
    comp = fl + vfl if f is None else fl * f
    if f is not None:
        comp += vfl  # in place: the block's temporaries are the sweep's cost
    mem = bytes_ * inv
    t = np.maximum(comp, mem)
    ov = overheads(table, eff, decode, p)
    if ov.any():
        t += ov
    return t, comp, mem
