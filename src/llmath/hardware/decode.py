"""A generation's decode steps in closed form: each context-dependent op's step time is the max of two affine
functions of u (the positions its layer attends), summed per op and split where the bound flips; chunked
layers (Llama-4) sum per chunk; fitted decode attention sums per context band. A 10⁶-token generation costs
what one step costs, with no Python loop over steps (see :func:`decode_generation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from llmath.hardware import Hardware
from llmath.hardware import decode_attention_sum as das
from llmath.hardware import fitted_columns as fc
from llmath.hardware.efficiency import Efficiency
from llmath.hardware.roofline import (
    I_FLOPS,
    I_VFLOPS,
    _fitted,
    byte_weights,
    byte_weights_key,
    op_times,
    overheads,
    rates,
)
from llmath.model.dtypes import Precision
from llmath.ops import Scenario, Table, Value

# ---- decode steps as affine functions of u = min(S + 1, W) -----------------------------------------


@lru_cache(maxsize=512)
def _decode_coefs(table: Table, bw_key: tuple) -> np.ndarray:
    """(5, 3, n_ops): for [matmul FLOPs, vector FLOPs, bytes] of a decode step (T = 1), the coefficients of
    1, B, experts hit U(B), B·u, where u = min(S + 1, W) is the positions the op's layer attends, and B·src
    (cross-attention over the cached encoder output: the same every step)."""
    groups = {"1": 0, "B": 1, "BT": 1, "BL": 1, "U:moe": 2, "X": 4, "XE": 4}
    sel = np.zeros((5, len(table.monos)))
    for i, m in enumerate(table.monos):
        sel[groups.get(m, 3), i] = 1.0  # K:, P:, E: monomials are B·u when T = 1 (H: never in costs)
    per_class = np.stack(
        [table.coef[:, I_FLOPS, :], table.coef[:, I_VFLOPS, :], table.class_matrix(np.array(bw_key))]
    )  # (3, n_ops, n_monos)
    out = np.einsum("gm,kom->gko", sel, per_class)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=512)
def _windows(table: Table) -> np.ndarray:
    return np.array([np.inf if op.window is None else op.window for op in table.ops])


@lru_cache(maxsize=512)
def _chunks(table: Table) -> np.ndarray:
    """Each op's attention chunk (0: none): chunked flash ops attend u = (S mod C) + 1 positions at step S,
    a sawtooth, not min(S + 1, W)."""
    return np.array(
        [
            next((float(t.mono.split(":c")[1]) for _, ts in op.costs for t in ts if ":c" in t.mono), 0.0)
            for op in table.ops
        ]
    )


def _chunk_pos(u0, c):
    """u of a chunked op at the step whose unchunked u is ``u0`` (= S + 1): ((u0 − 1) mod c) + 1."""
    return (u0 - 1) % c + 1


def _prefix_u_sum(j, u0, w):
    """Σ_{i<j} min(u0 + i, w) for integer-valued arrays (w may be inf)."""
    m = np.clip(w - u0 + 1, 0, j)
    return m * u0 + m * (m - 1) / 2 + (j - m) * np.where(np.isinf(w), 0.0, w)


@dataclass(frozen=True)
class DecodeSummary:
    first_s: Value  # step 0 time
    last_s: Value  # last step time
    total_s: Value  # all steps
    per_op_total_s: np.ndarray  # (…, n_ops)
    steps: Value


@lru_cache(maxsize=512)
def _slope_ops(table: Table, bw_key: tuple) -> np.ndarray:
    """Indices of the ops whose decode cost grows with the context (attention over the KV cache)."""
    k = _decode_coefs(table, bw_key)
    return np.flatnonzero(np.any(k[3] != 0, axis=0))


@lru_cache(maxsize=512)
def _compute_coefs(table: Table, bw_key: tuple, hw: Hardware, p: Precision, eff: Efficiency) -> np.ndarray:
    """(5, n_ops) compute seconds per [1, B, U(B), B·u, B·src] of a decode step."""
    mm_rate, vec_rate = rates(hw, p, eff, table)
    k = _decode_coefs(table, bw_key)
    out = k[:, 0] / mm_rate + k[:, 1] / vec_rate
    out.setflags(write=False)
    return out


def _u_sum(j: float, u0: float, w: float) -> float:
    """Scalar Σ_{i<j} min(u0 + i, w)."""
    m = min(max(w - u0 + 1, 0.0), j)
    return m * u0 + m * (m - 1) / 2 + (j - m) * (0.0 if math.isinf(w) else w)


@lru_cache(maxsize=4096)
def _decode_static(table: Table, hw: Hardware, p: Precision, eff: Efficiency, B: int, src: float = 0.0):
    """Per-batch constants of a decode step: each op's context-independent step time, and the
    (index, c0, c1, m0, m1, window, overhead) lines of the ops whose cost grows with the context."""
    bw_key = byte_weights_key(table, p)
    k = _decode_coefs(table, bw_key)
    mm_rate, vec_rate = rates(hw, p, eff, table)
    kc = _compute_coefs(table, bw_key, hw, p, eff)
    f, inv = _fitted(table, hw, p, eff, B, B, True, None)
    if f is not None:  # decode GEMMs have B rows: their measured matmul fraction
        kc = k[:, 0] / mm_rate * f + k[:, 1] / vec_rate
    spec = table.spec
    U = float(table.experts_hit(float(B))) if spec.moe is not None else 0.0
    x = np.array([1.0, float(B), U, 0.0, float(B) * src])
    c0 = x @ kc
    m0 = (x @ k[:, 2]) * inv
    ov = overheads(table, eff, True, p, hw)
    step = np.maximum(c0, m0) + ov
    step.setflags(write=False)
    w = _windows(table)
    da, jf = _decode_attention(table, hw, p, eff)
    banded = []
    if da is not None:
        lines_ = _attention_lines(k, np.array([float(B)]), x[None, :3], jf)  # (1, 6, nj)
        band = [[a.tolist() for a in arr[0]] for arr in da.bands(lines_, np.array([float(B)]), 48)]
        for i, o in enumerate(jf):
            L = tuple(float(v) for v in lines_[0, :, i])
            step_t = das.scalar_step(da, L, float(B), i)
            banded.append((int(o), [b[i] for b in band], step_t, float(w[o]), float(ov[o])))
    ch = _chunks(table)
    lines = tuple(
        (
            int(o),
            float(c0[o]),
            float(kc[3, o]) * B,
            float(m0[o]),
            float(k[3, 2, o]) * B * float(inv[o]),
            float(w[o]),
            float(ov[o]),
            float(ch[o]),
        )
        for o in _slope_ops(table, bw_key)
        if da is None or o not in jf
    )
    return step, float(step.sum()), lines, (da, float(B), tuple(banded))


def _decode_attention(table: Table, hw: Hardware, p: Precision, eff: Efficiency):
    """(the fitted decode-attention model, its columns) or (None, empty) where no fit applies."""
    cols = fc.columns(table)
    coef = eff.fit("attn_decode", p.kv) if cols.attn.size else None
    if coef is None or _chunks(table)[cols.attn].any():  # chunked layers (Llama-4): the line sums below
        coef = None
    if coef is None:
        return None, cols.attn[:0]
    rts = (hw.vector_peak, rates(hw, p, eff, table)[1], hw.memory_bandwidth_bytes_per_s)
    return das.DecodeAttention(coef, cols, p, rts), cols.attn


def _attention_lines(k: np.ndarray, Bu: np.ndarray, Xu: np.ndarray, jf: np.ndarray) -> np.ndarray:
    """(nB, 6, nj): matmul FLOPs, vector FLOPs and bytes of the columns ``jf`` as a + b·u per batch ``Bu``
    (``Xu`` (nB, 3): the batch's [1, B, U(B)])."""
    out = []
    for c in range(3):
        out += [Xu @ k[:3, c][:, jf], k[3, c, jf][None, :] * Bu[:, None]]
    return np.stack(out, axis=1)


def _line_sum(c0: float, c1: float, m0: float, m1: float, w: float, u0: float, n: float) -> float:
    """Σ over n steps of max(c0 + c1·u, m0 + m1·u) with u_j = min(u0 + j, w): split where the lines cross."""
    dc = c1 - m1
    ustar = (m0 - c0) / dc if dc != 0 else math.inf
    js = n if w < ustar else min(max(math.ceil(ustar - u0), 0.0), n)
    lo = _u_sum(js, u0, w)
    hi = _u_sum(n, u0, w) - lo
    comp_lo, mem_lo = c0 * js + c1 * lo, m0 * js + m1 * lo
    comp_hi, mem_hi = c0 * (n - js) + c1 * hi, m0 * (n - js) + m1 * hi
    if dc < 0:
        return comp_lo + mem_hi
    if dc > 0:
        return mem_lo + comp_hi
    return max(comp_lo + comp_hi, mem_lo + mem_hi)


def _chunk_line_sum(c0: float, c1: float, m0: float, m1: float, c: float, u0: float, n: float) -> float:
    """:func:`_line_sum` for a chunked op, u_j = ((u0 − 1 + j) mod c) + 1: the rest of the first chunk,
    whole chunks (u = 1 … c each), then the start of the last one; each an unclipped arithmetic run."""
    a = _chunk_pos(u0, c)
    n1 = min(n, c - a + 1)
    q, r = divmod(n - n1, c)
    inf = math.inf
    return (
        _line_sum(c0, c1, m0, m1, inf, a, n1)
        + q * _line_sum(c0, c1, m0, m1, inf, 1.0, c)
        + _line_sum(c0, c1, m0, m1, inf, 1.0, r)
    )


def _decode_scalar(
    table: Table, hw: Hardware, p: Precision, eff: Efficiency, B: int, P: float, N: float, src: float = 0.0
) -> DecodeSummary:
    step, step_sum, lines, (da, Bf, banded) = _decode_static(table, hw, p, eff, B, src)
    n = max(N - 1, 0.0)
    u0 = P + 1 + table.spec.prefix_positions  # CPM-Ant: its prompt positions are cached too
    per_op = step * n
    total, first, last = step_sum * n, step_sum, step_sum
    for o, band, step_t, w, ov in banded:
        t, tf, tl = das.decode_attention_scalar(band, step_t, u0, n, w, ov)
        total += t - per_op[o]
        per_op[o] = t
        first += tf - step[o]
        last += tl - step[o]
    ul_ = u0 + max(n - 1, 0.0)
    for o, c0, c1, m0, m1, w, ov, ch in lines:
        s = _chunk_line_sum(c0, c1, m0, m1, ch, u0, n) if ch else _line_sum(c0, c1, m0, m1, w, u0, n)
        t = s + n * ov
        total += t - per_op[o]
        per_op[o] = t
        uf, ul = (_chunk_pos(u0, ch), _chunk_pos(ul_, ch)) if ch else (min(u0, w), min(ul_, w))
        first += max(c0 + c1 * uf, m0 + m1 * uf) + ov - step[o]
        last += max(c0 + c1 * ul, m0 + m1 * ul) + ov - step[o]
    return DecodeSummary(first, last, total, per_op, n)


_MEMO_ELEMENTS = 1 << 16  # per-batch constants up to this size are memoised (a sweep's blocks repeat them)


@lru_cache(maxsize=8)
def _attention_bands(table: Table, hw: Hardware, p: Precision, eff: Efficiency, bu: bytes, K: int):
    """(lines (nB, 6, nj), bands) of the fitted decode-attention columns for the distinct batches ``bu``
    (float64 bytes) and K context bands (:meth:`llmath.hardware.decode_attention_sum.DecodeAttention.bands`)."""
    da, jf = _decode_attention(table, hw, p, eff)
    assert da is not None
    Bu = np.frombuffer(bu)
    Uu = table.experts_hit(Bu) if table.spec.moe is not None else np.zeros_like(Bu)
    lines_ = _attention_lines(
        _decode_coefs(table, byte_weights_key(table, p)), Bu, np.stack([np.ones_like(Bu), Bu, Uu], axis=-1), jf
    )
    band = da.bands(lines_, Bu, K)
    for a in (lines_, *band):
        a.setflags(write=False)
    return lines_, band


def _attention_inputs(table: Table, hw: Hardware, p: Precision, eff: Efficiency, jf, Bu, u0, n):
    """(lines, windows, bands) of the fitted decode-attention columns ``jf`` for the distinct batches ``Bu``."""
    w = _windows(table)[jf]
    K = das.band_count(u0, n, w)
    if Bu.size * jf.size * K <= _MEMO_ELEMENTS:  # a sweep's blocks share their batches: bands once for all
        lines_, band = _attention_bands(table, hw, p, eff, Bu.tobytes(), K)
    else:
        lines_, band = _attention_bands.__wrapped__(table, hw, p, eff, Bu.tobytes(), K)
    return lines_, w, band


def _attention_generation(
    table: Table, hw: Hardware, p: Precision, eff: Efficiency, Bf, u0, n, step, per_op, ov, groups=None
):
    """The fitted decode-attention columns of a vectorised generation, summed per context band
    (:func:`llmath.hardware.decode_attention_sum.decode_attention_sum`): sets their ``per_op`` totals and returns
    (their columns, (first-step, last-step) corrections to the context-independent ``step``). ``groups``:
    :func:`distinct` of the batches, when the caller has it."""
    da, jf = _decode_attention(table, hw, p, eff)
    if da is None:
        return jf, (0.0, 0.0)
    Bu, idx = distinct(Bf[..., 0]) if groups is None else groups
    lines_, w, band = _attention_inputs(table, hw, p, eff, jf, Bu, u0, n)
    idx = idx.reshape(Bf.shape[:-1])
    tot, tf, tl = das.decode_attention_sum(da, lines_, Bu, idx, u0, n, w, ov[jf], band)
    per_op[..., jf] = tot
    return jf, ((tf - step[..., jf]).sum(-1), (tl - step[..., jf]).sum(-1))


def _line_sum_arr(c0, m0, c1, m1, w, u0, n):
    """Broadcasting :func:`_line_sum`: Σ over n steps of max(c0 + c1·u, m0 + m1·u), u_j = min(u0 + j, w)."""
    dc = c1 - m1
    shape = np.broadcast_shapes(np.shape(dc), np.shape(c0), np.shape(m0))
    ustar = np.divide(m0 - c0, dc, out=np.full(shape, np.inf), where=np.broadcast_to(dc != 0, shape))
    # j*: the steps (from 0) whose u lies below u*
    jstar = np.where(w < ustar, n, np.clip(np.ceil(ustar - u0), 0, n))
    sum_lo = _prefix_u_sum(jstar, u0, w)
    sum_hi = _prefix_u_sum(n, u0, w) - sum_lo
    n_hi = n - jstar
    comp_lo, mem_lo = c0 * jstar + c1 * sum_lo, m0 * jstar + m1 * sum_lo
    comp_hi, mem_hi = c0 * n_hi + c1 * sum_hi, m0 * n_hi + m1 * sum_hi
    # below u* the line with the smaller slope is the larger; equal slopes: the larger constant
    total = np.where(dc < 0, comp_lo + mem_hi, mem_lo + comp_hi)
    return np.where(dc == 0, np.maximum(comp_lo + comp_hi, mem_lo + mem_hi), total)


def _slope_sums(c0j, m0j, c1, m1, w, ch, u0, n):
    """(Σ over the n steps, first-step u, last-step u) of the context-dependent ops; a chunked op (``ch`` > 0)
    sums the rest of its first chunk, whole chunks, then the start of the last one."""
    last = u0 + np.maximum(n - 1, 0)
    if not ch.any():
        return _line_sum_arr(c0j, m0j, c1, m1, w, u0, n), np.minimum(u0, w), np.minimum(last, w)
    c = np.where(ch > 0, ch, 1.0)
    a = _chunk_pos(u0, c)
    n1 = np.minimum(n, c - a + 1)
    q, r = np.floor((n - n1) / c), (n - n1) % c
    inf = np.full_like(c, np.inf)
    chunked = (_line_sum_arr(c0j, m0j, c1, m1, inf, a, n1) + q * _line_sum_arr(c0j, m0j, c1, m1, inf, 1.0, c)
               + _line_sum_arr(c0j, m0j, c1, m1, inf, 1.0, r))  # fmt: skip
    total = np.where(ch > 0, chunked, _line_sum_arr(c0j, m0j, c1, m1, w, u0, n))
    uf = np.where(ch > 0, _chunk_pos(u0, c), np.minimum(u0, w))
    return total, uf, np.where(ch > 0, _chunk_pos(last, c), np.minimum(last, w))


_DISTINCT_MIN = 64  # points above which a generation's per-batch constants are computed per distinct batch


def distinct(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(x, return_inverse=True)`` of a 1-d float array; integer values in a range not much wider
    than the array by a presence table (linear time: a sweep's batches), others by sorting."""
    xi = x.astype(np.int64)
    if x.size and (xi == x).all() and 0 <= xi.min() and xi.max() <= 4 * x.size:
        present = np.zeros(int(xi.max()) + 1, dtype=bool)
        present[xi] = True
        return np.flatnonzero(present).astype(float), (np.cumsum(present) - 1)[xi]
    u, idx = np.unique(x, return_inverse=True)
    return u, idx.reshape(x.shape)


def _step_parts(table: Table, hw: Hardware, p: Precision, eff: Efficiency, Bf: np.ndarray, src):
    """(compute, memory, seconds per byte, overheads) per op of a decode step's context-independent part, for
    batches ``Bf`` (…, 1) (``src``: source positions cross-attended; broadcasts against them)."""
    bw_key = byte_weights_key(table, p)
    k = _decode_coefs(table, bw_key)
    mm_rate, vec_rate = rates(hw, p, eff, table)
    kc = _compute_coefs(table, bw_key, hw, p, eff)
    U = table.experts_hit(Bf) if table.spec.moe is not None else np.zeros_like(Bf)
    Xs = Bf * np.asarray(src, dtype=float)[..., None]  # B·src: cross-attention, constant over the steps
    X = np.concatenate(np.broadcast_arrays(np.ones_like(Bf), Bf, U, np.zeros_like(Bf), Xs), axis=-1)  # (…, 5)
    f, inv = _fitted(table, hw, p, eff, Bf[..., 0], Bf[..., 0], True, None)
    c0 = X @ kc if f is None else (X @ k[:, 0]) / mm_rate * f + (X @ k[:, 1]) / vec_rate
    return c0, (X @ k[:, 2]) * inv, inv, overheads(table, eff, True, p, hw)


def _steps(table: Table, hw: Hardware, p: Precision, eff: Efficiency, Bf: np.ndarray, src):
    """:func:`_step_parts` and the context-independent step time of each op and their sum."""
    c0, m0, inv, ov = _step_parts(table, hw, p, eff, Bf, src)
    step = np.maximum(c0, m0)  # the step time of each op, were it context-independent
    if ov.any():
        step += ov
    return c0, m0, inv, ov, step, step.sum(-1)


@lru_cache(maxsize=4)
def _group_steps(table: Table, hw: Hardware, p: Precision, eff: Efficiency, bu: bytes, src: float):
    """:func:`_steps` for the distinct batches ``bu`` (float64 bytes), memoised: a sweep's blocks repeat them."""
    out = _steps(table, hw, p, eff, np.frombuffer(bu)[:, None], src)
    for a in out:
        a.setflags(write=False)
    return out


def decode_generation(table: Table, hw: Hardware, p: Precision, eff: Efficiency, B, P, N, src=0) -> DecodeSummary:
    """N − 1 decode steps after a P-token prompt (contexts S = P … P+N−2), summed in closed form.

    Encoder-decoder: ``P`` = the decoder's context after its prefill, ``src`` = source positions (fixed).

    Ops whose cost does not depend on the context (weight GEMMs, norms, ...) cost the same every step.
    For the others, compute(u) = c0 + c1·u and memory(u) = m0 + m1·u with u_j = min(P + 1 + j, W)
    nondecreasing in the step j, so the bound flips at most once, at u* where the two lines cross: each
    side is an arithmetic sum. Scalars take a pure-Python path over those few ops; arrays broadcast.
    """
    # compressed cache; BLT's rerun of every byte (ops/blt.py); image cross layers
    if any(m.startswith("z") or m in ("LL", "I", "BTI") for m in table.monos):
        return _decode_stepwise(table, hw, p, eff, B, P, N, src)
    if all(isinstance(x, int | float | np.integer | np.floating) for x in (B, P, N, src)):
        return _decode_scalar(table, hw, p, eff, int(B), float(P), float(N), float(src))
    bw_key = byte_weights_key(table, p)
    k = _decode_coefs(table, bw_key)
    kc = _compute_coefs(table, bw_key, hw, p, eff)
    Bf = np.asarray(B, dtype=float)[..., None]
    # the context-independent step depends on the batch alone: once per distinct batch (a sweep has few)
    groups = distinct(Bf[..., 0]) if np.ndim(src) == 0 and Bf.size > _DISTINCT_MIN else None
    if groups is None:
        c0, m0, inv, ov, step, step_sum = _steps(table, hw, p, eff, Bf, src)
    elif groups[0].size * len(table.ops) <= _MEMO_ELEMENTS:
        c0, m0, inv, ov, step, step_sum = _group_steps(table, hw, p, eff, groups[0].tobytes(), float(src))
    else:
        c0, m0, inv, ov, step, step_sum = _steps(table, hw, p, eff, groups[0][:, None], src)
    if groups is not None:
        step, step_sum = step[groups[1]], step_sum[groups[1]]
    n = np.maximum(np.asarray(N, dtype=float)[..., None] - 1, 0)
    per_op = step * n
    u0 = np.asarray(P, dtype=float)[..., None] + 1 + table.spec.prefix_positions
    jf, extra = _attention_generation(table, hw, p, eff, Bf, u0, n, step, per_op, ov, groups)
    j = np.setdiff1d(_slope_ops(table, bw_key), jf)
    if not j.size:
        return DecodeSummary(step_sum + extra[0], step_sum + extra[1], per_op.sum(-1), per_op, n[..., 0])
    w = _windows(table)[j]
    c0j, m0j, invj = c0[..., j], m0[..., j], inv[..., j]
    if groups is not None:
        c0j, m0j, invj = c0j[groups[1]], m0j[groups[1]], (invj[groups[1]] if invj.ndim > 1 else invj)
    c1 = kc[3, j] * Bf
    m1 = k[3, 2, j] * Bf * invj
    total, uf, ul = _slope_sums(c0j, m0j, c1, m1, w, _chunks(table)[j], u0, n)
    ovj = ov[j]
    per_op[..., j] = total + n * ovj
    base = step_sum - step[..., j].sum(-1)
    first = base + extra[0] + (np.maximum(c0j + c1 * uf, m0j + m1 * uf) + ovj).sum(-1)
    last = base + extra[1] + (np.maximum(c0j + c1 * ul, m0j + m1 * ul) + ovj).sum(-1)
    return DecodeSummary(first, last, per_op.sum(-1), per_op, n[..., 0])


def decode_total(table: Table, hw: Hardware, p: Precision, eff: Efficiency, B, P, N, src=0):
    """:func:`decode_generation`'s ``total_s`` alone, for arrays of sizes (a sweep): per point only the sums,
    no exact first or last step and no per-op split; the context-independent step summed once per distinct
    batch. Equal to ``decode_generation(...).total_s`` to rounding (the same terms, added in another order)."""
    Bf, Pf, Nf = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, P, N)))
    stepwise = any(m.startswith("z") or m in ("LL", "I", "BTI") for m in table.monos)
    if stepwise or np.ndim(src) != 0 or Bf.size <= _DISTINCT_MIN:
        return decode_generation(table, hw, p, eff, B, P, N, src).total_s
    Bu, idx = distinct(Bf)
    if Bu.size * len(table.ops) <= _MEMO_ELEMENTS:
        c0, m0, inv, ov, step, step_sum = _group_steps(table, hw, p, eff, Bu.tobytes(), float(src))
    else:
        c0, m0, inv, ov, step, step_sum = _steps(table, hw, p, eff, Bu[:, None], src)
    n = np.maximum(Nf - 1, 0)[..., None]
    u0 = Pf[..., None] + 1 + table.spec.prefix_positions
    bw_key = byte_weights_key(table, p)
    da, jf = _decode_attention(table, hw, p, eff)
    j = np.setdiff1d(_slope_ops(table, bw_key), jf)
    total = (step_sum - step[:, jf].sum(-1) - step[:, j].sum(-1))[idx] * n[..., 0]
    if da is not None:
        lines_, w, band = _attention_inputs(table, hw, p, eff, jf, Bu, u0, n)
        total += das.decode_attention_total(da, lines_, Bu, idx, u0, n, w, ov[jf], band).sum(-1)
    if j.size:
        k, kc = _decode_coefs(table, bw_key), _compute_coefs(table, bw_key, hw, p, eff)
        invj = inv[:, j][idx] if inv.ndim > 1 else inv[j]
        c1, m1 = kc[3, j] * Bf[..., None], k[3, 2, j] * Bf[..., None] * invj
        sums = _slope_sums(c0[:, j][idx], m0[:, j][idx], c1, m1, _windows(table)[j], _chunks(table)[j], u0, n)[0]
        total += (sums + n * ov[j]).sum(-1)
    return total


_STEP_BLOCK = 1 << 14  # decode steps evaluated per block by :func:`_decode_stepwise`
_STEADY = frozenset(
    {"1", "B", "BT", "BL", "U:moe", "X", "XE", "I", "BTI"}
)  # monomials that do not change between steps


@lru_cache(maxsize=64)
def _context_ops(table: Table) -> np.ndarray:
    """The ops whose decode cost changes with the context (any monomial but the steady ones)."""
    moving = np.array([m not in _STEADY for m in table.monos])
    return np.flatnonzero((table.coef[:, :, moving] != 0).any(axis=(1, 2)))


def _step_times(table: Table, hw: Hardware, p: Precision, eff: Efficiency, b: float, S, src: float, j):
    """(steps, len(j)) time of the ops ``j`` at the decode steps of contexts ``S`` (as roofline.op_times)."""
    vals = np.einsum("ocm,sm->soc", table.coef[j], table.monomial_matrix(Scenario(b, 1, S, src=src)))
    mm_rate, vec_rate = rates(hw, p, eff, table)
    f, inv = _fitted(table, hw, p, eff, b, b, True, S)
    n_ops = len(table.ops)
    compute = vals[..., I_FLOPS] / np.broadcast_to(mm_rate, (n_ops,))[j]
    if f is not None:
        compute = compute * np.broadcast_to(f, np.broadcast_shapes(np.shape(f), (n_ops,)))[..., j]
    compute = compute + vals[..., I_VFLOPS] / vec_rate
    memory = (vals * byte_weights(table, p)[j]).sum(-1) * np.broadcast_to(
        inv, np.broadcast_shapes(np.shape(inv), (n_ops,))
    )[..., j]
    return np.maximum(compute, memory) + overheads(table, eff, True, p, hw)[j]


def _decode_stepwise(table: Table, hw: Hardware, p: Precision, eff: Efficiency, B, P, N, src) -> DecodeSummary:
    """Compressed caches (DeepSeek-V4, ops/compressed.py) grow by one entry every m positions: a step's cost
    is a staircase in S, not a line, so the closed form does not apply. The ops whose cost changes with the
    context are evaluated at every step, vectorised over blocks of :data:`_STEP_BLOCK` steps (one scenario
    at a time for arrays of sizes); the others cost the same every step."""
    arrs = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, P, N, src)))
    shape, j = arrs[0].shape, _context_ops(table)
    first, last, total, steps = (np.zeros(shape) for _ in range(4))
    per_op = np.zeros(shape + (len(table.ops),))
    for idx in np.ndindex(shape):
        b, p0, n_tok, s = (float(a[idx]) for a in arrs)
        n = steps[idx] = max(n_tok - 1, 0.0)
        vals = table.values(Scenario(b, 1, p0, src=s))
        t0 = op_times(vals, table, hw, p, eff, b, b, True, p0)[0]  # tokens = B·T, T = 1
        ends = _step_times(table, hw, p, eff, b, np.array([p0, p0 + max(n - 1, 0.0)]), s, j)
        first[idx] = t0.sum() - t0[j].sum() + ends[0].sum()
        last[idx] = t0.sum() - t0[j].sum() + ends[1].sum()
        per_op[idx] = t0 * n
        per_op[idx][j] = 0.0
        for start in range(0, int(n), _STEP_BLOCK):
            S = p0 + np.arange(start, min(start + _STEP_BLOCK, int(n)), dtype=float)
            per_op[idx][j] += _step_times(table, hw, p, eff, b, S, s, j).sum(0)
        total[idx] = per_op[idx].sum()
    if not shape:
        return DecodeSummary(float(first), float(last), float(total), per_op, float(steps))
    return DecodeSummary(first, last, total, per_op, steps)
