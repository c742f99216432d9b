"""The closed loop beyond the engine's running-request cap: C clients, B < C places (``max_num_seqs``, the
KV pool's resident requests), the requests beyond the cap queued first come first served.

When C ≥ 2B, the C − B requests not running were all sent before any running one ends, so a place that frees is
taken by the queue's head in the next iteration: the B places repeat the first wave's burst every cycle and a
request waits (C / B − 1) cycles on average from its send to its admission (Little's law, C in flight and B
served per cycle). The first wave holds the B places from the start; the requests queued behind it are
admitted as its requests end, which decode through those requests' prefills. Between B and 2B clients the
follow-ups sent while places free come back after the replacement lag, and groups of requests that end
together split apart from cycle to cycle; the same account is used there (docs/serving.md, "When the
running-request cap binds", states its error against :func:`llmath.deploy.simulate.simulate`).
"""

from __future__ import annotations

import numpy as np

from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.overheads import Overheads
from llmath.deploy.replacement import joined_passes
from llmath.deploy.serving import Decoding, Requests, SteadyState


def deep_queue(CBm: tuple, req: Requests, steps, burst: tuple, taus: tuple, wave_1: tuple) -> tuple:
    """(mean TTFT, mean decode iteration) of a mixed-prefill engine whose queue holds a request for every place
    that frees (C ≥ 2B: the C − B requests not running were all sent before the B running ones finish): a place
    is taken the iteration after it frees, so the B places repeat their burst every cycle (n_b = ⌈n_w⌉ burst
    iterations, full ones at τ_b and the remainder at its own cost, then decode iterations at τ_d up to
    L = max(n_w, G − 1 + I_s) iterations) and a request's prompt ends ``own`` after its admission (I_s
    iterations, the last a burst iteration: full or the remainder); it then decodes for the rest of the cycle.
    The first wave (``wave_1``: its mean TTFT and decode iteration) holds B places from the start; a request
    queued behind it is admitted when one of them ends, its TTFT and G − 1 decode steps after the start. The mean
    TTFT is :func:`_binding_ttft`'s, the mean decode iteration the first wave's and the cycle's, weighed by
    their requests."""
    (C, B, m), (ttft_1, step_1) = CBm, wave_1
    n_w, T_b, I_s, L = burst
    tau_b, part_b, tau_d = taus
    n_b = np.maximum(np.ceil(n_w - 1e-9), 1.0)
    last = 1 - np.minimum(B, np.floor((n_b - 1) * T_b / float(req.new) + 1e-9)) / B  # ending in the remainder
    own = (I_s - 1) * tau_b + (1 - last) * tau_b + last * part_b
    cycle_s = cycle_time(n_w, L, taus)
    step_q = (cycle_s - own) / np.maximum(steps, 1e-9)
    # a first-wave request decodes through the prefills of the queued requests admitted before it ends
    later_1 = _admitted_before(B, C - B, np.maximum(np.floor(T_b / float(req.new) + 1e-9), 1.0))
    first_1 = step_1 + later_1 * n_w / B * (tau_b - tau_d) / np.maximum(steps, 1e-9)  # P' / T_b iterations each
    # the last B admitted decode through the prefills of those admitted after them only, as the first wave does
    n, n_last = m * C, np.minimum(B, m * C - B)
    step_s = (B * first_1 + n_last * step_1 + (n - B - n_last) * step_q) / n
    return _binding_ttft((C, B, m), cycle_s, (ttft_1, ttft_1 + steps * first_1), own), step_s


def cycle_time(n_w, L, taus: tuple):
    """A place's cycle when the queue refills it at once: the burst's n_b = ⌈n_w⌉ iterations (full ones at τ_b,
    the remainder at its own cost) and pure decode (τ_d) up to L iterations."""
    tau_b, part_b, tau_d = taus
    n_b = np.maximum(np.ceil(n_w - 1e-9), 1.0)
    return (n_b - 1) * tau_b + part_b + np.maximum(L - n_b, 0.0) * tau_d


def _admitted_before(B, queued, g):
    """Mean number of queued requests admitted before a first-wave request ends, over its B requests: their
    prompts end g at a time (g whole prompts per burst iteration), in that order, and the place each frees
    takes one of the ``queued`` at once: request j has g·⌊j / g⌋ ended before it, min(g·⌊j / g⌋, queued) of
    them refilled. Over the N = ⌊B / g⌋ full groups (group n: min(n·g, queued), k = min(N, ⌊queued / g⌋ + 1)
    of them below ``queued``) and the B − N·g requests of the last: g·(g·k(k − 1)/2 + (N − k)·queued) +
    (B − N·g)·min(N·g, queued), over B."""
    N = np.floor(B / g + 1e-9)
    k = np.minimum(N, np.floor(queued / g + 1e-9) + 1)
    full = g * (g * k * (k - 1) / 2 + (N - k) * queued)
    return (full + (B - N * g) * np.minimum(N * g, queued)) / B


def _binding_ttft(CBm: tuple, cycle_s, wave_1: tuple, admitted_s):
    """Mean TTFT when the cap binds (C > B) and a freed place is taken at once: each of the B places frees
    every ``cycle_s``, so a request's wait from its send to its admission averages (C / B − 1)·``cycle_s``
    (Little's law: C requests in flight, B per cycle), then ``admitted_s`` to its first token. Of the first C
    requests, sent at once, request r < B has the first wave's TTFT (``wave_1``: its TTFT and the time its
    requests end, from the start) and request r ≥ B is admitted when request r − B ends, a first-wave end and
    ⌊r / B⌋ − 1 cycles after the start. The first C weigh 1/m, the later ones 1 − 1/m."""
    (C, B, m), (ttft_1, end_1) = CBm, wave_1
    q = np.floor(C / B + 1e-9)
    cycles = B * q * (q - 1) / 2 + (C - q * B) * q  # Σ ⌊r / B⌋ over the first C
    first = (B * ttft_1 + (C - B) * (end_1 - cycle_s + admitted_s) + cycles * cycle_s) / C
    later = (C / B - 1) * cycle_s + admitted_s
    return first / m + (1 - 1 / m) * later


def queued_cycles(C, B, m: float):
    """Mean cycles a request queues for a free place when C > B requests are in flight, first come first
    served over the clients' C·m requests: request r (0-based) is admitted in cycle ⌊r / B⌋; the first C are
    sent at once (Σ ⌊r / B⌋ = B·q(q − 1)/2 + s·q over them, C = q·B + s), every later one when request r − C
    finishes, ⌊r / B⌋ − ⌊(r − C) / B⌋ − 1 cycles before its own, C / B − 1 on average."""
    q = np.floor(C / B + 1e-9)
    first = B * q * (q - 1) / 2 + (C - q * B) * q
    return (first + (m - 1) * C * (C / B - 1)) / (m * C)


def queue_wait(CB: tuple, held, transit):
    """Mean wait for a place when C > B requests are in flight out of step (output lengths that vary): a
    client's request spends ``transit`` from its send to where the engine could take it in (its front end and
    the replacement lag), W_q in the queue and H = ``held`` − ``transit`` in its place (``held``: its TTFT
    without a queue and its decoding). The B places are busy while requests queue, so B = X·H, and the C
    clients go round at X = C / (transit + W_q + H) (Little's law): W_q = (C − B)/B·H − transit, none when
    that is negative (places then idle while the follow-ups are on their way)."""
    C, B = CB
    return np.maximum((C - B) / B * (held - transit) - transit, 0.0)


def transit_s(eng: EngineConfig, ov: Overheads, req: Requests, ss: SteadyState):
    """A follow-up's time from its send to the pass that could take it in: the ``replacement_lag`` passes already
    scheduled or the ⌈o_req / τ̄⌉ its front end outlasts (:func:`llmath.deploy.replacement.joined_passes`), each of
    the steady state's mean iteration τ̄. When the running-request cap binds, its time on the way, in no place,
    which :func:`queue_wait` nets out of a client's cycle; :func:`admission_wait_s`, the TTFT's term, adds the
    scheduler's poll and holds to it."""
    tau = ss.mean_iteration_s
    return joined_passes(eng, ov.served_request_s(req.prompt), tau) * tau


def admission_wait_s(dec: Decoding, eng: EngineConfig, req: Requests, C, ss: SteadyState):
    """A follow-up's mean time from its send to the iteration that starts its prompt, at the steady state ``ss``
    of ``C`` clients (the TTFT term :func:`llmath.deploy.drifting_loop.drifting_state` charges each clump): its
    :func:`transit_s`, then the scheduler's poll (:func:`.admission_holds.after_poll`) and TensorRT-LLM's holds
    (:func:`.admission_holds.hold_s`); or, when the engine is idle ((o_req / e2e)^(C − 1): every other client
    between its requests), its front end o_req alone. :func:`transit_s` itself on a busy engine that polls every
    iteration, holds nothing and whose front end ends within the passes it joins after."""
    from llmath.deploy.admission_holds import after_poll, hold_s
    from llmath.deploy.serving import active_overheads

    ov = active_overheads(dec.dev, eng)
    o_req = ov.served_request_s(req.prompt)
    idle = (o_req / ss.e2e_s) ** (C - 1)
    busy = after_poll(transit_s(eng, ov, req, ss), o_req, eng, ss) + hold_s(dec, eng, req, ss, ss.mean_iteration_s)
    return (1 - idle) * busy + idle * o_req
