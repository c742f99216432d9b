"""4-bit float experts dequantised into a 16-bit grouped GEMM on Hopper: the ``w4a16_mxfp4`` MoE fit.

Measured values: aiconfigurator-core 0.12.0 (Apache-2.0), ``<system>/moe/trtllm/1.3.0rc20/moe_perf.parquet``,
``moe_dtype = w4a16_mxfp4``, ``kernel_source = moe_torch_flow``, ``distribution = balanced``, ``moe_tp_size = 1``;
gpt-oss-120b's expert shape (hidden 2880, inter 2880, top-4); latency in ms (parquet row in brackets).
"""

from __future__ import annotations

import pytest

from llmath import hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware import fitted_columns as fc
from llmath.hardware import fitted_ops as fo
from llmath.hardware.kernels import engine_fp4_gemm
from llmath.hardware.roofline import efficiency, op_times, overheads
from llmath.model import registry
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, table

# (device, experts, tokens, measured ms) of unsplit layers (moe_ep_size = 1)
MEASURED = [
    ("h200", 128, 1, 0.078741),  # row 109561
    ("h200", 128, 16, 0.341685),  # row 109566
    ("h200", 32, 16, 0.203397),  # row 55603
    ("h200", 128, 4096, 2.225707),  # row 109587
    ("h100-sxm", 32, 1, 0.079355),  # row 55620
    ("h100-sxm", 32, 16, 0.220933),  # row 55624
    ("h100-sxm", 32, 4096, 2.220027),  # row 55642
]


def _entry(device: str) -> dict:
    return ef.data()["devices"][device]["moe"]["w4a16_mxfp4"]


@pytest.mark.parametrize("device, experts, tokens, ms", MEASURED)
def test_weight_only_moe_fit_reproduces_its_table(device, experts, tokens, ms):
    # the fit's form at the table's own routing (balanced: min(E, T·k) experts hit), at the bf16 peak: within
    # the fit's reported held-out p90 of the measured time
    hw = hardware.get(device)
    x1, x2, xm, fl, by = ef.moe_cost(tokens, 2880, 2880, 4, experts, "w4a16_mxfp4", routing="balanced")
    t = ef.model_time(
        _entry(device)["coef"], x1, x2, xm, fl, by, hw.peak("bf16"), hw.memory_bandwidth_bytes_per_s,
        ef.device_tile(device),
    )  # fmt: skip
    assert float(t) == pytest.approx(ms * 1e-3, rel=_entry(device)["held_out"]["p90_abs_err"])


def test_mxfp4_weights_stream_at_seventeen_bytes_per_thirty_two():
    # OCP MX v1.0: a block of 32 e2m1 values (16 bytes) and one e8m0 scale (1 byte)
    assert ef.BYTES["w4a16_mxfp4"] == (32 * 4 / 8 + 1) / 32


def _gpt_oss_layer():
    cfg = {
        "model_type": "mixtral",
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "num_hidden_layers": 1,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 32000,
    }
    return spec_from_config(cfg, name="gpt-oss-layer")


def test_tensorrt_llm_routed_mxfp4_experts_on_h200_take_the_measured_kernel_floor():
    # one decode token of a gpt-oss-shaped MoE layer with MXFP4 experts on one H200 (no fp4 peak: the weights are
    # dequantised into a bf16 GEMM): under TensorRT-LLM its three routed GEMMs add up to the measured kernel,
    # 0.0787 ms (row 109561; 1 token of top-4 hits 4 experts under any routing), within the fit's p90
    hw = hardware.get("h200")
    t = table(_gpt_oss_layer(), "decode")
    p = Precision.uniform("bf16").override(weights="mxfp4")
    e = engine_fp4_gemm(efficiency("expected", hw), hw, "trtllm")
    assert e.fit("moe", "w4a16_mxfp4") == tuple(_entry("h200")["coef"])
    tm, _, _, _ = op_times(t.values(Scenario(1, 1, 1024)), t, hw, p, e, 1, 1, decode=True)
    routed = fc.columns(t).routed
    assert len(routed) == 3
    assert tm[routed].sum() == pytest.approx(0.078741e-3, rel=_entry("h200")["held_out"]["p90_abs_err"])


def test_other_engines_keep_the_gemm_models_for_mxfp4_experts():
    # vLLM serves gpt-oss's MXFP4 experts on Hopper with Marlin, which no table times at this shape: no such fit
    hw = hardware.get("h200")
    e = engine_fp4_gemm(efficiency("expected", hw), hw, "vllm")
    assert e.fit("moe", "w4a16_mxfp4") is None
    t = table(_gpt_oss_layer(), "decode")
    p = Precision.uniform("bf16").override(weights="mxfp4")
    assert fo._moe_coef(fc.columns(t), e, p, "bf16", False) is None


def test_fp4_experts_on_blackwell_do_not_take_the_weight_only_fit():
    # B200 has an fp4 peak: NVFP4 experts run W4A4 there, not the dequantising kernel; on H200 (no fp4 peak)
    # they fall back to bf16 GEMMs and do
    assert "fp4" in hardware.get("b200").peak_flops_per_s and "fp4" not in hardware.get("h200").peak_flops_per_s
    assert not fo.weight_only_fp4("nvfp4", "fp4")
    assert fo.weight_only_fp4("mxfp4", "bf16") and fo.weight_only_fp4("nvfp4", "bf16")
    assert not fo.weight_only_fp4("fp8", "bf16") and not fo.weight_only_fp4("int4", "bf16")


def test_a_moe_layers_per_kernel_time_is_shared_by_its_routed_gemms_in_every_layer_kind():
    # gpt-oss-120b alternates sliding-window and full-attention layers, so its decode table holds each routed GEMM
    # (gate, up, down) twice, each op standing for 18 of the 36 layers (config.json: num_hidden_layers 36,
    # layer_types alternating): the routed GEMMs' per-kernel times add up to one fitted t0 per MoE layer, 36 × t0
    hw = hardware.get("h200")
    t = table(registry.spec("gpt-oss-120b"), "decode")
    p = Precision.uniform("bf16").override(weights="mxfp4")
    e = engine_fp4_gemm(efficiency("expected", hw), hw, "trtllm")
    routed = fc.columns(t).routed
    assert len(routed) == 6 and int(t.kernels[routed].sum()) == 3 * 36
    ov = overheads(t, e, True, p, hw)
    assert ov[routed].sum() == pytest.approx(36 * _entry("h200")["coef"][8], rel=1e-9)
