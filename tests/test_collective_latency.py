"""The default collective latencies against NCCL's own latency model and the measured NCCL all-reduces."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from llmath.hardware.topology import DEFAULT_LATENCY_S


def test_defaults_are_nccls_latency_model():
    # NCCL src/graph/tuning.cc (commit b6475625): baseLat Ring/LL 6.6, Tree/LL 6.8 µs; hwLat NVLink LL 0.6,
    # NET Tree/LL 5.0 µs. One 8-GPU NVLink box, ring all-reduce: 6.6 + 2·(8 − 1)·0.6 = 15.0 µs
    assert DEFAULT_LATENCY_S["scale_up"] == pytest.approx((6.6 + 2 * 7 * 0.6) * 1e-6)
    # two boxes, tree all-reduce: 6.8 + 2·((8 − 1)·0.6 + log2(2)·5.0) = 25.2 µs
    assert DEFAULT_LATENCY_S["scale_out"] == pytest.approx((6.8 + 2 * (7 * 0.6 + 1 * 5.0)) * 1e-6)


def test_measured_nccl_all_reduce_intercepts_bracket_the_scale_up_default():
    fit = json.loads((resources.files("llmath") / "data" / "efficiency_fit.json").read_text())["devices"]
    # intercepts (s) of the fitted NCCL all-reduce at 8 GPUs, aiconfigurator-core's measured nccl_perf tables
    at8 = {d: v["all_reduce"]["8"]["coef"][0] for d, v in fit.items() if "8" in v.get("all_reduce", {})}
    assert {"h100-sxm", "h200"} <= set(at8)
    # the model's 15 µs is within 0.5× … 1.25× of every measured 8-GPU intercept (17.9 … 27.1 µs)
    for dev, alpha in at8.items():
        assert 0.5 * alpha <= DEFAULT_LATENCY_S["scale_up"] <= 1.25 * alpha, (dev, alpha)
