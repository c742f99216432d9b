"""Projections reading the same activation run as one GEMM in a decode step (hardware/gemm_runs.py,
docs/efficiency.md "Fused projections in decode steps")."""

from dataclasses import replace

import numpy as np
import pytest

from llmath import hardware
from llmath.hardware.gemm_runs import gemm_runs
from llmath.hardware.kernels import engine_fp4_gemm
from llmath.hardware.roofline import efficiency, stage_times
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops import Scenario, table

H200 = hardware.get("h200")
FP8 = Precision(weights="fp8", activations="fp8", kv="fp8")


def _runs(model: str, stage: str = "decode") -> dict[str, tuple[float, float]]:
    t = table(resolve(model), stage)
    elements, share = gemm_runs(t)
    return {op.name: (elements[i], share[i]) for i, op in enumerate(t.ops) if share[i] < 1}


def test_llama_q_k_v_and_gate_up_are_runs():
    # Llama-3.1-70B (config.json: hidden 8192, 64 heads and 8 KV heads of 128, intermediate 28672):
    # q + k + v = 8192 × (8192 + 2 · 1024) = 83,886,080 weights; gate + up = 2 × 8192 × 28672 = 469,762,048
    runs = _runs("llama-3.1-70b")
    assert set(runs) == {"attn.q_proj", "attn.k_proj", "attn.v_proj", "ffn.gate", "ffn.up"}
    for n in ("attn.q_proj", "attn.k_proj", "attn.v_proj"):
        assert runs[n] == (83_886_080, pytest.approx(1 / 3))
    for n in ("ffn.gate", "ffn.up"):
        assert runs[n] == (469_762_048, 0.5)


def test_deepseek_runs_skip_separated_projections_and_routed_experts():
    # DeepSeek-R1: q_a_proj and kv_a_proj read the same input but the q_a norm and q_b projection sit between
    # them in the operator list, so they stay two kernels; the routed experts are one grouped kernel already
    # (the MoE fit); the dense layers' and the shared expert's gate + up are runs: 2 × 7168 × 18432 =
    # 264,241,152 and 2 × 7168 × 2048 = 29,360,128 weights
    runs = _runs("deepseek-r1")
    assert {n for n in runs} == {"ffn.gate", "ffn.up", "moe.shared.gate", "moe.shared.up"}
    assert runs["ffn.gate"][0] == 264_241_152 and runs["moe.shared.up"][0] == 29_360_128


def test_a_fused_qkv_decode_kernel_against_the_kernel_table():
    # aiconfigurator-core 0.12.0 (Apache-2.0), h200_sxm, TensorRT-LLM 1.3.0rc20, 8 tokens, k = 8192, latency in
    # ms: gemm/.../gemm_perf.parquet (fp8, torch_flow) row 19675 n = 10240 (Llama-3.1-70B's q, k, v fused on one
    # GPU) 0.034416, row 24417 n = 8192 (q alone) 0.030363, row 71738 n = 1024 (k or v) 0.016922; each less its
    # input quantiser at m = 8, k = 8192 (quantize/.../computescale_perf.parquet row 1451 0.007395 +
    # scale_matrix_perf.parquet row 1450 0.001356 = 0.008751): fused 25.665 µs, as three GEMMs 21.612 + 2 ×
    # 8.171 = 37.954 µs
    fused, separate = 25.665e-6, 37.954e-6
    t = table(resolve("llama-3.1-70b"), "decode")
    names = [op.name for op in t.ops]
    qkv = [names.index(n) for n in ("attn.q_proj", "attn.k_proj", "attn.v_proj")]
    eff = engine_fp4_gemm(efficiency("expected", H200), H200, "trtllm")
    got = stage_times(t, Scenario(8, 1, 1000), H200, FP8, eff, decode=True)[0][qkv].sum() / 80  # 80 layers
    assert got == pytest.approx(fused, rel=0.05)
    plain = replace(eff, fused_gemms=False)
    unfused = stage_times(t, Scenario(8, 1, 1000), H200, FP8, plain, decode=True)[0][qkv].sum() / 80
    assert abs(unfused / separate - 1) < 0.25 and unfused > 1.25 * got


def test_prefill_passes_keep_one_kernel_per_projection():
    t = table(resolve("llama-3.1-70b"), "prefill")
    eff = engine_fp4_gemm(efficiency("expected", H200), H200, "vllm")
    plain = replace(eff, fused_gemms=False)
    a = stage_times(t, Scenario(1, 1024, 0), H200, FP8, eff, decode=False)[0]
    b = stage_times(t, Scenario(1, 1024, 0), H200, FP8, plain, decode=False)[0]
    assert np.array_equal(a, b)


def test_fitted_devices_fuse_but_under_llama_cpp():
    assert efficiency("expected", H200).fused_gemms  # as llmath's default engine (vLLM) runs them
    for engine in ("vllm", "sglang", "trtllm"):
        assert engine_fp4_gemm(efficiency("expected", H200), H200, engine).fused_gemms
    # llama.cpp multiplies by wq, wk and wv one at a time (src/llama-model.cpp)
    assert not engine_fp4_gemm(efficiency("expected", H200), H200, "llama.cpp").fused_gemms
    assert not efficiency("expected", hardware.get("mi300x")).fused_gemms  # the defaults: no fitted GEMM model
    assert not efficiency("ideal").fused_gemms
