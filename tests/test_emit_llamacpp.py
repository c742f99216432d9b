"""``--emit llama.cpp``: the ``llama-server`` command of a deployment (src/llmath/deploy/engine_llamacpp.py).

Flag names, meanings and defaults: llama.cpp tools/server/README.md at commit
00dc8057ab28c9cb4c79a6dd6dfce07fe779f63b (generated from common/arg.cpp): ``-m, --model FNAME``; ``-np, --parallel N``
(server slots); ``-c, --ctx-size N`` (the prompt context, which the slots divide when ``--parallel`` is given);
``-ngl, --gpu-layers, --n-gpu-layers N`` (a number, 'auto' or 'all'); ``-fa, --flash-attn [on|off|auto]``;
``-ctk, --cache-type-k`` / ``-ctv, --cache-type-v`` (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1; default
f16); ``-b, --batch-size N`` (default 2048); ``-ub, --ubatch-size N`` (default 512)."""

import json

import pytest
from helpers import run_cli

BASE = ("analyze", "llama-3-8b", "-H", "h100-sxm", "--prompt", "1000", "--gen", "200")


def _emit(capsys, *args):
    code, out, err = run_cli(capsys, *args, "--emit", "llama.cpp", "--json")
    assert code == 0, err
    return json.loads(out)


def _value(argv, flag):
    return argv[argv.index(flag) + 1]


def test_each_flag_and_where_its_value_comes_from(capsys):
    cmd = _emit(capsys, *BASE, "-c", "4", "--engine", "llama.cpp")
    argv = cmd["argv"]
    assert argv[0] == "llama-server" and cmd["engine"] == "llama.cpp"
    # meta-llama/Meta-Llama-3-8B is the bundled model's hub repository: its GGUF conversion as the file placeholder
    assert _value(argv, "-m") == "Meta-Llama-3-8B.gguf"
    assert _value(argv, "--parallel") == "4"  # -c 4: one slot per concurrent request
    # 4 slots × (prompt 1000 + gen 200) = 4800 positions: each slot holds one whole request
    assert _value(argv, "--ctx-size") == "4800"
    assert _value(argv, "--n-gpu-layers") == "all"  # every layer on the GPU, as llmath times it
    assert _value(argv, "--flash-attn") == "on"  # analyze's default attention is flash
    # data/engines.json llama.cpp max_num_batched_tokens 2048 (common.h n_batch); README -ub default 512
    assert _value(argv, "--batch-size") == "2048" and _value(argv, "--ubatch-size") == "512"
    assert "--cache-type-k" not in argv  # the default f16 cache needs no flag
    assert cmd["instances"] == 1


def test_a_quantised_kv_cache_sets_both_cache_types(capsys):
    argv = _emit(capsys, *BASE, "-c", "2", "--kv-dtype", "q8_0")["argv"]
    assert _value(argv, "--cache-type-k") == "q8_0" and _value(argv, "--cache-type-v") == "q8_0"  # llama.cpp's name


def test_eager_attention_turns_flash_attention_off(capsys):
    argv = _emit(capsys, *BASE, "--attention", "eager")["argv"]
    assert _value(argv, "--flash-attn") == "off"


def test_without_concurrency_one_slot_holds_one_request(capsys):
    argv = _emit(capsys, *BASE)["argv"]
    # data/engines.json llama.cpp max_num_seqs 1 (common.h n_parallel = 1); 1 × (1000 + 200) = 1200
    assert _value(argv, "--parallel") == "1" and _value(argv, "--ctx-size") == "1200"


def test_the_longest_output_of_a_distribution_sizes_the_slots(capsys):
    args = ("analyze", "llama-3-8b", "-H", "h100-sxm", "--prompt", "1000", "--gen-dist", "10:1,300:1", "-c", "2")
    argv = _emit(capsys, *args)["argv"]
    assert _value(argv, "--ctx-size") == str(2 * (1000 + 300))  # 2 slots × (prompt + longest output 300)


def test_a_given_token_budget_is_the_batch_size(capsys):
    argv = _emit(capsys, *BASE, "-c", "2", "--max-num-batched-tokens", "256")["argv"]
    # the physical batch is at most the logical one: min(512, 256)
    assert _value(argv, "--batch-size") == "256" and _value(argv, "--ubatch-size") == "256"


def test_replicas_are_separate_servers(capsys):
    cmd = _emit(capsys, *BASE, "--dp", "2", "-c", "8")
    assert cmd["instances"] == 2 and _value(cmd["argv"], "--parallel") == "4"  # 8 requests over 2 servers
    assert _value(cmd["argv"], "--ctx-size") == str(4 * 1200)
    assert any("2 such servers" in n for n in cmd["notes"])


def test_a_gguf_path_is_the_model_file(capsys, tmp_path):
    from llmath.deploy.engine_args import Deployment, emit

    dep = Deployment(model=str(tmp_path / "m.gguf"), max_num_seqs=1, request_tokens=10, max_num_batched_tokens=2048)
    cmd = emit("llama.cpp", dep, moe=False)
    assert _value(cmd.argv, "-m") == str(tmp_path / "m.gguf") and not cmd.notes


@pytest.mark.parametrize(
    "extra,words",
    [
        (("--tp", "2"), "tp=2"),
        (("--pp", "2"), "pp=2"),
        (("--kv-dtype", "fp8"), "llama.cpp stores KV as"),  # no fp8 cache type among the README's values
        (("--spec-method", "eagle", "--spec-tokens", "3"), "speculative decoding"),
    ],
)
def test_layouts_llama_server_does_not_run_are_usage_errors(capsys, extra, words):
    code, out, err = run_cli(capsys, *BASE, "-c", "2", *extra, "--emit", "llama.cpp")
    assert code == 2 and words in err and not out
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1


def test_every_written_flag_is_documented():
    from llmath.deploy.engine_args import documented, flags_data

    d = flags_data()["llama.cpp"]
    written = {s["flag"] for s in d["settings"].values()} | {d["settings"]["kv_dtype"]["flag_v"]}
    assert written <= documented("llama.cpp")


def test_plan_emits_llama_server(capsys):
    code, out, err = run_cli(
        capsys, "plan", "llama-3-8b", "-H", "h100-sxm", "--gpus", "1", "--engine", "llama.cpp",
        "--prompt", "1000", "--gen", "100", "--emit", "llama.cpp", "--json",
    )  # fmt: skip
    assert code == 0, err
    cmd = json.loads(out)
    n = int(_value(cmd["argv"], "--parallel"))
    assert n >= 1 and _value(cmd["argv"], "--ctx-size") == str(n * 1100)  # slots × (1000 + 100)
