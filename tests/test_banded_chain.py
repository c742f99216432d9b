"""The stationary law of a banded chain by block state reduction (:mod:`llmath.deploy.banded_chain`) against a
closed form and against a dense linear solve."""

import numpy as np
import pytest

from llmath.deploy.banded_chain import Band, banded_stationary


def _band(P: np.ndarray, lower: int, upper: int, block: int) -> Band:
    band = Band(len(P), lower, upper, block)
    for i in range(len(P)):
        for d in range(-lower, upper + 1):
            if 0 <= i + d < len(P):
                band.rows[i, d + lower] = P[i, i + d]
    return band


@pytest.mark.parametrize("block", [1, 5, 32])
def test_a_birth_death_chain_is_geometric(block):
    # up with p = 0.3, down with q = 0.5 (held at 0 and at the top): detailed balance π(j)·p = π(j + 1)·q, so
    # π(j) = (1 − ρ)ρ^j / (1 − ρ^n), ρ = p/q = 0.6, on the n = 50 states kept (a held jump stays in its state)
    n, p, q = 50, 0.3, 0.5
    P = np.diag(np.full(n - 1, p), 1) + np.diag(np.full(n - 1, q), -1)
    P += np.diag(1 - P.sum(axis=1))
    pi = banded_stationary(_band(P, 1, 1, block))
    rho = p / q
    want = (1 - rho) * rho ** np.arange(n) / (1 - rho**n)
    np.testing.assert_allclose(pi, want, rtol=1e-12)


@pytest.mark.parametrize("lower,upper,block", [(3, 7, 4), (5, 2, 2), (4, 11, 32)])
def test_a_random_banded_chain_equals_a_dense_solve(lower, upper, block):
    # any banded chain whose states all reach 0: π against numpy's dense solve of π(I − P) = 0 with Σπ = 1 in
    # place of one balance equation (its rounding is absolute, ~1e-16 of the largest π: compared to 1e-13 there);
    # rows that lose mass at the top edge keep it in their state
    rng = np.random.default_rng(7)
    n = 60
    P = np.zeros((n, n))
    for i in range(n):
        cols = np.arange(max(i - lower, 0), min(i + upper, n - 1) + 1)
        P[i, cols] = rng.random(len(cols))
        P[i] /= P[i].sum() / rng.uniform(0.9, 1.0) if i > n - upper - 1 else P[i].sum()
    held = P + np.diag(1 - P.sum(axis=1))
    A = (np.eye(n) - held).T
    A[-1] = 1.0
    want = np.linalg.solve(A, np.eye(n)[-1])
    np.testing.assert_allclose(banded_stationary(_band(P, lower, upper, block)), want, rtol=1e-9, atol=1e-13)


def test_lost_mass_named_restarts_at_state_0():
    # the same kind of chain, the mass its top rows lose named: it goes to state 0, as in numpy's dense solve of
    # the chain P + lost·e0ᵀ
    rng = np.random.default_rng(11)
    n, lower, upper = 40, 2, 6
    P = np.zeros((n, n))
    for i in range(n):
        cols = np.arange(max(i - lower, 0), min(i + upper, n - 1) + 1)
        P[i, cols] = rng.random(len(cols))
        P[i] /= P[i].sum() / (rng.uniform(0.5, 0.9) if i > n - upper - 1 else 1.0)
    lost = 1 - P.sum(axis=1)
    restarted = P.copy()
    restarted[:, 0] += lost
    A = (np.eye(n) - restarted).T
    A[-1] = 1.0
    want = np.linalg.solve(A, np.eye(n)[-1])
    got = banded_stationary(_band(P, lower, upper, 4), lost)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-13)
