"""A disaggregated prefill (context) server as TensorRT-LLM's published recipes run it: without the overlap
scheduler, so a client's next request joins the pass after the one in flight."""

import pytest

from llmath import Workload
from llmath.deploy import disagg, engines
from llmath.deploy.disagg import _closed_prefill_wait, context_replacement_lag, serve_disaggregated
from llmath.hardware import get


def test_trtllm_context_servers_lag_one_pass_not_the_overlap_schedulers_two():
    # srt-slurm recipes/trtllm/h200/1k1k/stp/c128_ctx1_gen9_dep8_batch512_eplb0_mtp0.yaml (4893f83e): the prefill
    # server sets disable_overlap_scheduler: true, the decode server false; without the overlap scheduler a
    # request arriving during pass k is fetched before pass k + 1: 1 pass ahead of its own
    assert context_replacement_lag("trtllm", 2) == 1
    # the preset (aggregated serving, generation servers) keeps the overlap scheduler's 2 (step n + 1 launched
    # before step n's responses go out: https://nvidia.github.io/TensorRT-LLM/latest/features/overlap-scheduler.html)
    assert engines.preset("trtllm", get("h200")).replacement_lag == 2


def test_an_engine_whose_recipes_state_no_context_lag_keeps_its_preset():
    assert context_replacement_lag("sglang", 2) == 2
    assert context_replacement_lag("vllm", 1) == 1


def test_the_later_waves_wait_one_pass_fewer_without_the_overlap_scheduler():
    # a pass of 0.5 s, a wave of 4 passes, the prompt in one pass, 10 s of decode, 10 prompts per client:
    # later waves: max(4 · 0.5 − 10, (1 + lag) · 0.5); the first wave (1/10 of requests): (4 + 1) / 2 · 0.5 = 1.25 s
    # lag 2: 0.9 · 1.5 + 0.1 · 1.25 = 1.475 s; lag 1: 0.9 · 1.0 + 0.1 · 1.25 = 1.025 s
    assert _closed_prefill_wait((0.5, 4.0, 1.0), 10.0, 10.0, 2) == pytest.approx(1.475)
    assert _closed_prefill_wait((0.5, 4.0, 1.0), 10.0, 10.0, 1) == pytest.approx(1.025)


def test_serve_disaggregated_runs_trtllm_prefill_pools_at_the_context_lag(monkeypatch):
    w = Workload(prompt=1024, gen=256, concurrency=64)
    pools = dict(prefill={"tp": 1}, decode={"tp": 1})
    ours = serve_disaggregated("llama-3.1-8b", "h100-sxm", workload=w, engine="trtllm", **pools)
    monkeypatch.setattr(disagg, "context_replacement_lag", lambda engine, preset_lag: preset_lag)
    overlap = serve_disaggregated("llama-3.1-8b", "h100-sxm", workload=w, engine="trtllm", **pools)
    t = ours["prefill_pass_s"]
    assert overlap["prefill_pass_s"] == pytest.approx(t)
    # 64 prompts of 1,024 tokens are 8 passes of the 8,192-token budget, well inside the decode time, so each later
    # wave (9 of 10 requests at 10 prompts per client) waits (1 + lag) passes: one pass fewer is 0.9 · t less TTFT
    # (the decode batch moves a little with it, so within 5%)
    assert overlap["ttft_s"] - ours["ttft_s"] == pytest.approx(0.9 * t, rel=0.05)
