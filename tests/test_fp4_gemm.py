"""The engines' NVFP4 weight GEMMs on Blackwell (scripts/fit_fp4_gemm.py, docs/efficiency.md)."""

import math

import pytest

from llmath import hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.kernels import engine_fp4_gemm
from llmath.hardware.roofline import efficiency, stage_times
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops import Scenario, table


def _entry(device: str, engine: str) -> dict:
    return ef.data()["fp4_gemm"]["devices"][device][engine]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_each_engine_has_its_own_kernel_model_fitted_within_ten_percent(engine):
    e = _entry("b200", engine)
    assert e["applied"] and e["held_out_median"] < 0.10 and e["rows_held_out"] > 500
    assert ef.fp4_gemm("b200", engine) == (e["t0_s"], e["mem"], e["kloop_per_s"], e["compute"])
    assert 1e-6 < e["t0_s"] < 20e-6 and 0 < e["mem"] <= 1  # a few µs per kernel, a fraction of the bandwidth
    assert 0 < e["compute"] < 1 and e["compute_rows_held_out"] > 500


def test_tensorrt_llm_table_is_recorded_but_not_applied():
    # its collector times the NVFP4 GEMM outside TensorRT-LLM's autotuner: the fallback tactic, not the served one
    e = _entry("b200", "trtllm")
    assert not e["applied"] and "autotun" in e["why"]
    assert ef.fp4_gemm("b200", "trtllm") is None
    hw = hardware.get("b200")
    assert engine_fp4_gemm(efficiency("expected", hw), hw, "trtllm").fp4_gemm is None
    assert engine_fp4_gemm(efficiency("expected", hw), hw, "sglang").fp4_gemm == ef.fp4_gemm("b200", "sglang")


def test_devices_without_nvfp4_tables_keep_the_general_model():
    assert efficiency("expected", hardware.get("h100-sxm")).fp4_gemm is None  # Hopper runs no fp4 GEMM
    assert ef.fp4_gemm("rtx-5090") is None  # consumer Blackwell's reference device has no NVFP4 table
    assert ef.fp4_gemm("b300") == ef.fp4_gemm("b200")  # no tables: the nearest measured architecture's (Blackwell)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_decode_nvfp4_gemm_takes_the_fitted_kernel_time(engine):
    """Llama-3-8B's down projection on B200 (k = 14336, n = 4096, 32 layers), 16 decoding tokens in NVFP4:
    t0 + max(k / rate, bytes / (bandwidth · mem)) per layer with the engine's fitted values."""
    hw, p = hardware.get("b200"), Precision.uniform("nvfp4")
    eff = engine_fp4_gemm(efficiency("expected", hw), hw, engine)
    t = table(resolve("llama-3-8b"), "decode")
    i = [op.name for op in t.ops].index("ffn.down")
    got = stage_times(t, Scenario(16, 1, 1000), hw, p, eff, decode=True)[0][i] / 32
    t0, mem, rate, _ = ef.fp4_gemm("b200", engine)
    k, n, m = 14336, 4096, 16
    # the roofline's bytes: 9/16 per weight, 9/16 per activation read (fp4), 2 per output (16-bit)
    weight_and_io = 9 / 16 * (n * k + m * k) + 2 * m * n
    want = t0 + max(k / rate, weight_and_io / (8e12 * mem))  # B200: 8 TB/s (data/hardware.json)
    assert math.isclose(got, want, rel_tol=0.02)
    assert got > t0 + 9 / 16 * n * k / 8e12  # never faster than streaming the weights at the full bandwidth


@pytest.mark.parametrize(
    ("model", "layers", "measured_s"),
    [
        # aiconfigurator-core 0.12.0 systems/data/b200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet, gemm_dtype nvfp4
        # (FlashInferCuteDslNvFp4LinearKernel): m = n = k = 8192 0.25759 ms; m = 8192, n = k = 4096 0.07785 ms
        ("llama-3.1-70b", 80, 0.25759e-3),  # num_hidden_layers of the hub configs
        ("llama-3-8b", 32, 0.07785e-3),
    ],
)
def test_a_prefill_nvfp4_gemm_takes_the_kernels_own_compute_share(model, layers, measured_s):
    """The output projection (n = k = hidden) of an 8192-token prefill on B200 under vLLM's NVFP4 GEMM: the
    kernel reaches about 0.43 of the dense FP4 peak there (2·8192³ FLOPs / 0.2576 ms = 4.27 PFLOP/s of 9), not
    the 16-bit fit's 0.66; within the share's held-out error (12.4%) of the measured kernel."""
    hw, p = hardware.get("b200"), Precision.uniform("nvfp4")
    eff = engine_fp4_gemm(efficiency("expected", hw), hw, "vllm")
    t = table(resolve(model), "prefill")
    i = [op.name for op in t.ops].index("attn.o_proj")
    got = stage_times(t, Scenario(1, 8192, 0), hw, p, eff, decode=False)[0][i] / layers
    assert got == pytest.approx(measured_s, rel=0.15)
