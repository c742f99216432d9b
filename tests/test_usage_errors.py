"""Every option and keyword that breaks its rule is a usage error: one line naming the value and the rule, exit
code 2 from the CLI, :class:`llmath.UsageError` from the library (never a raw TypeError/AttributeError, never a
silently changed or ignored input)."""

import pytest
from helpers import run_cli

import llmath
from llmath import UsageError, Workload
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.workload import WORKLOAD_FIELDS

SERVE = ("analyze", "llama-3-8b", "-H", "h100-sxm")
SPEC = ("--spec-method", "eagle", "--acceptance", "2")


@pytest.mark.parametrize(
    "args,pattern",
    [
        ((*SERVE, "-c", "0"), r"concurrency=0.0 must be a finite number in \[1, "),
        ((*SERVE, "--rate", "0"), r"rate=0.0 must be a finite number in \(0, "),
        ((*SERVE, "-c", "8", "--engine", "foo"), r"--engine 'foo' is not a known engine"),
        ((*SERVE, "-c", "8", "--engine", ""), r"--engine '' is not a known engine"),
        ((*SERVE, "-c", "8", "--max-num-seqs", "0"), r"max_num_seqs=0 must be an integer in \[1, "),
        ((*SERVE, "-c", "8", "--gpu-memory-utilization", "1.5"), r"gpu_memory_utilization=1.5 .* in \(0, 1\]"),
        ((*SERVE, "--gpus", "2", "--overlap", "foo"), r"overlap='foo' must be one of none, tbo"),
        ((*SERVE, "--overlap", "tbo"), r"overlap='tbo' applies to multi-GPU layouts"),
        ((*SERVE, "-c", "8", "--overlap", "tbo"), r"overlap='tbo' applies to multi-GPU layouts"),
        ((*SERVE, "-c", "inf"), r"concurrency=inf must be a finite number"),
        ((*SERVE, "-c", "1e400"), r"concurrency=inf must be a finite number"),  # float('1e400') is inf
        ((*SERVE, "-c", "8", "--gen-dist", "64:inf"), r"gen_dist weight=inf must be a finite number"),
        ((*SERVE, "-c", "8", *SPEC, "--spec-tokens", str(2**31)), r"k=2147483648 must be an integer in \[1, 64\]"),
        ((*SERVE, "-c", "8", "-b", "4"), r"--batch 4 applies to a static batch"),
        ((*SERVE, "-c", "8", "--prefix", "10"), r"--prefix 10 applies to a static batch.*--prefix-hit"),
        ((*SERVE, "-c", "8", "--plot", "r.png"), r"--plot r.png applies to a static batch"),
        ((*SERVE, "-c", "8", "--memory-plot", "m.png"), r"--memory-plot m.png applies to a static batch"),
        ((*SERVE, "-c", "8", "--draft-model", "llama-3.2-1b"), r"--draft-model: speculative decoding only"),
        ((*SERVE, "-c", "8", *SPEC, "--draft-model", "llama-3.2-1b"), r"applies to method 'draft'"),
        ((*SERVE, "--prefix-hit", "0.5"), r"--prefix-hit applies to serving: add --concurrency"),
        # (--engine alone is valid for a static batch: it picks the kernels a declared quantised format runs in)
        ((*SERVE, "--max-num-seqs", "4"), r"--max-num-seqs applies to serving: add --concurrency"),
        ((*SERVE, "--engine", "foo"), r"engine='foo' is not one of vllm, sglang, trtllm, llama.cpp"),
        ((*SERVE, "--peak-tflops", "1e-300", "--bandwidth-gbs", "1", "--memory-gb", "80"), r"1e-300 must be a"),
        (("analyze", "whisper-large-v3", "-c", "8", "-p", "4000"), r"fixed audio window of 1500 positions"),
        (("plan", "whisper-large-v3", "-p", "4000"), r"fixed audio window of 1500 positions"),
        (("plan", "llama-3-8b", "--tpot-ms", "-1"), r"tpot_ms=-1.0 must be a finite number in \(0, "),
        (("plan", "llama-3-8b", "--tpot-ms", "inf"), r"tpot_ms=inf must be a finite number"),
        (("plan", "llama-3-8b", "--cost-per-gpu-hour", "inf"), r"cost_per_gpu_hour=inf must be a finite number"),
        (("plan", "llama-3-8b", "--gpus", "0"), r"gpus=0 must be an integer in \[1, "),
        (("plan", "llama-3-8b", "--weights", ""), r"weights=\[\] must name one or more weight formats"),
        (("plan", "llama-3-8b", "--top", "0"), r"'--top': 0 must be an integer in \[1, "),
        (("params", "llama-3-8"), r"unknown model 'llama-3-8'"),
    ],
)
def test_cli_usage_errors_exit_2_in_one_line(capsys, args, pattern):
    import re

    code, out, err = run_cli(capsys, *args)
    assert code == 2 and not out, (code, err)
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err), err


def _workload(kw: dict) -> Workload:
    """A 64-token prompt, 8 tokens out, with the workload fields of ``kw`` (taken out of it)."""
    return Workload(**{"prompt": 64, "gen": 8, **{k: kw.pop(k) for k in WORKLOAD_FIELDS if k in kw}})


def _serve(**kw):
    return llmath.serve(**{"model": "llama-3-8b", "hardware": "h100-sxm", "workload": _workload(kw), **kw})


def _plan(**kw):
    return llmath.plan(**{"model": "llama-3-8b", "hardware": "h100-sxm", "gpus": 2, "workload": _workload(kw), **kw})


@pytest.mark.parametrize(
    "call,pattern",
    [
        (lambda: _serve(hardware=None, concurrency=1), r"hardware=None must be a registry name"),
        (lambda: _plan(hardware=None), r"hardware=None must be a registry name"),
        (lambda: _serve(model=None, concurrency=1), r"model=None must be a registry name"),
        (lambda: _serve(model="", concurrency=1), r"model='' must be a registry name"),
        (lambda: _serve(concurrency=1, precision="foo"), r"'foo' is not a known precision"),
        (lambda: _serve(concurrency=1, precision=3), r"precision=3 must be a llmath.Precision"),
        (lambda: _serve(concurrency="8"), r"concurrency='8' must be a finite number"),
        (lambda: _serve(concurrency=8, rate=1), r"exactly one of concurrency"),
        (lambda: _serve(concurrency=1, parallel=ParallelConfig(gpus=0)), r"gpus=0 must be an integer in \[1, "),
        (lambda: _serve(concurrency=1, parallel=ParallelConfig(gpus=-4)), r"gpus=-4 must be an integer in \[1, "),
        (lambda: _serve(concurrency=1, max_num_seqs="8"), r"max_num_seqs='8' must be an integer"),
        (lambda: _serve(concurrency=1, gpu_memory_utilization=float("nan")), r"gpu_memory_utilization=nan"),
        (lambda: _serve(concurrency=1, gen_dist=[(64,)]), r"must be a \(length, weight\) pair"),
        (lambda: _serve(concurrency=1, attention="fast"), r"attention='fast' must be one of eager, flash"),
        (lambda: _serve(concurrency=1, bogus=1), r"unknown engine setting"),
        (lambda: _serve(), r"exactly one of concurrency"),
        (lambda: _serve(concurrency=1, prompt=None), r"prompt=None must be an integer"),
        (lambda: _plan(parallel=ParallelConfig(dp="2")), r"dp='2' must be an integer"),
        (lambda: _plan(gpus=True), r"gpus=True must be an integer"),
        (lambda: _plan(weights=[]), r"weights=\[\] must name one or more"),
        (lambda: _plan(ttft_ms=float("nan")), r"ttft_ms=nan must be a finite number"),
        (lambda: _plan(disagg="yes"), r"disagg='yes' must be True or False"),
        (lambda: llmath.plan("llama-3-8b", "h100-sxm", 2), r"plan\(\): .*; see help"),
        (lambda: llmath.analyze("llama-3-8b", "h100-sxm", precision="foo"), r"'foo' is not a known precision"),
        (
            lambda: llmath.analyze("llama-3-8b", "h100-sxm", parallel=ParallelConfig(gpus=0)),
            r"gpus=0 must be an integer",
        ),
    ],
)
def test_library_raises_usage_errors(call, pattern):
    with pytest.raises(UsageError, match=pattern):
        call()


def test_accepted_values_are_the_values_used():
    """gpus=1 stays one GPU; a float concurrency that is finite is used as given (8.0 requests in flight)."""
    rep = _serve(concurrency=8.0, parallel=ParallelConfig(gpus=1))
    assert rep.gpus == 1 and rep.workload["concurrency"] == 8.0


def test_layer_count_is_bounded_before_any_work(tmp_path, capsys):
    import json
    import time

    from llmath.model import registry

    cfg = dict(registry.config("llama-3.2-1b"), num_hidden_layers=2**31 - 1)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    t = time.monotonic()
    code, _, err = run_cli(capsys, "params", str(tmp_path))
    assert code == 1 and "'num_hidden_layers'=2147483647 must be a positive integer <= 4,096" in err, err
    assert time.monotonic() - t < 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args,pattern",
    [
        (("plan", "llama-3-8b", "--gpus", "1000000"), r"gpus=1000000 must be an integer in \[1, 65,536\]"),
        (("plan", "llama-3-8b", "--gpus", "2147483648"), r"gpus=2147483648 must be an integer in \[1, 65,536\]"),
        # 55,440 = 2^4·3^2·5·7·11 GPUs has 120 divisors: its layouts and disaggregated pairs are far more than
        # those of 4,096 = 2^12 (13 divisors), which the pruned search answers
        (("plan", "deepseek-v3", "-H", "h200", "--gpus", "55440", "--disagg", "--weights", "bf16,fp8,nvfp4"),
         r"would evaluate [\d,]+ layer-stages .* over the limit of [\d,]+: .* or drop --disagg"),
    ],
)  # fmt: skip
def test_oversized_plans_are_refused_fast(capsys, args, pattern):
    import re
    import time

    t = time.monotonic()
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and re.search(pattern, err) and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - t < 2


def test_plan_size_counts_the_divisor_layouts():
    from llmath.deploy.budget import plan_evaluations
    from llmath.model.registry import resolve

    free = dict.fromkeys(("tp", "pp", "ep", "dp"))
    # llama-3-8b (dense, 32 layers) on 8 GPUs: tp in {1,2,4,8} × pp in {1,2,4,8} with tp·pp <= 8 = 10 layouts;
    # × 32 layers × 2 stages = 640
    assert plan_evaluations(resolve("llama-3-8b"), 8, free, 1, False) == 640
    # with disagg: + prefill workers (pp = 1, dp = 1: 4) × single-stage workers (pp = 1: 4) = 16 pairs; 26 × 64
    assert plan_evaluations(resolve("llama-3-8b"), 8, free, 1, True) == 26 * 64


def test_a_plan_stops_at_its_next_candidate_once_its_caller_has_gone():
    from llmath.deploy.budget import ABANDON
    from llmath.errors import Abandoned

    asked = []
    token = ABANDON.set(lambda: asked.append(1) or True)
    try:
        with pytest.raises(Abandoned):
            llmath.plan("llama-3-8b", "h100-sxm", gpus=8, workload=Workload(prompt=512, gen=128))
    finally:
        ABANDON.reset(token)
    assert asked == [1]  # asked once, at the first candidate, and nothing after
    assert (
        llmath.plan("llama-3-8b", "h100-sxm", gpus=8, workload=Workload(prompt=512, gen=128)).best is not None
    )  # no check: runs
