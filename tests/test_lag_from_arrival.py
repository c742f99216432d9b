"""vLLM's batch queue with async scheduling: a follow-up whose front end outlasts a pass waits for the pass
already queued behind the one in flight (vllm/v1/engine/core.py: the busy loop drains its input queue only at
the top of a loop, then schedules the next batch and blocks on the oldest one's output)."""

import dataclasses

import numpy as np
import pytest

from llmath.deploy import engines
from llmath.deploy.closed_loop import staggered_state
from llmath.deploy.replacement import joined_passes
from llmath.deploy.serving import Requests, memory
from llmath.deploy.simulate import simulate
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100, H200 = get("h100-sxm"), get("h200")


def test_the_presets_say_which_engine_counts_its_lag_from_the_arrival():
    assert engines.preset("vllm", H200).lag_from_arrival is True
    assert engines.preset("sglang", H200).lag_from_arrival is False
    assert engines.preset("trtllm", H200).lag_from_arrival is False
    assert "core.py" in engines.preset("vllm", H200).sources["lag_from_arrival"]


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
    # an overlap scheduler whose lag runs from the send: max(2, ⌈o / τ⌉) = 2, 2, 2, 3
    trt = engines.preset("trtllm", H200)
    np.testing.assert_array_equal(joined_passes(trt, o, tau), [2, 2, 2, 3])


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
