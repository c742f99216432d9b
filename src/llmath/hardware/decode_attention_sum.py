"""Decode attention's fitted kernel model (``attn_decode``) summed over a generation in closed form, band by band.

Decode attention's step time at u positions is t(u) = max(c(u), m(u)) with c(u) = FLOPs(u) / (vector peak ·
ηc(B·H, u)) and m(u) = bytes(u) / (bandwidth · ηm(bytes(u))): FLOPs and bytes are affine in u, the fractions
are not, so the affine closed form of the roofline (one split where the bound flips) does not apply as is.
Per context band [2^k, 2^(k+1)) c and m are replaced by their secants through the band's edges (exact at
every power of two; a secant of u ↦ u / sat(u) over a factor-2 band is within 1.5% of it for exponents
≥ 0.5), and each band is summed in closed form, split where its two secants cross. G(v), the sum over
u < v, is a cumulative table over whole bands plus one partial band, so a generation costs two lookups
whatever its length; the first and last steps use the exact t(u). :mod:`llmath.hardware.fitted_ops` sets the
same fractions per step (docs/efficiency.md, "In the roofline").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmath.hardware import efficiency_fit as ef
from llmath.hardware.fitted_columns import Columns, fit_format
from llmath.model.dtypes import Precision


def decode_fractions(coef, cols: Columns, p: Precision, B, u, heads=None, kv_heads=None):
    """(ηc, ηm) of decode attention at batch B and u positions read (arrays broadcast over the columns)."""
    H = cols.heads if heads is None else heads
    K = cols.kv_heads if kv_heads is None else kv_heads
    xm = ef.attn_decode_cost(B, u - 1, H, K, cols.head_dim, fit_format(p.kv) or "bf16")[2]
    ec, em, _ = ef.fractions(coef, B * H, u, xm)
    return ec, em


def _tri(L0, L1, lo, hi):
    """Σ over integers u in [lo, hi) of L0 + L1·u."""
    n = hi - lo
    return L0 * n + L1 * n * (lo + hi - 1) / 2


def _lsum(c0, c1, m0, m1, a, x):
    """Σ over integers u in [a, x) of max(c0 + c1·u, m0 + m1·u), split where the lines cross (arrays)."""
    dc = c1 - m1
    us = np.divide(m0 - c0, dc, out=np.full(np.broadcast_shapes(np.shape(dc), np.shape(c0)), np.inf), where=dc != 0)
    s = np.clip(np.ceil(us), a, x)
    lo_c, hi_c, lo_m, hi_m = _tri(c0, c1, a, s), _tri(c0, c1, s, x), _tri(m0, m1, a, s), _tri(m0, m1, s, x)
    out = np.where(dc > 0, lo_m + hi_c, lo_c + hi_m)
    return np.where(dc == 0, np.maximum(lo_c + hi_c, lo_m + hi_m), out)


def _lsum1(c0: float, c1: float, m0: float, m1: float, a: float, x: float) -> float:
    """Scalar :func:`_lsum`."""
    dc = c1 - m1
    if dc == 0:
        return max(_tri(c0, c1, a, x), _tri(m0, m1, a, x))
    s = min(max(float(math.ceil((m0 - c0) / dc)), a), x)
    if dc > 0:
        return _tri(m0, m1, a, s) + _tri(c0, c1, s, x)
    return _tri(c0, c1, a, s) + _tri(m0, m1, s, x)


@dataclass(frozen=True)
class DecodeAttention:
    """Decode attention's (compute, memory) step time at u: ``coef`` its fit, ``rates`` (vector peak, vector
    rate, bandwidth). Lines are 6-tuples (FLOPs, vector FLOPs, bytes as a + b·u: F0, F1, V0, V1, M0, M1)."""

    coef: tuple[float, ...]
    cols: Columns
    p: Precision
    rates: tuple[float, float, float]

    def cm(self, L, B, u, heads=None, kv_heads=None):
        ec, em = decode_fractions(self.coef, self.cols, self.p, B, u, heads, kv_heads)
        vpk, vec, bw = self.rates
        F0, F1, V0, V1, M0, M1 = L
        return (F0 + F1 * u) / (vpk * ec) + (V0 + V1 * u) / vec, (M0 + M1 * u) / (bw * em)

    def bands(self, lines, Bu, K: int):
        """Per band k < K: secant lines (c0, c1, m0, m1), (nB, nj, K), and G(2^k), (nB, nj, K + 1)."""
        e = 2.0 ** np.arange(K + 1)
        H, K_ = self.cols.heads[:, None], self.cols.kv_heads[:, None]
        c, m = self.cm(tuple(lines[:, i, :, None] for i in range(6)), Bu[:, None, None], e, H, K_)
        c1, m1 = np.diff(c, axis=-1) / e[:-1], np.diff(m, axis=-1) / e[:-1]
        c0, m0 = c[..., :-1] - c1 * e[:-1], m[..., :-1] - m1 * e[:-1]
        full = _lsum(c0, c1, m0, m1, e[:-1], e[1:])
        G = np.concatenate([np.zeros(full.shape[:-1] + (1,)), np.cumsum(full, axis=-1)], axis=-1)
        return c0, c1, m0, m1, G


def _G(band, idx, v, K: int):
    """G(v) = Σ_{u<v} of the banded step time, v ≥ 1, (…, nj); ``idx`` (…) picks each element's batch."""
    k = np.clip(np.floor(np.log2(v)), 0, K - 1).astype(np.intp)
    nj = band[0].shape[1]
    flat = (idx[..., None] * nj + np.arange(nj)) * K + k  # into the (nB, nj, K) tables
    c0, c1, m0, m1 = (a.reshape(-1)[flat] for a in band[:4])
    G = band[4][..., :K].reshape(-1)[flat]
    return G + _lsum(c0, c1, m0, m1, np.exp2(k), v)


def band_count(u0, n, w) -> int:
    """Context bands [2^k, 2^(k+1)) a generation's sum needs: those below its largest position read."""
    return max(int(np.ceil(np.log2(max(float(np.max(np.minimum(u0 + n, w))), 2.0)))), 1)


def _rows(lines, Bu, idx):
    """Each element's attention lines (6 × (…, nj)) and batch (…, 1), picked by ``idx``."""
    return tuple(lines[:, i, :][idx] for i in range(6)), Bu[idx][..., None]


def _below(da: DecodeAttention, lines, Bu, idx, u0, n, w, band):
    """Σ over the n steps of the attention columns' step times, without overheads (…, nj), and the rows
    (:func:`_rows`) when the windowed tail needed them (else ``None``)."""
    hi = np.minimum(u0 + n, w)  # raw positions below the window: [u0, hi)
    K = band_count(u0, n, w)
    band = da.bands(lines, Bu, K) if band is None else band
    g = _G(band, idx, np.stack(np.broadcast_arrays(np.maximum(hi, u0), u0 + 0 * hi)), K)  # G(hi), G(u0) at once
    below = np.where(hi > u0, g[0] - g[1], 0.0)
    tail = np.maximum(u0 + n - np.maximum(u0, w), 0)
    if not np.any(tail > 0):
        return below, None
    L, Bk = _rows(lines, Bu, idx)
    return below + tail * np.maximum(*da.cm(L, Bk, np.where(np.isinf(w), 1.0, w))), (L, Bk)


def decode_attention_sum(da: DecodeAttention, lines, Bu, idx, u0, n, w, ov, band=None):
    """(total, first, last) seconds of the attention columns over n steps with u_j = min(u0 + j, w), each
    (…, nj). ``lines`` (nB, 6, nj) per distinct batch ``Bu``; ``idx`` (…) each element's batch; u0, n (…, 1).
    ``band``: ``da.bands(lines, Bu, band_count(u0, n, w))``, when the caller has it."""
    below, rows = _below(da, lines, Bu, idx, u0, n, w, band)
    L, Bk = _rows(lines, Bu, idx) if rows is None else rows
    ends = np.stack(np.broadcast_arrays(np.minimum(u0, w), np.minimum(u0 + np.maximum(n - 1, 0), w)))
    t = np.maximum(*da.cm(L, Bk, ends)) + ov  # the first and the last step
    return below + n * ov, t[0], t[1]


def decode_attention_total(da: DecodeAttention, lines, Bu, idx, u0, n, w, ov, band=None):
    """:func:`decode_attention_sum`'s total alone (no exact first and last step): what a sweep reports."""
    return _below(da, lines, Bu, idx, u0, n, w, band)[0] + n * ov


def scalar_step(da: DecodeAttention, L, B: float, i: int):
    """A pure-Python t(u) of attention column ``i`` at batch B: :meth:`DecodeAttention.cm`'s max, with every
    constant of the batch folded in (the scalar path is timed per scenario)."""
    c, h1, p1, h2, p2, mem, hm, pm, _ = da.coef
    vpk, vec, bw = da.rates
    F0, F1, V0, V1, M0, M1 = L
    H, d = float(da.cols.heads[i]), da.cols.head_dim
    kvb = 2 * float(da.cols.kv_heads[i]) * d * ef.BYTES[fit_format(da.p.kv) or "bf16"] * B  # xm = kvb·u + qo
    qo = 4 * H * d * B
    c1 = c / (1 + (h1 / (B * H)) ** p1)

    def t(u: float) -> float:  # xm: efficiency_fit.attn_decode_cost
        ec = c1 / (1 + (h2 / u) ** p2)
        em = mem / (1 + (hm / (kvb * u + qo)) ** pm)
        return max((F0 + F1 * u) / (vpk * ec) + (V0 + V1 * u) / vec, (M0 + M1 * u) / (bw * em))

    return t


def decode_attention_scalar(band, t, u0: float, n: float, w: float, ov: float):
    """Scalar :func:`decode_attention_sum` for one column: ``band`` its (c0, c1, m0, m1, G) lists, ``t`` its
    exact step time (:func:`scalar_step`)."""
    K = len(band[0])

    def G(v: float) -> float:
        k = min(max(math.frexp(v)[1] - 1, 0), K - 1)  # floor(log2 v) for v ≥ 1
        return band[4][k] + _lsum1(band[0][k], band[1][k], band[2][k], band[3][k], 2.0**k, v)

    hi = min(u0 + n, w)
    total = G(hi) - G(u0) if hi > u0 else 0.0
    tail = max(u0 + n - max(u0, w), 0.0)
    if tail > 0:
        total += tail * t(w)
    return total + n * ov, t(min(u0, w)) + ov, t(min(u0 + max(n - 1, 0.0), w)) + ov
