"""Poisson arrivals: the prompt queue as the scheduler serves it, a discrete-time bulk-service queue.

Requests arrive at rate λ (a Poisson process) and join the queue at the next iteration boundary. Each iteration
the scheduler (vLLM V1, SGLang, TensorRT-LLM in-flight batching; :mod:`.simulate` runs the same rule) serves the
queued prompt tokens first come first served up to its budget: c = K − d·w tokens beside the d decoding requests
(mixed prefill), or the whole K in an iteration that pauses them (prefill-first); without chunking, whole prompts
only (⌊c/P'⌋ of them). So, with Q the queued prompt tokens at an iteration's start (after admission):

* the iteration serves s = min(Q, c) tokens and lasts τ(s) (:meth:`.step.Device.iteration` for d decoders and s
  tokens in ⌈s/P'⌉ chunks, or 1 + c/P' chunks at a random phase when the queue outlasts the budget, plus the
  engine's per-iteration overheads);
* the requests arriving meanwhile, Poisson(λ·τ(s)) of them, add P' tokens each: Q' = Q − s + P'·A.

This Markov chain lives on a lattice of P'/r tokens (r units a prompt; a budget that is not a whole number of units
is served as ⌊b⌋ or ⌈b⌉ units with the probabilities that keep its mean, so the capacity, which decides the wait
near saturation, is exact). Its stationary law π on the first n states solves π = πP, Σπ = 1 directly
(:mod:`.banded_chain`): P is banded, a state moving at most ⌈cap⌉ units down and r·(n_a − 1) up (n_a arrival counts,
those past P(A ≥ n_a) < 10⁻¹² moved onto the last with their mass and mean), so block state reduction with the
subtraction-free diagonal of the GTH algorithm solves it in about n·r·n_a·⌈cap⌉ operations, exact to rounding but
for that tail (no iteration to converge, so no slowing near saturation). The truncation: a jump past the last state
empties the queue (the reference power iteration, which renormalises, spreads that mass over π instead: the same
law to the leak's order); the leak (the mass π sends past the last state an iteration) bounds the mass the
untruncated chain holds above it, leak times the mean length of an excursion there, at most (r·n_a + ⌈cap⌉)/(cap −
r·μ_full) iterations (:func:`_mass_above`); n is the fewest states that put that mass under :data:`TAIL` = 10⁻⁹. At
most :data:`MAX_STATES` states (fewer where the band would hold more than :data:`MAX_BAND` numbers): where even
those leak more than :data:`TAIL`, r is halved (a coarser lattice holds a longer queue), down to r = 1.
From its stationary law π:

* θ(d) = E_π[τ] / P_π(decode): a decoding request's mean time per decode iteration, as it sees every
  iteration (mixed prefill) or only the pure-decode ones (prefill-first): the iteration average, not τ at the
  mean load (τ is convex in s, prefills come in bursts);
* TTFT: an arrival lands at a uniform moment (PASTA), so in an iteration from state Q with probability
  ∝ π(Q)·τ(Q), at a uniform point U of it; it waits out the rest (1 − U)·τ, then finds ahead of it the tokens
  left after that iteration plus P' per request that came before it in the iteration (Poisson(λ·U·τ)); with W
  tokens ahead it ends its prompt in iteration k = ⌈(W + P')/c⌉ of full budget, the last serving its remainder
  and the tokens that arrived behind it (their mean). Plus the front end's o_req.

The decoders' count: a request joins the decoders at rate λ and leaves after E[G − 1] decode iterations of
θ(d) seconds each (θ the chain's mean time per decode iteration at d decoders): a symmetric queue, whose law
p(d) ∝ Π_{j≤d} λ·E[G − 1]·θ(j)/j does not depend on how the output lengths spread; TPOT = E_p[d]/(λ·E[G − 1])
(Little's law), TTFT averaged over p. Where the law reaches the engine's cap on running requests
(``max_resident`` less the prefilling ones) later arrivals wait for a slot: the law goes on geometrically
(Erlang C), its wait scaled by (1 + c²)/2 for decode lengths of squared coefficient of variation c² (the
Allen–Cunneen approximation of M/G/c: A. O. Allen, Probability, Statistics, and Queueing Theory, 2nd ed.,
1990).

Not modelled: the decoders' count and the prompt queue moving together (both follow the recent arrivals, so
the count spreads about twice as wide as p(d) at three quarters of the largest rate: TPOT a few per cent low
there), prompt-length distributions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from llmath.deploy.banded_chain import Band, banded_stationary
from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.serving import Decoding, Requests, SteadyState, active_overheads, steady_state
from llmath.deploy.step import Device
from llmath.errors import RateError, WorkloadError

UNITS_PER_BUDGET = 64  # lattice: at least this many units in one iteration's budget (chunked prefill)
MAX_STATES = 4096
MAX_BAND = 1 << 23  # numbers a chain's band may hold (64 MiB): fewer states where it is wide
FIRST_STATES = 256  # the first truncation tried
TAIL = 1e-9  # mass the truncation may leave out
PMF_CUT = 1e-16  # the arrivals' reach (the band's memory, the excursions' bound): counts up to this tail
MATRIX_CUT = 1e-12  # arrival counts beyond this tail are left out of the chain's matrix
FAR_LOAD = 0.95  # a decoder count above the mean whose prompts load the budget this much ends the law's grid
DECODER_GRID = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0])  # × the mean field's decoders


@dataclass(frozen=True)
class Lattice:
    """The queue's units: ``r`` a prompt of P' tokens; ``cap`` units served by a full iteration (real: served
    as ⌊cap⌋ or ⌈cap⌉ units); ``c`` the budget in tokens."""

    r: int
    cap: float
    c: float
    unit: float  # tokens a unit
    whole: bool  # prompts served whole (no chunking)


@dataclass(frozen=True)
class QueueLaw:
    """The chain's stationary law over the queued units at an iteration's start, and each state's iteration
    time and engine overhead (seconds)."""

    lat: Lattice
    pi: np.ndarray
    tau: np.ndarray
    over: np.ndarray
    decode: np.ndarray  # whether the state's iteration decodes (prefill-first: only with no prompt)
    idle_s: float = 0.0  # no decoders: the empty queue is an idle engine, for 1/λ on average, not an iteration

    def time_s(self) -> np.ndarray:
        """The time each state lasts: its iteration, or the idle wait for the next arrival."""
        return np.where(np.arange(len(self.tau)) == 0, self.idle_s, self.tau) if self.idle_s else self.tau

    @property
    def mean_s(self) -> float:
        return float(self.pi @ self.tau)

    @property
    def decode_share(self) -> float:
        return float(self.pi @ self.decode)


def _lattice(P: int, K: float, d: float, w: float, mixed: bool, chunked: bool) -> Lattice:
    c = max(K - d * w, 1.0) if mixed else K
    if not chunked:  # whole prompts: one unit a prompt, ⌊c/P'⌋ a full iteration (at least one)
        m = max(math.floor(c / P), 1) if math.isfinite(c) else MAX_STATES
        return Lattice(1, float(m), float(m * P), float(P), True)
    r = max(1, min(P, math.ceil(UNITS_PER_BUDGET * P / c)))
    return Lattice(r, c * r / P, c, P / r, False)


def _times(dec: Decoding, eng: EngineConfig, req: Requests, lat: Lattice, d: float, n_states: int):
    """(τ, overhead, decodes) for each queue state 0 … n − 1: its iteration serves min(Q, cap) units (every
    state above ⌊cap⌋ the same full iteration: evaluated once)."""
    q = np.arange(min(n_states, math.floor(lat.cap) + 2), dtype=float)
    full = q > lat.cap
    s = np.minimum(q, lat.cap) * lat.unit  # tokens served
    P = req.new
    n = np.ceil(np.minimum(q, lat.cap) / lat.r)  # the prompts whose tokens it serves
    if not lat.whole:  # a full budget cuts the queue at a random phase: 1 + c/P' prompts on average
        n = np.where(full, 1.0 + lat.c / P, n)
    n = np.maximum(n, 1.0)
    chunk = s / n
    prefix = req.cached + np.maximum(P - chunk, 0.0) / 2
    ov = active_overheads(dec.dev, eng)
    mixed = eng.mixed_prefill
    dm = d if mixed else 0.0
    pre = s > 0
    if mixed:
        t_pre = dec.mixed(dm, req.decode_context, n, chunk, prefix)
    else:
        t_pre = dec.dev.iteration(0, 0, n, chunk, prefix).time_s
    o_pre = ov.per_iteration_eager_s + dm * ov.per_token_s
    o_dec = ov.iteration_s(eng.cuda_graphs) + d * ov.per_token_s
    t_dec = float(dec.step(d, req.decode_context))
    tau = np.where(pre, np.asarray(t_pre, dtype=float) + o_pre, t_dec + o_dec)
    over = np.where(pre, o_pre, o_dec)
    decodes = np.where(pre, 1.0 if mixed else 0.0, 1.0)
    pad = n_states - len(q)  # the full states above
    return tuple(np.concatenate([x, np.full(pad, x[-1])]) for x in (tau, over, decodes))


def _poisson_pmf(mu: np.ndarray, n: int) -> np.ndarray:
    """P(A = a), a = 0 … n − 1, for each mean in ``mu`` (rows), computed in log space."""
    a = np.arange(n, dtype=float)
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n, dtype=float)))])
    mu = np.maximum(np.asarray(mu, dtype=float)[..., None], 1e-300)
    return np.exp(-mu + a * np.log(mu) - log_fact)


def _mixed_pmf(mu: np.ndarray, n: int) -> np.ndarray:
    """P(A = a) for A ~ Poisson(μ·U), U uniform on [0, 1]: P(Poisson(μ) > a) / μ (arrivals before a moment
    drawn uniformly in an iteration of mean μ arrivals). P(Poisson(μ) > a) is summed over the pmf's tail (beyond
    ``n`` terms: none), not taken as 1 − cdf, which cancels to 0 at a tiny μ (a rate of 10⁻³⁰/s)."""
    pmf = _poisson_pmf(mu, n)
    mu = np.maximum(np.asarray(mu, dtype=float)[..., None], 1e-300)
    at_least = np.cumsum(pmf[..., ::-1], axis=-1)[..., ::-1]  # P(A ≥ a), a = 0 … n − 1
    above = np.concatenate([at_least[..., 1:], np.zeros_like(at_least[..., :1])], axis=-1)
    return above / mu


def _after_service(p: np.ndarray, lat: Lattice) -> tuple[np.ndarray, np.ndarray]:
    """(mass of the drained states q ≤ ⌊cap⌋ by state, what the full states leave by remaining units): a
    full iteration serves ⌊cap⌋ units with probability 1 − f, ⌈cap⌉ with f (f = cap − ⌊cap⌋)."""
    lo = int(min(math.floor(lat.cap), len(p) - 1))
    f = lat.cap - math.floor(lat.cap)
    left = np.zeros(len(p))
    tail = p[lo + 1 :]  # states above ⌊cap⌋: every one of them fills the budget
    left[1 : 1 + len(tail)] += (1 - f) * tail
    left[: len(tail)] += f * tail
    return p[: lo + 1], left


def _spread(left: np.ndarray, pmf: np.ndarray, r: int) -> tuple[np.ndarray, float]:
    """``left`` shifted up by r·a units with probability pmf[a]; (the result cut at its length, the mass cut)."""
    n = len(left)
    out = np.zeros(n)
    for a, w in enumerate(pmf):
        k = a * r
        if k >= n or w < 1e-300:
            continue
        out[k:] += w * left[: n - k]
    return out, float(left.sum() - out.sum())


def _arrivals_to(drained: np.ndarray, pmf: np.ndarray, r: int, n: int) -> np.ndarray:
    """From states that served every queued unit: r·a units with probability Σ_q drained[q]·pmf[q, a]."""
    out = np.zeros(n)
    mass = drained @ pmf[: len(drained)]
    k = np.arange(len(mass)) * r
    keep = k < n
    out[k[keep]] = mass[keep]
    return out


def _transitions(lat: Lattice, mu: np.ndarray, n: int, idle: bool) -> tuple[Band, np.ndarray]:
    """The chain's transition matrix on 0 … n − 1 as a band, and each state's mass that leaves those states: a
    drained state q ≤ ⌊cap⌋ goes to r·A, A ~ Poisson(μ_q) (``idle``: the empty queue to one arrival); a full
    one to q − ⌊cap⌋ (probability 1 − f) or q − ⌈cap⌉ (f), plus r·A, A ~ Poisson(μ_full); A <
    :func:`_band_terms` at :data:`MATRIX_CUT`."""
    n_a = _band_terms(mu, MATRIX_CUT)
    lo = int(min(math.floor(lat.cap), n - 1))
    if lo == n - 1:  # every kept state drains: only r·a, a < n_a, is reached
        n = min(n, lat.r * (n_a - 1) + 1)
    lower, upper = min(math.ceil(lat.cap), n - 1), lat.r * (n_a - 1)
    band = Band(n, lower, upper, reuse=True)
    rows = band.rows
    pmf = _matrix_pmf(mu[: lo + 1], n_a)
    if idle:
        pmf[0] = np.eye(n_a)[1]
    q, a = np.meshgrid(np.arange(min(lo + 1, n)), np.arange(n_a), indexing="ij")
    keep = lat.r * a < n
    rows[q[keep], (lat.r * a - q + lower)[keep]] = pmf[: len(q)][keep]
    leaves = np.where(keep, 0.0, pmf[: len(q)]).sum(axis=1)  # the arrivals past the last state
    if lo < n - 1:  # the full states: one row, shifted
        leaves = np.concatenate([leaves, _full_rows(rows, lat, float(mu[-1]), n_a, lo + 1, lower)])
    return band, leaves


def _full_rows(rows: np.ndarray, lat: Lattice, mu: float, n_a: int, first: int, lower: int) -> np.ndarray:
    """Fill the full states' rows (``first`` … n − 1, each the same row shifted: q − ⌊cap⌋ or q − ⌈cap⌉, plus
    r·A) but their jumps past n − 1; the mass each row sends past n − 1."""
    n = len(rows)
    f = lat.cap - math.floor(lat.cap)
    pmf = _matrix_pmf(np.array([mu]), n_a)[0]
    up = lat.r * np.arange(n_a) - math.floor(lat.cap)  # the jump with ⌊cap⌋ served
    jumps, mass = (np.concatenate([up, up - 1]), np.concatenate([(1 - f) * pmf, f * pmf])) if f > 0 else (up, pmf)
    for d, p in zip(jumps, mass, strict=True):  # a jump d lands inside for the rows q < n − d
        rows[first : max(n - d, first), d + lower] += p
    states = np.arange(first, n)
    beyond = np.zeros(len(states))
    for d, p in zip(jumps, mass, strict=True):
        beyond += p * (states + d >= n)
    return beyond


def _matrix_pmf(mu: np.ndarray, n_a: int) -> np.ndarray:
    """P(A = a), a < ``n_a``, for each mean in ``mu`` (rows), with the rest (A ≥ n_a, mass T, Σ a·P(A = a) = m)
    at a = n_a − 1, m/(n_a − 1) in all, the excess over T taken from a = 0: the mass and the mean stay exact (the
    drift, which sets the wait near saturation), the variance falls by under n_a²·T."""
    pmf = _poisson_pmf(mu, n_a)
    rest = np.maximum(1.0 - pmf.sum(axis=1), 0.0)
    rest_sum = np.maximum(np.asarray(mu, dtype=float) - pmf @ np.arange(n_a), 0.0)
    from_zero = np.clip(rest_sum / (n_a - 1) - rest, 0.0, pmf[:, 0])
    pmf[:, 0] -= from_zero
    pmf[:, -1] += rest + from_zero
    return pmf


def _band_terms(mu: np.ndarray, cut: float = PMF_CUT) -> int:
    """Arrivals an iteration reaches: 0 … n_a − 1, where P(A ≥ n_a) < ``cut`` at the largest mean. The chain's
    matrix holds those of :data:`MATRIX_CUT` = 10⁻¹² (:func:`_matrix_pmf` keeps the mass and the mean of the rest,
    which moves TTFT and TPOT by about 10⁻¹¹, and keeps the band r·n_a wide instead of
    r·(μ + 12√μ + 12), a fifth narrower than at 10⁻¹⁶); the band's memory and the excursions' bound count
    those of :data:`PMF_CUT` = 10⁻¹⁶."""
    n_a = _arrival_terms(mu)
    tail = np.cumsum(_poisson_pmf(mu.max(keepdims=True), n_a)[0][::-1])[::-1]  # P(A ≥ a)
    return max(int(np.argmax(tail < cut)) if tail[-1] < cut else n_a, 2)


def _arrival_terms(mu: np.ndarray) -> int:
    """Arrivals an iteration the chain counts: 0 … n_a − 1, 12 standard deviations and 12 above the mean."""
    return int(np.ceil(mu.max() + 12 * np.sqrt(mu.max()) + 12))


def stationary(lat: Lattice, mu: np.ndarray, n_states: int, idle: bool = False) -> tuple[np.ndarray, float]:
    """The chain's stationary law over ``n_states`` units, solved directly (:func:`.banded_chain.banded_stationary`
    on :func:`_transitions`), and the mass a step under it sends beyond the kept states (the truncation's
    leak). ``mu``: the mean arrivals of each state's iteration; ``idle``: the empty queue waits for the next
    request (one arrival), no iteration."""
    band, leaves = _transitions(lat, mu, n_states, idle)
    pi = np.zeros(n_states)
    pi[: band.n] = banded_stationary(band, np.maximum(leaves, 0.0))
    return pi, max(float(pi[: band.n] @ leaves), 0.0)


def _budget_load(dec: Decoding, eng: EngineConfig, req: Requests, rate: float, d: float, K: float, chunked: bool,
                 max_load: float) -> tuple[Lattice, float]:  # fmt: skip
    """The lattice at ``d`` decoders and the load of its full iteration's budget (the prompt tokens that arrive in
    a full iteration, over its budget); a load of ``max_load`` or more raises."""
    P = req.new
    lat = _lattice(P, K, d, dec.width, eng.mixed_prefill, chunked)
    tau_full = float(_times(dec, eng, req, lat, d, int(lat.cap) + 2)[0][-1])
    load = rate * tau_full * P / lat.c
    if load >= max_load:
        detail = f": {lat.c:.0f} prompt tokens per {tau_full * 1e3:.3g} ms iteration"
        raise RateError(rate, lat.c / (P * tau_full), "deployment's prompt budget serves", detail)
    return lat, load


def queue_law(dec: Decoding, eng: EngineConfig, req: Requests, rate: float, d: float, K: float,
              chunked: bool, max_load: float = 1.0) -> QueueLaw:  # fmt: skip
    """The prompt queue's stationary law at ``rate`` requests/s with ``d`` decoders: on the finest lattice (r
    halved from :func:`_lattice`'s) whose first :data:`MAX_STATES` states leave out less than :data:`TAIL`, or
    r = 1 (:func:`_kept_law`); a rate whose prompts load a full iteration's budget to ``max_load`` or more
    raises."""
    P = req.new
    lat, _ = _budget_load(dec, eng, req, rate, d, K, chunked, max_load)
    while True:
        law = _kept_law(dec, eng, req, rate, d, lat)
        if law is not None:
            return law
        r = max(1, lat.r // 2)  # a coarser lattice holds a longer queue
        lat = Lattice(r, lat.c * r / P, lat.c, P / r, False)


def _kept_law(dec: Decoding, eng: EngineConfig, req: Requests, rate: float, d: float, lat: Lattice):
    """The law on ``lat`` over few enough states that the mass above them is under :data:`TAIL`
    (:func:`_mass_above`), at most :func:`_most_states`; there, a leak under :data:`TAIL` (or r = 1) is kept, and
    otherwise None (a coarser lattice). The leak falls geometrically with the states kept, at the rate of
    :func:`_tail_rate` (one random walk above the boundary), which sizes each try (:func:`_next_size`)."""
    times = _times(dec, eng, req, lat, d, MAX_STATES)  # every state above ⌊cap⌋ the same: cut to n below
    mu_full = float(rate * times[0][-1])
    most = _most_states(lat, rate * times[0])
    n = min(most, max(FIRST_STATES, math.ceil(lat.cap) + 2 + 4 * lat.r))
    tried: list[tuple[int, float]] = []
    while True:
        tau, over, decodes = (x[:n] for x in times)
        pi, cut = stationary(lat, rate * tau, n, idle=d == 0)
        last = n >= most and (cut <= TAIL or lat.r == 1)
        if last or _mass_above(lat, rate * tau, cut) <= TAIL:
            return QueueLaw(lat, pi, tau, over, decodes, 1 / rate if d == 0 else 0.0)
        if n >= most:
            return None
        tried.append((n, cut))
        n = min(most, _next_size(tried, lat.r > 1, _tail_rate(lat, mu_full), most))
        if n == 0:
            return None


def _most_states(lat: Lattice, mu: np.ndarray) -> int:
    """:data:`MAX_STATES`, or fewer where the band of that many would hold more than :data:`MAX_BAND` numbers
    (prompts many times the budget: r units a prompt, the arrivals reaching r·n_a units up), at least enough
    for a full iteration and a prompt."""
    width = Band.row_width(math.ceil(lat.cap), lat.r * (_band_terms(mu) - 1))
    return max(min(MAX_STATES, MAX_BAND // width - 1), math.ceil(lat.cap) + 2 + lat.r)


def _mass_above(lat: Lattice, mu: np.ndarray, leak: float) -> float:
    """A bound on the mass the untruncated chain holds above the kept states: flows across a level balance, so it
    is the rate of excursions above (the leak) times their mean length, and an excursion, which starts at most
    ``upper`` units above and ends at most ``lower`` below, drifting down δ = cap − r·μ_full units an iteration,
    lasts at most (upper + lower)/δ iterations on average (Wald's identity)."""
    drift = lat.cap - lat.r * float(mu[-1])
    upper, lower = lat.r * (_band_terms(mu) - 1), math.ceil(lat.cap)
    return leak * (upper + lower) / drift if drift > 0 else math.inf


def _next_size(tried: list[tuple[int, float]], may_skip: bool, theta: float, most: int) -> int:
    """The states to keep next, from the last try's leak and the tail's rate ``theta`` (per state): where the leak
    falls to TAIL/1000 when that is under ``most``; else ``most``, after a try at a third of it when a coarser
    lattice is left (``may_skip``), or 0 (the coarser lattice) where the leak put at ``most`` exceeds TAIL 1000
    times from the first try, 3 times from a later one (measured, the rate extrapolates a try's leak 3,500 states
    on within a factor 2 from 583 states, 12% from 1,200)."""
    n, leak = tried[-1]
    if not theta > 0:
        return most
    at_most = leak * math.exp(-theta * (most - n))
    if may_skip and at_most > (1000 if len(tried) == 1 else 3) * TAIL:
        return 0
    want = n + math.ceil(math.log(TAIL / 1000 / leak) / -theta)
    if want < most:
        return max(want, math.ceil(1.25 * n))
    if may_skip and len(tried) == 1 and n < most // 3:
        return most // 3
    return most


def _tail_rate(lat: Lattice, mu: float) -> float:
    """θ with E[e^(θ·D)] = 1 for a full iteration's step D = r·A − S (A ~ Poisson(μ), S = ⌊cap⌋ or ⌈cap⌉): the
    stationary law of a random walk with negative drift falls as e^(−θ·q) far above its boundary (Cramér), so
    its leak past n states does too. Bisection on the convex log E[e^(θD)], 0 at θ = 0, falling first."""
    fl, f, r = math.floor(lat.cap), lat.cap - math.floor(lat.cap), lat.r

    def log_mgf(t: float) -> float:
        return math.log((1 - f) * math.exp(-t * fl) + f * math.exp(-t * (fl + 1))) + mu * math.expm1(t * r)

    if r * mu >= lat.cap:
        return 0.0
    lo, hi = 0.0, 1.0 / r
    while log_mgf(hi) < 0 and hi < 1e3:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if log_mgf(mid) < 0 else (lo, mid)
    return hi


def _wait_after_boundary(law: QueueLaw, rate: float, P: int, per_state: np.ndarray) -> float:
    """The mean time from the boundary an arrival joins at to the end of its prompt's last iteration, iteration
    times ``per_state`` (τ, or their overhead part): the units ahead of it W (what its iteration left, and the
    requests that came before it in that iteration), then ⌈(W + P')/c⌉ iterations of full budget, the last
    serving its remainder and the mean tokens that came behind it."""
    lat, pi, tau = law.lat, law.pi, law.tau
    time = law.time_s()
    omega = pi * time / float(pi @ time)  # the iteration (or idle wait) a uniform moment falls in
    n = len(pi)
    mu = rate * tau
    n_a = _arrival_terms(mu)
    mixed = _mixed_pmf(mu, n_a)
    if law.idle_s:
        mixed[0] = np.eye(n_a)[0]  # an idle engine: none ahead, it starts at once
    drained, left = _after_service(omega, lat)
    ahead, _ = _spread(left, mixed[-1], lat.r)
    ahead += _arrivals_to(drained, mixed, lat.r, n)
    ahead /= ahead.sum()
    c = lat.c
    tokens = np.arange(n) * lat.unit + P  # its own prompt and the tokens ahead of it
    k = np.ceil(tokens / c - 1e-9)
    residual = _residual(law, tau)
    behind = rate * P * (residual + (k - 1) * tau[-1])
    last = np.minimum(c, tokens - (k - 1) * c + behind)  # tokens the last iteration serves
    lo = int(min(math.floor(lat.cap), n - 1))
    served = np.append(np.arange(lo + 1) * lat.unit, c)
    per = np.append(per_state[: lo + 1], per_state[-1])
    return float(ahead @ ((k - 1) * per_state[-1] + np.interp(last, served, per)))


def _residual(law: QueueLaw, per_state: np.ndarray) -> float:
    """The mean rest of the iteration in flight at a uniform moment (its ``per_state`` part): E[τ·x] / 2E[τ] over
    the time (an idle engine has none to wait for)."""
    busy = law.pi * law.tau * per_state
    if law.idle_s:
        busy[0] = 0.0
    return float(busy.sum()) / (2 * float(law.pi @ law.time_s()))


def _quantile(law: QueueLaw, q: float, a: float) -> float:
    """The ``q`` quantile of a decoding request's inter-token latency: an iteration's τ under π (mixed prefill:
    every iteration decodes), per accepted token."""
    order = np.argsort(law.tau)
    cum = np.cumsum(law.pi[order])
    return float(law.tau[order][min(int(np.searchsorted(cum, q - 1e-12)), len(cum) - 1)]) / a


def _decoders_law(theta: np.ndarray, grid: np.ndarray, rate: float, steps: float, top: int) -> np.ndarray:
    """The law of the decoders' count d = 0 … ``top`` over time: a request joins at rate λ once prefilled and
    leaves after ``steps`` decode iterations, each taking θ(d) seconds with d decoders (interpolated on
    ``grid``), so the count is a symmetric queue whose law does not depend on how the decode lengths spread:
    p(d) ∝ Π_{j ≤ d} λ·steps·θ(j)/j (Kelly, Reversibility and Stochastic Networks, §3.3)."""
    if not rate * steps > 0:  # no decode steps (one output token): never a decoder
        return np.eye(top + 1)[0]
    j = np.arange(1, top + 1, dtype=float)
    th = np.interp(j, grid, theta)  # θ beyond the grid: its last value
    log_p = np.concatenate([[0.0], np.cumsum(np.log(rate * steps * th / j))])
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


def poisson_state(dev: Device | Decoding, eng: EngineConfig, req: Requests, concurrency: float, rate: float,
                  max_resident: int) -> SteadyState:  # fmt: skip
    """Poisson arrivals at ``rate`` requests/s (one replica): the prompt queue's chain (module docstring) at a
    few decoder counts around the mean field's (the desynchronised steady state at ``concurrency``, the mean
    field's concurrency for the rate: :func:`llmath.deploy.serving.rate_to_concurrency`; its ITL quantiles stay
    for prefill-first engines), averaged over the decoders' law (:func:`_decoders_law`). A one-point
    :class:`~llmath.deploy.serving.SteadyState`."""
    from llmath.deploy.serving import _budget

    dec = dev if isinstance(dev, Decoding) else Decoding(dev)
    ss = steady_state(dec, eng, req, [max(concurrency, 1.0)], max_resident)  # Little's C may be below one
    K, chunked = _budget(eng, req)
    a = dec.tokens
    steps = req.decode_steps / a  # decode iterations per request
    d = float(ss.decode_batch[0])
    wide = np.append(max(d, 1.0) * DECODER_GRID, d + 8 * np.sqrt(d) + 8)  # the count's law: many sd each side
    slots = max(round(max_resident - float(ss.resident[0] - ss.decode_batch[0])), 1)  # less the prefilling
    grid = np.unique(np.clip(np.round(wide), 0, slots))
    grid, laws, parts = _laws_on_grid(dec, eng, req, rate, grid, d, K, chunked)
    theta = np.array([law.mean_s / law.decode_share for law in laws])
    p = _decoders_law(theta, grid, rate, steps, int(grid[-1]))
    slot_wait = 0.0
    if grid[-1] >= slots:  # the law reaches the engine's cap: later arrivals wait for a slot
        p, slot_wait = _slot_wait(p, float(theta[-1]), slots, rate, steps, req)
    counts = np.arange(len(p), dtype=float)
    at = lambda x: float(p @ np.interp(counts, grid, x))  # noqa: E731  # a per-law value averaged over p
    mean_d = float(p @ counts)
    tpot = mean_d / (rate * steps) / a if rate * steps > 0 else at(theta) / a
    o_req = active_overheads(dec.dev, eng).served_request_s(req.prompt)
    ttft = o_req + slot_wait + at(np.array([x[0] for x in parts]))
    o_ttft = o_req + at(np.array([x[1] for x in parts]))
    law = laws[int(np.argmin(np.abs(grid - mean_d)))]
    e2e = ttft + req.decode_steps * tpot
    C = rate * e2e
    pre = law.tau != law.tau[0]
    if eng.mixed_prefill:
        itl = [np.array([_quantile(law, q, a)]) for q in (0.5, 0.9, 0.99)]
    else:
        itl = [ss.itl_p50_s, ss.itl_p90_s, ss.itl_p99_s]
    one = lambda x: np.array([float(x)])  # noqa: E731
    mixed_share = float(law.pi[pre].sum())
    o_tpot = at(np.array([float(x.pi @ x.over) / x.decode_share for x in laws])) / a
    return replace(
        ss, concurrency=one(C), resident=one(min(C, max_resident)), ttft_s=one(ttft), tpot_s=one(tpot),
        itl_p50_s=itl[0], itl_p90_s=itl[1], itl_p99_s=itl[2], e2e_s=one(e2e),
        throughput_tok_s=one(rate * req.mean_gen), requests_s=one(rate), decode_batch=one(mean_d),
        prefill_tokens_per_iter=one(law.pi @ (np.minimum(np.arange(len(law.pi)), law.lat.cap) * law.lat.unit)),
        mixed_fraction=one(mixed_share), step_decode_s=one(law.tau[0]),
        step_mixed_s=one(law.pi[pre] @ law.tau[pre] / mixed_share if mixed_share else law.tau[-1]),
        overhead_ttft_s=one(o_ttft), overhead_tpot_s=one(o_tpot),
    )  # fmt: skip


def _laws_on_grid(dec: Decoding, eng: EngineConfig, req: Requests, rate: float, grid: np.ndarray, d: float,
                  K: float, chunked: bool) -> tuple[np.ndarray, list[QueueLaw], list[tuple[float, float]]]:  # fmt: skip
    """The prompt queue's law and first-token parts at each decoder count of ``grid``, up to the first count
    whose budget the rate outgrows (an error at or below the mean field's ``d``)."""
    laws, parts = [], []
    below = grid[grid <= d]
    if len(below):  # the budget shrinks as the decoders grow: refuse at once a rate the mean's budget cannot serve
        _budget_load(dec, eng, req, rate, float(below[-1]), K, chunked, 1.0)
    for j in grid:
        try:  # above the mean, a count that loads the budget to 95% lies far in the law's tail
            law = queue_law(dec, eng, req, rate, float(j), K, chunked, 1.0 if j <= d else FAR_LOAD)
        except WorkloadError:
            if j <= d:  # the prompt budget is short of the rate already at the mean decoders
                raise
            break  # more decoders than the budget leaves room for: a count the law does not reach
        laws.append(law)
        parts.append(_first_token_parts(law, rate, req.new))
    return grid[: len(laws)], laws, parts


def _slot_wait(p: np.ndarray, theta: float, slots: int, rate: float, steps: float, req: Requests):
    """The engine runs at most ``slots`` decoders: beyond, arrivals wait for a slot, which frees at
    slots/(steps·θ) a second, so the count's law goes on geometrically, ratio ρ = λ·steps·θ/slots (the
    Erlang-C construction on the law up to the cap), its wait scaled by (1 + c²)/2 for decode lengths of squared
    coefficient of variation c² (Allen–Cunneen: half the exponential's wait for a fixed length). (The law over
    the running counts 0 … slots, the waiting states' mass at the cap; the mean wait for a slot.)"""
    g, w = req.lengths
    mean = float((g - 1) @ w)
    scv = float(((g - 1) ** 2) @ w) / mean**2 - 1 if mean else 0.0
    rho = rate * steps * theta / slots
    if rho >= 1:
        raise RateError(rate, slots / (steps * theta), "deployment sustains", f" with {slots} decoding at once")
    waiting = p[-1] * rho / (1 - rho)  # Σ_k p(cap)·ρ^k, k ≥ 1
    running = p / (1 + waiting)
    running[-1] += waiting / (1 + waiting)
    queued = p[-1] * rho / (1 - rho) ** 2 / (1 + waiting)  # Σ_k k·p(cap)·ρ^k, normalised
    return running, (1 + scv) / 2 * queued / rate


def _first_token_parts(law: QueueLaw, rate: float, P: int) -> tuple[float, float]:
    """(TTFT less the front end, its engine-overhead part) at this law."""
    t = _residual(law, law.tau) + _wait_after_boundary(law, rate, P, law.tau)
    return t, _residual(law, law.over) + _wait_after_boundary(law, rate, P, law.over)
