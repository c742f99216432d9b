"""Every aggregated row `llmath plan` returns is what `llmath analyze` (``serve``) gives on its layout at its
concurrency: both build the replica with the engine's launch and host terms (deploy/engine_device.py), and one
concurrency or an array of them evaluates to the same numbers."""

import numpy as np
import pytest

from llmath import Workload, serve
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.plan import plan
from llmath.hardware.efficiency_fit import tile_share
from llmath.model.dtypes import Precision

BF16 = Precision("bf16", "bf16", "bf16")
WORK = dict(prompt=1024, gen=256)
CASES = [("llama-3-8b", 8, {"tp": 8}), ("qwen3-30b-a3b", 2, {"tp": 2})]  # a dense model, a MoE one


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "sglang"])
@pytest.mark.parametrize(("model", "gpus", "pins"), CASES)
def test_the_planners_aggregated_rows_are_what_analyze_gives_on_their_layouts(engine, model, gpus, pins):
    # one instance on all the GPUs (the pinned TP): a row's concurrency is the instance's; its best and its
    # front at 1, 2 and 3 clients and at the most it admits, each against serve at that layout and concurrency
    r = plan(model, "h100-sxm", gpus=gpus, workload=Workload(**WORK), engine=engine, parallel=ParallelConfig(**pins))
    rows = [x for x in [r.best, *r.pareto] if x["mode"] == "aggregated"]
    cs = sorted({x["concurrency"] for x in rows})
    assert cs[:3] == [1, 2, 3] and cs[-1] >= 256
    checked = [x for x in rows if x["concurrency"] in (1, 2, 3, cs[-1])] + [r.best]
    for x in checked:
        assert x["gpus_used"] == gpus and x["tp"] * x["pp"] * x["dp"] == gpus
        layout = ParallelConfig(None, x["tp"], x["pp"], x["ep"], x["dp"])
        work = Workload(**WORK, concurrency=x["concurrency"])
        m = serve(model, "h100-sxm", workload=work, engine=engine, precision=BF16, parallel=layout).metrics
        for k in ("ttft_s", "tpot_s", "throughput_tok_s_per_gpu"):
            assert x[k] == pytest.approx(m[k], rel=1e-9), (x["concurrency"], k)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_searched_layouts_rows_are_what_analyze_gives_on_one_instance(engine):
    # unpinned: the pruned search samples every layout and refines between samples; each aggregated row's
    # instances (gpus_used / (tp × pp) of a dense model, its dp) serve concurrency / instances clients each
    r = plan("llama-3-8b", "h100-sxm", gpus=8, workload=Workload(**WORK), engine=engine, tpot_ms=20)
    rows = [x for x in [r.best, *r.pareto] if x["mode"] == "aggregated"]
    assert len({x["tp"] for x in rows}) > 1
    for x in rows:
        instances = x["gpus_used"] // (x["tp"] * x["pp"])
        assert x["dp"] == instances
        work = Workload(**WORK, concurrency=x["concurrency"] / instances)
        layout = ParallelConfig(None, x["tp"], x["pp"]) if x["tp"] * x["pp"] > 1 else None
        m = serve("llama-3-8b", "h100-sxm", workload=work, engine=engine, precision=BF16, parallel=layout).metrics
        for k in ("ttft_s", "tpot_s", "throughput_tok_s_per_gpu"):
            assert x[k] == pytest.approx(m[k], rel=1e-9), (x["tp"], x["concurrency"], k)


def test_a_whole_tile_summed_from_fractions_is_one_tile_whatever_the_rounding():
    # 1,008.97… decoders + 8.011… chunks × 896.6 tokens = 8,192 tokens, 64 tiles of 128 rows: an ulp above
    # (how numpy rounded the product for one concurrency or for an array) is still 64 tiles, a whole tile (share 1),
    # while a token more is a 65th, 8,193 / (65 × 128) of it filled
    whole = np.array([8192.0, np.nextafter(8192.0, np.inf), 8193.0])
    assert tile_share(whole, 128) == pytest.approx([1.0, 1.0, 8193 / (65 * 128)], rel=1e-15)
    assert tile_share(np.array([0.0]), 128)[0] < 1e-30  # no rows: no share, and no division by zero
