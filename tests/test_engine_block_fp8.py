"""Each engine's own block-FP8 MoE kernel, against the rows of that engine's per-kernel table, and the rule that
picks TensorRT-LLM's TRTLLM MoE backend for InferenceX's DeepSeek-R1 FP8 B200 rows."""

import pytest

from llmath import hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.efficiency import efficiency
from llmath.hardware.kernels import engine_fp4_gemm, launcher_moe_kernel
from llmath.measure.trt_launchers import moe_kernel

# (device, engine, table file under aiconfigurator-core 0.12.0 systems/data/, kernel_source, (hidden, inter,
# experts, top-k), tokens, moe-TP, measured ms, row): moe_dtype fp8_block, balanced, moe_ep_size 1
ROWS = [
    ("b200", "vllm", "b200_sxm/moe/vllm/0.24.0", "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic",
     (3072, 1536, 256, 8), 16, 1, 0.282149, 2018),
    ("b200", "vllm", "b200_sxm/moe/vllm/0.24.0", "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic",
     (3072, 1536, 256, 8), 16, 4, 0.100123, 19192),
    ("b200", "vllm", "b200_sxm/moe/vllm/0.24.0", "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic",
     (3072, 1536, 256, 8), 8192, 1, 2.554331, 2065),
    ("b200", "sglang", "b200_sxm/moe/sglang/0.5.14", "sglang_flashinfer_trtllm_moe",
     (3072, 1024, 256, 8), 16, 1, 0.20126, 3595),
    ("b200", "sglang", "b200_sxm/moe/sglang/0.5.14", "sglang_flashinfer_trtllm_moe",
     (3072, 1024, 256, 8), 8192, 1, 1.757898, 3616),
    ("h200", "vllm", "h200_sxm/moe/vllm/0.24.0", "vllm_fp8moe_triton_tritonexperts",
     (3072, 1536, 256, 8), 16, 4, 0.157243, 14444),
    ("h200", "vllm", "h200_sxm/moe/vllm/0.24.0", "vllm_fp8moe_triton_tritonexperts",
     (3072, 1536, 256, 8), 8192, 1, 3.692741, 1504),
    ("h100-sxm", "vllm", "h100_sxm/moe/vllm/0.24.0", "vllm_fp8moe_triton_tritonexperts",
     (3072, 1536, 256, 8), 16, 1, 0.654992, 1547),
    ("h200", "sglang", "h200_sxm/moe/sglang/0.5.14", "sglang_fused_moe_triton",
     (3072, 1536, 256, 8), 16, 1, 0.473292, 1299),
    ("h200", "sglang", "h200_sxm/moe/sglang/0.5.14", "sglang_fused_moe_triton",
     (3072, 1536, 256, 8), 8192, 1, 3.072932, 1321),
    ("h100-sxm", "sglang", "h100_sxm/moe/sglang/0.5.14", "sglang_fused_moe_triton",
     (3072, 1536, 256, 8), 16, 4, 0.172262, 12721),
]  # fmt: skip


def _layer_s(coef, device: str, shape, tokens: int, tp: int) -> float:
    """One rank's MoE layer at the fit: FP8 MMA, FP8 weight bytes, moe-TP splitting each expert's width."""
    hw = hardware.get(device)
    hidden, inter, experts, top_k = shape
    x = ef.moe_cost(tokens, hidden, inter / tp, top_k, experts, "fp8_block", routing="balanced")
    return float(ef.model_time(coef, *x, hw.peak("fp8"), hw.memory_bandwidth_bytes_per_s, ef.device_tile(device)))


@pytest.mark.parametrize("device, engine, table, source, shape, tokens, tp, ms, row", ROWS)
def test_engine_block_fp8_moe_reproduces_its_own_table(device, engine, table, source, shape, tokens, tp, ms, row):
    # within the fit's reported held-out p90 of the measured time (decode-sized and prefill-sized rows)
    kernel = next(k for k in ef.ENGINE_FP8_BLOCK_MOE[engine] if ef.engine_moe_kernel(device, k, "fp8_block"))
    entry = ef.data()["engine_moe_kernel"]["devices"][device][kernel]["fp8_block"]
    assert entry["table"].startswith(f"{table}/moe_perf.parquet ({source},")
    got = _layer_s(ef.engine_fp8_block_moe(device, engine), device, shape, tokens, tp)
    assert got == pytest.approx(ms * 1e-3, rel=entry["held_out"]["p90_abs_err"])


def _moe_fp8_block(device: str, engine: str, kernel: str = ""):
    hw = hardware.get(device)
    eff = launcher_moe_kernel(engine_fp4_gemm(efficiency("expected", hw), hw, engine), hw, kernel)
    return eff.fit("moe", "fp8-block"), eff.fit("moe_prefill", "fp8-block")


def test_each_engine_serves_block_fp8_experts_with_its_own_kernel_and_trtllm_keeps_its_table():
    for device in ("b200", "h200", "h100-sxm"):
        trt = ef.coefficients(device, "moe", "fp8_block")[0]
        assert tuple(_moe_fp8_block(device, "trtllm")[0]) == tuple(trt)  # DeepGEMM (B200), CUTLASS (Hopper)
        for engine in ("vllm", "sglang"):
            own = ef.engine_fp8_block_moe(device, engine)
            assert own is not None and tuple(own) != tuple(trt)
            assert _moe_fp8_block(device, engine)[0] == tuple(own)


def test_vllm_b200_triton_launcher_kernel_times_decode_and_prefill():
    # InferenceX's MiniMax-M2.5 FP8 B200 launcher (VLLM_USE_FLASHINFER_MOE_FP8=0, VLLM_MOE_USE_DEEP_GEMM=0) runs
    # vLLM's Triton fused MoE in every pass: its table (b200_sxm/moe/vllm/0.19.0, vllm_fused_moe) times
    # MiniMax-M2.5's own expert shape, 8,192 tokens at moe-TP 1: 4.344272 ms (row 3752)
    decode, prefill = _moe_fp8_block("b200", "vllm", "triton_fp8_block")
    assert decode == prefill == tuple(ef.engine_moe_kernel("b200", "triton_fp8_block", "fp8_block"))
    got = _layer_s(decode, "b200", (3072, 1536, 256, 8), 8192, 1)
    assert got == pytest.approx(4.344272e-3, rel=0.3)


def test_trtllm_gen_kernel_is_faster_than_deepgemm_at_decode_sizes_as_the_tables_say():
    # B200, 16 tokens over MiniMax-M2.5's experts (128 of 256 hit, 128 × 3 × 3072 × 1536 B = 1.81 GB) at moe-TP 1:
    # the TensorRT-LLM-generated kernel 0.282149 ms (vLLM 0.24.0 table, row 2018), TensorRT-LLM's DeepGEMM backend
    # 0.396939 ms (b200_sxm/moe/trtllm/1.3.0rc20, deepgemm, row 166216): each fit within 25% of its row
    shape = (3072, 1536, 256, 8)
    gen = _layer_s(ef.engine_moe_kernel("b200", "trtllm_gen_fp8_block", "fp8_block"), "b200", shape, 16, 1)
    deepgemm = _layer_s(ef.coefficients("b200", "moe", "fp8_block")[0], "b200", shape, 16, 1)
    assert gen == pytest.approx(0.282149e-3, rel=0.25)
    assert deepgemm == pytest.approx(0.396939e-3, rel=0.25)


def _trt_row(measured: str, isl: int = 1024, osl: int = 1024, **kw) -> dict[str, str]:
    notes = f"model=x; measured={measured}T00:00:00.000Z; wip=False"
    r = dict(backend="trtllm", model_path="deepseek-ai/DeepSeek-R1", system="b200_sxm", precision="fp8",
             isl=str(isl), osl=str(osl), source_notes=notes)  # fmt: skip
    return {**r, **kw}


def test_trtllm_moe_backend_as_inferencex_dsr1_fp8_b200_script_writes_it():
    # benchmarks/dsr1_fp8_b200_trt.sh: MOE_BACKEND="DEEPGEMM" until ec7bafaae (2026-01-29), then "TRTLLM" except
    # ISL 1024 / OSL 8192 from CONC 256 (DEEPGEMM)
    gen, deepgemm = {"moe_kernel": "trtllm_gen_fp8_block"}, {"moe_kernel": "trtllm_deepgemm_fp8_block"}
    assert moe_kernel(_trt_row("2026-02-05"), 64, 1, True) == gen
    assert moe_kernel(_trt_row("2026-02-05", 1024, 8192), 128, 1, True) == gen
    assert moe_kernel(_trt_row("2026-02-05", 1024, 8192), 256, 1, True) == deepgemm
    assert moe_kernel(_trt_row("2026-01-14"), 64, 1, True) == deepgemm
    assert moe_kernel(_trt_row("2026-02-05"), 64, 1, False) == {}  # not InferenceX's
    assert moe_kernel(_trt_row("2026-02-05", system="h200_sxm"), 64, 1, True) == {}  # H200: CUTLASS
