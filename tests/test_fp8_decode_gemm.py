"""FP8 weight GEMMs in a decode step: the GEMM form fitted to the fp8 rows of at most 64 tokens less their
activation quantiser (scripts/fit_decode_gemm.py, docs/efficiency.md "The GEMM fit at decode sizes")."""

import math

import pytest

from llmath import hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.roofline import efficiency, stage_times
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops import Scenario, table

H200 = hardware.get("h200")

# Raw rows of aiconfigurator-core 0.12.0 (Apache-2.0), h200_sxm, TensorRT-LLM 1.3.0rc20, latency in ms:
# gemm/.../gemm_perf.parquet (fp8, torch_flow) row, quantize/.../computescale_perf.parquet (amax pass) row and
# quantize/.../scale_matrix_perf.parquet (scale-and-cast) row at the same m, k. Shapes (n, k) the fit held out.
HELD_OUT_ROWS = [
    # (m, n, k), GEMM row: ms, amax row: ms, scale-and-cast row: ms
    ((8, 16384, 8192), (10209, 0.04590400060017904), (1451, 0.007395200058817863), (1450, 0.0013557333499193192)),
    ((8, 10240, 51200), (18785, 0.1442293326059977), (1447, 0.007656533146897951), (1446, 0.0015893333901961643)),
    ((8, 6144, 65536), (32763, 0.11195199688275655), (1467, 0.007746133580803871), (1467, 0.0016544000556071598)),
]


@pytest.mark.parametrize(("shape", "gemm", "amax", "cast"), HELD_OUT_ROWS)
def test_reproduces_held_out_static_input_kernels(shape, gemm, amax, cast):
    # the kernel an engine runs on an input quantised upstream: the measured GEMM less both quantiser pieces,
    # e.g. 45.904 − 7.395 − 1.356 = 37.153 µs for 8 × 16384 × 8192
    want = (gemm[1] - amax[1] - cast[1]) * 1e-3
    m, n, k = shape
    got = float(ef.model_time(ef.fp8_decode_gemm("h200"), *ef.gemm_cost(m, n, k, "fp8"), H200.peak("fp8"),
                              H200.memory_bandwidth_bytes_per_s, 64))  # fmt: skip
    assert got == pytest.approx(want, rel=0.05)
    # the general fp8 fit as the serving model used it in decode (t0 less the median quantiser) is further off
    old = ef.data()["devices"]["h200"]["gemm"]["fp8"]["coef"]
    general = float(ef.model_time(old, *ef.gemm_cost(m, n, k, "fp8"), H200.peak("fp8"),
                                  H200.memory_bandwidth_bytes_per_s, 64))  # fmt: skip
    general += ef.fp8_static_gemm_overhead("h200")[0] - old[8]
    assert abs(general / want - 1) > abs(got / want - 1)


def test_fitted_where_one_tile_holds_the_decode_rows_with_held_out_errors():
    fits = ef.data()["fp8_decode_gemm"]["devices"]
    assert set(fits) == {"h100-sxm", "h200", "b200", "gb200"}  # 64-row tiles; Ada and consumer Blackwell: 16
    for fit in fits.values():
        assert len(fit["coef"]) == 9 and fit["rows_held_out"] > 1000 and fit["held_out"]["median_abs_err"] < 0.2
    assert ef.fp8_decode_gemm("h100-pcie") == ef.fp8_decode_gemm("h100-sxm")  # inherited by the resolve rule
    assert ef.fp8_decode_gemm("l40s") is None and ef.fp8_decode_gemm("mi300x") is None
    assert efficiency("expected", H200).fp8_decode_gemm == tuple(fits["h200"]["coef"])
    assert efficiency("expected", hardware.get("a100-sxm-80gb")).fp8_decode_gemm is None  # no fp8 execution


def test_a_decode_fp8_gemm_streams_at_the_decode_fit_and_prefill_keeps_the_general_one():
    """Llama-3-8B's down projection on H200 (k = 14336, n = 4096, 32 layers), 16 decoding tokens in FP8."""
    p = Precision(weights="fp8", activations="fp8", kv="fp8")
    eff = efficiency("expected", H200)
    t = table(resolve("llama-3-8b"), "decode")
    i = [op.name for op in t.ops].index("ffn.down")
    got = stage_times(t, Scenario(16, 1, 1000), H200, p, eff, decode=True)[0][i] / 32
    c = ef.fp8_decode_gemm("h200")
    k, n, m = 14336, 4096, 16
    io = n * k + m * k + 2 * m * n  # the roofline's bytes: fp8 weights and activations read, a 16-bit output
    # t0 + bytes / (bandwidth · mem · sat(weight bytes)), H200 4.8 TB/s (data/hardware.json); memory-bound
    want = c[8] + io / (4.8e12 * c[5] / (1 + (c[6] / (n * k)) ** c[7]))
    assert math.isclose(got, want, rel_tol=0.01)
    assert got > io / 4.8e12  # never faster than the datasheet bandwidth
    tp = table(resolve("llama-3-8b"), "prefill")
    pre = stage_times(tp, Scenario(1, 16, 0), H200, p, eff, decode=False)
    j = [op.name for op in tp.ops].index("ffn.down")
    assert not math.isclose(pre[0][j] / 32, got, rel_tol=0.01)  # the same 16 rows in a prefill pass: general fit
