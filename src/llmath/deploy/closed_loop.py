"""The closed loop as benchmark clients run it: C requests started together, each replaced when it finishes.

vLLM ``bench serve --max-concurrency C`` (``request_rate`` inf: every request is created at once and a
semaphore of C lets them through), SGLang ``bench_serving --max-concurrency``, AIPerf / GenAI-Perf
concurrency mode and the collectors of published serving tables all start C requests at the same moment and
send a client's next request as soon as its previous one completes, ``prompts_per_client`` times over (the
usual recipe sends 10·C prompts: :data:`PROMPTS_PER_CLIENT`). With fixed lengths the requests stay in step:

* **first wave**: the C prompts (B = min(C, B_max) admitted) queue together; the engine prefills them first
  come first served, each iteration taking the budget its decoders leave (K − D_i·w, D_i the prompts ended
  before it); request j ends its prompt in burst iteration k and its TTFT is the burst iterations up to k.
  The burst is laid out iteration by iteration (:mod:`llmath.deploy.burst`) and timed in three kinds, each
  at its own decoders and chunks: before any prompt has ended (no decoder), full, and the remainder;
* **after it**: requests finish in the order they started, k + G − 1 iterations after their burst started,
  and a follow-up joins after the ``replacement_lag`` iterations already scheduled: the cycle is
  G − 1 + lag + I_s iterations (I_s = ⌈P' / K_e⌉ iterations per prompt, K_e = K − D·w) and a request waits
  for the lag + I_s iterations up to its own, min(k − 1, lag + I_s − 1) of them the burst's iterations ahead
  of it, the rest the previous cycle's decoding. A later wave's burst is a flow: its requests come back as
  fast as the burst ends prompts, so lag·a of them are away and the a + 1 the iteration touches prefill
  (a = T_b / P'): D = B − 1 − a·(1 + lag) decode in it (:func:`llmath.deploy.burst.flow_decoders`). When the
  last prompt of a burst ends within lag iterations of the first, every request has finished before the
  first follow-up is scheduled: the engine idles and takes the wave back whole, so every wave is the first,
  a follow-up having waited for the wave's tail (the requests behind its own still decoding). When the
  cycle's prompt and decode tokens outlast a lifetime of K-token iterations, every iteration prefills and a
  request waits n_w − (G − 1) iterations for budget (the token-budget-bound regime, K·(G − 1) /
  (P' + (G − 1)·w) requests decoding in each);
* **TPOT** (per request (e2e − TTFT)/(G − 1), then the mean, as the clients compute it): a request decodes
  through every burst iteration outside its wait (the full ones and the remainder, each at its own cost),
  the rest are pure decode of all B requests (τ_d); a request does not decode in its own prefill iterations;
* the benchmark's mean TTFT is the first wave's with weight 1/m and the following waves' with weight
  1 − 1/m (m prompts per client); requests beyond B_max wait in the engine's queue, a freed place taking its
  head at once (C ≥ 3B: :mod:`llmath.deploy.capped_loop`; B < C < 3B, where the groups that end together
  split apart from cycle to cycle: the admission recurrence of :mod:`llmath.deploy.shallow_queue`).

When the output lengths vary (a length distribution: benchmark clients' ``--random-range-ratio`` draws them
uniformly from [⌊r·G⌋, G]), the first wave still starts together, but its requests finish after different
numbers of tokens and their follow-ups arrive out of step, but bunched: :mod:`llmath.deploy.drifting_loop`.

An engine that runs prefill batches first (SGLang without ``--enable-mixed-chunk``: a waiting prompt is
prefilled before the running requests decode again) keeps no groups apart: no request decodes while another
waits for its prefill, so the C requests started together start decoding in the same iteration, finish in the
same iteration and come back together, into an idle engine. Every wave is then the first: request j of it
has its first token at the end of batch k = ⌈(j + 1)·P' / T_b⌉ of the n_b = ⌈n_w⌉ prefill batches (a prompt
chunked over several batches ends in its last) and decodes after all of them, so its TPOT carries the n_b − k
batches after its own, and the decoding iterations carry no prefill.

Every request reaches the scheduler the front-end time o_req after its client sends it, and its TTFT runs
from the send (docs/serving.md, "Closed forms against the simulation"): a wave sent into an idle engine
waits o_req; a follow-up sent while the engine runs joins after max(lag, ⌈o_req / τ_d⌉) iterations.

A mean-field account of an exact iteration simulation (:func:`llmath.deploy.simulate.simulate` with
``arrival="closed"``): the tests bound the difference. Engines whose budget is unbounded (no chunking)
prefill whole prompts; the prefill-only pass of a group then is one iteration of B·P' tokens.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from llmath.deploy.admission_holds import after_poll, hold_s
from llmath.deploy.burst import flow_decoders, wave_kinds
from llmath.deploy.capped_loop import cycle_time, deep_queue, queued_cycles
from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.prefill_first import boundary_wait
from llmath.deploy.replacement import joined_passes, staggered_wait
from llmath.deploy.serving import (
    Decoding,
    Requests,
    SteadyState,
    _budget,
    _overheads,
    _quantiles,
    active_overheads,
    steady_state,
)
from llmath.deploy.shallow_queue import shallow_capped
from llmath.deploy.step import Device
from llmath.deploy.workload import PROMPTS_PER_CLIENT
from llmath.errors import WorkloadError

STAGGERED_PASSES = 3  # fixed-point passes of the requests in the engine (o_req ≪ e2e: the first is close)


def prefill_burst(eng: EngineConfig, req: Requests, B: np.ndarray, w: float, steps: float) -> tuple:
    """The prefill burst of B requests in step: (group that finishes together, decoding requests in a burst
    iteration, prompt tokens T_b per burst iteration, burst iterations n_w, iterations I_s one prompt spans,
    chunks per burst iteration, their size, their mean cached prefix). When the cycle's prompt and decode
    tokens, B·(P' + (G − 1)·w), outlast a lifetime of K-token iterations (token-budget-bound: every
    iteration prefills, the prompts queue for budget), a request decodes (G − 1) of the B·(P' + (G − 1)·w) / K
    iterations of its cycle, so K·(G − 1) / (P' + (G − 1)·w) requests decode in each."""
    Pn, (K, chunked) = float(req.new), _budget(eng, req)
    group = np.minimum(B, np.maximum(np.floor(K / Pn), 1.0)) if np.isfinite(K) else B
    d_burst = np.maximum(B - group, 0.0) if eng.mixed_prefill else np.zeros_like(B)  # decoding meanwhile
    bound = B * (Pn + steps * w) > K * (steps + eng.replacement_lag + np.ceil(Pn / K))
    d_burst = np.where(bound & chunked, np.minimum(d_burst, K * steps / (Pn + steps * w)), d_burst)
    K_e = np.maximum(K - d_burst * w, 1.0) if chunked else np.full_like(B, np.inf)
    T_b = np.minimum(K_e, B * Pn) if chunked else group * Pn
    n_w = B * Pn / T_b  # iterations of prefill work per cycle
    I_s = np.maximum(1.0, np.ceil(Pn / K_e)) if chunked else np.ones_like(B)
    n_c = np.maximum(T_b / Pn, 1.0)  # chunks in a burst iteration
    chunk = T_b / n_c
    return group, d_burst, T_b, n_w, I_s, n_c, chunk, req.cached + np.maximum(Pn - chunk, 0.0) / 2


def lockstep_state(
    dev: Device | Decoding,
    eng: EngineConfig,
    req: Requests,
    concurrency,
    max_resident: int,
    prompts_per_client: float = PROMPTS_PER_CLIENT,
    replace: bool = True,
) -> SteadyState:
    """The benchmark clients' closed loop at each concurrency (numpy array; module docstring).
    ``replace=False``: offline, the C requests queued at once and none sent after them (one wave; the queued
    ones wait for the cycles ahead of them, :func:`~llmath.deploy.capped_loop.queued_cycles`)."""
    dec = dev if isinstance(dev, Decoding) else Decoding(dev)
    C = np.asarray(concurrency, dtype=float)
    if np.any(C < 1):
        raise WorkloadError(f"concurrency={concurrency!r} must be >= 1")
    if not prompts_per_client >= 1:
        raise WorkloadError(f"prompts_per_client={prompts_per_client!r} must be >= 1")
    steps = req.decode_steps / dec.tokens
    B = np.minimum(C, max_resident)
    mixed = eng.mixed_prefill
    group, d_burst, T_b, n_w, I_s, n_c, chunk, pre = prefill_burst(eng, req, B, dec.width, steps)
    ctx = req.decode_context
    o_m, o_d, o_req = _overheads(dec, eng, req, B, d_burst)
    if mixed:  # the burst iterations by kind, each at its own decoders and chunks (module llmath.deploy.burst)
        waves = _waves(dec, eng, req, (C, B), d_burst, o_req)
        lag, (d_burst, T_b, n_w, I_s), first_wave, (tau_b, part_b), (tau_d, tau_t) = waves
        o_m = _overheads(dec, eng, req, B, d_burst)[0]
    else:
        (tau_b,), (tau_d,) = dec.mixed_and_step(d_burst[None], B[None], ctx, n_c[None], chunk[None], pre[None])
        tau_b, tau_d = tau_b + o_m, tau_d + o_d
    # iterations per cycle; prefill-first batches stop the decoders, so they add to a request's lifetime
    L = np.maximum(n_w, steps + I_s) if mixed else steps + n_w
    tau_c = (np.minimum(n_w, L) * tau_b + (L - np.minimum(n_w, L)) * tau_d) / L  # the cycle's mean iteration
    m = float(prompts_per_client) if replace else 1.0
    if mixed:
        cycle_args = (lag, req, B, steps, T_b, n_w, I_s, (tau_b, part_b, tau_d), (*first_wave, tau_t))
        ttft, wait, step_s, seen = _mixed_cycle(*cycle_args, m, o_req)
        # beyond the cap the queue refills every place the moment it frees (module llmath.deploy.capped_loop)
        wave_1 = _mixed_cycle(*cycle_args, 1.0, o_req)[::2]  # the first wave's (TTFT, decode iteration)
        queued = deep_queue((C, B, m), req, steps, (n_w, T_b, I_s, L), (tau_b, part_b, tau_d), wave_1)
        ttft, step_s = np.where(C > B, queued[0], ttft), np.where(C > B, queued[1], step_s)
        cycle_s, whole_1 = cycle_time(n_w, L, (tau_b, part_b, tau_d)), first_wave[2]
    else:  # prefill-first: nobody decodes while a prompt waits, so every wave comes back whole (module docstring)
        k_mean, first, whole_s = _burst_positions(B, float(req.new), T_b, n_w, tau_b, np.zeros_like(tau_b))
        wait, seen = k_mean, np.maximum(np.ceil(n_w - 1e-9), 1.0) - k_mean  # batches up to its own; after it
        step_s = (whole_s - first + steps * tau_d) / np.maximum(steps, 1e-9)
        # every wave, the first included, comes into an idle engine; the queue drains B per cycle of L iterations
        ttft = first + o_req + queued_cycles(C, B, m) * L * tau_c
        lag, cycle_s, whole_1 = joined_passes(eng, o_req, tau_d), L * tau_c, whole_s
    # between B and 3B clients the queue's transient (module llmath.deploy.shallow_queue); offline, the span
    ttft, step_s, span = shallow_capped(dec, eng, req, (C, B, m), lag, (ttft, step_s), (whole_1, cycle_s, tau_d))
    e2e = ttft + steps * step_s
    a, q = dec.tokens, seen / np.maximum(steps, 1e-9)
    o_ttft = wait * o_m + o_req
    o_tpot = (q * o_m + (1 - q) * o_d) / a
    p50, p90, p99 = _quantiles((0.5, 0.9, 0.99), q, 1.0, tau_b / a, tau_b / a, tau_d / a)
    rps = C / e2e if replace else C / span  # Little's law (C in flight); offline: C by the time the last ends
    return SteadyState(C, B, ttft, step_s / a, p50, p90, p99, e2e, rps * req.mean_gen, rps, B - group,
                       T_b, np.minimum(n_w / L, 1.0), tau_d, tau_b, o_ttft, o_tpot)  # fmt: skip


EXACT_POSITIONS = 32  # burst iterations summed one by one; beyond, the arithmetic mean of the floor


def iterations_ahead(m, B, Pn: float, T_b):
    """E[min(k − 1, m)] over the B requests of a burst, k the burst iteration that ends a request's prompt:
    request j (0-based, first come first served) ends it in iteration ⌈(j + 1)·P' / T_b⌉, so ⌊i·T_b / P'⌋ of
    them have by the end of iteration i and E[min(k − 1, m)] = Σ_{i=1..m} (1 − min(B, ⌊i·T_b / P'⌋) / B)."""
    a, most = T_b / Pn, float(m.max())
    top = int(min(most, EXACT_POSITIONS))
    i = np.arange(1.0, top + 1.0).reshape((-1,) + (1,) * m.ndim)
    exact = ((i <= m) * (1 - np.minimum(B, np.floor(i * a + 1e-9)) / B)).sum(axis=0)
    if most <= top:
        return exact
    n = np.maximum(np.floor(np.minimum(m, (B + 0.5) / a)) - top, 0.0)  # the rest, ⌊x⌋ ≈ x − 1/2
    return exact + n * (1 + 0.5 / B) - a / B * n * (2 * top + n + 1) / 2


def _burst_positions(B, Pn: float, T_b, n_w, tau_x, tau_base) -> tuple:
    """A burst of B·P' prompt tokens in n_b = ⌈n_w⌉ iterations of T_b tokens at τ_x each, the last carrying the
    remainder (n_w − n_b + 1)·T_b, its time interpolated between ``tau_base`` and τ_x by its tokens; request j
    ends its prompt in iteration k = ⌈(j + 1)·P' / T_b⌉ (:func:`iterations_ahead`): (E[k], the mean time of the burst
    iterations up to a request's own, the burst's time)."""
    n_b = np.maximum(np.ceil(n_w - 1e-9), 1.0)
    last = 1 - np.minimum(B, np.floor((n_b - 1) * T_b / Pn + 1e-9)) / B  # share ending in the last iteration
    part = tau_base + (n_w - (n_b - 1)) * (tau_x - tau_base)
    k_mean = 1 + iterations_ahead(n_b - 1, B, Pn, T_b)
    return k_mean, (k_mean - last) * tau_x + last * part, (n_b - 1) * tau_x + part


def _mixed_cycle(lag, req: Requests, B, steps, T_b, n_w, I_s, taus: tuple, first_wave: tuple, m: float, o_req):
    """Mixed prefill in lockstep (module docstring): (mean TTFT, the mean TTFT wait in iterations, the mean
    decode iteration, the prefill iterations a request decodes through) over the clients' waves.

    A later wave's burst of B·P' prompt tokens takes n_b = ⌈n_w⌉ iterations, full ones at τ_b and the
    remainder at its own cost; the first wave's (``first_wave``) is laid out by kind (:func:`_wave_times`):
    E[k], the mean burst time up to a request's own iteration, the whole burst, its iterations, those up to the
    first prompt's end, and the tail iteration after a request's end. Request j's
    follow-up is sent when it finishes, k + G − 1 iterations after the burst began, and joins the first
    iteration after the ``lag`` iterations already scheduled and after its front-end time o_req
    (lag = max(replacement_lag, ⌈o_req / τ_d⌉): the front end runs while the engine iterates): the cycle is
    G − 1 + lag + I_s iterations and a request waits for the lag + I_s iterations up to its own,
    min(k − 1, lag + I_s − 1) of them the burst's (full) iterations ahead of it, the rest the previous cycle's
    decode; it decodes through every other burst iteration. When the first wave's last prompt ends within lag
    iterations of its first every request has finished before the first follow-up is scheduled: the engine
    idles and takes the wave back whole, so every wave is the first (request k waits for the k burst
    iterations up to its own and decodes through the n_b − k after it), its follow-up sent at its end and
    taken back after the n_b − k tail iterations of the requests behind it, and not before o_req.
    A burst longer than the cycle is token-budget-bound: every iteration prefills."""
    tau_b, part_b, tau_d = taus
    Pn = float(req.new)
    n_b = np.maximum(np.ceil(n_w - 1e-9), 1.0)
    k_mean, first, whole_f, n_b1, to_first, tau_t = first_wave  # to_first: iterations up to the first prompt's end
    S = iterations_ahead(lag + I_s - 1, B, Pn, T_b)  # the burst iterations ahead of a request in its wait
    last = 1 - np.minimum(B, np.floor((n_b - 1) * T_b / Pn + 1e-9)) / B
    own = (1 - last) * tau_b + last * part_b
    whole = n_b1 - to_first <= lag
    back = (n_b1 - k_mean) * tau_t + np.maximum(o_req - (n_b1 - to_first) * tau_t, 0.0)  # sent to taken back
    later = np.where(whole, first + back, S * tau_b + (lag + I_s - 1 - S) * tau_d + own)
    seen_s = np.where(whole, whole_f - first, (n_b - 1 - S) * tau_b + part_b - own)
    seen = np.where(whole, n_b1 - k_mean, n_b - 1 - S)
    wait = np.where(whole, k_mean, lag + I_s)
    bound = n_b > steps + lag + I_s  # token-budget-bound: every iteration prefills
    if bound.any():  # the follow-up's lag is spent in the queue; it decodes in prefilling iterations only
        wait = np.where(bound, np.maximum(n_w - steps, I_s), wait)
        later = np.where(bound, wait * tau_b, later)
        seen = np.where(bound, np.clip(n_w - I_s, 0.0, steps), seen)
        seen_s = np.where(bound, seen * tau_b, seen_s)
    seen = np.minimum(seen, steps)
    seen_1 = np.minimum(n_b1 - k_mean, steps)  # the first wave decodes through the burst after its own
    after = (whole_f - first) / np.maximum(n_b1 - k_mean, 1e-9)
    seen_1s = np.where(seen_1 < n_b1 - k_mean, seen_1 * after, whole_f - first)
    step_s = (seen_s + (steps - seen) * tau_d) / max(steps, 1e-9)
    step_1 = (seen_1s + (steps - seen_1) * tau_d) / max(steps, 1e-9)
    ttft = (1 - 1 / m) * later + (1 / m) * (first + o_req)
    w = 1 / m
    return ttft, (1 - w) * wait + w * k_mean, (1 - w) * step_s + w * step_1, (1 - w) * seen + w * seen_1


def _flow(eng: EngineConfig, req: Requests, B, w: float, away: tuple, cap) -> tuple:
    """A later wave's burst as a flow (:func:`llmath.deploy.burst.flow_decoders`, ``away``: the lag and the
    requests queued): (decoders in a full burst iteration, prompt tokens T_b in it, burst iterations
    n_w = B·P' / T_b, iterations I_s one prompt spans)."""
    Pn, (K, chunked) = float(req.new), _budget(eng, req)
    D = flow_decoders(B, Pn, K, chunked, w, away[0], cap, queued=away[1])
    if not chunked:  # whole prompts: those that fit beside the decoders, one at least
        T_b = np.minimum(np.maximum(np.floor((K - D * w) / Pn), 1.0), B) * Pn if np.isfinite(K) else B * Pn
        return D, T_b, B * Pn / T_b, np.ones_like(T_b)
    T_b = np.minimum(np.maximum(K - D * w, 1.0), B * Pn)
    return D, T_b, B * Pn / T_b, np.maximum(1.0, np.ceil(Pn / np.maximum(K - D * w, 1.0)))


def _waves(dec: Decoding, eng: EngineConfig, req: Requests, CB: tuple, cap, o_req) -> tuple:
    """The bursts by kind (:func:`llmath.deploy.burst.wave_kinds`), each at its own decoders and chunks with its
    decoders' per-token overhead, the pure decode iteration and the wave's tail, in one evaluation: (the lag, a
    later wave's flow (:func:`_flow`), the first wave's times (:func:`_wave_times`), a later wave's (full
    iteration, last iteration), (τ_d, τ_t)). A follow-up joins the first iteration after the lag and after its
    front end, lag = max(replacement_lag, ⌈o_req / τ_d⌉) (docs/serving.md); the first of a wave ends in the
    decode iterations and those behind it queue that long, so a later wave's decoders (``cap`` at most) follow
    from τ_d: they are laid out at the replacement lag, and re-timed where the front end's lag moves them."""
    (C, B), Pn, (K, chunked), w = CB, float(req.new), _budget(eng, req), dec.width
    first = wave_kinds(B, Pn, float(req.cached), K, chunked, w, life=req.decode_steps / dec.tokens)
    guess = _flow(eng, req, B, w, (float(eng.replacement_lag), C - B), cap)
    kinds = (*first, *wave_kinds(B, Pn, float(req.cached), K, chunked, w, guess[0])[1:])
    _, full, last = first
    d_tail = B - (full.count * full.decoders + last.count * last.decoders) / np.maximum(full.count + last.count, 1e-9)
    d = np.stack(np.broadcast_arrays(B, np.maximum(d_tail, 1.0)))
    d_k, n_k, c_k, pf_k = _stacked(kinds)
    tau, tau_s = dec.mixed_and_step(d_k, d, req.decode_context, n_k, c_k, pf_k)
    tau_d, tau_t = tau_s + _overheads(dec, eng, req, d, 0.0)[1]
    lag = joined_passes(eng, o_req, tau_d)
    flow = _flow(eng, req, B, w, (lag, C - B), cap)
    moved = np.broadcast_to(flow[0] != guess[0], np.shape(B))
    if moved.any():  # the front end outlasts the lag: those points' later wave, laid out and timed again
        later = wave_kinds(B, Pn, float(req.cached), K, chunked, w, flow[0])[1:]
        d_l, n_l, c_l, pf_l = (x[..., moved] for x in _stacked(later))
        tau = tau.copy()
        tau[3:][..., moved] = dec.select(moved).mixed(d_l, req.decode_context, n_l, c_l, pf_l)
        kinds = (*first, *later)
    tau = tau + _overheads(dec, eng, req, B, _stacked(kinds)[0])[0]
    return lag, flow, _wave_times(first, tau), (tau[3], tau[4]), (tau_d, tau_t)


def _stacked(kinds: tuple) -> tuple:
    """The kinds' mean decoders, chunks, chunk sizes and prefixes, each stacked along a leading axis."""
    return tuple(np.stack(np.broadcast_arrays(*(getattr(k, f) for k in kinds))) for f in _LAYOUT)


def _wave_times(first: tuple, tau) -> tuple:
    """The first wave's burst (``first``, its kinds timed in ``tau[:3]``): (E[k], the mean time up to a
    request's own iteration, the whole burst, its iterations, those up to the first prompt's end)."""
    upto, whole = (sum(getattr(k, f) * t for k, t in zip(first, tau[:3], strict=True)) for f in ("upto", "count"))
    head, _, last = first
    to_first = head.count + (last.decoders < 0.5)  # the iterations up to the first prompt's end (D = 0 in them)
    return sum(k.upto for k in first), upto, whole, sum(k.count for k in first), to_first


_LAYOUT = ("decoders", "chunks", "size", "prefix")


def in_step(req: Requests) -> bool:
    """Whether the clients' requests stay in step: every request has the same output length."""
    return len({g for g, _ in req.gen_dist}) <= 1


def staggered_state(
    dev: Device | Decoding, eng: EngineConfig, req: Requests, concurrency, max_resident: int, steady=None
):
    """C clients out of step, each request replaced as it finishes: the desynchronised steady state
    (:func:`llmath.deploy.serving.steady_state`) plus the replacement's wait for an iteration boundary. It is sent just
    after the iteration that finished its predecessor and reaches the scheduler the engine's per-request front-end time
    o_req later, and waits for the iteration that takes it in (:func:`staggered_wait`, over the mixed and pure-decode
    iterations), with the scheduler's next poll when it takes requests in only every ``recv_interval`` iterations
    (:func:`.admission_holds.after_poll`), then for as long as TensorRT-LLM's batch waiting or attention-DP balancing
    holds its prompt (:func:`.admission_holds.batch_wait_iterations`, :func:`.admission_holds.adp_balance_iterations`;
    off by default), unless the engine is idle: no other request is in it, (o_req / e2e)^(C − 1). The requests in the
    front end or waiting for a boundary are not in the batch: the steady state runs at C·(e2e − o_req) / (e2e + wait)
    requests in the engine (fixed-point passes); throughput C·G / e2e. ``steady``: the steady state it builds on
    (default :func:`.serving.steady_state`, a prefill-first engine's follow-ups then sent at a pass boundary:
    :func:`.prefill_first.boundary_wait`)."""
    at_boundary = steady is None and not eng.mixed_prefill
    steady = steady or steady_state
    dec = dev if isinstance(dev, Decoding) else Decoding(dev)
    C = np.asarray(concurrency, dtype=float)
    o_req = active_overheads(dec.dev, eng).served_request_s(req.prompt)
    inside, wait = C, 0.0
    for _ in range(STAGGERED_PASSES):  # the requests in the front end or waiting for a boundary are not batched
        ss = steady(dec, eng, req, inside, max_resident)
        f, t_m, t_d, mean = ss.mixed_fraction, ss.step_mixed_s, ss.step_decode_s, ss.mean_iteration_s
        if at_boundary:
            wait = boundary_wait(eng, o_req, mean, t_d)
        else:
            wait = staggered_wait(eng, o_req, mean, f * t_m**2 + (1 - f) * t_d**2)
        wait = after_poll(wait, 0.0, eng, ss) + hold_s(dec, eng, req, ss, mean)
        busy = 1 - (o_req / ss.e2e_s) ** (C - 1)  # another request is in the engine when it arrives
        wait = wait * busy
        inside = np.maximum(C * (ss.e2e_s - o_req) / (ss.e2e_s + wait), 1.0)
    o_m, o_d, _ = _overheads(dec, eng, req, ss.resident, ss.decode_batch)
    e2e = ss.e2e_s + wait
    rps = C / e2e
    o_wait = wait / mean * (f * o_m + (1 - f) * o_d)
    # in flight per replica: the clients' requests the engine admits (its own batch is ``decode_batch``)
    return replace(ss, concurrency=C, resident=np.minimum(C, max_resident), ttft_s=ss.ttft_s + wait, e2e_s=e2e,
                   throughput_tok_s=rps * req.mean_gen, requests_s=rps,
                   overhead_ttft_s=ss.overhead_ttft_s + o_wait)  # fmt: skip
