"""vLLM's batch queue with async scheduling: a follow-up whose front end outlasts a pass waits for the pass
already queued behind the one in flight (vllm/v1/engine/core.py: the busy loop drains its input queue only at
the top of a loop, then schedules the next batch and blocks on the oldest one's output)."""

import dataclasses

import numpy as np

from llmath.deploy import closed_loop as cl
from llmath.deploy import engines
from llmath.hardware import get

H200 = get("h200")


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
    np.testing.assert_array_equal(cl._joined_passes(async_vllm, o, tau), [2, 2, 3, 4])
    # the synchronous step (lag 1, nothing queued): the first pass boundary after the arrival, 1, 1, 2, 3
    sync_vllm = engines.preset("vllm", H200)
    np.testing.assert_array_equal(cl._joined_passes(sync_vllm, o, tau), [1, 1, 2, 3])
    # an overlap scheduler whose lag runs from the send: max(2, ⌈o / τ⌉) = 2, 2, 2, 3
    trt = engines.preset("trtllm", H200)
    np.testing.assert_array_equal(cl._joined_passes(trt, o, tau), [2, 2, 2, 3])
