"""Fuzzing the deployment surfaces (hypothesis, derandomized, bounded examples; about a minute on 2 cores):
the library's serve/plan keywords, the serving and plan options of the CLI, generated bad sidecars
(safetensors headers, the index, hf_quant_config.json, quantization_config), GGUF headers and hardware files.

Whatever the input: the library returns a result or raises an :class:`llmath.LLMathError`; the CLI exits 0, 1
or 2 with one line and never an internal error; every number it prints is finite."""

import json
import math
import struct

import pytest
from helpers import run_cli, write_llama_gguf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmath
from llmath import LLMathError, ParallelConfig
from llmath.model import registry

FUZZ = settings(
    max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
SMALL = "llama-3.2-1b"
BASE = registry.config(SMALL)
ODD = st.sampled_from(
    [None, 0, -1, 1, 2, 8, 1.5, 2**31, 2**63, 1e400, -1e-300, 1e-300, float("nan"), float("inf"), "", "8", "foo",
     True, [], {}, [1], (64, 0.5), "vllm", "eager", "tbo", "fp8", "h100-sxm"]
)  # fmt: skip


def finite(obj) -> bool:
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(finite(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return all(finite(v) for v in obj)
    return True


def one_line_cli(capsys, *args):
    code, out, err = run_cli(capsys, *args)
    assert code in (0, 1, 2), (code, err)
    assert "internal error" not in err and "Traceback" not in err, err
    if code:
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    elif "--json" in args:
        json.loads(out, parse_constant=lambda c: pytest.fail(f"non-finite {c} in {args}"))
    return code, out, err


# ---- the library ----------------------------------------------------------------------------------------


def _result_or_llmath_error(entry, kw, layout=("gpus", "tp", "pp", "ep", "dp", "overlap")):
    """``entry(model, hardware, **kw)`` returns a result whose numbers are finite, or raises an LLMathError
    (the ``layout`` keys of ``kw`` given as one ParallelConfig)."""
    kw = {"model": SMALL, "hardware": "h100-sxm", **kw}
    try:
        if par := {k: kw.pop(k) for k in layout if k in kw}:
            kw["parallel"] = ParallelConfig(**par)
        res = entry(**kw)
    except LLMathError:
        return
    assert finite(res.to_dict()), kw


SERVE_KEYS = ["concurrency", "rate", "gpus", "tp", "dp", "overlap", "prefix_hit", "gen_dist", "precision",
              "attention", "efficiency_mode", "engine", "max_num_seqs", "gpu_memory_utilization",
              "max_num_batched_tokens", "prompt", "gen", "hardware", "model"]  # fmt: skip


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(SERVE_KEYS), ODD, max_size=3))
def test_serve_keywords(changes):
    _result_or_llmath_error(llmath.serve, {"prompt": 64, "gen": 8, "concurrency": 4, **changes})


PLAN_KEYS = ["gpus", "tp", "pp", "dp", "ep", "ttft_ms", "tpot_ms", "weights", "disagg", "cost_per_gpu_hour",
             "prefix_hit", "engine", "kv_dtype", "prompt", "gen"]  # fmt: skip


@settings(FUZZ, max_examples=15)
@given(changes=st.dictionaries(st.sampled_from(PLAN_KEYS), ODD, max_size=2))
def test_plan_keywords(changes):
    _result_or_llmath_error(llmath.plan, {"gpus": 2, "prompt": 64, "gen": 8, **changes}, ("tp", "pp", "ep", "dp"))


# ---- the CLI's serving and plan options ------------------------------------------------------------------

WORDS = st.sampled_from(
    ["0", "1", "-1", "8", "1.5", "nan", "inf", "1e400", "", "foo", "64:0.5", "64:inf", "x:1", "2147483648", "vllm",
     "sglang", "tbo", "none", "eagle", "draft", "bf16,fp8", ","]
)  # fmt: skip
SERVING_OPTS = ["--concurrency", "--rate", "--engine", "--prefix-hit", "--max-num-batched-tokens", "--max-num-seqs",
                "--gpu-memory-utilization", "--gen-dist", "--spec-method", "--spec-tokens", "--acceptance",
                "--draft-model", "--gpus", "--overlap", "--batch", "--prefix", "--top"]  # fmt: skip
PLAN_OPTS = ["--gpus", "--tp", "--pp", "--ttft-ms", "--tpot-ms", "--weights", "--engine", "--prefix-hit",
             "--cost-per-gpu-hour", "--top", "--kv-dtype", "--prompt", "--gen"]  # fmt: skip


@FUZZ
@given(opts=st.lists(st.tuples(st.sampled_from(SERVING_OPTS), WORDS), max_size=3))
def test_analyze_serving_options(capsys, opts):
    args = ["analyze", SMALL, "-p", "64", "-n", "8", "-c", "4", "--json"]
    for k, v in opts:
        args += [k, v]
    one_line_cli(capsys, *args)


@settings(FUZZ, max_examples=15)
@given(opts=st.lists(st.tuples(st.sampled_from(PLAN_OPTS), WORDS), max_size=2))
def test_plan_options(capsys, opts):
    args = ["plan", SMALL, "--gpus", "2", "-p", "64", "-n", "8", "--json"]
    for k, v in opts:
        args += [k, v]
    one_line_cli(capsys, *args)


# ---- generated bad sidecars ------------------------------------------------------------------------------

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
              st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)  # fmt: skip
TENSOR = "model.layers.0.mlp.up_proj.weight"


def _st_file(header) -> bytes:
    h = json.dumps(header, allow_nan=True).encode()
    return struct.pack("<Q", len(h)) + h


@FUZZ
@given(
    where=st.sampled_from(["safetensors", "tensor", "offsets", "index", "weight_map", "total", "hqc", "hqc_q", "qc",
                           "qc_field", "qc_group"]),
    value=JSONISH,
    field=st.sampled_from(["bits", "group_size", "modules_to_not_convert", "exclude_modules", "quant_algo",
                           "config_groups", "weights", "num_bits", "kv_cache_scheme", "quant_type"]),
)  # fmt: skip
def test_bad_sidecars(tmp_path_factory, capsys, where, value, field):
    d = tmp_path_factory.mktemp("ck")
    cfg = dict(BASE)
    files: dict[str, bytes] = {}
    good = {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}
    if where == "safetensors":
        files["model.safetensors"] = _st_file(value)
    elif where in ("tensor", "offsets"):
        files["model.safetensors"] = _st_file({TENSOR: value if where == "tensor" else {**good, "data_offsets": value}})
    elif where in ("index", "weight_map", "total"):
        idx = {"weight_map": {TENSOR: "x.safetensors"}, "metadata": {"total_size": 2_471_628_800}}
        idx = (
            value
            if where == "index"
            else {**idx, "weight_map": value}
            if where == "weight_map"
            else {**idx, "metadata": {"total_size": value}}
        )
        files["model.safetensors.index.json"] = json.dumps(idx).encode()
    elif where in ("hqc", "hqc_q"):
        side = value if where == "hqc" else {"quantization": {"quant_algo": "FP8", field: value}}
        files["hf_quant_config.json"] = json.dumps(side).encode()
    else:
        q = {
            "quant_method": "compressed-tensors",
            "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}},
        }
        if where == "qc":
            q = value
        elif where == "qc_field":
            q = {**q, field: value}
        else:
            q["config_groups"]["g"]["weights"][field] = value
        cfg["quantization_config"] = q
    (d / "config.json").write_text(json.dumps(cfg))
    for name, data in files.items():
        (d / name).write_bytes(data)
    one_line_cli(capsys, "analyze", str(d), "-p", "16", "-n", "2", "--json")


# ---- GGUF headers ----------------------------------------------------------------------------------------


@FUZZ
@given(
    key=st.sampled_from(["block_count", "embedding_length", "feed_forward_length", "attention.head_count",
                         "attention.head_count_kv", "context_length", "expert_count"]),
    value=st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([2**31 - 1, 0, 1, 3, 4096, 4097])),
    cut=st.one_of(st.none(), st.integers(0, 400)),
)  # fmt: skip
def test_gguf_headers(tmp_path_factory, capsys, key, value, cut):
    pytest.importorskip("gguf")
    path = tmp_path_factory.mktemp("gguf") / "m.gguf"
    sizes = {"block_count": 2, "embedding_length": 64, "feed_forward_length": 128, "attention.head_count": 4,
             "attention.head_count_kv": 2, "context_length": 256}  # fmt: skip
    sizes[key] = value
    write_llama_gguf(path, sizes)
    if cut is not None:
        path.write_bytes(path.read_bytes()[:cut])
    one_line_cli(capsys, "params", str(path), "--json")


# ---- hardware files --------------------------------------------------------------------------------------

HW = {"name": "x", "memory_bytes": 80e9, "memory_bandwidth_bytes_per_s": 3.35e12, "peak_flops_per_s": {"bf16": 1e15}}


@FUZZ
@given(
    field=st.sampled_from(["memory_bytes", "memory_bandwidth_bytes_per_s", "peak_flops_per_s", "vector_flops_per_s",
                           "interconnect_bytes_per_s", "topology", "tdp_w", "kind", "name"]),
    value=st.one_of(JSONISH, st.sampled_from([1e-300, 1e300, 0, -1, 1e3, {"bf16": 1e-300}, {"bf16": "1e15"}])),
    toml=st.booleans(),
)  # fmt: skip
def test_hardware_files(tmp_path_factory, capsys, field, value, toml):
    d = tmp_path_factory.mktemp("hw")
    doc = {**HW, field: value}
    if toml:
        path = d / "dev.toml"
        text = "\n".join(f"{k} = {json.dumps(v)}" for k, v in doc.items() if not isinstance(v, dict | list))
        path.write_text(text)
    else:
        path = d / "dev.json"
        path.write_text(json.dumps(doc))
    one_line_cli(capsys, "analyze", SMALL, "-H", str(path), "-p", "16", "-n", "2", "--json")
