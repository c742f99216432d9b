"""TensorRT-LLM's MLA decode kernel on Hopper (``engine_mla_decode``, ``Kernel.MLA_DECODE``): the absorbed attention of
a DeepSeek-V3-shaped decode step against the engine's own per-kernel table, and only where that engine serves."""

import numpy as np
import pytest

from llmath.deploy import engines
from llmath.deploy.engine_device import engine_device
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.step import _mono
from llmath.hardware import efficiency_fit as ef
from llmath.hardware import get as get_hardware
from llmath.hardware.decode import decode_generation
from llmath.hardware.kernels import engine_fp4_gemm, engine_precision
from llmath.hardware.roofline import efficiency, monomial_times
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops import Scenario

FP8_BLOCK = Precision(weights="fp8-block", activations="bf16", kv="fp8", act_quant="fp8")


def _device(engine: str, hw_name: str, tp: int, dp: int):
    spec, hw = resolve("deepseek-ai/DeepSeek-R1"), get_hardware(hw_name)
    layout = ParallelConfig(tp=tp, dp=dp, ep=8).requested(spec)
    eng = engines.preset(engine, hw, tp=tp)
    eff = engine_fp4_gemm(efficiency("expected", hw), hw, engine)
    return engine_device(spec, hw, engine_precision(FP8_BLOCK, hw, engine), eff, eng, "flash", layout)


def _flash_mla_us(dev, batch: int, context: int) -> float:
    """One MoE layer's absorbed MLA kernel of a decode step, µs."""
    t = dev.parts[0].decode
    scen = Scenario(np.asarray(float(batch)), np.asarray(1.0), np.asarray(float(context)))
    mv = dev._fix(t, _mono(t, scen), batch)
    tm = monomial_times(t, mv, dev.hw, dev.precision, dev.decode_eff, batch, batch, True, context)[0]
    i = max(i for i, op in enumerate(t.ops) if op.name == "attn.flash_mla")  # the MoE layers' row
    return float(tm[i]) / 58 * 1e6  # DeepSeek-R1: 61 layers, the first 3 dense (config.json first_k_dense_replace)


@pytest.mark.parametrize(
    ("tp", "dp", "batch", "context", "table_us"),
    [
        # aiconfigurator-core 0.12.0 h200_sxm/mla/trtllm/1.3.0rc20/generation_mla_perf.parquet, kv_cache_dtype fp8:
        # 16 heads (TP 8), batch 32, step 8191: 0.067541 ms; batch 128, step 8191: 0.215163 ms;
        # 128 heads (attention-DP), batch 32, step 8191: 0.125131 ms; batch 128, step 4095: 0.235909 ms
        (8, 1, 32, 8191, 67.5),
        (8, 1, 128, 8191, 215.2),
        (1, 8, 32, 8191, 125.1),
        (1, 8, 128, 4095, 235.9),
    ],
)
def test_trtllm_mla_decode_kernel_takes_its_table_time_on_h200(tp, dp, batch, context, table_us):
    got = _flash_mla_us(_device("trtllm", "h200", tp, dp), batch, context)
    assert got == pytest.approx(table_us, rel=0.15)


def test_other_engines_keep_the_roofline_fractions():
    # vLLM's own tables time its MLA decode backends apart; no fit of them: the roofline's scalar fractions, which
    # stream the fp8 cache near the datasheet bandwidth, well under TensorRT-LLM's kernel at 128 heads
    assert ef.engine_mla_decode("h200", "vllm", "fp8") is None
    assert ef.engine_mla_decode("b200", "trtllm", "fp8") is None  # Blackwell: not fitted (its kernels differ)
    vllm = _flash_mla_us(_device("vllm", "h200", 1, 8), 32, 8191)
    assert vllm < 0.7 * 125.1


def test_held_out_error_recorded_with_the_table():
    e = ef.data()["engine_mla_decode"]["devices"]["h200"]["trtllm"]["fp8"]
    assert len(e["sha256"]) == 64 and "generation_mla_perf" in e["table"]
    assert e["held_out"]["median_abs_err"] < 0.15 and e["rows_held_out"] > 100


def test_closed_form_generation_matches_the_steps():
    # the fit's fractions follow the query rows alone, so the closed-form sum over a generation is the sum of the
    # per-step times at each context (P … P + N − 2)
    dev = _device("trtllm", "h200", 8, 1)
    t, B, P, N = dev.parts[0].decode, 16, 1000, 40
    summed = decode_generation(t, dev.hw, dev.precision, dev.decode_eff, B, P, N).total_s
    steps = 0.0
    for S in range(P, P + N - 1):
        scen = Scenario(np.asarray(float(B)), np.asarray(1.0), np.asarray(float(S)))
        mv = dev._fix(t, _mono(t, scen), B)
        steps += float(monomial_times(t, mv, dev.hw, dev.precision, dev.decode_eff, B, B, True, S)[0].sum())
    assert summed == pytest.approx(steps, rel=1e-3)
