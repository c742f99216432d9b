"""Engines that take requests in only at a pass's top, with one pass already launched: a follow-up whose front end
outlasts a pass waits for the pass queued behind the one in flight (vLLM's batch queue with async scheduling,
vllm/v1/engine/core.py: the busy loop drains its input queue only at the top of a loop, then schedules the next
batch and blocks on the oldest one's output; TensorRT-LLM's PyExecutor._executor_loop_overlap and SGLang's
Scheduler.event_loop_overlap: fetch, schedule and launch, then wait for the previous pass's results)."""

import dataclasses

import numpy as np
import pytest

from llmath.deploy import engines
from llmath.deploy.closed_loop import staggered_state
from llmath.deploy.replacement import joined_passes, staggered_wait
from llmath.deploy.serving import Requests
from llmath.deploy.serving_memory import memory
from llmath.deploy.simulate import simulate
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100, H200 = get("h100-sxm"), get("h200")


def test_the_presets_say_which_engine_counts_its_lag_from_the_arrival():
    assert engines.preset("vllm", H200).lag_from_arrival is True
    assert engines.preset("sglang", H200).lag_from_arrival is True
    assert engines.preset("trtllm", H200).lag_from_arrival is True
    assert "core.py" in engines.preset("vllm", H200).sources["lag_from_arrival"]
    assert "event_loop_overlap" in engines.preset("sglang", H200).sources["lag_from_arrival"]
    assert "_executor_loop_overlap" in engines.preset("trtllm", H200).sources["lag_from_arrival"]


def test_passes_from_the_send_to_the_pass_that_takes_the_request_in():
    tau = 0.010
    o = np.array([0.002, 0.010, 0.015, 0.025])  # front ends of 0.2, 1, 1.5 and 2.5 passes
    async_vllm = dataclasses.replace(engines.preset("vllm", H200), replacement_lag=2)
    # arrives within the first pass: picked up at its end, behind the one pass queued: 1 + 1 = 2 passes;
    # 1.5 passes: picked up at the end of the 2nd, then the queued one: 2 + 1 = 3; 2.5 passes: 3 + 1 = 4
    np.testing.assert_array_equal(joined_passes(async_vllm, o, tau), [2, 2, 3, 4])
    # the synchronous step (lag 1, nothing queued): the first pass boundary after the arrival, 1, 1, 2, 3
    sync_vllm = engines.preset("vllm", H200)
    np.testing.assert_array_equal(joined_passes(sync_vllm, o, tau), [1, 1, 2, 3])
    # an overlap scheduler whose lag ran from the send: max(2, ⌈o / τ⌉) = 2, 2, 2, 3
    from_send = dataclasses.replace(engines.preset("trtllm", H200), lag_from_arrival=False)
    np.testing.assert_array_equal(joined_passes(from_send, o, tau), [2, 2, 2, 3])


def test_staggered_follow_ups_wait_one_more_pass_in_the_closed_form_and_the_simulation():
    # vLLM with async scheduling (lag 2) and a front end of 1.5 passes: from the send, max(2, ⌈1.5⌉) = 2 passes
    # when the lag runs from the send; ⌈1.5⌉ + 1 = 3 when the engine takes the request in at a pass's top
    # behind the pass queued there: one mean pass τ more TTFT, TPOT unchanged; the simulation, whose front ends
    # vary by ±50%, agrees within the staggered loop's 10% (tests/test_closed_loop.py)
    dev = Device(resolve("llama-3.1-8b"), H100, Precision(), efficiency("expected", H100))
    base = engines.preset("vllm", H100, replacement_lag=2)
    req, C = Requests(1024, 256), 16
    top = memory(dev, base, req).max_resident
    tau = float(staggered_state(dev, dataclasses.replace(base, lag_from_arrival=False), req, [C], top).tpot_s[0])
    ov = dataclasses.replace(base.overheads, front_end_s=1.5 * tau)
    got = {}
    for queued in (False, True):
        eng = dataclasses.replace(base, lag_from_arrival=queued, overheads=ov)
        closed = staggered_state(dev, eng, req, [C], top)
        sim = simulate(dev, eng, req, C, top, iterations=4000, arrival="staggered", lag=True)
        got[queued] = (float(closed.ttft_s[0]), sim.ttft_s, float(closed.tpot_s[0]), sim.tpot_s)
        assert got[queued][0] == pytest.approx(sim.ttft_s, rel=0.1)
    assert got[True][0] - got[False][0] == pytest.approx(tau, rel=0.15)
    assert got[True][1] - got[False][1] == pytest.approx(tau, rel=0.3)
    assert got[True][2] == pytest.approx(got[False][2], rel=0.01)


@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_overlap_loops_take_a_follow_up_in_behind_the_pass_already_launched(engine):
    # both loops fetch at the top of pass n + 1's iteration, launch it, then wait for pass n's results: a follow-up
    # sent as pass n ends and arriving o later is fetched at the end of the pass it arrives in, ⌈o / τ⌉ passes
    # after the send, and runs after the one launched then: ⌈o / τ⌉ + 1 = 2, 2, 3, 4 (0.2, 1, 1.5, 2.5 passes);
    # at least the preset's lag of 2 (step n + 3)
    tau, o = 0.010, np.array([0.002, 0.010, 0.015, 0.025])
    eng = engines.preset(engine, H200)
    assert eng.replacement_lag == 2
    np.testing.assert_array_equal(joined_passes(eng, o, tau), [2, 2, 3, 4])
    # without the overlap loop (TensorRT-LLM's context servers: lag 1) nothing is queued: ⌈o / τ⌉ = 1, 1, 2, 3
    np.testing.assert_array_equal(joined_passes(dataclasses.replace(eng, replacement_lag=1), o, tau), [1, 1, 2, 3])


def test_an_out_of_step_follow_up_waits_for_the_pass_in_flight_and_the_one_launched():
    # equal passes of τ̄ = 10 ms (E[τ²] = τ̄², mean residual τ̄/2 = 5 ms), lag 2: within the passes already
    # scheduled 2·10 − o; arriving later, the residual 5 ms plus the one pass launched behind it, 10 ms:
    # o = 2 ms: max(18, 15) = 18 ms; o = 8 ms: max(12, 15) = 15 ms; o = 15 ms: max(5, 15) = 15 ms
    # (with the lag counted from the send instead: max(18, 5), max(12, 5), max(5, 5) = 18, 12, 5 ms)
    mean, o = 0.010, np.array([0.002, 0.008, 0.015])
    eng = engines.preset("trtllm", H200)
    np.testing.assert_allclose(staggered_wait(eng, o, mean, mean**2), [0.018, 0.015, 0.015], rtol=1e-12)
    from_send = dataclasses.replace(eng, lag_from_arrival=False)
    np.testing.assert_allclose(staggered_wait(from_send, o, mean, mean**2), [0.018, 0.012, 0.005], rtol=1e-12)
