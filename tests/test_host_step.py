"""The host's time per engine step: max(GPU, host) under an overlap scheduler, their sum without one."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.host_step import HostStep
from llmath.deploy.overheads import Overheads
from llmath.deploy.service import serve
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100 = get("h100-sxm")


def test_host_time_is_a_constant_and_a_part_per_request():
    h = HostStep(base_s=1e-3, per_request_s=50e-6)
    # 1 ms + 128 × 50 µs = 1 ms + 6.4 ms = 7.4 ms; a step of no request costs the host nothing
    assert h.host_s(np.array([128.0, 0.0])) == pytest.approx([7.4e-3, 0.0])


def test_overlap_hides_the_host_up_to_the_gpu_time_and_no_overlap_adds_it():
    over, serial = HostStep(0.0, 50e-6, overlap=True), HostStep(0.0, 50e-6, overlap=False)
    # 128 requests: host 6.4 ms. GPU 5 ms: the host is the longer (6.4); GPU 9 ms: the GPU (9)
    assert over.step_s(np.array([5e-3, 9e-3]), 128) == pytest.approx([6.4e-3, 9e-3])
    # without the overlap scheduler the two run one after the other: 5 + 6.4, 9 + 6.4
    assert serial.step_s(np.array([5e-3, 9e-3]), 128) == pytest.approx([11.4e-3, 15.4e-3])


def test_bad_host_terms_are_clear_errors():
    with pytest.raises(WorkloadError, match="per_request_s=-1"):
        HostStep(per_request_s=-1)
    with pytest.raises(WorkloadError, match="host_step_per_request_s"):
        Overheads("x", host_step_per_request_s=5e-5)  # a non-zero term without a source


def test_a_device_iteration_is_floored_by_the_host():
    dev = Device(resolve("llama-3.2-1b"), H100, Precision(), efficiency("expected", H100))
    gpu = dev.iteration(np.array([8.0, 256.0]), 1000.0).time_s
    host = replace(dev, host_step=HostStep(0.0, 40e-6))  # 8 requests: 0.32 ms; 256: 10.24 ms
    t = host.iteration(np.array([8.0, 256.0]), 1000.0).time_s
    assert t == pytest.approx(np.maximum(gpu, [8 * 40e-6, 256 * 40e-6]))
    serial = replace(dev, host_step=HostStep(0.0, 40e-6, overlap=False))
    assert serial.iteration(256.0, 1000.0).time_s == pytest.approx(gpu[1] + 256 * 40e-6)


def test_the_trtllm_preset_keeps_the_overlap_scheduler_and_no_host_term():
    eng = engines.preset("trtllm")
    assert eng.overlap_scheduler  # disable_overlap_scheduler defaults to False (overlap-scheduler docs)
    assert eng.overheads.host_step_s == 0.0 and eng.overheads.host_step_per_request_s == 0.0  # refuted: docs


def test_serving_takes_the_host_floor_from_the_engines_terms(monkeypatch):
    work = Workload(prompt=512, gen=256, concurrency=128)
    base = serve("llama-3.2-1b", "h100-sxm", workload=work, engine="trtllm").metrics
    pre = engines.overheads("trtllm")
    ov = replace(pre, host_step_per_request_s=200e-6, sources={**pre.sources, "host_step_per_request_s": "a test"})
    monkeypatch.setattr(engines, "overheads", lambda name, hw=None: ov)  # the preset with a per-request host term
    floored = serve("llama-3.2-1b", "h100-sxm", workload=work, engine="trtllm").metrics
    # 128 resident requests × 200 µs = 25.6 ms per decode step, far above a 1B model's GPU step on an H100
    assert base["tpot_s"] < 25.6e-3 <= floored["tpot_s"] * 1.0001
    ideal = serve("llama-3.2-1b", "h100-sxm", workload=work, engine="trtllm", efficiency_mode="ideal")
    assert ideal.metrics["tpot_s"] < 25.6e-3  # no engine overheads under ideal efficiency
