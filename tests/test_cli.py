"""The CLI: JSON keys scripts rely on, human output, and one-line errors with exit code 1."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]


run = run_cli


def test_params_json(capsys):
    code, out, _ = run(capsys, "params", "llama-3-8b", "--json")
    d = json.loads(out)
    assert code == 0
    assert d["total"] == 8_030_261_248  # meta-llama/Meta-Llama-3-8B, as transformers counts it
    # one token reads one row of the 128,256 x 4,096 embedding table (untied: the LM head is all used)
    assert d["active_per_token"] == d["total"] - (128_256 - 1) * 4096
    assert d["active_per_token_with_embedding"] == d["total"]
    assert set(d["estimates"]) == {"12Ld2", "12Ld2+13Ld", "12Ld2+13Ld+Vd"}
    assert sum(d["by_component"].values()) == d["total"]


def test_params_moe_active(capsys):
    _, out, _ = run(capsys, "params", "mixtral-8x7b", "--json")
    d = json.loads(out)
    # active = total - 6 of 8 experts in 32 layers, each 3*4096*14336 (with the whole embedding table) ...
    assert d["active_per_token_with_embedding"] == d["total"] - 32 * 6 * 3 * 4096 * 14336
    # ... and one row of the 32,000 x 4,096 table instead of all of it
    assert d["active_per_token"] == d["active_per_token_with_embedding"] - (32_000 - 1) * 4096


def test_analyze_json_keys(capsys):
    code, out, _ = run(
        capsys,
        "analyze",
        "llama-3-8b",
        "--hardware",
        "h100-sxm",
        "--batch",
        "2",
        "--prompt",
        "100",
        "--gen",
        "10",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    for path in (
        "params.total",
        "prefill.flops.matmul",
        "prefill.flops.vector",
        "prefill.bytes.total",
        "prefill.time_s",
        "decode.flops.matmul",
        "decode.bytes.total",
        "decode.time_s",
        "kv_cache.bytes",
        "kv_cache.peak_bytes",
        "kv_cache.bytes_per_token",
        "ttft_s",
        "tpot_s",
        "e2e_s",
        "throughput_tok_s",
        "memory.total_bytes",
        "memory.fits",
    ):
        v = d
        for k in path.split("."):
            v = v[k]
        assert v is not None, path
    # KV after prefill: 2 sequences x 100 positions x 131,072 B; at the end 100 + 10 - 1 positions
    assert d["kv_cache"]["bytes"] == 2 * 100 * 131_072
    assert d["kv_cache"]["peak_bytes"] == 2 * 109 * 131_072
    assert d["throughput_tok_s"] == pytest.approx(2 * 10 / d["e2e_s"])


def test_ops_explain_reads_like_the_gqa_einsum_table(capsys):
    code, out, _ = run(
        capsys, "ops", "llama-3-8b", "--stage", "decode", "--batch", "16", "--prompt", "4096", "--explain"
    )
    assert code == 0
    assert "attn.k_proj" in out and "2·D·K·H" in out and "intensity" in out


def test_ops_json_flash_vs_eager(capsys):
    _, a, _ = run(capsys, "ops", "llama-3-8b", "--prompt", "64", "--attention", "eager", "--json")
    _, b, _ = run(capsys, "ops", "llama-3-8b", "--prompt", "64", "--json")
    ea, fl = json.loads(a), json.loads(b)
    # eager runs all 64*64 score pairs, flash 64*65/2; 4*N*H*L FLOPs per pair = 4*4096*32
    assert ea["flops"]["matmul"] - fl["flops"]["matmul"] == 4 * 4096 * 32 * (64 * 64 - 64 * 65 // 2)


@pytest.mark.parametrize(
    "args,pattern,code",
    [
        (["params", "llama-3-8"], r"unknown model 'llama-3-8'; closest: .*llama-3-8b", 2),
        (["analyze", "llama-3-8b", "--hardware", "h100x"], r"unknown hardware 'h100x'; closest: h100, h100-sxm", 2),
        (["analyze", "llama-3-8b", "--batch", "0"], r"'--batch' / '-b': 0 must be an integer in \[1, ", 2),
        (["analyze", "llama-3-8b", "--dtype", "fp12"], r"'--dtype': .*'fp12' is not a known precision", 2),
        (["analyze", "llama-3-8b", "--peak-tflops", "100"], r"needs all of --peak-tflops", 2),
        (["sweep", "llama-3-8b", "--batch", "1:x"], r"--batch='1:x' is not a list", 2),
        (["ops", "t5-base", "--prefix", "4"], r"encoder-decoder model; its decoder prefill is --decoder-prompt", 2),
        (["ops", "llama-3-8b", "--stage", "encoder"], r"decoder-only model", 2),
        (["analyze", "bart-large", "--prefix", "4"], r"encoder-decoder model", 2),
    ],
)
def test_errors_are_one_line(capsys, args, pattern, code):
    """Usage errors (a value breaking its rule, an unknown name, a flag in the wrong mode) exit 2; one line each."""
    got, out, err = run(capsys, *args)
    assert got == code, err
    assert re.search(pattern, err), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_config_files(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, "params", str(bad))
    assert code == 1 and "malformed JSON" in err
    cfg = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 2,
        "num_attention_heads": 32,
        "vocab_size": 1000,
        "intermediate_size": None,
    }
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    code, _, err = run(capsys, "params", str(p))
    assert code == 1 and "'intermediate_size'" in err and "missing or null" in err
    cfg["intermediate_size"] = 100
    cfg["num_attention_heads"] = 30
    p.write_text(json.dumps(cfg))
    code, _, err = run(capsys, "params", str(p))
    assert code == 1 and "not divisible by 30 attention heads" in err and "head_dim" in err
    cfg["num_attention_heads"] = 32
    cfg["num_hidden_layers"] = 0
    p.write_text(json.dumps(cfg))
    code, _, err = run(capsys, "params", str(p))
    assert code == 1 and "'num_hidden_layers'=0 must be a positive integer" in err
    cfg["num_hidden_layers"] = 2
    cfg["model_type"] = "no_such_arch"  # (a made-up type: every real one may be read some day)
    p.write_text(json.dumps(cfg))
    code, _, err = run(capsys, "params", str(p))
    assert code == 1 and "model_type='no_such_arch' is not supported" in err
    cfg["model_type"] = "llama"
    p.write_text(json.dumps(cfg))
    code, out, _ = run(capsys, "params", str(tmp_path), "--json")  # a directory holding config.json
    assert code == 0
    # 2 layers: 4*4096*4096 attn + 3*4096*100 ffn + 2*4096 norms; + 2*1000*4096 (untied) + 4096 final norm
    assert json.loads(out)["total"] == 2 * (4 * 4096 * 4096 + 3 * 4096 * 100 + 2 * 4096) + 2 * 1000 * 4096 + 4096


def test_context_beyond_positions_warns(capsys):
    code, _, err = run(capsys, "analyze", "gpt2", "--prompt", "1000", "--gen", "100")
    # prefill writes positions 0..999 and its first token; the 99 decode steps are at contexts 1000..1098,
    # the last putting its new token at position 1098, past gpt2's table (1024 positions: 0..1023)
    assert code == 0 and "position 1098 is past the model's position table (max_position_embeddings=1024" in err
    assert "--context 1023" in err


def test_each_workload_flag_changes_the_result(capsys):
    base = ["analyze", "llama-3-8b", "--json"]
    _, ref, _ = run(capsys, *base)
    ref = json.loads(ref)
    for flag in (
        ["--batch", "3"],
        ["--prompt", "100"],
        ["--gen", "7"],
        ["--attention", "eager"],
        ["--dtype", "fp8"],
        ["--weights", "int4"],
        ["--kv-dtype", "fp8"],
        ["--efficiency", "ideal"],
        ["--hardware", "h200"],
        ["--overhead-us", "50"],
        ["--reserve-gb", "5"],
        ["--prefix", "64"],
    ):
        _, o, _ = run(capsys, *base, *flag)
        d = json.loads(o)
        assert (d["e2e_s"], d["memory"]["total_bytes"]) != (ref["e2e_s"], ref["memory"]["total_bytes"]), flag


def test_readme_commands_match_ci():
    readme = (ROOT / "README.md").read_text().splitlines()
    block = readme[readme.index("```bash") + 1 : readme.index("```bash") + 3]
    assert block[0].startswith("pip install . && llmath analyze")  # the core install, no extras
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert block[0] in ci and block[1] in ci


def test_console_script_runs():
    r = subprocess.run(
        [sys.executable, "-m", "llmath.cli", "params", "gpt2", "--json"], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0
    # GPT-2 small, per layer: 2*768 (ln_1) + 768*2304+2304 (c_attn) + 768*768+768 (c_proj) + 2*768 (ln_2)
    # + 768*3072+3072 (c_fc) + 3072*768+768 (c_proj) = 7,087,872; x 12 = 85,054,464; + wte 50257*768 = 38,597,376
    # + wpe 1024*768 = 786,432 + ln_f 1,536 (lm_head tied) = 124,439,808
    assert json.loads(r.stdout)["total"] == 124_439_808


def test_training_and_useful_flops(capsys):
    _, out, _ = run(capsys, "analyze", "llama-2-7b", "--prompt", "128", "--attention", "eager", "--json")
    d = json.loads(out)
    # eager executes 128*128 score pairs, the useful causal ones are 128*129/2; 4*N*H*L per pair
    assert d["prefill"]["flops"]["matmul"] - d["prefill"]["flops"]["useful_matmul"] == 4 * 4096 * 32 * (
        128 * 128 - 128 * 129 // 2
    )
    tr = d["training"]
    assert tr["step_matmul"] == 3 * tr["forward_matmul"] and tr["step_matmul_recompute"] == 4 * tr["forward_matmul"]
    # the training forward computes logits at all 128 positions: 127 more rows of 2*4096*32000 than the prefill
    assert tr["forward_matmul"] - d["prefill"]["flops"]["useful_matmul"] == 127 * 2 * 4096 * 32000


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_plots_are_written(tmp_path, capsys, ext):
    pytest.importorskip("matplotlib")
    roof, mem, sw = (tmp_path / f"{n}.{ext}" for n in ("roof", "mem", "sweep"))
    code, _, err = run(capsys, "analyze", "llama-3-8b", "--plot", str(roof), "--memory-plot", str(mem))
    assert code == 0 and roof.stat().st_size > 5000 and mem.stat().st_size > 5000
    code, _, _ = run(capsys, "sweep", "llama-3-8b", "--batch", "1:64:x4", "--plot", str(sw))
    assert code == 0 and sw.stat().st_size > 5000
    code, _, err = run(capsys, "analyze", "llama-3-8b", "--plot", str(tmp_path / "x.jpg"))
    assert code == 2 and "must end in .png or .svg" in err


def test_incompatible_flags(capsys):
    code, _, err = run(capsys, "ops", "llama-3-8b", "--stage", "prefill", "--context", "10")
    assert code == 2 and "--context applies to --stage decode" in err


def test_gen_one_and_context_warnings(capsys):
    code, out, _ = run(capsys, "analyze", "llama-7b", "--prompt", "512", "--gen", "1")
    assert code == 0 and "no decode steps" in out
    # LLaMA-1 configs give the context limit as max_sequence_length=2048
    code, _, err = run(capsys, "ops", "llama-7b", "--stage", "decode", "--context", "4096")
    assert code == 0 and "max_position_embeddings=2048" in err
    code, _, err = run(capsys, "estimates", "gpt2-xl", "--context", "4096", "--gen", "16")
    assert code == 0 and "is past the model's position table (max_position_embeddings=1024" in err


def test_seeds_is_a_hidden_alias_of_estimates(capsys):
    args = ("gpt2", "--context", "128", "--gen", "16", "--json")
    code, est, _ = run(capsys, "estimates", *args)
    code2, old, err = run(capsys, "seeds", *args)
    assert code == code2 == 0 and old == est and "llmath estimates" in err
    # GPT-2 small, one token attending 128 positions: 24*L*d^2 + 4*L*d*N = 24*12*768^2 + 4*12*768*128
    assert json.loads(est)["per_token"][0]["estimate"] == 24 * 12 * 768**2 + 4 * 12 * 768 * 128 == 174_587_904
    code, out, _ = run(capsys, "--help")
    assert "estimates" in out and "seeds" not in out


def test_custom_hardware_from_toml_and_flags(tmp_path, capsys):
    toml = tmp_path / "mygpu.toml"
    toml.write_text(
        'name = "mygpu"\nmemory_bytes = 48e9\nmemory_bandwidth_bytes_per_s = 1e12\n'
        'source = "test"\n[peak_flops_per_s]\nbf16 = 200e12\n'
    )
    code, out, _ = run(capsys, "analyze", "llama-3-8b", "--hardware", str(toml), "--efficiency", "ideal", "--json")
    d = json.loads(out)
    assert code == 0 and d["hardware"] == "mygpu"
    # ideal, memory-bound decode step: bytes / 1e12 B/s
    assert d["decode"]["time_s"] == pytest.approx(d["decode"]["bytes"]["total"] / 1e12)
    code, out, _ = run(
        capsys,
        "analyze",
        "llama-3-8b",
        "--peak-tflops",
        "200",
        "--bandwidth-gbs",
        "1000",
        "--memory-gb",
        "48",
        "--efficiency",
        "ideal",
        "--json",
    )
    assert code == 0 and json.loads(out)["decode"]["time_s"] == pytest.approx(d["decode"]["time_s"])


def test_compare_and_sweep_csv(capsys):
    code, out, _ = run(capsys, "compare", "llama-3-8b", "mistral-7b-v0.1", "-H", "h100-sxm,a100-sxm-80gb", "--json")
    rows = json.loads(out)["rows"]
    assert code == 0 and len(rows) == 4
    # the same model is faster per token on the H100 (3.35 vs 2.04 TB/s)
    by = {(r["model"], r["hardware"]): r for r in rows}
    assert by[("llama-3-8b", "h100-sxm")]["tpot_s"] < by[("llama-3-8b", "a100-sxm-80gb")]["tpot_s"]
    code, out, _ = run(capsys, "sweep", "llama-3-8b", "--batch", "1,8", "--prompt", "128:256:+128", "--csv")
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 1 + 2 * 2 and lines[0].startswith("batch,prompt,gen,ttft_s")


def test_cli_reference_is_current():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (ROOT / "docs" / "cli.md").read_text() == mod.render(), "run: python scripts/gen_cli_docs.py"
    for cmd in ("analyze", "ops", "params", "sweep", "compare", "estimates", "calibrate", "validate", "serve"):
        assert f"## llmath {cmd}" in mod.render()


def test_analyze_layout_done_when_commands(capsys):
    # the acceptance commands: per-GPU memory, communication and timing
    code, out, err = run(capsys, "analyze", "llama-3.1-70b", "-H", "h100-sxm", "--gpus", "2", "--weights", "fp8")
    assert code == 0, err
    assert "layout: 2 GPUs = tp 2" in out and "memory per GPU" in out and "attn.all_reduce" in out
    code, out, err = run(
        capsys, "analyze", "deepseek-v3", "-H", "h200", "--gpus", "8", "--ep", "8", "--dp", "8", "--json"
    )
    assert code == 0, err
    d = json.loads(out)
    assert (d["parallel"]["tp"], d["parallel"]["dp"], d["parallel"]["ep"], d["parallel"]["expert_tp"]) == (1, 8, 8, 1)
    assert d["memory"]["per_gpu_bytes"] > 0 and isinstance(d["memory"]["fits"], bool)
    assert set(d["comm"]["decode"]) == {"moe.dispatch", "moe.combine"}
    assert d["throughput_tok_s_per_gpu"] == pytest.approx(d["throughput_tok_s"] / 8)
    assert d["decode"]["comm_s"] > 0 and d["prefill"]["time_s"] >= d["prefill"]["comm_s"]


def test_each_layout_flag_changes_the_result(capsys):
    # --gpus 2 alone is tp 2 with ep 2 for an MoE model; --tp 2 alone keeps the experts TP-sharded (ep 1)
    base = ["analyze", "mixtral-8x7b", "-H", "h100-sxm", "-b", "16", "--json"]
    seen = {}
    for extra in ([], ["--gpus", "2"], ["--tp", "4"], ["--tp", "2", "--pp", "2"], ["--tp", "2"],
                  ["--tp", "2", "--dp", "2"], ["--tp", "2", "--dp", "2", "--ep", "4", "--overlap", "tbo"]):  # fmt: skip
        code, out, err = run(capsys, *base, *extra)
        assert code == 0, err
        d = json.loads(out)
        seen[tuple(extra)] = (d["ttft_s"], d["tpot_s"], d["memory"]["per_gpu_bytes"])
    assert len(set(seen.values())) == len(seen)


@pytest.mark.parametrize(
    "args,pattern",
    [
        # dp is not given, so none is invented: 8 is no multiple of tp·pp = 3, and 3 does not split 64 heads
        (
            ["--gpus", "8", "--tp", "3"],
            r"--gpus 8 with tp·pp = 3·1 = 3: 8 is not a multiple of 3 .*64 attention.*--tp 8",
        ),  # noqa: E501
        # tp·pp = 16 > 8: the layouts offered use all 8 GPUs (keeping pp 4: 8 / 4 = 2 GPUs per stage)
        (
            ["--gpus", "8", "--tp", "4", "--pp", "4"],
            r"not a multiple of 16.*on 8 GPUs: --tp 1 --pp 4 --dp 2, --tp 2 --pp 4",
        ),  # noqa: E501
        (["--tp", "5"], r"tp=5 must divide the 64 attention heads"),
        (["--tp", "2", "--ep", "2"], r"ep=2 applies to MoE models"),
        (["--pp", "81"], r"pp=81 exceeds the 80 layers"),
        (["--tp", "0"], r"'--tp': 0 must be an integer in \[1, "),  # a usage error: exit 2
    ],
)
def test_layout_errors_are_one_line(capsys, args, pattern):
    code, out, err = run(capsys, "analyze", "llama-3.1-70b", *args)
    assert code == 2 and not out  # a layout the model or GPU count cannot run: a usage error
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err), err


def test_sweep_and_compare_take_the_layout(capsys):
    code, out, err = run(capsys, "sweep", "llama-3.1-70b", "-H", "h100-sxm", "-b", "1,8", "--gpus", "4", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    a = json.loads(run(capsys, "analyze", "llama-3.1-70b", "-b", "8", "--gpus", "4", "--json")[1])
    assert rows[1]["ttft_s"] == pytest.approx(a["ttft_s"]) and rows[1]["tpot_s"] == pytest.approx(a["tpot_s"])
    assert rows[1]["memory_bytes"] == pytest.approx(a["memory"]["per_gpu_bytes"])
    code, out, _ = run(capsys, "compare", "llama-3.1-70b", "-H", "h100-sxm", "--gpus", "2", "--json")
    assert json.loads(out)["rows"][0]["layout"] == "tp2 pp1 dp1 ep1"
