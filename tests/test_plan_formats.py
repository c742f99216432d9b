"""`llmath plan` without ``--weights`` plans the checkpoint's own formats, as `llmath analyze` reads them.

The reference is the public serving function: ``serve`` (``llmath analyze --concurrency``) given no precision reads
the checkpoint's formats itself (``llmath.hardware.execution.checkpoint_precision``); the planner's best row on its
layout and concurrency must be serve's there to 1e-9 relative. The checkpoint is the registry's Qwen3-235B-A22B-FP8
(the hub's config.json, ``quantization_config``: block FP8 with ``weight_block_size`` [128, 128],
``modules_to_not_convert`` naming lm_head, the router gates and the norms)."""

import json

import pytest
from helpers import run_cli

from llmath import Workload, params, serve
from llmath.cli import main
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.plan import plan
from llmath.errors import WorkloadError

MODEL, HW, WORK = "qwen3-235b-a22b-fp8", "h100-sxm", dict(prompt=1024, gen=256)


def _cli(capsys, *args: str) -> dict:
    try:
        main(["plan", MODEL, "-H", HW, "--gpus", "4", "--tp", "4", "--json", *args])
    except SystemExit as e:
        assert not e.code
    return json.loads(capsys.readouterr().out)


def test_the_best_plan_of_an_fp8_checkpoint_is_serve_on_its_layout_with_the_checkpoints_formats():
    r = plan(MODEL, HW, gpus=4, workload=Workload(**WORK), parallel=ParallelConfig(tp=4))
    x = r.best
    assert x is not None and x["weights"] == "fp8-block" and r.formats["from"] == "checkpoint"
    layout = ParallelConfig(None, x["tp"], x["pp"], x["ep"], x["dp"])
    rep = serve(MODEL, HW, workload=Workload(**WORK, concurrency=x["concurrency"]), parallel=layout)  # no precision
    for k in ("ttft_s", "tpot_s", "throughput_tok_s_per_gpu"):
        assert x[k] == pytest.approx(rep.metrics[k], rel=1e-9), k
    assert x["concurrency"] <= rep.memory.max_resident * rep.replicas

    # the memory per GPU holds 1-byte weights: the FP8 modules (attention q, k, v, o and the routed experts) at
    # 1 byte per parameter, what the checkpoint keeps 16-bit (embedding, lm_head, router, norms) at 2, all split
    # over the 4 GPUs (TP 4, EP 4) but the router and the norms (replicated), plus one scale per 128 × 128 block
    # (4-byte fp32 scale_inv: 4 / 16384 = 0.0244% of the FP8 bytes); a bf16 plan would need 2 bytes per parameter
    c = params(MODEL).by_component
    fp8 = sum(v for k, v in c.items() if k.startswith(("attention.", "moe.experts.")) and k.endswith(".weight"))
    split16 = c["embedding.token"] + c["lm_head.weight"]
    replicated16 = c["moe.router.weight"] + c["norm.layers"] + c["norm.final"] + c["attention.qk_norm"]
    one_byte = fp8 * 1 / 4 + split16 * 2 / 4 + replicated16 * 2
    assert one_byte <= rep.memory.weights_bytes <= one_byte + fp8 / 4 * 4 / (128 * 128) * 1.001
    assert rep.memory.weights_bytes < 0.51 * params(MODEL).total * 2 / 4  # about half the bf16 bytes per GPU


def test_weights_bf16_plans_the_bf16_model_that_does_not_fit():
    # 235.1e9 parameters × 2 bytes / 4 GPUs = 117.5 GB per GPU > 80 GB: `--weights bf16` keeps planning bf16
    with pytest.raises(WorkloadError, match="no configuration fits"):
        plan(MODEL, HW, gpus=4, workload=Workload(**WORK), parallel=ParallelConfig(tp=4), weights="bf16")


def test_cli_plan_json_says_which_formats_it_planned(capsys):
    d = _cli(capsys)
    assert d["formats"]["from"] == "checkpoint" and list(d["formats"]["by_weights"]) == ["fp8-block"]
    own = d["formats"]["by_weights"]["fp8-block"]
    assert own["act_quant"] == "fp8" and own["modules"]["lm_head"] == "bf16"
    assert {"best", "pareto", "evaluated", "rejected", "notes"} <= set(d) and d["best"]["weights"] == "fp8-block"
    d = _cli(capsys, "--weights", "fp8")
    assert d["formats"]["from"] == "--weights" and list(d["formats"]["by_weights"]) == ["fp8"]
    assert d["best"]["weights"] == "fp8"


def test_cli_plan_names_the_checkpoints_formats_and_emits_no_quantization_flag(capsys):
    try:
        main(["plan", MODEL, "-H", HW, "--gpus", "4", "--tp", "4", "--top", "1"])
    except SystemExit as e:
        assert not e.code
    assert "weights: the checkpoint's fp8-block" in capsys.readouterr().out
    try:
        main(["plan", MODEL, "-H", HW, "--gpus", "4", "--tp", "4", "--emit", "vllm"])
    except SystemExit as e:
        assert not e.code
    cmd = capsys.readouterr().out
    assert "--tensor-parallel-size 4" in cmd and "--quantization" not in cmd  # vLLM reads quantization_config


def test_the_pages_plan_plans_the_checkpoints_formats_unless_weights_are_chosen():
    from llmath.web import api

    q = {"model": MODEL, "hardware": HW, "gpus": "4", "tp": "4", "prompt": "1024", "gen": "256"}
    d = api.plan(q)
    assert d["formats"]["from"] == "checkpoint" and d["best"]["weights"] == "fp8-block"
    d = api.plan(q | {"weights": "fp8"})
    assert d["formats"]["from"] == "--weights" and d["best"]["weights"] == "fp8"


def test_a_command_for_another_engine_than_the_plan_timed_says_so(capsys):
    # the plan's rows are timed with --engine's scheduler and kernels; a command written for another engine
    # carries a note naming both, and the JSON names the engine that timed the plan
    code, out, _ = run_cli(capsys, "plan", "llama-3-8b", "-H", "h100-sxm", "--gpus", "1", "--prompt", "1000",
                           "--gen", "100", "--engine", "sglang", "--emit", "vllm", "--json")  # fmt: skip
    notes = json.loads(out)["notes"]
    assert code == 0 and any("sglang" in n and "--engine vllm" in n for n in notes)
    code, out, _ = run_cli(capsys, "plan", "llama-3-8b", "-H", "h100-sxm", "--gpus", "1", "--prompt", "1000",
                           "--gen", "100", "--engine", "vllm", "--emit", "vllm", "--json")  # fmt: skip
    assert code == 0 and not any("--engine" in n for n in json.loads(out)["notes"])
    code, out, _ = run_cli(capsys, "plan", "llama-3-8b", "-H", "h100-sxm", "--gpus", "1", "--prompt", "1000",
                           "--gen", "100", "--engine", "sglang", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["engine"] == "sglang"
