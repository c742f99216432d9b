"""The desynchronised steady state of a prefill-first engine (``EngineConfig.mixed_prefill`` False: SGLang
without ``--enable-mixed-chunk``): a pass that admits prompts runs them alone, the decoding requests wait.

**The closed form** (times in seconds; B resident requests, S = (G − 1)/a decode passes per request, a tokens
each):

* a prompt group: the n prompts waiting at a pass boundary run together in I_p passes of the full budget K
  (I_p = ⌈P'/K⌉ with chunking, else 1; n = 1 when chunked over several passes), T_p = (I_p − 1)·τ_a + τ_b,
  no decode tokens in them; every decode pass τ_d carries all B requests;
* a request's life: its own group T_p, then S decode passes; in one life E every other resident request runs
  its prompt once (B requests complete per E, Little's law), n − 1 of them in its own group and the other
  B − n in the (B − n)/n groups it waits through while decoding, u = T_p/n of prefill time each:
  E = T_p + S·τ_d + (B − n)·u = B·u + S·τ_d (B = 1: T_p + S·τ_d); the prompt passes take B·u/E of the
  time, the decode passes S·τ_d/E;
* the group size: the arrivals in one decode pass and the group behind it, n = λ·(τ_d + T_p), λ = B/E, at
  least 1 and at most B, K/P' (chunked) or ⌊K/P'⌋ prompts (a few fixed-point passes);
* TPOT = (τ_d + (B − n)·u/S)/a; TTFT = the queue wait (C − B)/λ + T_p + o_req (the boundary wait is the
  caller's: :func:`.closed_loop.staggered_state` with :func:`boundary_wait`); the inter-token latency is τ_d,
  or τ_d plus a group's T_p with probability q = (B − n)·u/(S·T_p) (the groups a decode interval waits
  through; above one, the mean stall in every interval).
"""

from __future__ import annotations

import numpy as np

from .engine_config import EngineConfig
from .replacement import queued_passes
from .serving import (
    FIXED_POINT_PASSES,
    Decoding,
    Requests,
    SteadyState,
    _budget,
    _overheads,
    _quantiles,
    checked_concurrency,
)
from .step import Device


def _group_passes(dec: Decoding, req: Requests, K: float, chunked: bool, n: np.ndarray) -> tuple:
    """(I_p, τ_a, τ_b) of a group of n prompts run alone: I_p − 1 passes of full chunks, then the last."""
    Pn = req.new
    Ip = float(np.ceil(Pn / K)) if chunked else 1.0
    full = min(float(Pn), K)
    last = max(Pn - (Ip - 1) * full, 1.0)
    kinds = (2,) + (1,) * n.ndim  # both kinds of pass in one evaluation
    chunk = np.array([full, last]).reshape(kinds)
    prefix = np.array([req.cached + max(Pn - full, 0.0) / 2, req.cached + Pn - last]).reshape(kinds)
    tau_a, tau_b = dec.dev.iteration(0.0, 0.0, np.stack([n, n]), chunk, prefix).time_s
    return Ip, tau_a, tau_b


def prefill_first_state(
    dev: Device | Decoding, eng: EngineConfig, req: Requests, concurrency, max_resident: int
) -> SteadyState:
    """The steady state at each concurrency (numpy array) of an engine whose prompt passes hold no decode
    tokens: the module's closed form."""
    dec, C = checked_concurrency(dev, concurrency)
    Pn = req.new
    K, chunked = _budget(eng, req)
    S, a = req.decode_steps / dec.tokens, dec.tokens
    B = np.minimum(C, max_resident)
    n_max = max(K / Pn if chunked else np.floor(K / Pn), 1.0) if np.isfinite(K) else np.inf
    o_p, o_d, o_req = _overheads(dec, eng, req, B, np.zeros_like(B))
    tau_d = dec.step(B, req.decode_context) + o_d
    n = np.ones_like(B)
    for _ in range(FIXED_POINT_PASSES):
        Ip, tau_a, tau_b = _group_passes(dec, req, K, chunked, n)
        T_p = (Ip - 1) * (tau_a + o_p) + tau_b + o_p
        u = T_p / n
        E = B * u + S * tau_d
        lam = B / E
        n = np.minimum(np.clip(lam * (tau_d + T_p), 1.0, n_max), B) if Ip == 1 else np.ones_like(B)
    stall = (B - n) * u / S if S > 0 else np.zeros_like(B)  # the others' prompt time per decode pass
    step_s = tau_d + stall
    wait = np.maximum(C - B, 0.0) / lam  # closed loop: the queue drains λ requests a second
    ttft = wait + T_p + o_req
    e2e = ttft + E - T_p
    rate_p, rate_d = lam * Ip / n, (1 - lam * T_p / n) / tau_d  # prefill and decode passes a second
    f = rate_p / (rate_p + rate_d)
    tau_m = T_p / Ip
    o_m = Ip * o_p / T_p  # the overheads' share of a prefill pass
    q = np.minimum(stall / T_p, 1.0)
    hi = tau_d + np.where(q > 0, stall / np.maximum(q, 1e-300), T_p)
    p50, p90, p99 = _quantiles((0.5, 0.9, 0.99), q, 1.0, hi / a, hi / a, tau_d / a)
    o_ttft = wait * (f * o_p + (1 - f) * o_d) + Ip * o_p + o_req
    o_tpot = (o_d + stall * o_m) / a
    return SteadyState(C, B, ttft, step_s / a, p50, p90, p99, e2e, C * req.mean_gen / e2e, C / e2e, B,
                       lam * Pn / (rate_p + rate_d), f, tau_d, tau_m, o_ttft, o_tpot)  # fmt: skip


def boundary_wait(eng: EngineConfig, o_req, mean, step_decode):
    """A follow-up's wait from its arrival to the pass that takes it in (:func:`.closed_loop.staggered_state`): a
    prefill-first engine finishes requests only in decode passes, so a follow-up is sent at a pass boundary, not
    at a random moment, and arrives o_req into the pass after it: it waits out the ``replacement_lag`` passes
    scheduled after its send (lag·τ̄ − o_req, τ̄ the mean over the passes), and at least the rest of the pass it
    arrives in (τ̄ − o_req; a front end that outlasts that pass lands in a later one, most often a decode pass,
    τ_d/2 left) and those queued behind it (:func:`.replacement.queued_passes`)."""
    rest = np.maximum(mean - o_req, step_decode / 2)
    return np.maximum(eng.replacement_lag * mean - o_req, queued_passes(eng) * mean + rest)
