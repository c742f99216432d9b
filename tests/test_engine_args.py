"""Engine command lines: every emitted flag is one the engine documents, and emit then read is the identity."""

from __future__ import annotations

import json

import pytest

from llmath.deploy.engine_args import ENGINES, Deployment, EngineArgsError, documented, emit, yaml_subset
from llmath.deploy.engine_read import parse
from tests.helpers import run_cli

DENSE = [
    Deployment(
        "meta-llama/Llama-3.1-70B",
        tp=4,
        dp=2,
        max_num_seqs=103,
        max_num_batched_tokens=8192,
        gpu_memory_utilization=0.9,
    ),
    Deployment("meta-llama/Llama-3.1-8B", tp=2, pp=2, kv_dtype="fp8", max_num_seqs=64),
    Deployment(
        "meta-llama/Llama-3.1-8B",
        tp=1,
        weights="fp8",
        enforce_eager=True,
        spec_method="eagle",
        spec_tokens=3,
        draft_model="yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
    ),
]
MOE = [
    Deployment(
        "deepseek-ai/DeepSeek-V3", tp=1, dp=8, ep=8, kv_dtype="fp8", max_num_seqs=64, spec_method="mtp", spec_tokens=2
    ),
    Deployment("mistralai/Mixtral-8x7B-v0.1", tp=2, ep=2, max_num_batched_tokens=4096),
]


def _flags(argv: list[str], skip: int) -> list[str]:
    return [t.split("=")[0] for t in argv[skip:] if t.startswith("--") or (t.startswith("-") and t[1:2].isalpha())]


def test_documented_lists_hold_the_sources_flags():
    # spellings copied from the sources named in data/engine_flags.json (vLLM arg_utils.py add_cli_args,
    # SGLang server_arguments.md, TensorRT-LLM commands/serve.py)
    for f in (
        "--tensor-parallel-size",
        "-tp",
        "--enable-expert-parallel",
        "--max-num-seqs",
        "--kv-cache-dtype",
        "--speculative-config",
        "--gpu-memory-utilization",
        "--host",
        "--enable-prefix-caching",
    ):
        assert f in documented("vllm"), f
    for f in (
        "--tp-size",
        "--dp-size",
        "--enable-dp-attention",
        "--max-running-requests",
        "--mem-fraction-static",
        "--chunked-prefill-size",
        "--speculative-num-steps",
        "--disable-radix-cache",
    ):
        assert f in documented("sglang"), f
    for f in (
        "--tp_size",
        "--ep_size",
        "--max_batch_size",
        "--max_num_tokens",
        "--kv_cache_free_gpu_memory_fraction",
        "--config",
        "--extra_llm_api_options",
        "--backend",
    ):
        assert f in documented("trtllm"), f
    # the lists hold the engine's documented flags, not only those llmath writes
    assert len(documented("vllm")) > 150 and len(documented("sglang")) > 200 and len(documented("trtllm")) > 30


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dep,moe", [(d, False) for d in DENSE] + [(d, True) for d in MOE], ids=str)
def test_every_emitted_flag_is_documented(engine, dep, moe):
    if engine == "trtllm" and dep.weights:
        dep = Deployment(**{**dep.__dict__, "weights": None})
    cmd = emit(engine, dep, moe)
    skip = {"vllm": 2, "sglang": 3, "trtllm": 1}[engine]
    flags = _flags(cmd.argv, skip)
    assert flags and all(f in documented(engine) for f in flags), [f for f in flags if f not in documented(engine)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dep,moe", [(d, False) for d in DENSE] + [(d, True) for d in MOE], ids=str)
def test_emit_then_read_is_the_same_deployment(engine, dep, moe):
    if engine == "trtllm":  # the checkpoint states the weights; dense replicas are separate servers
        if dep.dp > 1 and not moe:
            dep = Deployment(**{**dep.__dict__, "dp": 1})
        dep = Deployment(**{**dep.__dict__, "weights": None, "enforce_eager": False})
    cmd = emit(engine, dep, moe)
    config = yaml_subset(cmd.config_text()) if cmd.config else None
    read = parse(cmd.shell(), config)
    assert read.engine == engine and read.unknown == []
    assert read.deployment == dep


def test_sglang_attention_dp_counts_every_gpu_in_tp_size():
    # SGLang server_arguments.md: --enable-dp-attention runs attention DP with FFN TP over --tp-size GPUs
    read = parse(
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention"
    )
    assert (read.deployment.tp, read.deployment.dp, read.deployment.gpus) == (1, 8, 8)
    plain = parse("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --tp-size 2 --dp-size 2")
    assert (plain.deployment.tp, plain.deployment.dp, plain.deployment.gpus) == (2, 2, 4)


def test_sglang_attention_dp_running_cap_is_the_servers():
    # SGLang managers/tp_worker.py: each attention-DP scheduler runs --max-running-requests // --dp-size
    dep = Deployment("deepseek-ai/DeepSeek-V3", tp=1, dp=8, ep=8, max_num_seqs=64)
    argv = emit("sglang", dep, True).argv
    assert argv[argv.index("--max-running-requests") + 1] == str(64 * 8)
    head = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention"
    assert parse(head + " --max-running-requests 512").deployment.max_num_seqs == 512 // 8
    # without attention DP every --dp-size replica is its own server with the whole cap
    plain = parse("python -m sglang.launch_server --model-path m/n --tp-size 2 --dp-size 2 --max-running-requests 9")
    assert plain.deployment.max_num_seqs == 9
    with pytest.raises(EngineArgsError, match="below --dp-size 8"):
        parse(head + " --max-running-requests 4")


def test_sglang_mixed_chunk_is_read_emitted_and_served(capsys):
    # SGLang server_arguments.md: --enable-mixed-chunk mixes prefill and decode in a batch; without it
    # (ServerArgs.enable_mixed_chunk = False) a prefill batch runs on its own, ahead of decoding
    head = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B"
    assert parse(head).deployment.mixed_prefill is None
    dep = parse(head + " --enable-mixed-chunk").deployment
    assert dep.mixed_prefill is True
    assert parse(emit("sglang", dep, False).shell()).deployment == dep
    serving = ("-H", "h100-sxm", "-c", "16", "--prompt", "1024", "--gen", "64", "--json")
    code, out, _ = run_cli(capsys, "analyze", "--engine-args", head + " --enable-mixed-chunk", *serving)
    assert code == 0 and json.loads(out)["engine"]["mixed_prefill"] is True
    code, out, _ = run_cli(capsys, "analyze", "llama-3.1-8b", "--engine", "sglang", *serving)
    assert code == 0 and json.loads(out)["engine"]["mixed_prefill"] is False
    code, out, _ = run_cli(capsys, "analyze", "llama-3.1-8b", "--engine", "vllm", "--prefill-first", *serving)
    assert code == 0 and json.loads(out)["engine"]["mixed_prefill"] is False
    mixed = head + " --enable-mixed-chunk"
    code, _, err = run_cli(capsys, "analyze", "--engine-args", mixed, "--prefill-first", *serving)
    assert code == 2 and "conflicts" in err
    code, _, err = run_cli(capsys, "analyze", "llama-3.1-8b", "--mixed-prefill")
    assert code == 2 and "applies to serving" in err


def test_prefill_first_has_no_flag_on_engines_that_always_mix():
    # vLLM's V1 scheduler and TensorRT-LLM's in-flight batching put prefill chunks in the decoding iterations
    dep = Deployment("meta-llama/Llama-3.1-8B", mixed_prefill=False)
    for engine in ("vllm", "trtllm"):
        cmd = emit(engine, dep, False)
        assert any("prefill-first has no flag" in n for n in cmd.notes), cmd.notes


def test_vllm_reads_aliases_equals_and_speculation():
    read = parse(
        "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 8 --max-num-seqs=256 --kv-cache-dtype fp8_e4m3 "
        '--speculative-config \'{"method": "eagle3", "num_speculative_tokens": 4, "model": "d/e"}\' --port 8000'
    )
    d = read.deployment
    assert (d.tp, d.max_num_seqs, d.kv_dtype, d.spec_method, d.spec_tokens, d.draft_model) == (
        8,
        256,
        "fp8",
        "eagle",
        4,
        "d/e",
    )
    assert read.unknown == []


@pytest.mark.parametrize(
    "text,needle",
    [
        ("vllm serve m -tp 8 --tensor-parallel-size 4", "twice"),
        ("vllm serve m --model other", "model is given twice"),
        ("vllm serve m --enable-expert-parallel --no-enable-expert-parallel", "conflict"),
        ("python -m sglang.launch_server --model-path m --tp 6 --dp 4 --enable-dp-attention", "divide"),
        ("vllm serve m --quantization marlinx", "--quantization 'marlinx'"),
        ('vllm serve m --speculative-config \'{"method": "ngram", "num_speculative_tokens": 3}\'', "ngram"),
        ("ollama run m", "must start with"),
        ("vllm serve m -tp zero", "integer"),
    ],
)
def test_conflicting_or_unmodelled_flags_are_refused(text, needle):
    with pytest.raises(EngineArgsError, match=needle):
        parse(text)


def test_yaml_subset_refuses_what_it_does_not_read():
    assert yaml_subset("a:\n  b: fp8\nc: true\nd: 3\n") == {"a": {"b": "fp8"}, "c": True, "d": 3}
    with pytest.raises(EngineArgsError, match="line 2"):
        yaml_subset("a:\n  - 1\n")


def test_plan_emit_vllm_reads_back_to_the_plans_layout(capsys):
    args = ["plan", "llama-3.1-70b", "-H", "h100-sxm", "--gpus", "8", "--tpot-ms", "50"]
    code, out, _ = run_cli(capsys, *args, "--json")
    best = json.loads(out)["best"]
    code, cmd, err = run_cli(capsys, *args, "--emit", "vllm")
    assert code == 0 and cmd.startswith("vllm serve meta-llama/Llama-3.1-70B ")
    flags = _flags(cmd.split(), 2)
    assert all(f in documented("vllm") for f in flags)
    code, out, err = run_cli(
        capsys,
        "analyze",
        "-H",
        "h100-sxm",
        "-c",
        str(best["concurrency"]),
        "--prompt",
        "1024",
        "--gen",
        "256",
        "--engine-args",
        cmd.strip(),
        "--json",
    )
    assert code == 0, err
    lay = json.loads(out)["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"], lay["ep"]) == (best["tp"], best["pp"], best["dp"], best["ep"])


def test_analyze_engine_args_warns_once_and_refuses_conflicts(capsys):
    text = "vllm serve meta-llama/Llama-3.1-8B -tp 2 --foo 1 --bar --port 8000"
    code, out, err = run_cli(capsys, "analyze", "--engine-args", text, "--json")
    assert code == 0
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "--foo" in warnings[0] and "--bar" in warnings[0] and "--port" not in warnings[0]
    assert json.loads(out)["parallel"]["tp"] == 2
    code, _, err = run_cli(capsys, "analyze", "--engine-args", text, "--tp", "4")
    assert code == 2 and "--tp 4 conflicts" in err
    code, _, err = run_cli(capsys, "analyze", "--engine-args", "vllm serve m -tp 2 -tp 4")
    assert code == 2 and "twice" in err and "Traceback" not in err


def test_trtllm_config_file_is_written_and_read(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(
        capsys,
        "analyze",
        "deepseek-v3",
        "-H",
        "h200",
        "--tp",
        "1",
        "--dp",
        "8",
        "--ep",
        "8",
        "--kv-dtype",
        "fp8",
        "-c",
        "512",
        "--emit",
        "trtllm",
        "--json",
    )
    assert code == 0, err
    cmd = json.loads(out)
    assert cmd["config"] == {"enable_attention_dp": True, "kv_cache_config": {"dtype": "fp8"}}
    (tmp_path / cmd["config_file"]).write_text(
        "enable_attention_dp: true\nkv_cache_config:\n  dtype: fp8\n", encoding="utf-8"
    )
    code, out, err = run_cli(capsys, "analyze", "-H", "h200", "-c", "512", "--engine-args", cmd["command"], "--json")
    assert code == 0, err
    lay = json.loads(out)["layout"]
    assert (lay["tp"], lay["dp"], lay["ep"]) == (1, 8, 8)
    assert json.loads(out)["workload"]["kv_dtype"] == "fp8"


def test_an_engines_command_converts_to_another_engines(capsys):
    # SGLang: --tp 8 --dp 8 --enable-dp-attention is 8 attention replicas of one GPU each, experts over 8
    text = (
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention --ep 8"
    )
    code, out, err = run_cli(capsys, "analyze", "-H", "h200", "-c", "64", "--engine-args", text, "--emit", "vllm")
    assert code == 0, err
    # vLLM spells it as DP 8 of TP 1 with expert parallelism over all 8 ranks; 64 requests over 8 replicas
    assert out.split() == [
        "vllm",
        "serve",
        "deepseek-ai/DeepSeek-V3",
        "--tensor-parallel-size",
        "1",
        "--data-parallel-size",
        "8",
        "--enable-expert-parallel",
        "--max-num-seqs",
        "8",
        "--max-num-batched-tokens",
        "8192",
        "--gpu-memory-utilization",
        "0.9",
    ]
