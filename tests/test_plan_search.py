"""The planner's pruned search finds what evaluating every configuration finds (the exhaustive search is the
oracle: the same serving model, nothing skipped), and its pruning rules hold on their own."""

import numpy as np
import pytest

from llmath import Workload
from llmath.deploy.engines import preset
from llmath.deploy.plan import plan
from llmath.deploy.plan_search import Frontier, disagg_bound, families, weights_leave_no_pool
from llmath.hardware import get
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

CASES = [
    # 8 GPUs: a dense model, two formats, aggregated and disaggregated, both targets
    ("llama-3.1-70b", "h100-sxm", dict(workload=Workload(prompt=2048, gen=256), gpus=8, ttft_ms=2000, tpot_ms=40,
                                       disagg=True, weights=["bf16", "fp8"])),
    # 64 GPUs: an MoE model (attention-DP × EP layouts), a TPOT target, disaggregated
    ("qwen3-30b-a3b", "h100-sxm", dict(workload=Workload(prompt=1024, gen=512), gpus=64, tpot_ms=30, disagg=True,
                                       weights="fp8")),
]  # fmt: skip


@pytest.mark.parametrize(("model", "hw", "kw"), CASES, ids=["8-gpus", "64-gpus"])
def test_the_pruned_search_finds_the_exhaustive_best_and_front(model, hw, kw):
    pruned = plan(model, hw, **kw)
    full = plan(model, hw, exhaustive=True, **kw)
    assert full.best is not None
    assert pruned.best == full.best
    assert pruned.pareto == full.pareto
    assert pruned.evaluated < full.evaluated  # it did skip configurations


def test_without_targets_the_pruned_search_still_finds_the_exhaustive_best():
    kw = dict(workload=Workload(prompt=1024, gen=256), gpus=8, disagg=True, weights=["bf16", "fp8"])
    assert plan("llama-3-8b", "h100-sxm", **kw).best == plan("llama-3-8b", "h100-sxm", exhaustive=True, **kw).best


def test_the_best_of_equal_throughputs_is_the_fastest_per_user():
    # disaggregated pools limited by the same prefill pool tie on tokens/s per GPU: the best is on the front
    res = plan(
        "qwen3-30b-a3b",
        "h100-sxm",
        gpus=64,
        workload=Workload(prompt=1024, gen=512),
        tpot_ms=30,
        disagg=True,
        weights="fp8",
    )
    best = res.best
    assert best is not None
    assert any(r == best for r in res.pareto)


def test_memory_bound_rejects_only_what_cannot_hold_its_weights():
    # deepseek-v3: 671,026,404,352 parameters (the model card's 671B) in fp8 (1 byte each) = 671 GB; an H200
    # holds 141 GB, of which vLLM's gpu_memory_utilization 0.9 gives the engine 126.9 GB:
    # 671.0 / 4 = 167.8 GB per GPU ≥ 126.9 (cannot fit), 671.0 / 8 = 83.9 GB < 126.9 (may fit)
    spec, hw = resolve("deepseek-v3"), get("h200")
    eng, p = preset("vllm", hw), Precision("fp8", "fp8", "fp8")
    assert weights_leave_no_pool(spec, p, eng, hw.memory_bytes, 4)
    assert not weights_leave_no_pool(spec, p, eng, hw.memory_bytes, 8)


def test_families_group_by_everything_but_pipeline_depth():
    keys = [(2, 4, 1, 2), (2, 1, 1, 2), (1, 2, 1, 1), (2, 2, 1, 2)]
    assert families(keys) == [[(2, 1, 1, 2), (2, 2, 1, 2), (2, 4, 1, 2)], [(1, 2, 1, 1)]]


def test_the_disaggregated_bound_is_the_unrounded_rate_match():
    # 2 req/s per prefill worker of 4 GPUs, 0.5 req/s per decode worker of 8 GPUs, 100 tokens each: four decode
    # workers per prefill worker, 2·100 / (4 + 4·8) = 5.555… tokens/s per GPU
    assert disagg_bound(2.0, 4, np.array([0.5]), 8, 100.0)[0] == pytest.approx(200 / 36)


def test_the_frontier_beats_only_dominated_boxes():
    f = Frontier()
    f.add(np.array([10.0, 5.0, 1.0]), np.array([1.0, 2.0, 3.0]))
    # a box (thr ≤ 4, user 1.5) is beaten by (5, 2); (6, 1.5) by none; (0.5, 3.5) by none (nothing that fast)
    assert f.beats(np.array([4.0, 6.0, 0.5]), np.array([1.5, 1.5, 3.5])).tolist() == [True, False, False]
