"""TensorRT-LLM's ``moe_config.backend`` from an ``--engine-args`` command's ``--config`` YAML: a value TensorRT-LLM's
``MoeConfig.backend`` Literal rejects (tensorrt_llm/llmapi/llm_args.py at NVIDIA/TensorRT-LLM 0004396720: AUTO,
CUTLASS, CUTEDSL, TRTLLM, DEEPGEMM, DENSEGEMM, VANILLA, TRITON, MARLIN, MEGAMOE_DEEPGEMM, MEGAMOE_CUTEDSL; WIDEEP in
earlier releases) is a usage error; a valid backend without a kernel path of its own in llmath keeps the engine's
default MoE kernel and says so in a note."""

from __future__ import annotations

import json

import pytest

from llmath.deploy.engine_args import EngineArgsError, yaml_subset
from llmath.deploy.engine_read import parse
from tests.helpers import run_cli

TRTLLM = "trtllm-serve openai/gpt-oss-20b"


def _read(backend: str):
    return parse(TRTLLM, yaml_subset(f"moe_config:\n  backend: {backend}\n"))


@pytest.mark.parametrize("backend", ["CUTLAS", "FLASHINFER", "MARLINN", "cutlass"])
def test_a_backend_tensorrt_llm_rejects_is_refused(backend):
    with pytest.raises(EngineArgsError) as e:
        _read(backend)
    msg = str(e.value)
    assert f"moe_config.backend {backend!r}" in msg and "CUTLASS, CUTEDSL" in msg and "--config" in msg


def test_a_lower_case_backend_names_the_spelling_tensorrt_llm_takes():
    # MoeConfig.backend is a Literal of upper-case names with no validator that upper-cases the value
    with pytest.raises(EngineArgsError, match="TensorRT-LLM spells it 'TRITON'"):
        _read("triton")


def test_moe_config_that_is_not_a_mapping_is_refused():
    with pytest.raises(EngineArgsError, match="moe_config 'TRITON' must be a mapping"):
        parse(TRTLLM, yaml_subset("moe_config: TRITON\n"))


@pytest.mark.parametrize("backend", ["CUTLASS", "DEEPGEMM", "TRTLLM", "WIDEEP", "MEGAMOE_CUTEDSL"])
def test_a_valid_backend_without_a_kernel_path_keeps_the_default_and_says_so(backend):
    read = _read(backend)
    assert read.deployment.engine_settings == {}  # the engine's default MoE kernel, as without the key
    assert [n for n in read.notes if "moe_config.backend" in n] == [
        f"moe_config.backend {backend}: llmath has no kernel path of its own for this backend and times the experts"
        " with the engine's default MoE kernel for the checkpoint's format"
    ]


def test_auto_and_triton_need_no_note():
    # AUTO is TensorRT-LLM's own choice (the engine's default); TRITON is the kernel path llmath names
    assert _read("AUTO").notes == [] and _read("AUTO").deployment.engine_settings == {}
    assert _read("TRITON").notes == []
    assert _read("TRITON").deployment.engine_settings == {"moe_kernel": "trtllm_triton_mxfp4"}


def test_the_cli_exits_2_on_one_line_and_notes_a_valid_backend(capsys, tmp_path):
    (tmp_path / "bad.yaml").write_text("moe_config:\n  backend: CUTLAS\n")
    args = ("analyze", "-H", "h100-sxm", "-c", "4", "--json", "--engine-args")
    code, _, err = run_cli(capsys, *args, f"{TRTLLM} --config {tmp_path / 'bad.yaml'}")
    assert code == 2 and "moe_config.backend 'CUTLAS'" in err and "Traceback" not in err, err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err
    (tmp_path / "deepgemm.yaml").write_text("max_batch_size: 64\nmoe_config:\n  backend: DEEPGEMM\n")
    (tmp_path / "none.yaml").write_text("max_batch_size: 64\n")
    code, noted, err = run_cli(capsys, *args, f"{TRTLLM} --config {tmp_path / 'deepgemm.yaml'}")
    assert code == 0 and "note: moe_config.backend DEEPGEMM: llmath has no kernel path" in err, err
    code, plain, _ = run_cli(capsys, *args, f"{TRTLLM} --config {tmp_path / 'none.yaml'}")
    assert code == 0 and json.loads(noted)["tpot_s"] == json.loads(plain)["tpot_s"]  # today's behaviour kept
