"""vLLM's time per routed-expert layer of a pass that prefills: added to the pass, counted from the model's MoE
layers, nothing for a dense model or a decode-only step."""

import pytest

from llmath.deploy import engines
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops.table import table

# routed-expert layers from the models' config.json: gpt-oss-120b num_hidden_layers 36, every layer MoE;
# DeepSeek-V3 61 layers, first_k_dense_replace 3 -> 58 MoE; Llama-3.1-70B dense
GPT_OSS_MOE_LAYERS, DSV3_MOE_LAYERS = 36, 61 - 3


def _device(model: str, moe_s: float) -> Device:
    hw = get("B200")
    return Device(resolve(model), hw, Precision(), efficiency("expected", hw), "flash", True,
                  moe_prefill_host_s=moe_s)  # fmt: skip


def test_routed_expert_layers_are_the_models_moe_layers():
    assert table(resolve("gpt-oss-120b"), "prefill").routed_expert_layers == GPT_OSS_MOE_LAYERS
    assert table(resolve("deepseek-v3"), "prefill").routed_expert_layers == DSV3_MOE_LAYERS
    assert table(resolve("llama-3.1-70b"), "prefill").routed_expert_layers == 0


def test_a_pass_that_prefills_gains_the_term_per_moe_layer_a_decode_step_does_not():
    plain, charged = _device("gpt-oss-120b", 0.0), _device("gpt-oss-120b", 1e-3)
    # one 1,024-token prompt beside 3 decoding requests: 36 MoE layers x 1 ms = 36 ms more, added
    mixed = float(charged.iteration(3, 1000, 1, 1024).time_s) - float(plain.iteration(3, 1000, 1, 1024).time_s)
    assert mixed == pytest.approx(GPT_OSS_MOE_LAYERS * 1e-3)
    # an 8k prompt alone, whose GPU time is longer: still added, not a floor under it
    long = float(charged.iteration(0, 0, 1, 8192).time_s) - float(plain.iteration(0, 0, 1, 8192).time_s)
    assert long == pytest.approx(GPT_OSS_MOE_LAYERS * 1e-3)
    assert float(charged.iteration(4, 1000).time_s) == float(plain.iteration(4, 1000).time_s)


def test_a_dense_model_gains_nothing():
    plain, charged = _device("llama-3.1-70b", 0.0), _device("llama-3.1-70b", 1e-3)
    assert float(charged.iteration(0, 0, 1, 1024).time_s) == float(plain.iteration(0, 0, 1, 1024).time_s)


def test_only_vllm_carries_the_term_with_its_rows_named():
    ov = engines.overheads("vllm")
    assert 0 < ov.moe_prefill_host_per_layer_s < 1e-3
    assert "fitted" in ov.sources["moe_prefill_host_per_layer_s"]
    assert "Leave one model out" in ov.sources["moe_prefill_host_per_layer_s"]
    for other in ("sglang", "trtllm"):
        assert engines.overheads(other).moe_prefill_host_per_layer_s == 0.0
