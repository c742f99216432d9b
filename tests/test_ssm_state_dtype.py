"""The SSM state's own format (ops/ssm_state.py): vLLM's ``--mamba-ssm-cache-dtype`` and the config's
``mamba_ssm_cache_dtype``.

Sources: vLLM ``vllm/model_executor/layers/mamba/mamba_utils.py`` (``MambaStateDtypeCalculator``: Mamba-1/-2
and Gated DeltaNet keep (conv, temporal) states, the temporal one in ``mamba_ssm_cache_dtype``, ``auto`` = as
the conv state; KDA, lightning and short conv take one dtype); ``vllm/model_executor/models/config.py``
(``NemotronHForCausalLMConfig``: the config's value, float32 when absent); transformers 5.23 ``NemotronHConfig``
(``mamba_ssm_cache_dtype`` default "float32").

Nemotron-H 8B: 24 Mamba-2 layers of H = 128 heads, P = 64, N = 128, G = 8, conv C = 4, I = 8192: per layer
an SSM state of H·P·N = 1,048,576 elements and a conv window of (C − 1)·(I + 2·G·N) = 3·10,240 = 30,720.
"""

from __future__ import annotations

import json

import pytest
from helpers import registry_config
from typer.testing import CliRunner

from llmath import Workload
from llmath.analysis import analyze
from llmath.cli import app
from llmath.deploy.layout import ParallelConfig
from llmath.errors import ConfigError
from llmath.model.checkpoint import precision_for
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops.ssm_state import ssm_state_format

NEMO = "nemotron-h-8b-base-8k"
SSM, CONV, LAYERS = 128 * 64 * 128, 3 * 10_240, 24


def _nemo(**over):
    return spec_from_config(dict(registry_config(NEMO), **over), NEMO)


def test_nemotron_h_defaults_to_fp32_as_transformers_and_vllm():
    transformers = pytest.importorskip("transformers")
    assert "mamba_ssm_cache_dtype" not in registry_config(NEMO)  # the class default applies
    assert transformers.NemotronHConfig().mamba_ssm_cache_dtype == "float32"
    assert _nemo().ssm_state_dtype == "fp32"
    assert _nemo(mamba_ssm_cache_dtype="auto").ssm_state_dtype is None
    assert _nemo(mamba_ssm_cache_dtype="bfloat16").ssm_state_dtype == "bf16"


def test_state_bytes_take_the_ssm_format_and_the_conv_window_the_kv_format():
    a = analyze(NEMO, None, workload=Workload(batch=1, prompt=16, gen=2)).to_dict()
    # fp32 SSM (4 bytes), bf16 conv window (2 bytes): 24·(1,048,576·4 + 30,720·2) = 102,137,856
    assert a["state"]["fixed_bytes_per_sequence"] == LAYERS * (SSM * 4 + CONV * 2) == 102_137_856
    assert a["precision"]["ssm_state"] == {
        "format": "fp32",
        "bytes_per_element": 4.0,
        "source": "config mamba_ssm_cache_dtype",
    }
    b = analyze(NEMO, None, workload=Workload(batch=1, prompt=16, gen=2), precision=Precision(ssm="bf16")).to_dict()
    # the flag wins: 24·(1,048,576·2 + 30,720·2) = 51,806,208
    assert b["state"]["fixed_bytes_per_sequence"] == LAYERS * (SSM + CONV) * 2 == 51_806_208
    # "auto" in the config: the state follows the KV cache (fp8: 1 byte): 24·(1,048,576 + 30,720)
    c = analyze(
        _nemo(mamba_ssm_cache_dtype="auto"),
        None,
        workload=Workload(batch=1, prompt=16, gen=2),
        precision=Precision(kv="fp8"),
    )
    assert c.to_dict()["state"]["fixed_bytes_per_sequence"] == LAYERS * (SSM + CONV)


def test_memory_and_decode_bytes_follow_the_ssm_format():
    fp32 = analyze(NEMO, "h100-sxm", workload=Workload(batch=2, prompt=100, gen=4))
    bf16 = analyze(NEMO, "h100-sxm", workload=Workload(batch=2, prompt=100, gen=4), precision=Precision(ssm="bf16"))
    # two sequences' SSM states, 2 bytes more per element: 2·24·1,048,576·2 = 100,663,296
    diff = 2 * LAYERS * SSM * 2
    assert fp32.memory.kv_cache_bytes - bf16.memory.kv_cache_bytes == diff == 100_663_296
    # a decode step reads and writes every SSM state once
    d32, d16 = fp32.to_dict()["decode"]["bytes"], bf16.to_dict()["decode"]["bytes"]
    assert d32["kv_read"] - d16["kv_read"] == d32["kv_write"] - d16["kv_write"] == diff
    assert fp32.to_dict()["decode"]["memory_s"] > bf16.to_dict()["decode"]["memory_s"]
    assert fp32.memory.max_batch < bf16.memory.max_batch


def test_only_mamba_and_gated_deltanet_states_take_it():
    from causal_lm_types import default_config

    qn = spec_from_config(dict(default_config("qwen3_next"), mamba_ssm_cache_dtype="float32"), "qwen3_next")
    kimi = spec_from_config(dict(default_config("kimi_linear"), mamba_ssm_cache_dtype="float32"), "kimi_linear")
    p = Precision()
    # Qwen3-Next: 36 Gated DeltaNet layers of H·N·P = 32·128·128 in fp32, conv 3·8,192 in bf16
    a = analyze(qn, None, workload=Workload(batch=1, prompt=16, gen=2), precision=p).to_dict()
    assert a["state"]["fixed_bytes_per_sequence"] == 36 * (32 * 128 * 128 * 4 + 3 * 8192 * 2)
    # KDA keeps one dtype (vLLM kda_state_dtype): 27 layers, 21 KDA: 32·128·128 + 3·12,288 in bf16
    k = analyze(kimi, None, workload=Workload(batch=1, prompt=16, gen=2), precision=p).to_dict()
    assert k["state"]["fixed_bytes_per_sequence"] == 21 * (32 * 128 * 128 + 3 * 12_288) * 2
    assert k["precision"]["ssm_state"] is None


def test_bad_values_are_one_line_errors():
    with pytest.raises(ConfigError, match="mamba_ssm_cache_dtype='float8' is not a state format"):
        _nemo(mamba_ssm_cache_dtype="float8")
    r = CliRunner().invoke(app, ["analyze", NEMO, "--ssm-state-dtype", "int3"])
    assert r.exit_code != 0 and "int3" in r.output and "Traceback" not in r.output


def test_cli_flag_and_json_key():
    r = CliRunner().invoke(app, ["analyze", NEMO, "-b", "1", "--prompt", "16", "--gen", "2", "--json",
                                 "--ssm-state-dtype", "bf16"])  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["precision"]["ssm_state"]["source"] == "flag --ssm-state-dtype"
    assert d["state"]["fixed_bytes_per_sequence"] == 51_806_208  # as above: 24·(1,048,576 + 30,720)·2
    assert ssm_state_format(_nemo(), precision_for(NEMO, ssm="fp16")) == ("fp16", "flag --ssm-state-dtype")


def test_per_rank_state_under_tp_keeps_the_ssm_format():
    one = analyze(NEMO, "h100-sxm", workload=Workload(batch=2, prompt=100, gen=4))
    two = analyze(
        NEMO, "h100-sxm", workload=Workload(batch=2, prompt=100, gen=4), parallel=ParallelConfig(gpus=2, tp=2)
    )
    # TP 2 splits the Mamba-2 heads, groups and the 8 KV heads in half: each GPU holds half of every state,
    # the SSM half still in fp32; the end context is 100 + 4 − 1 = 103 positions of 4 attention layers' K/V:
    # 2·(24·(1,048,576·4 + 30,720·2) + 103·4·2·8·128·2) / 2 = 103,825,408 per GPU
    per_gpu = 2 * (LAYERS * (SSM * 4 + CONV * 2) + 103 * 4 * 2 * 8 * 128 * 2) // 2
    assert two.memory.kv_cache_bytes == per_gpu == 103_825_408
    assert one.memory.kv_cache_bytes == 2 * per_gpu


def test_human_report_names_the_ssm_format():
    r = CliRunner().invoke(app, ["analyze", NEMO, "-b", "1", "--prompt", "16", "--gen", "2"])
    assert r.exit_code == 0, r.output
    # 24·(1,048,576·4 + 30,720·2) = 102,137,856
    assert "102,137,856 B of fixed state per sequence (SSM state in fp32 (config mamba_ssm_cache_dtype)" in r.output


def test_serving_admission_counts_the_fixed_state_per_request():
    from llmath.deploy import engines
    from llmath.deploy.serving import Requests
    from llmath.deploy.serving_memory import memory
    from llmath.deploy.step import Device, kv_bytes_per_sequence
    from llmath.hardware import get as get_hardware
    from llmath.hardware.roofline import efficiency
    from llmath.model.registry import resolve

    spec, hw = resolve(NEMO), get_hardware("h100-sxm")
    dev = Device(spec, hw, Precision(), efficiency("expected", hw))
    mem = memory(dev, engines.preset("vllm", hw), Requests(1024, 256))
    # the last position's KV plus the fixed state: fp32 SSM and bf16 conv windows of the
    # 24 Mamba-2 layers, 24·(1,048,576·4 + 30,720·2) = 102,137,856 bytes a request holds whatever its length
    assert mem.kv_bytes_per_request == kv_bytes_per_sequence(spec, 1024 + 256 - 1, Precision()) + 102_137_856
