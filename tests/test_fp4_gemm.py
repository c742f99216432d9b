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
    assert ef.fp4_gemm("b200", engine) == (e["t0_s"], e["mem"], e["kloop_per_s"])
    assert 1e-6 < e["t0_s"] < 20e-6 and 0 < e["mem"] <= 1  # a few µs per kernel, a fraction of the bandwidth


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
    t0, mem, rate = ef.fp4_gemm("b200", engine)
    k, n, m = 14336, 4096, 16
    # the roofline's bytes: 9/16 per weight, 9/16 per activation read (fp4), 2 per output (16-bit)
    weight_and_io = 9 / 16 * (n * k + m * k) + 2 * m * n
    want = t0 + max(k / rate, weight_and_io / (8e12 * mem))  # B200: 8 TB/s (data/hardware.json)
    assert math.isclose(got, want, rel_tol=0.02)
    assert got > t0 + 9 / 16 * n * k / 8e12  # never faster than streaming the weights at the full bandwidth
