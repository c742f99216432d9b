"""A small iteration-level simulation of continuous batching, to validate the closed form of :mod:`.serving`.

One iteration at a time, as vLLM's V1 scheduler does it: every running request that has finished its prompt
decodes one token; the rest of the token budget goes to prompt chunks, first come first served (running
requests first, then waiting ones while fewer than ``max_resident`` run); without chunking a prompt is only
scheduled whole. Each iteration's time is :meth:`.step.Device.iteration` for that mix (the decoders at their
mean context, the chunks at their mean size and prefix). Closed loop: a finished request is replaced at once
by a new one from the same client; the clients' first requests are staggered over one request
lifetime. This is a test oracle (a Python loop, about a second per thousand iterations on a shared 2-core
machine), not what the planner runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmath.deploy.bench_client import BenchClient
from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.replacement import queued_passes
from llmath.deploy.serving import Requests, active_overheads
from llmath.deploy.step import Device


@dataclass
class _Req:
    arrival: float
    gen: int = 1
    done_prompt: int = 0
    generated: int = 0
    first_token: float = float("nan")
    last_token: float = float("nan")
    finished: float = float("nan")
    client: int = 0
    new: int = 0  # its prompt tokens to prefill (0: the stream's P')


@dataclass(frozen=True)
class SimResult:
    ttft_s: float
    tpot_s: float
    e2e_s: float
    throughput_tok_s: float
    itl_p50_s: float
    itl_p99_s: float
    iterations: int


def _schedule(running, waiting, req: Requests, eng: EngineConfig, max_resident: int):
    """(decoders, [(request, chunk tokens)]) of the next iteration; admits waiting requests."""
    K = eng.max_num_batched_tokens or 1 << 62
    chunked = eng.chunked_prefill and eng.max_num_batched_tokens is not None and not req.encoder_decoder
    decoders = [r for r in running if r.done_prompt == r.new]
    budget = K - (len(decoders) if eng.mixed_prefill else 0)
    chunks = []
    for r in [r for r in running if r.done_prompt < r.new]:
        left = r.new - r.done_prompt
        take = min(left, budget) if chunked else (left if left <= budget else 0)
        if take > 0:
            chunks.append((r, take))
            budget -= take
    while waiting and len(running) < max_resident and budget > 0:
        if not chunked and waiting[0].new > budget:
            break
        r = waiting.pop(0)
        running.append(r)
        take = min(r.new, budget)
        chunks.append((r, take))
        budget -= take
    if chunks and not eng.mixed_prefill:  # prefill-first: the prompts run alone, the decoders wait
        return [], chunks
    return decoders, chunks


def simulate(
    dev: Device,
    eng: EngineConfig,
    req: Requests,
    concurrency: int,
    max_resident: int,
    iterations: int = 4000,
    arrival: str = "staggered",
    prompts_per_client: int | None = None,
    rate: float | None = None,
    seed: int = 0,
    lag: bool | None = None,
    jitter: float | None = None,
    client: BenchClient | None = None,
) -> SimResult:
    """Run a closed loop of ``concurrency`` clients for at most ``iterations`` iterations.

    ``arrival="staggered"``: the clients' first requests spread over one request lifetime, statistics over the
    requests that arrive in the middle third (the desynchronised steady state). ``arrival="closed"``: every
    client sends its first request at once and each of its ``prompts_per_client`` requests as soon as the
    previous one finishes (vLLM ``bench serve --max-concurrency``, SGLang ``bench_serving``, AIPerf concurrency
    mode); statistics over every request, as those clients report them. ``"offline"``: one such wave;
    ``"poisson"``: arrivals at ``rate`` requests/s. Every request reaches the scheduler the engine's front-end
    time o_req after its client sends it, and its TTFT runs from the send (docs/serving.md, "The front-end time:
    one convention"); ``lag``: whether a follow-up request also waits for the ``eng.replacement_lag`` iterations
    already scheduled when it is sent (default: in the closed loop only; none when the engine is idle; ``True``
    with ``"staggered"``: the clients' closed loop once out of step,
    :func:`llmath.deploy.closed_loop.staggered_state`, whose front-end times then vary by ±``jitter``/2 of
    o_req, seeded, default ±50%, so that the clients stay out of step; ``jitter`` given: in any mode; neither:
    the desynchronised steady state, a follow-up reaching the scheduler at an iteration boundary). ``client``
    (:class:`llmath.deploy.bench_client.BenchClient`, closed loop): its requests as it makes them, every
    prompt and output length drawn apart (numpy's legacy generator seeded by ``seed``, prompts first, as the
    client draws them: seed 0 repeats its own run's lengths; the output lengths over the range of
    ``req``'s), its slots sharing one list of C·``prompts_per_client`` where it says so; without it the
    prompts are P and the outputs an evenly mixed sequence of ``req``'s lengths (:func:`_lengths`)."""
    if arrival == "offline":  # every request queued at once, none sent after them: one wave
        arrival, prompts_per_client = "closed", 1
    if arrival == "poisson":
        return _poisson(dev, eng, req, rate or 0.0, max_resident, iterations, seed)
    if arrival not in ("staggered", "closed"):
        raise ValueError(f"arrival={arrival!r} must be 'staggered', 'closed', 'offline' or 'poisson'")
    lockstep = arrival == "closed"
    lagged = lockstep if lag is None else lag
    spread = jitter if jitter is not None else (1.0 if lagged and not lockstep else 0.0)
    hand_off = _front_end(dev, eng, req, spread, seed, at_boundary=not lagged and jitter is None)
    lag_iters = eng.replacement_lag if lagged else 0  # the next iterations are already scheduled
    source = _source(req, concurrency, prompts_per_client, client if lockstep else None, seed)
    finished, itl, tokens_out, now = _closed(dev, eng, req, concurrency, max_resident, iterations, lockstep,
                                             source, lag_iters, hand_off)  # fmt: skip
    if lockstep:
        return _all_stats(finished, itl, tokens_out, now, iterations)
    return _stats(finished, itl, tokens_out, now, iterations)


def _front_end(dev, eng, req: Requests, spread: float, seed: int, at_boundary: bool = False):
    """(time a request is sent, time it reaches the scheduler) as a function of the time ``now`` it could
    first be scheduled: it reaches the scheduler the engine's front-end time o_req after it is sent
    (docs/serving.md, "Closed forms against the simulation"), ±``spread``/2 of it (seeded). ``at_boundary``:
    the desynchronised steady state's reading, a follow-up sent o_req before ``now`` so that it reaches the
    scheduler at the iteration boundary (:func:`llmath.deploy.serving.steady_state`)."""
    o_req = active_overheads(dev, eng).served_request_s(req.prompt)
    rng = np.random.default_rng(seed)
    if at_boundary:
        return lambda now: (now - o_req, now)
    if spread == 0:
        return lambda now: (now, now + o_req)
    return lambda now: (now, now + o_req * (1 + spread * (float(rng.random()) - 0.5)))


def _source(req: Requests, concurrency: int, prompts_per_client: int | None, client, seed: int):
    """The clients' requests: a function of the client (slot) asking for its next one, giving
    (output length, prompt tokens to prefill) or None when it sends no more (module docstring of
    :mod:`llmath.deploy.bench_client`; without a ``client``, m per client, the prompts P', the outputs
    :func:`_lengths`)."""
    m = prompts_per_client or 1 << 62
    left = [m] * concurrency  # requests each client still sends
    if client is None:
        lengths = _lengths(req)

        def mixed(i: int):
            if left[i] <= 0:
                return None
            left[i] -= 1
            return next(lengths), req.new

        return mixed
    if prompts_per_client is None:
        raise ValueError("a benchmark client's run needs prompts_per_client (its list is C·m requests)")
    rng = np.random.RandomState(seed)  # the client's own generator and order: seed 0 repeats its run's lengths
    n = concurrency * m
    prompts = client.draw(req.prompt, n, rng)
    gens = client.draw(req.max_gen, n, rng)
    drawn = list(zip(gens.tolist(), np.maximum(prompts - req.cached, 1).tolist(), strict=True))
    order = iter(drawn)

    def listed(i: int):
        if client.shared_list:
            return next(order, None)
        if left[i] <= 0:
            return None
        left[i] -= 1
        return drawn[i * m + left[i]]

    return listed


def _closed(dev, eng, req, concurrency, max_resident, iterations, lockstep, source, lag, hand_off):
    """The clients' loop: (finished requests, inter-token gaps, tokens out per iteration, end time)."""
    ov = active_overheads(dev, eng)  # the engine's time outside the kernels, as the closed form adds it
    starts = _first_requests(req, eng, concurrency, lockstep)
    waiting: list[_Req] = []
    running: list[_Req] = []
    finished: list[_Req] = []
    itl: list[tuple[float, float]] = []
    tokens_out: list[tuple[float, int]] = []
    # [iterations still to start before the request is seen, the time it reaches the scheduler, request,
    # pass tops still to pass once it is there (1: none; vLLM's batch queue: the lag, :func:`_release`)]
    pending: list[list] = []
    queued = 1 + (queued_passes(eng) if lag > 0 else 0)
    now = 0.0
    for it in range(iterations):
        for i in [i for i, s in enumerate(starts) if s is not None and s <= it]:
            starts[i] = None
            g, p = source(i)
            sent, ready = hand_off(now)
            pending.append([0, ready, _Req(sent, g, client=i, new=p), queued])
        pending, now = _release(pending, waiting, now, idle=not (waiting or running))
        if not (waiting or running):
            break
        now, done = _advance(dev, eng, req, ov, (running, waiting, finished), max_resident, now, itl, tokens_out)
        for r in done:
            nxt = source(r.client)
            if nxt is not None:  # sent at once
                sent, ready = hand_off(now)
                pending.append([lag, ready, _Req(sent, nxt[0], client=r.client, new=nxt[1]), queued])
    return finished, itl, tokens_out, now


def _first_requests(req: Requests, eng: EngineConfig, concurrency: int, together: bool) -> list[int | None]:
    """The iteration each client sends its first request at: all at 0, or staggered over one lifetime."""
    life = int(-(-req.new // (eng.max_num_batched_tokens or req.new)) + req.decode_steps)
    return [0 if together else (i * life) // concurrency for i in range(concurrency)]  # ascending


def _release(pending: list, waiting: list, now: float, idle: bool) -> tuple[list, float]:
    """Move the follow-up requests that have reached the scheduler and whose lag has run out (no lag when the
    engine is idle; an idle engine waits for the first to arrive) to the queue, where the engine takes a request
    in at a pass's top behind the passes already queued, only after that many tops since its arrival (the
    entry's last element, ``lag_from_arrival``); (the others still pending,
    one iteration closer; the time)."""
    if idle and pending:
        now = max(now, min(t for _, t, _, _ in pending))
    go = [(n <= 0 and q <= 1 or idle) and t <= now for n, t, _, q in pending]
    waiting += [r for (_, _, r, _), g in zip(pending, go, strict=True) if g]
    kept = [[n - 1, t, r, q - (t <= now)] for (n, t, r, q), g in zip(pending, go, strict=True) if not g]
    return kept, now


def _poisson(dev, eng, req, rate: float, max_resident: int, iterations: int, seed: int) -> SimResult:
    """Open loop: requests arrive at exponential gaps of mean 1/``rate`` (seeded) and join the queue at the
    next iteration boundary; statistics over the requests that arrive in the middle third of the run."""
    if not rate > 0:
        raise ValueError(f"arrival='poisson' needs rate > 0 requests/s, not {rate!r}")
    rng = np.random.default_rng(seed)
    lengths = _lengths(req)
    ov = active_overheads(dev, eng)
    o_req = ov.served_request_s(req.prompt)
    waiting: list[_Req] = []
    running: list[_Req] = []
    finished: list[_Req] = []
    itl: list[tuple[float, float]] = []
    tokens_out: list[tuple[float, int]] = []
    now, nxt = 0.0, float(rng.exponential(1 / rate))
    for _ in range(iterations):
        while nxt <= now:
            waiting.append(_Req(nxt - o_req, next(lengths), new=req.new))
            nxt += float(rng.exponential(1 / rate))
        if not (waiting or running):
            now = nxt  # idle until the next arrival
            continue
        now, _ = _advance(dev, eng, req, ov, (running, waiting, finished), max_resident, now, itl, tokens_out)
    return _stats(finished, itl, tokens_out, now, iterations)


def _advance(dev, eng, req, ov, queues, max_resident: int, now: float, itl: list, tokens_out: list):
    """Schedule and run one iteration; (the time after it, the requests it finished)."""
    running, waiting, finished = queues
    decoders, chunks = _schedule(running, waiting, req, eng, max_resident)
    t, emitted = _iterate(dev, eng, req, ov, decoders, chunks, now, itl)
    now += t
    tokens_out.append((now, emitted))
    done = [r for r in running if r.generated >= r.gen]
    for r in done:
        running.remove(r)
        finished.append(r)
        r.finished = now
    return now, done


def _iterate(dev, eng, req, ov, decoders, chunks, now: float, itl: list) -> tuple[float, int]:
    """Run one iteration: (its time, tokens it emitted); advances the requests."""
    ctx = np.mean([req.start - req.new + r.new + r.generated - 1 for r in decoders]) if decoders else 0.0
    if chunks:
        sizes = np.array([c for _, c in chunks], dtype=float)
        prefixes = np.array([req.cached + r.done_prompt for r, _ in chunks], dtype=float)
        t = dev.iteration(len(decoders), ctx, len(chunks), sizes.mean(), prefixes.mean()).time_s
        t = t + ov.per_iteration_eager_s
    else:
        t = dev.iteration(len(decoders), ctx).time_s + ov.iteration_s(eng.cuda_graphs)
    t = float(t) + len(decoders) * ov.per_token_s
    end = now + t
    emitted = 0
    for r in decoders:
        r.generated += 1
        itl.append((end, end - r.last_token))
        r.last_token = end
        emitted += 1
    for r, c in chunks:
        r.done_prompt += c
        if r.done_prompt == r.new:
            r.generated, r.first_token, r.last_token = 1, end, end
            if r.gen == 1:
                r.finished = end
            emitted += 1
    return t, emitted


def _lengths(req: Requests):
    """Output lengths in a deterministic, evenly mixed order with the distribution's weights (golden-ratio
    sequence over the cumulative weights), so a short run already sees the mixture."""
    g, w = req.lengths
    cum = np.cumsum(w)
    n = 0
    while True:
        n += 1
        yield int(g[min(int(np.searchsorted(cum, (n * 0.6180339887498949) % 1.0, side="right")), len(g) - 1)])


def _stats(finished: list[_Req], itl: list, tokens_out: list, now: float, iterations: int) -> SimResult:
    """Request means over the requests that arrived in the middle third of the run (the first third warms
    up; the last lets the long ones of a length mixture finish, so short ones are not over-counted);
    inter-token latencies and throughput over the second half."""
    half = now / 2
    done = [r for r in finished if now / 3 <= r.arrival < 2 * now / 3]
    ttft = np.mean([r.first_token - r.arrival for r in done])
    e2e = np.mean([r.finished - r.arrival for r in done])
    steps = sum(r.gen - 1 for r in done)
    tpot = sum(r.finished - r.first_token for r in done) / steps if steps else 0.0  # per decode token
    late = np.array([d for t, d in itl if t >= half])
    out = sum(n for t, n in tokens_out if t >= half)
    p50, p99 = (float(np.percentile(late, q)) if late.size else 0.0 for q in (50, 99))
    return SimResult(float(ttft), float(tpot), float(e2e), out / (now - half), p50, p99, iterations)


def _all_stats(finished: list[_Req], itl: list, tokens_out: list, now: float, iterations: int) -> SimResult:
    """Every request's means as the benchmark clients define them: TTFT, e2e, and TPOT per request =
    (e2e − TTFT) / (output − 1), then the mean over the requests with more than one output token."""
    ttft = np.mean([r.first_token - r.arrival for r in finished])
    e2e = np.mean([r.finished - r.arrival for r in finished])
    per = [(r.finished - r.first_token) / (r.gen - 1) for r in finished if r.gen > 1]
    gaps = np.array([d for _, d in itl])
    out = sum(n for _, n in tokens_out)
    p50, p99 = (float(np.percentile(gaps, q)) if gaps.size else 0.0 for q in (50, 99))
    return SimResult(float(ttft), float(np.mean(per)) if per else 0.0, float(e2e), out / now, p50, p99, iterations)
