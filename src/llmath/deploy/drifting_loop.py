"""The closed loop (:mod:`llmath.deploy.closed_loop`) when the output lengths vary: a length distribution, as
benchmark clients' ``--random-range-ratio`` draws them uniformly from [⌊r·G⌋, G].

The first wave still starts together, but its requests finish after different numbers of tokens and their
follow-ups arrive out of step, but bunched: wave n is sent after n drawn lengths, and the clients whose sums
coincide send in the same iteration. :func:`drifting_state` weighs the first wave in lockstep
(:func:`llmath.deploy.closed_loop.lockstep_state`) and each later wave (its clumps' prefill, the earlier senders'
backlog, the queue beyond B_max) 1/m each; the decoding is the steady state's
(:func:`llmath.deploy.closed_loop.staggered_state`).
"""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np

from llmath.deploy.admission_holds import after_poll, hold_s, window_arrivals
from llmath.deploy.capped_loop import queue_wait, transit_s
from llmath.deploy.closed_loop import iterations_ahead, lockstep_state, prefill_burst, staggered_state
from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.replacement import joined_passes
from llmath.deploy.serving import (
    Decoding,
    Requests,
    SteadyState,
    _budget,
    _overheads,
    active_overheads,
    mixed_steady_state,
)
from llmath.deploy.step import Device
from llmath.deploy.workload import PROMPTS_PER_CLIENT
from llmath.errors import WorkloadError


def drifting_state(
    dev: Device | Decoding,
    eng: EngineConfig,
    req: Requests,
    concurrency,
    max_resident: int,
    prompts_per_client: float = PROMPTS_PER_CLIENT,
) -> SteadyState:
    """The closed loop with output lengths that vary (module docstring): the C requests started together are
    one wave in lockstep (:func:`lockstep_state` with one prompt per client); each finishes after its own
    number of tokens, so the follow-ups arrive out of step (:func:`staggered_state`), but bunched: a client's
    n-th request is sent after its first prompt's end and n drawn lengths, so clients whose sums coincide send
    together (:func:`_collisions`) and a request waits for its clump's prefill and the earlier senders' rest
    (:func:`_clump`). The clients' means over every request weigh each wave 1/m (m prompts per client);
    throughput C·E[G]/e2e."""
    if not prompts_per_client >= 1:
        raise WorkloadError(f"prompts_per_client={prompts_per_client!r} must be >= 1")
    dec = dev if isinstance(dev, Decoding) else Decoding(dev)
    C = np.asarray(concurrency, dtype=float)
    if C.ndim == 0:  # one concurrency: the same state, each field a scalar
        ss = drifting_state(dec, eng, req, C[None], max_resident, prompts_per_client)
        return replace(ss, **{f.name: np.asarray(getattr(ss, f.name))[0] for f in fields(ss)})
    first = lockstep_state(dec, eng, req, C, max_resident, 1.0)
    # the clumps' passes are priced below, prefill-first or mixed (_clump, _wave_decoding); the wait for a boundary
    # counts passes of the mixed steady state's mean, which the simulation bounds in tests/test_closed_loop.py hold
    # with (a prefill-first engine's shorter mean pass puts its TTFT 8% below the simulation's at 256 clients)
    uniform = staggered_state(dec, eng, req, C, max_resident, steady=mixed_steady_state)
    m = float(prompts_per_client)
    n = np.arange(1.0, min(np.ceil(m - 1e-9), MAX_WAVES + 1.0))  # the later waves
    if not n.size:
        return first
    share = np.minimum(1.0, m - n)
    share[-1] += m - 1 - share.sum()  # waves beyond MAX_WAVES as the last
    B = np.minimum(C, max_resident)
    # the first wave's prompts end over its burst's iterations; prefill-first, its requests decode together
    n_w = prefill_burst(eng, req, B, dec.width, req.decode_steps / dec.tokens)[3]
    starts = np.maximum(np.ceil(n_w - 1e-9), 1.0) if eng.mixed_prefill else np.ones_like(B)
    Pn, (K, chunked) = float(req.new), _budget(eng, req)
    apart = int(min(np.ceil(Pn / max(K - float(np.max(B)) * dec.width, 1.0)), MAX_APART)) if chunked else 1
    R = _collisions(req, dec.tokens, n, starts, max(apart, 1))
    P = R[..., 0]
    wave_ttft, per_prompt = _clump(dec, eng, req, (C, B), (1 + (C - 1) * P, (C - 1)[..., None] * R[..., 1:]), uniform)
    first_tpot, wave_tpot, tail = _wave_decoding(dec, eng, req, (B, P, per_prompt), first, uniform)
    # beyond B_max the C − B requests queue for a place (Little's law: llmath.deploy.capped_loop.queue_wait)
    held = wave_ttft + wave_tpot * req.decode_steps
    wave_ttft = wave_ttft + queue_wait((C, B), held, transit_s(eng, active_overheads(dec.dev, eng), req, uniform))
    ttft = (first.ttft_s + (share[:, None] * wave_ttft).sum(axis=0)) / m
    tpot = (first_tpot + (share[:, None] * wave_tpot).sum(axis=0) - tail) / m
    e2e = ttft + tpot * req.decode_steps
    rps = C / e2e
    return replace(uniform, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, throughput_tok_s=rps * req.mean_gen,
                   requests_s=rps, overhead_ttft_s=(first.overhead_ttft_s + (m - 1) * uniform.overhead_ttft_s) / m,
                   overhead_tpot_s=(first.overhead_tpot_s + (m - 1) * uniform.overhead_tpot_s) / m)  # fmt: skip


MAX_WAVES = 32  # later waves laid out one by one; the rest as the last (its sends spread as √n)


def _wave_decoding(dec: Decoding, eng: EngineConfig, req: Requests, clumps: tuple, first, uniform) -> tuple:
    """(the first wave's TPOT, a later wave's, what the last wave lacks): a decoder waits through the prefill
    of every other request once per cycle, bunched or not, so a later wave decodes as the steady state
    (prefill-first: a pure decode step plus the B − 1 others' prefill iterations, ``per_prompt`` each, over
    G − 1 steps, where the steady state prices a prefill as a mixed iteration); the first wave decodes through
    the follow-ups of the clients that finished before it and the last wave through its later senders only,
    (1 − P) / 2 of the others each, P the probability that two send together."""
    B, P, per_prompt = clumps
    cycle = (B - 1) * per_prompt / max(req.decode_steps / dec.tokens, 1e-9) / dec.tokens
    half = (1 - P) / 2 * cycle
    mid = uniform.tpot_s if eng.mixed_prefill else uniform.step_decode_s / dec.tokens + cycle
    return first.tpot_s + half[0], np.broadcast_to(mid, P.shape), (cycle - half)[-1]


def _collisions(req: Requests, tokens: float, n, starts, apart: int = 1):
    """Probability that two clients send their n-th requests (n: a vector of waves) δ = 0 … ``apart`` − 1
    iterations apart, one after the other: a client's n-th request is sent after its first prompt's end
    (uniform over ``starts`` burst iterations; one when the wave starts decoding together) and n lifetimes of
    G_i − 1 decode iterations, i.i.d. over the lengths' distribution (benchmark clients draw each request's
    length apart), so two clients' counts differ by δ with probability Σ_t q_n(t)·q_n(t + δ), q_n the
    distribution of the sum; by Parseval, (1/N)·Σ_k |ĝ(k)|^(2n)·|û(k)|²·cos(kδ) over N points beyond the
    sum's range (û: the uniform start's Dirichlet kernel), for every concurrency at once: (waves, C, δ)."""
    g, p = req.lengths
    pmf = np.bincount(np.round((g - g.min()) / tokens).astype(int), weights=p)
    u = np.atleast_1d(np.asarray(starts, dtype=float)).ravel()[:, None]
    var = float(np.arange(len(pmf)) ** 2 @ pmf - (np.arange(len(pmf)) @ pmf) ** 2)
    exact = n <= max(COLLISION_POINTS // (len(pmf) + 1), 1)  # beyond: the local limit, normal
    size = int(2 ** np.ceil(np.log2(n[exact].max(initial=0.0) * (len(pmf) - 1) + u.max() + apart + 1)))
    k = 2 * np.pi * np.arange(size) / size
    half = np.sin(k / 2)
    safe = np.where(half > 1e-12, half, 1.0)
    dirichlet = np.where(half > 1e-12, np.sin(u * k / 2) / (u * safe), 1.0) ** 2  # |û(k)|², one row per C
    power = np.abs(np.fft.fft(pmf, size)) ** 2  # |ĝ(k)|²
    delta = np.arange(float(apart))
    shift = np.cos(k[:, None] * delta[None, :]) / size
    near = [(dirichlet * power**w) @ shift for w in n[exact]]
    var_n = 2 * (n[~exact][:, None, None] * var + (u[None, :, :] ** 2 - 1) / 12)  # of the difference
    far = np.exp(-(delta**2) / (2 * var_n)) / np.sqrt(2 * np.pi * var_n)
    out = np.concatenate([np.reshape(near, (-1, len(u), apart)), np.minimum(far, 1.0)])
    return out.reshape((len(n), *np.shape(starts), apart))


COLLISION_POINTS = 1 << 13  # the largest sum's range laid out exactly
MAX_APART = 64  # iterations of one prompt's prefill over which the earlier senders' chunks are counted


def _clump(dec: Decoding, eng: EngineConfig, req: Requests, CB: tuple, together, uniform: SteadyState) -> tuple:
    """(TTFT, the decoders' time per prompt) of a request sent at the end of the iteration that finished its
    predecessor, ``together`` = (c, the others sent δ = 1, 2, … iterations before it): c − 1 others are sent at the same
    boundary (an engine that polls every N iterations prefills those sent over its window together, at least
    :func:`window_arrivals` of them). It reaches the scheduler o_req later and, unless the engine is idle ((o_req /
    e2e)^(C − 1), :func:`staggered_state`), joins after max(lag, ⌈o_req / τ̄⌉) iterations of the steady state's mean τ̄
    (already scheduled; a poll's wait: :func:`.admission_holds.after_poll`); the prompts sent δ iterations before it
    have δ·K_e tokens done and it waits for the rest; the c prompts are prefilled first come first served in iterations
    of the budget the decoders leave (prefill-first: the whole budget, no decoder), request j of them ending in
    iteration ⌈(j + 1)·P' / K_e⌉ (:func:`iterations_ahead`), each iteration carrying its share of the c chunks. The
    decoders lose those iterations' time (prefill-first) or their excess over a decode iteration (mixed), 1/c of it per
    prompt."""
    C, B = CB
    together, earlier = together
    Pn, (K, chunked) = float(req.new), _budget(eng, req)
    tau = uniform.mean_iteration_s
    o_req = active_overheads(dec.dev, eng).served_request_s(req.prompt)
    idle = (o_req / uniform.e2e_s) ** (C - 1)
    joined = joined_passes(eng, o_req, tau) * tau
    waited = (1 - idle) * (after_poll(joined, o_req, eng, uniform) + hold_s(dec, eng, req, uniform, tau))
    waited = waited + idle * o_req
    c = np.minimum(np.maximum(together, window_arrivals(eng, uniform)), B)
    d = np.maximum(B - c, 0.0) if eng.mixed_prefill else np.zeros_like(c)
    K_e = np.maximum(K - d * dec.width, 1.0 if chunked else Pn)  # whole prompts: one at least
    T = np.minimum(K_e, c * Pn) if chunked else np.maximum(np.floor(np.minimum(K_e, c * Pn) / Pn), 1.0) * Pn
    n_it = np.maximum(np.ceil(c * Pn / T - 1e-9), 1.0)
    k_mean = 1 + iterations_ahead(n_it - 1, c, Pn, T)
    chunks = np.maximum(T / Pn, 1.0)
    tau_c = dec.mixed(d, req.decode_context, chunks, T / chunks, req.cached + np.maximum(Pn - T / chunks, 0) / 2)
    tau_c = tau_c + _overheads(dec, eng, req, B, d)[0]
    lost = tau_c - uniform.step_decode_s if eng.mixed_prefill else tau_c
    # the prompts sent δ iterations earlier have δ·K_e tokens done when it joins; it waits for the rest
    done = np.arange(1.0, earlier.shape[-1] + 1.0) * K_e[..., None] if chunked else np.inf
    ahead = (earlier * np.maximum(Pn - done, 0.0)).sum(axis=-1) / K_e if chunked else 0.0
    return waited + (k_mean + ahead) * tau_c, c * Pn / T * lost / c
