"""The prompt queue's stationary law by power iteration from the empty queue, as :mod:`llmath.deploy.prompt_queue`
found it before its direct solve: the reference the direct solve is tested against (tests/test_poisson_queue.py)."""

import math

import numpy as np

from llmath.deploy.prompt_queue import (
    TAIL,
    Lattice,
    QueueLaw,
    _after_service,
    _arrivals_to,
    _budget_load,
    _poisson_pmf,
    _spread,
    _times,
)

MAX_PASSES = 20_000
TOLERANCE = 1e-12  # L1 change of π between passes


def power_stationary(lat: Lattice, mu: np.ndarray, n_states: int, idle: bool = False) -> tuple[np.ndarray, float]:
    """π over ``n_states`` units: one step of the chain at a time from the empty queue, the mass it sends beyond
    the kept states dropped and the rest renormalised, until π changes by less than :data:`TOLERANCE` (L1) or
    after :data:`MAX_PASSES` steps; and the mass the last step dropped."""
    n_a = int(np.ceil(mu.max() + 12 * np.sqrt(mu.max()) + 12))
    pmf = _poisson_pmf(mu, n_a)
    if idle:
        pmf[0] = np.eye(n_a)[1]
    full_pmf = pmf[-1]  # every state above ⌊cap⌋ has the same iteration
    p = np.zeros(n_states)
    p[0] = 1.0
    cut = 0.0
    for _ in range(MAX_PASSES):
        drained, left = _after_service(p, lat)
        nxt, cut = _spread(left, full_pmf, lat.r)
        nxt += _arrivals_to(drained, pmf, lat.r, n_states)
        nxt /= nxt.sum()
        done = float(np.abs(nxt - p).sum()) < TOLERANCE
        p = nxt
        if done:
            break
    return p, cut


def power_queue_law(dec, eng, req, rate, d, K, chunked, max_load=1.0, max_states=4096):
    """The prompt queue's law as :func:`llmath.deploy.prompt_queue.queue_law` found it with the power iteration:
    a span of 16 + 40·load/(1 − load) prompts, four times longer while the last step drops more than 10⁻⁹ and
    under ``max_states``, then r halved."""
    P = req.new
    lat, load = _budget_load(dec, eng, req, rate, d, K, chunked, max_load)
    span = 16 + 40 * load / (1 - load)
    while True:
        n = int(min(max_states, math.ceil(lat.cap) + 2 + math.ceil(span * lat.r)))
        tau, over, decodes = _times(dec, eng, req, lat, d, n)
        pi, cut = power_stationary(lat, rate * tau, n, idle=d == 0)
        if cut <= TAIL or (n >= max_states and lat.r == 1):
            return QueueLaw(lat, pi, tau, over, decodes, 1 / rate if d == 0 else 0.0)
        if n < max_states:
            span *= 4
            continue
        r = max(1, lat.r // 2)
        lat = Lattice(r, lat.c * r / P, lat.c, P / r, False)
