"""SGLang's SchedulerRecvSkipper under a closed loop of clients: the poll wait of a prefill-first engine
(deploy.closed_loop._poll_wait with prefill_first) and the requests one poll prefills together
(deploy.closed_loop._window_arrivals) against an event-by-event run of the clients and the skipper."""

import random
from statistics import mean
from types import SimpleNamespace

import pytest

from llmath.deploy.closed_loop import _poll_wait, _window_arrivals


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
    assert float(_poll_wait(interval, ss, prefill_first=True)) == pytest.approx((interval - 1) / 2 * 0.01)
    assert float(_poll_wait(interval, ss, prefill_first=True)) == pytest.approx(wait, rel=0.12)


def test_the_time_share_form_misses_a_closed_loop_at_high_load():
    # 128 clients at N = 30: about 96 requests a second, λ·τ_p = 7.7, so the open-arrival form expects most
    # arrivals in prefill chains (τ_p / 2 = 40 ms); the closed loop sends none there and waits ~145 ms
    wait, rate, _ = _closed_loop_poll_wait(128, 30, 0.01, 0.08)
    ss = SimpleNamespace(step_decode_s=0.01, step_mixed_s=0.08, requests_s=rate)
    assert float(_poll_wait(30, ss)) < 0.5 * wait


@pytest.mark.parametrize(("clients", "interval"), [(4, 10), (16, 30), (64, 30), (128, 30)])
def test_a_poll_prefills_the_requests_of_its_whole_window_together(clients, interval):
    # get_new_batch_prefill (python/sglang/srt/managers/scheduler.py) admits every waiting request within the
    # budget, so a request is prefilled with the others sent over its window of N decode iterations, at the
    # clients' rate λ over the decoding time. 128 clients at N = 30, τ_d = 10 ms, τ_p = 80 ms: about 96 requests a
    # second; a prefill every window, so λ·(N·τ_d + τ_p) = 96 · 0.38 ≈ 36 others, 37 in a request's batch
    wait, rate, batch = _closed_loop_poll_wait(clients, interval, 0.01, 0.08)
    ss = SimpleNamespace(step_decode_s=0.01, step_mixed_s=0.08, requests_s=rate)
    polling = SimpleNamespace(recv_interval=interval, mixed_prefill=False)
    assert float(_window_arrivals(polling, ss)) == pytest.approx(batch, rel=0.15)
    # an engine that polls every iteration, or mixes prompts into decoding, takes each request in as it comes
    every, mixed = (SimpleNamespace(recv_interval=n, mixed_prefill=m) for n, m in ((1, False), (30, True)))
    assert _window_arrivals(every, ss) == _window_arrivals(mixed, ss) == 1.0
