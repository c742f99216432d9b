"""Each engine's own decode-attention kernel over an fp8 KV cache on Hopper (``engine_attn_decode``).

Measured values: aiconfigurator-core 0.12.0 (Apache-2.0), ``h200_sxm/attention/<engine>/<version>/
generation_attention_perf.parquet``, head dim 128, 4 query heads and 1 KV head (Llama-3.1-8B's share of one
rank at TP 8), batch 512, ``step`` 2047 (the context), ``window_size`` 0; latency in ms (parquet row in brackets).
"""

from __future__ import annotations

import pytest

from llmath import hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.kernels import engine_fp4_gemm
from llmath.hardware.roofline import efficiency

SHAPE = dict(batch=512, context=2047, heads=4, kv_heads=1, head_dim=128)
# engine: (fp8 KV, bf16 KV) ms
MEASURED = {
    "sglang": (0.134190, 0.141040),  # 0.5.14 fa3, rows 7047 and 7019
    "vllm": (0.122000, 0.148810),  # 0.24.0 vllm_flash_attn_fa3, rows 43802 and 43796
    "trtllm": (0.076340, 0.147980),  # 1.3.0rc20 torch_flow, rows 21234 and 21233
}


def _time(coef, hw) -> float:
    x1, x2, xm, fl, by = ef.attn_decode_cost(
        SHAPE["batch"], SHAPE["context"], SHAPE["heads"], SHAPE["kv_heads"], SHAPE["head_dim"], "fp8"
    )
    return float(ef.model_time(coef, x1, x2, xm, fl, by, hw.vector_peak, hw.memory_bandwidth_bytes_per_s))


def test_flash_attention_3_reads_an_fp8_cache_no_faster_than_bf16_where_tensorrt_llm_halves_it():
    # the mechanism, from the tables alone: FA3 over fp8 within 20% of its bf16 time, TensorRT-LLM's about half
    for engine in ("sglang", "vllm"):
        fp8, bf16 = MEASURED[engine]
        assert 0.8 < fp8 / bf16 < 1.2
    fp8, bf16 = MEASURED["trtllm"]
    assert fp8 / bf16 < 0.6


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_engine_fp8_decode_attention_fit_reproduces_its_table(engine):
    hw = hardware.get("h200")
    coef = ef.engine_attn_decode("h200", engine, "fp8")
    entry = ef.data()["engine_attn_decode"]["devices"]["h200"][engine]["fp8"]
    assert _time(coef, hw) == pytest.approx(MEASURED[engine][0] * 1e-3, rel=entry["held_out"]["p90_abs_err"])
    # TensorRT-LLM's own fit at the same shape is faster: the other kernel
    trt = ef.coefficients("h200", "attn_decode", "fp8")[0]
    assert _time(trt, hw) < 0.8 * _time(coef, hw)


def test_the_engine_picks_its_own_decode_attention_fit():
    hw = hardware.get("h200")
    base = efficiency("expected", hw)
    for engine in ("sglang", "vllm"):
        e = engine_fp4_gemm(base, hw, engine)
        assert e.fit("attn_decode", "fp8") == tuple(ef.engine_attn_decode("h200", engine, "fp8"))
        assert e.fit("attn_decode", "bf16") == base.fit("attn_decode", "bf16")  # a bf16 cache keeps the fit
    assert engine_fp4_gemm(base, hw, "trtllm").fit("attn_decode", "fp8") == base.fit("attn_decode", "fp8")
    # Hopper parts without tables inherit the H100's entry; Blackwell has none (its engines' kernels read fp8
    # faster than bf16, as TensorRT-LLM's do)
    assert ef.engine_attn_decode("gh200", "vllm", "fp8") == ef.engine_attn_decode("h100-sxm", "vllm", "fp8")
    assert ef.engine_attn_decode("b200", "vllm", "fp8") is None
