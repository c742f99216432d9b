"""``llmath calibrate`` writes the fitted tables' GEMM model (llmath.measure.gemm_fit): a fake measurement
backend (timings generated from a known model of that form) stands in for torch."""

from __future__ import annotations

import numpy as np
import pytest

from llmath.hardware import efficiency_fit as ef
from llmath.hardware import from_dict
from llmath.hardware.roofline import _fitted_inv, _gemm_shapes, efficiency
from llmath.measure.calibrate import SKINNY_M
from llmath.measure.gemm_fit import features, gemm_fit_entry
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops import table

pytest.importorskip("scipy")

# a CPU-like device: 100 GFLOP/s fp32, 20 GB/s; a known GEMM model of the fitted form
# [c, h1, p1, h2, p2, mem, hm, pm, t0]: compute fraction 0.9 × sat(m; 64, 1.2) × sat(n·k; 3e5, 0.8),
# memory fraction 0.7 × sat(bytes; 1e6, 1), 2 µs per kernel
PEAK, BW = 100e9, 20e9
TRUE = [0.9, 64.0, 1.2, 3e5, 0.8, 0.7, 1e6, 1.0, 2e-6]
SHAPES = [(4096, 8192), (8192, 4096), (4096, 4096)]  # (k, n) of calibrate's skinny weights


def _t(m, n, k):
    return float(ef.model_time(TRUE, *features(m, n, k, 4), PEAK, BW))


def _fake_raw():
    """What calibrate's raw block records, with every median time taken from TRUE."""
    gemm = [{"dtype": "fp32", "m": s, "n": s, "k": s, "median_s": _t(s, s, s)} for s in (1024, 2048, 4096)]
    skinny = [
        {"dtype": "fp32", "rows": r, "k": k, "n": n, "median_s": _t(r, n, k)} for r in SKINNY_M for k, n in SHAPES
    ]
    return {"gemm": gemm, "skinny": skinny}


def test_the_fit_recovers_the_model_on_shapes_it_never_saw():
    ((fmt, coef),) = gemm_fit_entry(_fake_raw(), "fp32", PEAK, BW)
    assert fmt == "fp32" and len(coef) == 9
    for m, n, k in [(3, 6144, 6144), (48, 6144, 6144), (700, 14336, 4096), (1500, 3000, 3000)]:
        got = float(ef.model_time(coef, *features(m, n, k, 4), PEAK, BW))
        assert got == pytest.approx(_t(m, n, k), rel=0.05), (m, n, k)


def test_too_few_timings_write_no_model():
    raw = {"gemm": [{"dtype": "fp32", "m": 512, "n": 512, "k": 512, "median_s": 1e-3}], "skinny": []}
    assert gemm_fit_entry(raw, "fp32", PEAK, BW) is None  # 1 timing < 9 coefficients


def _profile(eff: dict) -> dict:
    return {
        "name": "fake-profile",
        "memory_bytes": 64e9,
        "memory_bandwidth_bytes_per_s": BW,
        "peak_flops_per_s": {"fp32": PEAK},
        "vector_flops_per_s": 10e9,
        "source": "a fake measurement backend (test)",
        "measured": {"efficiency": eff},
    }


def test_a_calibrated_profile_runs_the_fitted_gemm_path():
    base = {"matmul": 1.0, "memory": 1.0, "vector": 0.5, "attention_decode": 0.5, "overhead_s": 2e-6}
    base |= {"decode_overhead_s": 2e-6, "skinny_rows": [[1, 0.8], [64, 0.3]], "matmul_rows": [[1, 0.01], [256, 0.5]]}
    fit = gemm_fit_entry(_fake_raw(), "fp32", PEAK, BW)
    hw, hw_old = from_dict(_profile(base | {"gemm_fit": fit})), from_dict(_profile(base))
    eff, eff_old = efficiency("expected", hw), efficiency("expected", hw_old)
    assert eff.gemm_coef("fp32") == pytest.approx(tuple(fit[0][1]))
    assert "fitted GEMM model" in eff.rule and eff_old.gemm_coef("fp32") is None
    p = Precision(weights="fp32", activations="fp32", kv="fp32")
    t = table(resolve("llama-3.2-1b"), "decode", "flash")
    inv = _fitted_inv(t, hw, eff, p, True)  # the GPU fits' bandwidth path, taken for the calibrated device
    assert inv is not None and _fitted_inv(t, hw_old, eff_old, p, True) is None
    # a weight GEMM streams at ηm(its weight bytes per run, fp32) of the profile bandwidth, ηm from the fit
    mm = np.flatnonzero(t.is_weight_mm)
    nk = _gemm_shapes(t)[0][mm]
    em = ef.fractions(fit[0][1], 1.0, 1.0, nk * 4)[1]
    assert inv[mm] == pytest.approx(1 / (BW * em))
    assert np.all(em <= 1)  # never faster than the profile's own bandwidth
