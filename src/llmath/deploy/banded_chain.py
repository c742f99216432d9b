"""The stationary law of a Markov chain whose jumps are bounded both ways, by block state reduction.

A chain on states 0 … n − 1 whose transitions from i go to i + d, −``lower`` ≤ d ≤ ``upper``, has a banded
transition matrix P. Its stationary law π (π = πP, Σπ = 1) is found by censoring (W. K. Grassmann, M. I.
Taksar, D. P. Heyman, "Regenerative analysis and steady state distributions for Markov chains", Operations
Research 33(5), 1985, the GTH algorithm, here a block of b states at a time): the top block K is removed, and
the chain watched only on the states below it has P_IJ + P_IK (I − P_KK)⁻¹ P_KJ, which stays in the band
(a path that leaves the states below through K comes back at most ``lower`` below K's lowest state). When one
block is left its law is solved; each removed block then has π_K = π_I·P_IK (I − P_KK)⁻¹ (the flows into K
balance those out of it), from the bottom up. As in GTH, the diagonal of I − P_KK is the mass that leaves each
state for the other kept states (never 1 − P_kk), so no subtraction loses the small flows of a chain near
saturation; I − P_KK is then a diagonally dominant M-matrix whose inverse is nonnegative, and every π is
a sum of nonnegative terms. Mass a row lacks (its jumps beyond the ends, cut by the caller) restarts the chain
at state 0 when the caller names it (a state ω that takes it and goes to 0, carried through the reduction as
one more column), else stays in its state.

Cost: about n·(upper + b)·(lower + b) multiply-adds and n/b small dense solves; memory: the band, n·(lower +
upper + 2b + 1) numbers. Tested against a power iteration of the same chain (tests/power_iteration.py) and
against closed forms (tests/test_poisson_queue.py, tests/test_banded_chain.py).
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.lib.stride_tricks import as_strided

from llmath.ops.table import matmul_rows

BLOCK = 32  # states removed at a time (at least ``lower``)
_SCRATCH = threading.local()  # each thread's storage for the bands built with ``reuse``


class Band:
    """A banded transition matrix in storage padded for its reduction: ``rows[i, d + lower]`` = P(i → i + d),
    −``lower`` ≤ d ≤ ``upper`` (zero where i + d leaves 0 … n − 1), filled by the caller. ``reuse``: the storage
    is the calling thread's scratch, zeroed, grown as needed and kept for the next such band (which overwrites
    this one): a chain solved many times then writes over memory already mapped instead of asking the system
    for tens of megabytes of fresh pages each time."""

    def __init__(self, n: int, lower: int, upper: int, block: int = BLOCK, reuse: bool = False):
        self.n, self.lower, self.upper = n, lower, upper
        self.block = max(block, lower, 1)
        width = lower + upper + 1
        self.w = self.row_width(lower, upper, self.block)
        self.store = _scratch((n + 1) * self.w) if reuse else np.zeros((n + 1) * self.w)
        self.rows = self.store[: n * self.w].reshape(n, self.w)[:, self.block : self.block + width]

    @staticmethod
    def row_width(lower: int, upper: int, block: int = BLOCK) -> int:
        """The numbers a band of these sizes stores a state (its storage holds one row more than its states)."""
        return lower + upper + 1 + 2 * max(block, lower, 1)

    def dense(self) -> np.ndarray:
        """An n×n view of P on the storage: every block the reduction reads (the removed block K, the rows I
        that reach it, the columns J it reaches) lies inside the padded band; entries outside it are never read
        or written."""
        item = self.store.itemsize
        start = self.lower + self.block
        return as_strided(self.store[start:], shape=(self.n, self.n), strides=((self.w - 1) * item, item))


def _scratch(size: int) -> np.ndarray:
    """``size`` zeros in the calling thread's scratch storage."""
    store = getattr(_SCRATCH, "store", None)
    if store is None or len(store) < size:
        store = _SCRATCH.store = np.empty(size)
    out = store[:size]
    out.fill(0.0)
    return out


def _removal_matrix(P: np.ndarray, lo: int, hi: int, first: int, lost: np.ndarray) -> np.ndarray:
    """I − P_KK for the block K = lo … hi − 1 of the chain kept on 0 … hi − 1, its diagonal the mass each
    state sends to the other kept states (columns ``first`` … hi − 1 hold all of it) and the mass it loses."""
    rows = P[lo:hi, first:hi]
    kk = rows[:, lo - first :]
    a = -kk
    np.fill_diagonal(a, rows.sum(axis=1) - np.diagonal(kk) + lost[lo:hi])
    return a


def _bottom_law(a: np.ndarray, lost: np.ndarray) -> np.ndarray:
    """The law of the last block, its own chain with a state ω that takes the mass it loses and restarts at 0:
    π_0 = 1 and πa = 0 over the other states (every state reaches 0, so that system is nonsingular), ω left out,
    not normalised."""
    s = len(a)
    full = np.zeros((s + 1, s + 1))
    full[:s, :s], full[:s, s], full[s, 0], full[s, s] = a, -lost, -1.0, 1.0
    pi = np.ones(s + 1)
    pi[1:] = np.linalg.solve(full[1:, 1:].T, -full[0, 1:])
    return pi[:s]


def banded_stationary(band: Band, lost: np.ndarray | None = None) -> np.ndarray:
    """π = πP, Σπ = 1 (module docstring). ``lost``: the mass each row lacks (its jumps past the ends), which
    restarts the chain at state 0 (None: none). Every state must reach state 0. The reduction overwrites the
    band."""
    n, lower, upper, b = band.n, band.lower, band.upper, band.block
    lost = np.zeros(n) if lost is None else np.array(lost, dtype=float)
    P = band.dense()
    removed = []
    hi = n
    while True:
        lo = max(hi - b, 0)
        first = max(lo - lower, 0)
        a = _removal_matrix(P, lo, hi, first, lost)
        if lo == 0:
            break
        top = max(lo - upper, 0)  # the rows that reach K: top … lo − 1
        x = np.linalg.solve(a, np.column_stack([P[lo:hi, first:lo], lost[lo:hi]]))  # (I − P_KK)⁻¹ [P_KJ, lost]
        through = matmul_rows(P[top:lo, lo:hi], x)  # what rows I reach, and lose, through K
        P[top:lo, first:lo] += through[:, :-1]
        lost[top:lo] += through[:, -1]
        removed.append((lo, hi, top, a))
        hi = lo
    pi = np.zeros(n)
    pi[:hi] = _bottom_law(a, lost[:hi])
    for lo, hi, top, a in reversed(removed):
        pi[lo:hi] = np.linalg.solve(a.T, pi[top:lo] @ P[top:lo, lo:hi])
    return pi / pi.sum()
