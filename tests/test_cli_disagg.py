"""``llmath analyze --disagg``: disaggregated serving from the command line, its --json the library's result."""

import json
import re

import pytest
from helpers import run_cli

from llmath import Workload
from llmath.deploy.disagg import serve_disaggregated
from llmath.deploy.speculative import Speculation
from llmath.model.checkpoint import precision_for


def _json(capsys, *args) -> dict:
    code, out, err = run_cli(capsys, "analyze", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_json_is_the_library_result_with_the_same_arguments(capsys):
    # fp8 weights and KV, an EAGLE draft in both pools, SGLang's presets: the library call is the reference
    cli = _json(
        capsys, "llama-3-8b", "-H", "h100-sxm", "-c", "24", "--prompt", "2048", "--gen", "128",
        "--disagg", "--prefill-workers", "2", "--prefill-tp", "1", "--decode-tp", "2",
        "--engine", "sglang", "--weights", "fp8", "--kv-dtype", "fp8",
        "--spec-method", "eagle", "--spec-tokens", "3", "--acceptance", "2.5",
    )  # fmt: skip
    lib = serve_disaggregated(
        "llama-3-8b", "h100-sxm", workload=Workload(prompt=2048, gen=128, concurrency=24),
        prefill={"workers": 2, "tp": 1}, decode={"tp": 2}, engine="sglang",
        precision=precision_for("llama-3-8b", weights="fp8", kv="fp8"), speculation=Speculation("eagle", 3, 2.5),
    )  # fmt: skip
    assert cli == json.loads(json.dumps(lib))
    # the keys the aggregated serving JSON has for the same metrics (docs/json.md)
    assert {"ttft_s", "tpot_s", "e2e_s", "throughput_tok_s", "throughput_tok_s_per_gpu"} <= cli.keys()


def test_default_engine_is_the_library_default(capsys):
    cli = _json(capsys, "llama-3-8b", "-c", "8", "--disagg")
    lib = serve_disaggregated(
        "llama-3-8b", "h100-sxm", workload=Workload(prompt=512, gen=128, concurrency=8), prefill={}, decode={}
    )
    assert cli == json.loads(json.dumps(lib))


def test_pool_gpus_and_requests_by_arithmetic(capsys):
    d = _json(
        capsys, "qwen3-30b-a3b", "-c", "64", "--disagg", "--prefill-workers", "2", "--prefill-tp", "2",
        "--decode-dp", "4", "--decode-ep", "4",
    )  # fmt: skip
    # GPUs = prefill workers × tp·pp·dp + decode workers × tp·pp·dp (EP spreads experts over those GPUs,
    # it adds none) = 2 × 2·1·1 + 1 × 1·1·4 = 4 + 4 = 8
    assert (d["prefill_gpus"], d["decode_gpus"], d["gpus"]) == (4, 4, 8)
    # requests decoding = the batch per attention-DP rank × decode workers × dp = B × 1 × 4; the rest of the
    # 64 wait for or run their prefill
    assert d["decode_requests"] == pytest.approx(d["decode_batch"] * 4)
    assert d["prefill_requests"] + d["decode_requests"] == pytest.approx(64)
    assert d["throughput_tok_s_per_gpu"] == pytest.approx(d["throughput_tok_s"] / 8)


def test_human_table_names_both_pools(capsys):
    code, out, err = run_cli(capsys, "analyze", "llama-3-8b", "-c", "16", "--disagg", "--decode-tp", "2")
    assert code == 0, err
    assert "prefill 1×tp1, decode 1×tp2" in out and "on 3 × h100-sxm" in out
    for row in ("TTFT (mean)", "KV transfer", "TPOT (mean)", "per GPU", "prefill pool: GPUs / requests"):
        assert row in out


@pytest.mark.parametrize(
    "args,pattern",
    [
        (("-c", "8", "--prefill-tp", "2"), r"--prefill-tp: disaggregated serving only; add --disagg"),
        (("--decode-workers", "2"), r"--decode-workers: disaggregated serving only; add --disagg"),
        (("--disagg",), r"--disagg serves a closed loop: add --concurrency C"),
        (("-c", "8", "--disagg", "--tp", "2"), r"--tp: not applied with --disagg; give each pool's layout"),
        (("-c", "8", "--disagg", "--rate", "3"), r"--rate: not applied with --disagg; .*closed"),
        (("-c", "8", "--disagg", "--max-num-seqs", "4"), r"--max-num-seqs: not applied with --disagg"),
        (("-c", "8", "--disagg", "--batch", "4"), r"--batch 4 applies to a static batch"),
        (("-c", "8", "--disagg", "--acceptance", "2"), r"--acceptance: speculative decoding only"),
        (("-c", "8", "--disagg", "--emit", "vllm"), r"--disagg does not take --engine-args/--emit"),
        (("-c", "8", "--disagg", "--decode-tp", "0"), r"'--decode-tp': 0 must be an integer in \[1, "),
    ],
)
def test_flags_that_do_nothing_exit_2_in_one_line(capsys, args, pattern):
    code, out, err = run_cli(capsys, "analyze", "llama-3-8b", *args)
    assert code == 2 and not out, (code, err)
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err), err
