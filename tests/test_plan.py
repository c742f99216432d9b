"""The planner: the Pareto front is non-dominated, targets are honoured, pins and misfits say so, JSON keys."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmath import Workload
from llmath.cli import main
from llmath.deploy.disagg import link_bytes_per_s, prefill_worker
from llmath.deploy.engines import preset
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.plan import pareto_mask, plan
from llmath.deploy.serving import Requests
from llmath.deploy.speculative import Speculation, draft_device, one_layer, round_time
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

KEYS = ("mode", "tp", "pp", "ep", "dp", "concurrency", "ttft_s", "tpot_s", "throughput_tok_s")
KEYS += ("throughput_tok_s_per_gpu", "tok_s_per_user")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), min_size=1, max_size=40))
def test_pareto_mask_keeps_exactly_the_non_dominated(points):
    x, y = np.array(points).T
    keep = pareto_mask(x, y)
    for i in range(len(x)):
        dominated = np.any((x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i])))
        if keep[i]:
            assert not dominated
        elif not dominated:  # an exact duplicate of a kept point (one copy is kept)
            assert np.any(keep & (x == x[i]) & (y == y[i]))


def test_plan_front_is_non_dominated_and_meets_the_targets():
    r = plan(
        "llama-3-8b", "h100-sxm", gpus=4, workload=Workload(prompt=1024, gen=256), ttft_ms=100, tpot_ms=25, disagg=True
    )
    front = r.pareto
    assert front and r.best is not None
    for p in front:
        assert p["ttft_s"] <= 0.1 and p["tpot_s"] <= 0.025
        assert set(KEYS) <= set(p)
        assert p["tok_s_per_user"] == pytest.approx(1 / p["tpot_s"])
        for q in front:
            assert not (
                q["throughput_tok_s_per_gpu"] >= p["throughput_tok_s_per_gpu"]
                and q["tok_s_per_user"] >= p["tok_s_per_user"]
                and (q["throughput_tok_s_per_gpu"], q["tok_s_per_user"])
                != (p["throughput_tok_s_per_gpu"], p["tok_s_per_user"])
            )
    # the best is the front's highest tokens/s per GPU
    assert r.best["throughput_tok_s_per_gpu"] == max(p["throughput_tok_s_per_gpu"] for p in front)


def test_without_targets_the_best_is_the_maximum_throughput():
    free = plan("llama-3-8b", "h100-sxm", gpus=2, workload=Workload(prompt=512, gen=128))
    tight = plan("llama-3-8b", "h100-sxm", gpus=2, workload=Workload(prompt=512, gen=128), tpot_ms=10)
    assert free.best["throughput_tok_s_per_gpu"] > tight.best["throughput_tok_s_per_gpu"]
    assert tight.best["tpot_s"] <= 0.010
    assert free.best["throughput_tok_s"] == pytest.approx(2 * free.best["throughput_tok_s_per_gpu"])


def test_impossible_targets_leave_best_empty_with_a_note():
    r = plan("llama-3-8b", "h100-sxm", gpus=1, workload=Workload(prompt=512, gen=128), tpot_ms=0.01)
    assert r.best is None and r.pareto == [] and r.notes


def test_a_model_that_does_not_fit_says_so():
    with pytest.raises(WorkloadError, match="no configuration fits"):
        plan("llama-3-70b", "h100-sxm", gpus=1, workload=Workload(prompt=1024, gen=128))


def test_cost_per_million_tokens():
    r = plan("llama-3-8b", "h100-sxm", gpus=1, workload=Workload(prompt=512, gen=128), cost_per_gpu_hour=3.6)
    b = r.best
    # $3.6 per GPU-hour = $0.001 per GPU-second; per million tokens: 0.001 / (tokens/s per GPU) × 1e6
    assert b["usd_per_million_tokens"] == pytest.approx(1e3 / b["throughput_tok_s_per_gpu"])


def test_disaggregated_prefill_worker_limits():
    hw = get("h100-sxm")
    dev = Device(resolve("llama-3-8b"), hw, Precision(), efficiency("expected", hw))
    eng = preset("vllm", hw)
    # an 8192-token budget packs ⌊8192 / 1024⌋ = 8 whole prompts per prefill iteration
    w = prefill_worker(dev, eng, Requests(1024, 128))
    assert w.prompts_per_iteration == 8
    assert w.requests_s == pytest.approx(8 / w.ttft_s)
    # one direction of the H100's 900 GB/s (bidirectional) NVLink, per sending GPU, inside an 8-GPU box
    assert link_bytes_per_s(hw) == 450e9
    assert link_bytes_per_s(hw, senders=2, span=4) == 900e9
    assert link_bytes_per_s(hw, senders=1, span=16) < 450e9  # two boxes: the scale-out network


def test_speculative_verify_of_width_one_is_a_decode_step():
    hw = get("h100-sxm")
    dev = Device(resolve("llama-3-8b"), hw, Precision(), efficiency("expected", hw))
    assert dev.verify(8, 1, 2000).time_s == pytest.approx(dev.iteration(8, 2000).time_s)
    # the EAGLE/MTP head is the target's shape with one layer
    assert one_layer(dev.spec).n_layers == 1 and one_layer(dev.spec).d_model == dev.spec.d_model
    s = Speculation("eagle", 3, 2.5)
    d = draft_device(dev, s)
    # one round = 3 draft steps + a verify of width 4; TPOT = round / 2.5
    t = round_time(dev, d, s, 8, 2000)
    assert t == pytest.approx(3 * d.iteration(8, 2001).time_s + dev.verify(8, 4, 2000).time_s)
    with pytest.raises(WorkloadError, match="acceptance length"):
        Speculation("eagle", 3, 4.5)


def test_cli_plan_json_keys(capsys):
    code = 0
    try:
        main(["plan", "llama-3-8b", "-H", "h100-sxm", "--gpus", "2", "--prompt", "512", "--gen", "64", "--json"])
    except SystemExit as e:
        code = e.code or 0
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    assert set(KEYS) <= set(d["best"])
    assert isinstance(d["pareto"], list) and all(set(KEYS) <= set(p) for p in d["pareto"])


def test_pinning_an_impossible_layout_is_an_error():
    # llama-3-8b has 32 attention heads: tp=3 cannot divide them
    with pytest.raises(WorkloadError, match="tp=3 must divide the 32 attention heads"):
        plan("llama-3-8b", "h100-sxm", gpus=3, workload=Workload(prompt=512, gen=64), parallel=ParallelConfig(tp=3))


def test_layouts_are_searched_and_pins_honoured():
    # llama-3-70b in bf16 (141 GB) needs at least two H100s: the plan finds TP layouts, and a pin holds
    r = plan("llama-3-70b", "h100-sxm", gpus=4, workload=Workload(prompt=1024, gen=128))
    assert r.best["tp"] * r.best["pp"] >= 2
    assert {"mode": "aggregated", "weights": "bf16", "tp": 1, "pp": 1, "ep": 1, "dp": 1} in [
        {k: x[k] for k in ("mode", "weights", "tp", "pp", "ep", "dp")} for x in r.rejected
    ]
    pinned = plan(
        "llama-3-70b", "h100-sxm", gpus=4, workload=Workload(prompt=1024, gen=128), parallel=ParallelConfig(tp=4)
    )
    assert all(x["tp"] == 4 for x in pinned.pareto)
    two = plan(
        "llama-3-8b", "h100-sxm", gpus=8, workload=Workload(prompt=512, gen=64), parallel=ParallelConfig(tp=1, dp=2)
    )
    assert all(x["dp"] == 2 and x["gpus_used"] == 2 for x in two.pareto)


def test_the_package_exports_serve_and_plan():
    import llmath
    from llmath.deploy.service import serve

    assert llmath.plan is plan and llmath.serve is serve


def test_disagg_on_one_gpu_says_why_it_has_no_disaggregated_rows():
    # a prefill pool and a decode pool are two GPUs at least: on one, only aggregated rows, and a note saying so
    r = plan("llama-3.2-1b", "h100-sxm", gpus=1, workload=Workload(prompt=512, gen=64), disagg=True)
    assert {row["mode"] for row in r.pareto} == {"aggregated"}
    assert any("--disagg" in n and "use --gpus 2" in n for n in r.notes)
