"""How long a request that reached the scheduler waits before its prompt prefills, beyond the iteration boundary
(:mod:`llmath.deploy.closed_loop` adds these to its waits):

* the scheduler's polls: SGLang's ``--scheduler-recv-interval`` takes requests in only every N decode iterations
  or after an iteration that prefills (``SchedulerRecvSkipper``): :func:`poll_wait`, :func:`after_poll`, and the
  prefill batch one poll gathers, :func:`window_arrivals`;
* TensorRT-LLM's batch waiting (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``):
  :func:`batch_wait_iterations`;
* TensorRT-LLM's attention-DP balancing (``attention_dp_config``): :func:`adp_balance_iterations`;

:func:`hold_s` is the last two at a steady state's arrivals.
"""

from __future__ import annotations

import numpy as np

from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.serving import Decoding, Requests, SteadyState

WINDOW_PASSES = 3  # fixed-point passes of a polling window's arrivals and the time it spends prefilling


def window_arrivals(eng: EngineConfig, ss: SteadyState):
    """Mean size of the prefill batch a request is in where a prefill-first engine polls only every
    ``recv_interval`` decode iterations (SGLang's ``SchedulerRecvSkipper``; ``get_new_batch_prefill`` admits every
    waiting request, within the budget, in one batch): the request and the m others sent over its window of
    N decode iterations. Requests are sent only while the engine decodes, so over a window of N·τ_d they come at
    λ / (1 − u), u the share of time spent prefilling: a batch of τ_p each time a window's poll finds a request,
    λ·(1 − e^(−m)) / m batches a second (m Poisson in a window); a few fixed-point passes. 1 where the engine
    polls every iteration or mixes prompts into decoding."""
    if eng.recv_interval <= 1 or eng.mixed_prefill:
        return 1.0
    rate, window = ss.requests_s, eng.recv_interval * ss.step_decode_s
    m = rate * window
    for _ in range(WINDOW_PASSES):
        batches = rate * np.where(m > 1e-9, -np.expm1(-m) / np.maximum(m, 1e-9), 1.0)
        m = rate * window / (1.0 - np.minimum(batches * ss.step_mixed_s, 0.9))
    return 1.0 + m


def hold_s(dec: Decoding, eng: EngineConfig, req: Requests, ss: SteadyState, mean_step):
    """Mean time a scheduled prompt is held before it prefills: TensorRT-LLM's batch waiting and attention-DP
    balancing (:func:`batch_wait_iterations`, :func:`adp_balance_iterations`; 0 where the engine has neither),
    at the state ``ss``'s decoding batch and arrivals per iteration of ``mean_step``."""
    arrivals = ss.requests_s * mean_step
    held = batch_wait_iterations(eng, req, ss.decode_batch, arrivals) + adp_balance_iterations(
        eng, dec.dev.dp, arrivals
    )
    return held * mean_step


def after_poll(lagged, o_req, eng: EngineConfig, ss: SteadyState):
    """A request's wait for the engine's ``replacement_lag`` passes (``lagged``: from the send when ``o_req`` is
    its front-end time, else from its arrival) and for a poll (:func:`poll_wait`): a prefill-first engine polling
    every N passes takes requests in at a pass's top and prefills them behind the pass in flight (SGLang's
    ``event_loop_overlap``: ``recv_requests``, the launch, the previous batch's results), so the two add up;
    otherwise the longer."""
    polled = poll_wait(eng.recv_interval, ss, not eng.mixed_prefill)
    if eng.recv_interval > 1 and not eng.mixed_prefill:
        return lagged + polled
    return np.maximum(lagged, o_req + polled)


def poll_wait(interval: int, ss: SteadyState, prefill_first: bool = False):
    """Mean wait of a request for the scheduler's next poll when it takes requests in only after ``interval``
    decode iterations or after any iteration that prefills (SGLang's ``SchedulerRecvSkipper``), at the state
    ``ss``'s decode step τ_d, prefill iteration τ_p and arrivals λ per second: a prompt is prefilled only once a
    poll took it in, so the polls come in cycles of a window of W = interval·τ_d decode iterations, then, when
    the window's poll found a request (1 − e^(−λW)), a chain of prefill iterations, each followed by a poll that
    finds another with probability 1 − e^(−λτ_p) (e^(λτ_p) iterations on average). A request arriving at a
    uniform moment waits W/2 in a window, τ_p/2 in a prefill: weighted by their time shares. 0 when the scheduler
    takes requests in at every iteration.

    ``prefill_first``: a closed loop's clients send a request only when another finishes, and a prefill-first engine
    finishes none in a prefill, so every request arrives at the end of one of a window's decode iterations, j = 1 …
    interval uniformly, and waits the interval − j left: (interval − 1)/2 · τ_d at any load (the time shares above
    would let the prefill chains absorb arrivals that never come in them)."""
    if interval <= 1:
        return 0.0
    if prefill_first:
        return (interval - 1) / 2 * ss.step_decode_s
    window, prefill, rate = interval * ss.step_decode_s, ss.step_mixed_s, ss.requests_s
    chain = -np.expm1(-rate * window) * np.exp(np.minimum(rate * prefill, 50.0)) * prefill
    return (window * window / 2 + chain * prefill / 2) / (window + chain)


def batch_wait_iterations(eng: EngineConfig, req: Requests, decoding, arrivals_per_iteration):
    """Mean iterations a prompt is held by TensorRT-LLM's batch waiting (``PyExecutor._waiting_requests``): while
    requests decode, the scheduled prompts wait until their tokens and the d decoding tokens reach
    r·K (``batch_wait_max_tokens_ratio`` × ``max_num_tokens``) or the wait has lasted W iterations
    (``batch_wait_timeout_iters``); with either at 0 nobody waits. n* = ⌈(r·K − d) / P⌉ prompts release a group;
    its first waits A = min((n* − 1) / X, W) iterations for the others to arrive (X per iteration), which arrive
    evenly over A: the group's mean is A·(1 + (n − 1)/2) / n with n = 1 + X·A. 0 where one prompt suffices."""
    W, r, K = eng.batch_wait_iters, eng.batch_wait_tokens_ratio, eng.max_num_batched_tokens
    if W <= 0 or r <= 0 or K is None:
        return 0.0
    needed = np.ceil(np.maximum(r * K - np.asarray(decoding, dtype=float), 0.0) / req.prompt)
    return group_wait(needed, np.asarray(arrivals_per_iteration, dtype=float), float(W))[0]


def group_wait(needed, X, cap: float) -> tuple:
    """(mean iterations, size) of a held group: the first waits A = min((needed − 1) / X, cap) for the others,
    which arrive evenly over A: A·(1 + (n − 1)/2) / n with n = 1 + X·A."""
    A = np.minimum(np.maximum(needed - 1, 0.0) / np.maximum(X, 1e-12), cap)
    n = 1 + X * A
    return A * (1 + (n - 1) / 2) / n, n


def arrivals_to_cover_ranks(ranks: int) -> float:
    """Expected arrivals until each of the D attention-DP ranks holds a prompt, the first included: TensorRT-LLM
    gives a new request to a rank below the expected count of active requests, the fewest tokens first
    (``ExecutorRequestQueue._balance_requests_across_ranks``), which in a full closed loop is the rank whose request
    just finished; finishes fall on the ranks at random, so after the first the others come as a coupon collector's,
    D·(1 + 1/2 + … + 1/(D − 1)) arrivals."""
    return 1.0 + ranks * sum(1.0 / i for i in range(1, int(ranks)))


def adp_balance_iterations(eng: EngineConfig, ranks: int, arrivals_per_rank_iteration):
    """Mean iterations a prompt is held by TensorRT-LLM's attention-DP balancing (``attention_dp_config``
    ``enable_balance``; ``PyExecutor._balance_adp_requests``): with requests decoding, the scheduled prompts wait
    until every one of the D ranks has one (:func:`arrivals_to_cover_ranks` arrivals, D·X per iteration over the
    ranks) or for ``timeout_iters``, then ``batching_wait_iters`` B more; the D·X·B that arrive during those B wait
    B/2 on average. 0 without balancing or on one rank."""
    if not eng.adp_balance or ranks <= 1:
        return 0.0
    X = ranks * np.asarray(arrivals_per_rank_iteration, dtype=float)
    first, n = group_wait(arrivals_to_cover_ranks(ranks), X, float(eng.adp_timeout_iters))
    B = float(eng.adp_batching_wait_iters)
    return (n * (first + B) + X * B * B / 2) / (n + X * B)
