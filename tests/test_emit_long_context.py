"""``--emit`` with ``--allow-long-context`` (docs/context.md): the command starts the engine with a length limit that
admits the requests timed past the model's context; within it the command is the one written without the flag.

Flags and environment variables (data/engine_flags.json, settings.max_model_len): vLLM ``--max-model-len`` and
``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (vllm/config/model.py ``_get_and_verify_max_len`` refuses a longer length
without it), SGLang ``--context-length`` and ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``
(``ModelConfig._derive_context_length``; it refuses input + output >= context_len, so the limit is one more),
TensorRT-LLM ``--max_seq_len`` (trtllm-serve). Llama-3.1-8B's max_position_embeddings is 131072
(huggingface.co/meta-llama/Llama-3.1-8B, config.json), gpt2's n_positions 1024."""

import json

import pytest
from helpers import run_cli

LONG = ("analyze", "llama-3.1-8b", "-H", "h100-sxm", "--prompt", "200000", "--gen", "10", "-c", "4")


def _emit(capsys, *args):
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    "engine,flag,value,env",
    [
        ("vllm", "--max-model-len", "200010", "VLLM_ALLOW_LONG_MAX_MODEL_LEN"),  # 200000 + 10
        ("sglang", "--context-length", "200011", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"),  # + 1: P + G < N
        ("trtllm", "--max_seq_len", "200010", None),
    ],
)
def test_emit_raises_the_engines_length_limit(capsys, engine, flag, value, env):
    cmd = _emit(capsys, *LONG, "--emit", engine, "--allow-long-context")
    argv = cmd["argv"]
    assert argv[argv.index(flag) + 1] == value
    assert cmd["env"] == ({env: "1"} if env else {})
    assert cmd["command"].startswith(f"{env}=1 ") if env else not cmd["env"]
    assert any("131072" in n for n in cmd["notes"])
    assert any("RoPE scaling" in n for n in cmd["notes"])  # Llama-3.1 is rotary


def test_emit_uses_the_longest_output_of_a_distribution(capsys):
    args = ("analyze", "gpt2", "-H", "h100-sxm", "--prompt", "1000", "--gen-dist", "10:1,300:1", "-c", "4")
    cmd = _emit(capsys, *args, "--emit", "vllm", "--allow-long-context")
    assert cmd["argv"][cmd["argv"].index("--max-model-len") + 1] == "1300"  # 1000 + the longest output 300
    assert any("learned position table" in n for n in cmd["notes"])  # gpt2: no rows past 1024


def test_emit_past_the_context_without_the_override_is_refused(capsys):
    code, out, err = run_cli(capsys, *LONG, "--emit", "vllm")
    assert code == 2 and not out
    assert "--allow-long-context" in err and "131072" in err


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_emit_within_the_context_is_unchanged(capsys, engine):
    short = ("analyze", "llama-3.1-8b", "-H", "h100-sxm", "--prompt", "131000", "--gen", "72", "-c", "4")  # = 131072
    plain = _emit(capsys, *short, "--emit", engine)
    allowed = _emit(capsys, *short, "--emit", engine, "--allow-long-context")
    assert plain == allowed
    assert not plain["env"]
    assert not {"--max-model-len", "--context-length", "--max_seq_len"} & set(plain["argv"])


def test_plan_emit_with_the_override_raises_the_limit(capsys):
    args = ("plan", "gpt2", "-H", "h100-sxm", "--gpus", "1", "--prompt", "1000", "--gen", "100")
    cmd = _emit(capsys, *args, "--allow-long-context", "--emit", "vllm")
    assert cmd["argv"][cmd["argv"].index("--max-model-len") + 1] == "1100"
    assert cmd["env"] == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    short = _emit(capsys, "plan", "gpt2", "-H", "h100-sxm", "--gpus", "1", "--prompt", "900", "--gen", "100",
                  "--emit", "vllm")  # fmt: skip
    assert "--max-model-len" not in short["argv"] and not short["env"]
