"""The planner with speculative decoding: every aggregated layout also evaluated speculating, the draft's weights
counted in memory, and the speculating configuration kept only where it wins under the targets."""

import json

import pytest
from helpers import run_cli

from llmath import Workload
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.plan import plan
from llmath.deploy.service import serve
from llmath.deploy.speculative import Speculation
from llmath.hardware import custom
from llmath.model.dtypes import Precision

BF16 = Precision("bf16", "bf16", "bf16")
EAGLE = Speculation("eagle", 3, 2.5)


def test_the_best_speculating_plan_has_serves_tpot_at_its_concurrency():
    # identity under test: a plan row at (layout, concurrency C) is serve()'s closed loop at the same layout, C
    # and speculation (both run closed_loop.lockstep_state on the same Decoding, memory with the same draft bytes)
    # the same search with and without speculation
    search = dict(gpus=2, parallel=ParallelConfig(tp=2), workload=Workload(prompt=1024, gen=256), tpot_ms=10)
    r = plan("llama-3-8b", "h100-sxm", **search, speculation=EAGLE)
    b = r.best
    assert b["speculation"] == {"method": "eagle", "k": 3, "acceptance": 2.5, "draft_model": None}
    rep = serve(
        "llama-3-8b",
        "h100-sxm",
        workload=Workload(prompt=1024, gen=256, concurrency=b["concurrency"]),
        parallel=ParallelConfig(gpus=2, tp=2),
        speculation=EAGLE,
    )
    assert rep.metrics["tpot_s"] == pytest.approx(b["tpot_s"], rel=1e-9)
    assert rep.metrics["ttft_s"] == pytest.approx(b["ttft_s"], rel=1e-9)
    # speculating at 2.5 tokens a round holds more requests per GPU under a 10 ms TPOT than decoding one at a time
    plain = plan("llama-3-8b", "h100-sxm", **search)
    assert plain.best["speculation"] is None
    assert b["throughput_tok_s_per_gpu"] > plain.best["throughput_tok_s_per_gpu"]


def test_the_draft_weights_are_counted_in_memory():
    # Llama-3-8B's EAGLE head: one decoder layer of its shape, embedding and LM head shared with the target:
    # q, o 4096·4096 each, k, v 4096·(8·128) each, gate/up/down 3·4096·14336, two RMSNorms 2·4096 = 218,120,192
    # parameters (+ at most one more 4096-wide norm), 2 bytes each in bf16 on one GPU
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    kw = {"workload": Workload(prompt=1024, gen=256, concurrency=8), "precision": BF16}
    with_draft = serve("llama-3-8b", "h100-sxm", speculation=EAGLE, **kw).memory
    without = serve("llama-3-8b", "h100-sxm", **kw).memory
    assert with_draft.weights_bytes - without.weights_bytes == pytest.approx(2 * layer, rel=1e-4)
    # the plan counts the same: a 24 GB device holds Llama-3-8B (16.06 GB of bf16 weights) but not it and a
    # Llama-3.1-8B draft (another 16.06 GB), so every row decodes one token at a time and the misfit is listed
    small = custom(989, 3350, 24)
    draft = Speculation("draft", 3, 2.5, "llama-3.1-8b")
    r = plan("llama-3-8b", small, gpus=1, workload=Workload(prompt=1024, gen=256), speculation=draft)
    assert r.best is not None and all(p["speculation"] is None for p in r.pareto)
    assert any(x["reason"] == "does not fit with the draft" for x in r.rejected)


def test_acceptance_one_never_wins():
    # at acceptance 1 a round (3 draft steps + a verify of width 4) yields one token, as one decode step does,
    # at a higher cost and with the draft's weights taking KV memory: the non-speculative plan is kept
    kw = {"workload": Workload(prompt=1024, gen=256), "gpus": 2, "tpot_ms": 20}
    r = plan("llama-3-8b", "h100-sxm", speculation=Speculation("eagle", 3, 1.0), **kw)
    plain = plan("llama-3-8b", "h100-sxm", **kw)
    assert all(p["speculation"] is None for p in r.pareto)
    assert r.best == plain.best


def test_the_pruned_search_finds_the_exhaustive_answer_with_speculation():
    kw = {"workload": Workload(prompt=512, gen=128), "gpus": 2, "tpot_ms": 8, "speculation": EAGLE}
    fast = plan("llama-3-8b", "h100-sxm", **kw)
    full = plan("llama-3-8b", "h100-sxm", exhaustive=True, **kw)
    assert fast.best == full.best and fast.pareto == full.pareto


def test_cli_plan_rows_say_whether_they_speculate(capsys):
    base = ("plan", "llama-3-8b", "--gpus", "2", "--tpot-ms", "10", "--json")
    code, out, _ = run_cli(capsys, *base, "--spec-method", "eagle", "--spec-tokens", "3", "--acceptance", "2.5")
    d = json.loads(out)
    assert code == 0 and {"best", "pareto"} <= set(d)
    assert d["best"]["speculation"] == {"method": "eagle", "k": 3, "acceptance": 2.5, "draft_model": None}
    code, out, _ = run_cli(capsys, *base)
    d = json.loads(out)
    assert code == 0 and all(p["speculation"] is None for p in [d["best"], *d["pareto"]])


def test_plan_emit_of_a_speculating_best_carries_the_speculative_config(capsys):
    # vLLM takes speculation as --speculative-config '{"method": ..., "num_speculative_tokens": k}'
    # (docs.vllm.ai, "Speculative Decoding"); an EAGLE head's k = 3 as the plan searched it
    args = ("plan", "llama-3-8b", "--gpus", "2", "--tp", "2", "--tpot-ms", "10", "--emit", "vllm")
    code, out, _ = run_cli(capsys, *args, "--spec-method", "eagle", "--acceptance", "2.5")
    assert code == 0 and '"method":"eagle","num_speculative_tokens":3' in out
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and "--speculative-config" not in out


@pytest.mark.parametrize(
    "args,pattern",
    [
        (("--spec-method", "eagle", "--acceptance", "5"), r"acceptance length 5.0 must lie in \[1, k \+ 1 = 4\]"),
        (("--spec-method", "eagle", "--acceptance", "0.5"), r"acceptance length 0.5 must lie in \[1, k \+ 1 = 4\]"),
        (("--spec-method", "mtp", "--acceptance", "2"), r"--spec-method mtp: 'llama-3-8b' has no multi-token"),
        (("--spec-method", "foo", "--acceptance", "2"), r"speculative method 'foo' must be one of draft, eagle"),
        (("--spec-method", "eagle"), r"--spec-method needs --acceptance"),
        (("--acceptance", "2"), r"--acceptance: speculative decoding only; add --spec-method"),
        (("--spec-method", "draft", "--acceptance", "2"), r"'draft' needs a draft model"),
        (("--spec-method", "eagle", "--acceptance", "2", "--draft-model", "llama-3.2-1b"), r"applies to method"),
        (("--spec-method", "eagle", "--acceptance", "2", "--spec-tokens", "65"), r"k=65 must be an integer in"),
    ],
)
def test_cli_plan_speculation_usage_errors_exit_2(capsys, args, pattern):
    import re

    code, out, err = run_cli(capsys, "plan", "llama-3-8b", "--gpus", "1", *args)
    assert code == 2 and not out, (code, err)
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err), err
