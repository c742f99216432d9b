"""Crashes, hangs and silently wrong numbers that bad input can cause, each pinned: bad input gives a
one-line error (exit 2 for a usage error, 1 for the rest), never a traceback, hang or changed number."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import run_cli

import llmath
from llmath import LLMathError, Workload
from llmath.deploy.layout import ParallelConfig
from llmath.model import registry
from llmath.validation import MAX_POINTS, parse_range

run = run_cli


def one_line_error(err: str) -> bool:
    lines = err.strip().splitlines()
    return "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: ")


@pytest.mark.parametrize(
    "args,code,pattern",
    [
        (["analyze", "--reserve-gb", "nan"], 2, "'--reserve-gb': nan must be a finite number"),
        (["analyze", "--peak-tflops", "1", "--bandwidth-gbs", "1", "--memory-gb", "inf"], 2, "'--memory-gb': inf"),
        (["analyze", "--overhead-us", "nan"], 2, "'--overhead-us': nan must be a finite number"),
        (["sweep", "llama-3-8b", "--batch", str(10**30)], 2, "values must be in"),
        (["sweep", "llama-3-8b", "--batch", "0:4:x2"], 2, "'0:4:x2'"),
        (["sweep", "llama-3-8b", "--batch", "1:4:x1"], 2, "never progresses"),
        (["sweep", "llama-3-8b", "--batch", "1:2000000:+1"], 2, "limit is 1,000,000 points"),
        (["sweep", "llama-3-8b", "--batch", "1:1000:+1", "--prompt", "1:1001:+1"], 2, "limit is 1,000,000 points"),
        (["estimates", "--prompt", "0"], 2, "'--prompt' / '-p': 0 must be an integer"),
        (["estimates", "--gen", "1000000000"], 2, "gen=1000000000 must be an integer in"),
        (["serve", "--port", "70000"], 2, "'--port': 70000 must be an integer in [0, 65,535]"),
        (["analyze", "-H", "/tmp"], 1, "/tmp: is a directory"),
        (["params", "m" * 300], 2, "unknown model"),
        (["params", "/tmp/" + "m" * 300 + ".json"], 1, "too long"),
        (["compare", "llama-3-8b", "-H", ","], 2, "names no accelerator"),
        (["params", "/dev/zero"], 1, "not a regular file"),
        (["analyze", "llama-3-8b", "--bogus"], 2, "No such option: --bogus"),
        (["analyze", "-b", "abc"], 2, "'--batch' / '-b'"),
        (["analyze", "--attention", "foo"], 2, "'--attention'"),
        (["params"], 2, "Missing argument"),
        (["bogus"], 2, "No such command"),
    ],
)
def test_cli_crashes_are_one_line_errors(capsys, args, code, pattern):
    got, _, err = run(capsys, *args)
    assert got == code, err
    assert pattern in err, err
    assert one_line_error(err), err


def test_fifo_config_does_not_block(tmp_path, capsys):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "params", str(fifo))  # would block forever if opened
    assert code == 1 and "not a regular file" in err and one_line_error(err)


def test_range_at_the_cap_is_quick_and_exact():
    vals = parse_range("--batch", "1:1000000:+1")
    assert len(vals) == MAX_POINTS and vals[0] == 1 and vals[-1] == 10**6
    assert parse_range("--batch", "1:256:x2") == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def base_config(name="llama-3.2-1b"):
    return registry.config(name)


def write(tmp_path, text):
    p = tmp_path / "config.json"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    "key,value,pattern",
    [
        ("intermediate_size", "abc", "'intermediate_size'='abc' must be a positive integer"),
        ("num_attention_heads", 0, "'num_attention_heads'=0 must be a positive integer"),
        ("model_type", ["llama"], "'model_type'=['llama'] must be a string"),
        ("layer_types", 5, "'layer_types'=5 must be a list of strings"),
        ("tie_word_embeddings", "false", "'tie_word_embeddings'='false' must be a JSON bool"),
        ("head_dim", 127.9, "'head_dim'=127.9 must be a positive integer"),
        ("intermediate_size", True, "'intermediate_size'=True must be a positive integer"),
        ("max_position_embeddings", -1, "'max_position_embeddings'=-1 must be a positive integer"),
    ],
)
def test_config_field_kinds(tmp_path, capsys, key, value, pattern):
    cfg = base_config()
    cfg[key] = value
    code, _, err = run(capsys, "params", write(tmp_path, json.dumps(cfg)))
    assert code == 1 and pattern in err and one_line_error(err), err


def test_gpt2_negative_positions_refused(tmp_path, capsys):
    cfg = base_config("gpt2")
    cfg["n_positions"] = -1  # gave a negative position-embedding count before
    code, _, err = run(capsys, "params", write(tmp_path, json.dumps(cfg)))
    assert code == 1 and "'n_positions'=-1" in err


def test_moe_fields(tmp_path, capsys):
    cfg = base_config("qwen3-30b-a3b") if "qwen3-30b-a3b" in registry.names() else None
    if cfg is None:
        pytest.skip("no qwen3_moe model in the registry")
    cfg["num_experts"] = 0  # silently dropped the MoE before
    code, _, err = run(capsys, "params", write(tmp_path, json.dumps(cfg)))
    assert code == 1 and "'num_experts'=0" in err
    cfg["num_experts"] = 4
    cfg["num_experts_per_tok"] = 8
    code, _, err = run(capsys, "params", write(tmp_path, json.dumps(cfg)))
    assert code == 1 and "exceeds the 4 routed experts" in err
    ds = base_config("deepseek-v2-lite")
    ds["moe_layer_freq"] = 0  # ZeroDivisionError before
    code, _, err = run(capsys, "params", write(tmp_path, json.dumps(ds)))
    assert code == 1 and "'moe_layer_freq'=0" in err


def test_integral_floats_are_read_as_the_integer(tmp_path):
    cfg = base_config()
    ref = llmath.params("llama-3.2-1b").total
    cfg["hidden_size"] = float(cfg["hidden_size"])  # 2048.0: same number, same count
    cfg["head_dim"] = 64.0
    assert llmath.params(write(tmp_path, json.dumps(cfg))).total == ref


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 30])
def test_non_finite_and_huge_literals(tmp_path, capsys, literal):
    text = json.dumps(base_config()).replace('"vocab_size": 128256', f'"vocab_size": {literal}')
    assert literal in text
    code, _, err = run(capsys, "params", write(tmp_path, text))
    assert code == 1 and "'vocab_size'" in err and one_line_error(err), err


def test_open_upper_bound_of_time_step_limit(tmp_path, capsys):
    # transformers' Mamba2Config / NemotronHConfig default time_step_limit to (0.0, float("inf")) and
    # to_json_file writes Infinity: nvidia/Nemotron-H-56B-Base-8K's hub file has [0.0, Infinity]
    assert llmath.params("nemotron-h-56b-base-8k").total > 0
    vocab = '"vocab_size": 128256'
    text = json.dumps(base_config()).replace(vocab, f'"time_step_limit": [0.0, Infinity], {vocab}')
    assert llmath.params(write(tmp_path, text)).total == llmath.params("llama-3.2-1b").total
    for bad in ("[0.0, -Infinity]", "[0.0, NaN]"):
        text = json.dumps(base_config()).replace(vocab, f'"time_step_limit": {bad}, {vocab}')
        code, _, err = run(capsys, "params", write(tmp_path, text))
        assert code == 1 and "'time_step_limit[1]'" in err and one_line_error(err), err


def test_deep_json(tmp_path, capsys):
    code, _, err = run(capsys, "params", write(tmp_path, "[" * 100_000 + "]" * 100_000))
    assert code == 1 and "nested deeper than 64" in err and one_line_error(err)
    deep: dict = {}
    d = deep
    for _ in range(100_000):
        d["x"] = {}
        d = d["x"]
    with pytest.raises(LLMathError, match="nested deeper"):
        llmath.spec_from_config({**base_config(), "extra": deep})


def test_oversized_config_file(tmp_path, capsys):
    cfg = base_config()
    cfg["pad"] = "x" * (5 << 20)
    code, _, err = run(capsys, "params", write(tmp_path, json.dumps(cfg)))
    assert code == 1 and "-byte limit" in err


def test_eager_json_is_strict_and_zero_over_zero_is_null(capsys):
    code, out, _ = run(capsys, "analyze", "llama-3-8b", "--attention", "eager", "--json")
    assert code == 0

    def refuse(c):
        raise AssertionError(f"non-finite JSON literal {c}")

    d = json.loads(out, parse_constant=refuse)
    ops = {o["name"]: o for o in d["prefill"]["ops"]}
    empty = [o for o in ops.values() if o["flops"] + o["vflops"] == 0 and sum(o["bytes"].values()) == 0]
    assert empty, "an operator with no FLOPs and no bytes (e.g. eager's cache_append in a prefill) exists"
    assert all(o["intensity"] is None for o in empty)


def test_sweep_near_int64_limits_stays_positive_and_exact_to_float():
    """Batch 2^24 × context 2^32 overflowed int64 (negative bytes). KV bytes of Llama-3-8B per position
    and sequence: 2 (K, V) × 32 layers × 8 KV heads × 128 × 2 bytes (bf16) = 131,072."""
    from llmath.sweep import grid

    g = grid("llama-3-8b", "h100-sxm", np.array([2**24]), np.array([2**32]), np.array([1]))
    kv = float(g["kv_peak_bytes"][0])
    assert kv == 2**24 * 2**32 * 131_072 and math.isfinite(float(g["e2e_s"][0])) and g["e2e_s"][0] > 0


def test_library_bad_arguments_raise_llmath_errors():
    for call in (
        lambda: llmath.params(None),
        lambda: llmath.params(3.5),
        lambda: llmath.analyze("llama-3-8b", precision=5),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", tensor_parallel=2),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", parallel=ParallelConfig(tp=0)),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", parallel=ParallelConfig(tp=2.5)),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", reserve_bytes=-1e12),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", reserve_bytes=float("nan")),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=2.5)),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=True)),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(prompt=10**30)),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", overhead_s=float("nan")),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", matmul=float("nan")),
        lambda: llmath.analyze("llama-3-8b", 42),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", efficiency_mode=None),
        lambda: llmath.analyze("llama-3-8b", "h100-sxm", attention=["flash"]),
        lambda: llmath.Precision(weights=None),
        lambda: llmath.spec_from_config(["not", "a", "dict"]),
    ):
        with pytest.raises(LLMathError):
            call()


def test_a_fraction_counts_only_when_whole():
    from fractions import Fraction

    with pytest.raises(LLMathError, match=r"batch=Fraction\(7, 2\) must be an integer"):
        llmath.analyze("llama-3-8b", workload=Workload(batch=Fraction(7, 2)))  # not truncated to 3
    assert llmath.analyze("llama-3-8b", workload=Workload(batch=Fraction(6, 2))).workload["batch"] == 3


def test_unknown_keyword_lists_accepted_names():
    with pytest.raises(LLMathError) as e:
        llmath.analyze("llama-3-8b", "h100-sxm", tensor_parallel=2)
    msg = str(e.value)
    assert "'tensor_parallel'" in msg and "batch" in msg and "tp" in msg and "overhead_s" in msg


def test_precision_as_a_dtype_name_means_uniform():
    a = llmath.analyze("llama-3-8b", "h100-sxm", precision="fp8")
    b = llmath.analyze("llama-3-8b", "h100-sxm", precision=llmath.Precision.uniform("fp8"))
    assert a.to_dict() == b.to_dict()


def test_qwen3_moe_saved_by_transformers_reads(tmp_path):
    """transformers saves Qwen3-MoE's expert count as ``num_local_experts`` (the attribute_map alias of
    ``num_experts``): the same file with either spelling gives the same count."""
    names = [n for n in registry.names() if registry.spec(n).model_type == "qwen3_moe"]
    if not names:
        pytest.skip("no qwen3_moe model in the registry")
    cfg = registry.config(names[0])
    cfg["num_local_experts"] = cfg.pop("num_experts")
    assert llmath.params(write(tmp_path, json.dumps(cfg))).total == llmath.params(names[0]).total
    cfg["num_experts"] = cfg["num_local_experts"] + 1  # both spellings, different values: refused
    with pytest.raises(LLMathError, match="differ"):
        llmath.params(write(tmp_path, json.dumps(cfg)))


def test_unexpected_errors_say_bug_and_how_to_debug(capsys, monkeypatch):
    import llmath.ops.params as params_mod

    def boom(spec):
        raise RuntimeError("synthetic")

    monkeypatch.setattr(params_mod, "param_report", boom)
    code, _, err = run(capsys, "params", "llama-3-8b")
    assert code == 1 and one_line_error(err) and "bug" in err and "LLMATH_DEBUG=1" in err


def test_usage_error_as_a_process():
    """The installed entry point, as a user runs it: one line, exit 2, no traceback."""
    r = subprocess.run(
        [sys.executable, "-c", "from llmath.cli import main; main()", "analyze", "llama-3-8b", "--bogus"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and one_line_error(r.stderr), r.stderr
