"""SGLang's SchedulerRecvSkipper under a closed loop of clients: the poll wait of a prefill-first engine
(deploy.closed_loop.poll_wait with prefill_first) and the requests one poll prefills together
(deploy.closed_loop.window_arrivals) against an event-by-event run of the clients and the skipper."""

import random
from statistics import mean
from types import SimpleNamespace

import pytest

from llmath.deploy.admission_holds import after_poll, poll_wait, window_arrivals


def _closed_loop_poll_wait(clients, interval, tau_d, tau_p, gen=(80, 100), per_client=20, seed=1):
    """(mean wait for a poll, requests per second, mean size of the prefill batch a request is in) of ``clients``
    that each send a request as their previous one finishes, at SGLang's skipper
    (python/sglang/srt/managers/scheduler_recv_skipper.py: each loop adds the last batch's weight, 1 for a decode
    or idle one, 1000 for a prefill; requests are taken in when the count reaches the interval) in front of a
    prefill-first engine: a poll that takes requests in runs their prefill in one batch (τ_p, no request decodes
    or finishes meanwhile), every other iteration decodes every running request (τ_d)."""
    rnd = random.Random(seed)
    t, count, last = 0.0, 0, None
    pending, running, waits, sent, done, batches = [0.0] * clients, [], [], clients, 0, []
    while done < clients * per_client:
        count += 1000 if last == "prefill" else 1
        if count >= interval:
            count = 0
            taken = [a for a in pending if a <= t]
            if taken:
                pending = [a for a in pending if a > t]
                waits += [t - a for a in taken]
                batches += [len(taken)] * len(taken)
                t, last = t + tau_p, "prefill"
                running += [rnd.randint(*gen) for _ in taken]
                continue
        if not running:  # an idle engine's loop polls at once
            t, count, last = min(pending), interval, None
            continue
        t, last = t + tau_d, "decode"
        left = [g - 1 for g in running]
        running = [g for g in left if g > 0]
        for _ in range(len(left) - len(running)):
            done += 1
            if sent < clients * per_client:
                sent, pending = sent + 1, [*pending, t]
    # the first wave, sent into an idle engine, left out
    return mean(waits[clients:]), done / t, mean(batches[clients:])


@pytest.mark.parametrize(("clients", "interval"), [(4, 10), (16, 30), (64, 30), (128, 30)])
def test_a_closed_loop_waits_for_the_rest_of_a_window_of_decode_iterations(clients, interval):
    # τ_d = 10 ms, τ_p = 80 ms. Requests arrive only at the end of a decode iteration, j = 1 … N of a window
    # uniformly, and wait N − j iterations: (N − 1)/2 · τ_d = 45 ms at N = 10, 145 ms at N = 30, at any load
    wait, rate, _ = _closed_loop_poll_wait(clients, interval, 0.01, 0.08)
    ss = SimpleNamespace(step_decode_s=0.01, step_mixed_s=0.08, requests_s=rate)
    assert float(poll_wait(interval, ss, prefill_first=True)) == pytest.approx((interval - 1) / 2 * 0.01)
    assert float(poll_wait(interval, ss, prefill_first=True)) == pytest.approx(wait, rel=0.12)


def test_the_time_share_form_misses_a_closed_loop_at_high_load():
    # 128 clients at N = 30: about 96 requests a second, λ·τ_p = 7.7, so the open-arrival form expects most
    # arrivals in prefill chains (τ_p / 2 = 40 ms); the closed loop sends none there and waits ~145 ms
    wait, rate, _ = _closed_loop_poll_wait(128, 30, 0.01, 0.08)
    ss = SimpleNamespace(step_decode_s=0.01, step_mixed_s=0.08, requests_s=rate)
    assert float(poll_wait(30, ss)) < 0.5 * wait


@pytest.mark.parametrize(("clients", "interval"), [(4, 10), (16, 30), (64, 30), (128, 30)])
def test_a_poll_prefills_the_requests_of_its_whole_window_together(clients, interval):
    # get_new_batch_prefill (python/sglang/srt/managers/scheduler.py) admits every waiting request within the
    # budget, so a request is prefilled with the others sent over its window of N decode iterations, at the
    # clients' rate λ over the decoding time. 128 clients at N = 30, τ_d = 10 ms, τ_p = 80 ms: about 96 requests a
    # second; a prefill every window, so λ·(N·τ_d + τ_p) = 96 · 0.38 ≈ 36 others, 37 in a request's batch
    wait, rate, batch = _closed_loop_poll_wait(clients, interval, 0.01, 0.08)
    ss = SimpleNamespace(step_decode_s=0.01, step_mixed_s=0.08, requests_s=rate)
    polling = SimpleNamespace(recv_interval=interval, mixed_prefill=False)
    assert float(window_arrivals(polling, ss)) == pytest.approx(batch, rel=0.15)
    # an engine that polls every iteration, or mixes prompts into decoding, takes each request in as it comes
    every, mixed = (SimpleNamespace(recv_interval=n, mixed_prefill=m) for n, m in ((1, False), (30, True)))
    assert window_arrivals(every, ss) == window_arrivals(mixed, ss) == 1.0


def _overlap_loop_poll_wait(clients, interval, tau_d, tau_p, gen=(160, 200), per_client=20, o_rt=0.004, seed=1):
    """(mean wait from a request's arrival at the scheduler to the poll that takes it in, to its prefill's start on
    the GPU, mean output length) of
    ``clients`` in a closed loop, in SGLang's overlap loop (python/sglang/srt/managers/scheduler.py at 0.5.8.post1
    and 0.5.9, ``event_loop_overlap``): each pass polls through the skipper at its top (``recv_requests``), then
    schedules (``get_next_batch_to_run``: every waiting request in one prefill batch, else a decode of every running
    request, the last prefill's included), launches it behind the batch on the GPU, and only then processes the
    previous batch, waiting for its end: so a pass's top comes as the batch before the one in flight ends, and a
    request finished by a decode is answered at that decode's end and comes back ``o_rt`` later."""
    rnd = random.Random(seed)
    t, gpu_free, count, last, prev = 0.0, 0.0, 0, None, None
    pending, running, waiting, waits, lengths, starts = [0.0] * clients, {}, [], [], [], []
    sent, done, ident = clients, 0, 0
    while done < clients * per_client:
        count += 1000 if last == "prefill" else 1
        if count >= interval:
            count, taken = 0, [a for a in pending if a <= t]
            pending = [a for a in pending if a > t]
            waits, waiting = waits + [t - a for a in taken], waiting + taken
        if waiting:  # prefill-first; its requests decode from the next batch on
            batch, end = "prefill", max(gpu_free, t) + tau_p
            starts += [end - tau_p - a for a in waiting]
            for _ in waiting:
                ident, running[ident] = ident + 1, rnd.randint(*gen) - 1
                lengths.append(running[ident] + 1)
            waiting, finished = [], 0
        elif running:
            batch, end = "decode", max(gpu_free, t) + tau_d
            running = {r: n - 1 for r, n in running.items()}
            finished, running = sum(n == 0 for n in running.values()), {r: n for r, n in running.items() if n > 0}
        else:
            batch, end, finished = None, gpu_free, 0
        gpu_free, last = end, batch
        if prev is not None:  # the previous batch's results, once it has ended
            t, (p_end, p_finished) = max(t, prev[0]), prev
            for _ in range(p_finished):
                done += 1
                if sent < clients * per_client:
                    sent, pending = sent + 1, [*pending, p_end + o_rt]
        prev = (end, finished) if batch else None
        if batch is None and prev is None and pending:  # an idle loop spins until a request has come
            t = max(t, min(pending))
    return mean(waits[clients:]), mean(starts[clients:]), mean(lengths)


@pytest.mark.parametrize(("clients", "interval"), [(4, 10), (16, 30), (64, 30), (128, 30)])
def test_the_overlap_loop_keeps_a_half_window_wait_for_drawn_lengths(clients, interval):
    # Output lengths drawn over [160, 200] (a range ratio of 0.8, as InferenceX's client draws them), so the steps
    # at which the requests finish fall at every place in a window of N = 30 decode iterations. The skipper counts
    # 1 per decode pass and 1000 per prefill (python/sglang/srt/environ.py at 0.5.9:
    # SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE 1, _WEIGHT_DEFAULT 1000) and restarts at every poll, so the
    # polls fall every N decode passes and a request waits about (N − 1)/2 · τ_d = 145 ms (τ_d = 10 ms), not the
    # whole window's (N − 1) · τ_d = 290 ms: polled m = 1 … N decode ends after the one that finished its
    # predecessor, less o_rt, (N + 1)/2 · τ_d − 4 ms = 51 ms at N = 10, 151 ms at N = 30 (where a window with a
    # prefill holds N − 1 decode ends: less at high load)
    wait, _, length = _overlap_loop_poll_wait(clients, interval, 0.01, 0.08)
    ss = SimpleNamespace(step_decode_s=0.01, step_mixed_s=0.08, requests_s=clients / (length * 0.01))
    assert float(poll_wait(interval, ss, prefill_first=True)) == pytest.approx(wait, rel=0.2)
    assert wait < 0.75 * (interval - 1) * 0.01


@pytest.mark.parametrize(("clients", "interval"), [(4, 10), (16, 30), (64, 30), (128, 30)])
def test_the_overlap_loop_prefills_a_polled_request_behind_the_pass_in_flight(clients, interval):
    # A poll comes at a pass's top, as the batch before the one in flight ends; the prompt it takes in runs after
    # that one (τ_d = 10 ms). From the decode that finished its predecessor, a follow-up is polled m = 1 … N
    # decode ends later (uniformly) and prefilled one more later: (N + 3)/2 · τ_d, less the o_rt = 4 ms before it
    # arrives, = the replacement lag's 2·τ_d − o_rt (engines.json, SGLang) plus the poll's (N − 1)/2 · τ_d:
    # 61 ms at N = 10, 161 ms at N = 30; the longer of the two alone (45, 145 ms) misses the pass in flight
    _, start, length = _overlap_loop_poll_wait(clients, interval, 0.01, 0.08)
    ss = SimpleNamespace(step_decode_s=0.01, step_mixed_s=0.08, requests_s=clients / (length * 0.01))
    polling = SimpleNamespace(recv_interval=interval, mixed_prefill=False)
    assert float(after_poll(2 * 0.01 - 0.004, 0.004, polling, ss)) == pytest.approx(start, rel=0.1)
    every = SimpleNamespace(recv_interval=1, mixed_prefill=False)  # polls at every pass: the lag alone
    assert float(after_poll(2 * 0.01 - 0.004, 0.004, every, ss)) == pytest.approx(0.016)
