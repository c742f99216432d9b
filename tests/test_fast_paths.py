"""The sweep's fast paths equal their reference paths on random inputs.

References: the scalar closed form (pure Python per point, :func:`decode_generation` on scalars), the
per-scenario fast path (:func:`llmath.analysis.scenario`), ``np.unique`` and the plain ``@`` product.
"""

import numpy as np
import pytest

from llmath import Precision
from llmath.analysis import scenario
from llmath.hardware import get
from llmath.hardware.decode import decode_generation, distinct
from llmath.hardware.roofline import efficiency
from llmath.model import registry
from llmath.ops import table
from llmath.ops.table import matmul_rows
from llmath.sweep import CHUNK, grid


def test_distinct_equals_np_unique():
    rng = np.random.default_rng(0)
    cases = [
        rng.integers(1, 50, 1000).astype(float),  # a presence table
        rng.integers(1, 10**7, 300).astype(float),  # too wide for one: sorted
        rng.random(500) * 100,  # not integers
        rng.integers(0, 20, (40, 30)).astype(float),  # 2-d
        np.array([3.0]),
    ]
    for x in cases:
        u, idx = distinct(x)
        ru, ridx = np.unique(x, return_inverse=True)
        np.testing.assert_array_equal(u, ru)
        np.testing.assert_array_equal(u[idx], x)
        assert idx.shape == x.shape


def test_matmul_rows_equals_the_product():
    rng = np.random.default_rng(1)
    for rows, k, n in ((100_000, 5, 51), (7, 5, 17), (40_000, 3, 1), (2**18 + 3, 1, 1)):
        a, b = rng.random((rows, k)), rng.random((k, n))
        np.testing.assert_allclose(matmul_rows(a, b), a @ b, rtol=1e-13)
    a3, b = rng.random((4, 300, 5)), rng.random((5, 17))  # other shapes: the plain product
    np.testing.assert_allclose(matmul_rows(a3, b), a3 @ b, rtol=1e-13)


@pytest.mark.parametrize("name", ["llama-3-8b", "gpt-oss-20b", "deepseek-v3", "mixtral-8x7b"])
def test_grouped_decode_equals_the_scalar_closed_form(name):
    # > 64 points with repeated batches take the per-distinct-batch path; each point against the scalar path
    rng = np.random.default_rng(2)
    t = table(registry.spec(name), "decode", "flash")
    for hw_name, p in (
        ("h100-sxm", Precision()),
        ("h100-sxm", Precision(weights="int4")),
        ("a100-sxm-80gb", Precision.uniform("fp8")),
    ):
        hw = get(hw_name)
        for mode in ("ideal", "expected"):
            eff = efficiency(mode, hw)
            B = rng.choice([1, 3, 64, 65, 500, 4096], 200).astype(np.int64)
            P, N = rng.integers(1, 40_000, 200), rng.integers(1, 5000, 200)
            v = decode_generation(t, hw, p, eff, B, P, N)
            ungrouped = decode_generation(t, hw, p, eff, B, P, N, src=np.zeros(200))  # the per-point arrays
            np.testing.assert_allclose(v.total_s, ungrouped.total_s, rtol=1e-12)
            np.testing.assert_allclose(v.per_op_total_s, ungrouped.per_op_total_s, rtol=1e-12, atol=1e-300)
            for i in range(0, 200, 7):
                s = decode_generation(t, hw, p, eff, int(B[i]), int(P[i]), int(N[i]))
                assert float(v.total_s[i]) == pytest.approx(float(s.total_s), rel=1e-12, abs=1e-15)
                assert float(v.first_s[i]) == pytest.approx(float(s.first_s), rel=1e-12)
                assert float(v.last_s[i]) == pytest.approx(float(s.last_s), rel=1e-12)


@pytest.mark.parametrize("name", ["llama-3-8b", "qwen1.5-moe-a2.7b", "gemma-2-9b"])
def test_sweep_blocks_equal_the_scalar_scenario(name):
    # more than one block of points; sampled points against analysis.scenario (its own cached scalar path)
    rng = np.random.default_rng(3)
    n = CHUNK + 1000
    B, P, N = rng.integers(1, 300, n), rng.integers(1, 9000, n), rng.integers(1, 2000, n)
    g = grid(name, "h100-sxm", B, P, N)
    for i in rng.choice(n, 12, replace=False):
        s = scenario(name, "h100-sxm", int(B[i]), int(P[i]), int(N[i]))
        assert g["ttft_s"][i] == pytest.approx(s["ttft_s"], rel=1e-12)
        assert g["tpot_s"][i] == pytest.approx(s["tpot_s"], rel=1e-12)
        assert g["e2e_s"][i] == pytest.approx(s["e2e_s"], rel=1e-12)
