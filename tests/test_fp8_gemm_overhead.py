"""FP8 weight GEMMs' per-kernel time: the fp8 GEMM fit's t0 less the activation quantiser its source kernels ran
(dynamic: amax pass + scale-and-cast), since engines fuse the quantiser upstream. Values from
src/llmath/data/efficiency_fit.json (fitted to aiconfigurator-core 0.12.0's H100 tables by
scripts/fit_efficiency.py and scripts/fit_quantize.py), the arithmetic written out."""

from __future__ import annotations

import numpy as np
import pytest

import llmath
from llmath import hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.roofline import efficiency, overheads
from llmath.model.dtypes import Precision
from llmath.ops import table

H100 = hardware.get("h100-sxm")
# H100 (efficiency_fit.json, GEMM fits with the tile floor): fp8 GEMM t0 = 12.891 µs, bf16 GEMM t0 = 2.8647 µs;
# fp8_quantize: amax pass (compute_scale) 7.3024 µs, static quantiser (scale_matrix) 1.4357 µs, medians over m <= 64
T0_FP8, T0_BF16, AMAX, STATIC_Q = 12.891e-6, 2.8647e-6, 7.3024e-6, 1.4357e-6
FP8_GEMM = T0_FP8 - AMAX - STATIC_Q  # 12.891 − 7.3024 − 1.4357 = 4.1529 µs


def test_fp8_fit_decomposes_into_bf16_gemm_plus_dynamic_quantisation():
    # the measured pieces add up: 2.8647 + 7.3024 + 1.4357 = 11.603 µs against the fitted 12.891 µs (within 1.3 µs)
    q = ef.data()["fp8_quantize"]["devices"]["h100-sxm"]
    assert q["compute_scale_s"] == pytest.approx(AMAX, rel=1e-4)
    assert q["static_quantize_s"] == pytest.approx(STATIC_Q, rel=1e-4)
    assert abs(T0_BF16 + AMAX + STATIC_Q - T0_FP8) < 1.3e-6


def test_fp8_gemm_overhead_is_fp8_t0_less_the_quantiser():
    t, quant = ef.fp8_static_gemm_overhead("h100-sxm")
    assert quant == pytest.approx(AMAX + STATIC_Q, rel=1e-4)
    assert t == pytest.approx(FP8_GEMM, rel=1e-4)
    assert efficiency("expected", H100).fp8_gemm_overhead_s == pytest.approx(4.1529e-6, rel=1e-4)
    # L40S: fp8 t0 10.232 µs − (6.2123 + 2.7307) µs = 1.2890 µs, above its bf16 t0 (0.294 µs)
    assert ef.fp8_static_gemm_overhead("l40s")[0] == pytest.approx(10.232e-6 - 6.2123e-6 - 2.7307e-6, rel=1e-4)
    # inherited by rule (h100-pcie: same-arch h100-sxm); no fp8 fit on Ampere; none for other vendors
    assert ef.fp8_static_gemm_overhead("h100-pcie") == ef.fp8_static_gemm_overhead("h100-sxm")
    assert ef.fp8_static_gemm_overhead("a100-sxm-80gb") is None
    assert efficiency("expected", hardware.get("a100-sxm-80gb")).fp8_gemm_overhead_s is None
    assert ef.fp8_static_gemm_overhead("mi300x") is None


@pytest.mark.parametrize("decode", [False, True])
def test_fp8_weight_gemms_pay_it_per_kernel(decode):
    e = efficiency("expected", H100)
    t = table(llmath.resolve("llama-2-7b"), "decode" if decode else "prefill")
    p8 = Precision(weights="fp8", activations="fp8", kv="fp8")
    p16 = Precision.uniform("bf16")
    ov8, ov16 = overheads(t, e, decode, p8), overheads(t, e, decode, p16)
    names = [op.name for op in t.ops]
    # Llama-2-7B: 32 layers; q, k, v, o, gate, up, down are fp8 GEMMs, one kernel each per layer in prefill; in
    # decode q, k and v run as one fused GEMM (hardware/gemm_runs.py), each paying a third of its kernel time
    for n in ("attn.q_proj", "ffn.down"):
        i = names.index(n)
        share = 1 / 3 if (decode and n == "attn.q_proj") else 1.0
        # prefill: max(4 µs eager launch, 4.1529 µs) (bf16 GEMMs: 4 µs / 2.8647 µs); decode: the t0 of the fit of
        # decode-sized fp8 kernels without their quantiser (efficiency_fit.json fp8_decode_gemm, h100-sxm:
        # 6.9174e-16 s, its small-kernel time in its memory curve; tests/test_fp8_decode_gemm.py)
        want = 6.9174e-16 if decode else max(4e-6, FP8_GEMM)
        assert ov8[i] == pytest.approx(32 * want * share, rel=1e-4)
        assert ov16[i] == pytest.approx(32 * (T0_BF16 if decode else 4e-6) * share, rel=1e-4)
    # the LM head stays 16-bit (kept by the format rule), so its overhead is unchanged
    j = names.index("lm_head")
    assert ov8[j] == ov16[j]
    # an explicit overhead (--overhead-us) replaces every per-kernel time, this one included; in decode the fused
    # q/k/v (three GEMMs, one kernel) and gate/up (two, one kernel) pay it once per layer
    e1 = efficiency("expected", H100, overhead_s=1e-6, decode_overhead_s=1e-6)
    fused = {"attn.q_proj": 3, "attn.k_proj": 3, "attn.v_proj": 3, "ffn.gate": 2, "ffn.up": 2} if decode else {}
    per_op = np.array([1.0 / fused.get(n, 1) for n in names])
    assert np.allclose(overheads(t, e1, decode, p8), t.kernels * 1e-6 * per_op)
