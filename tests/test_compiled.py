"""The compiled scenario (llmath.hardware.compiled) equals the general evaluation it replaces.

References: :meth:`llmath.ops.Scenario.monomials` (the operator formulas' monomials, exact ints),
:func:`llmath.hardware.roofline.stage_times` and :func:`llmath.hardware.decode.decode_generation` on the
same tables, for every registry model the compiled path covers and many sizes.
"""

import numpy as np
import pytest

from llmath import Precision, Workload
from llmath.analysis import analyze, scenario
from llmath.hardware import compiled as cp
from llmath.hardware import get
from llmath.hardware.decode import decode_generation
from llmath.hardware.roofline import efficiency, stage_times
from llmath.model import registry
from llmath.ops import Scenario, table

SIZES = [(1, 1, 0), (1, 1, 1), (3, 7, 0), (8, 1024, 0), (8, 1, 1024), (5, 4095, 4096), (64, 1, 131_071)]


def _sizes(rng, n=40):
    extra = zip(rng.integers(1, 4097, n), rng.integers(1, 200_000, n), rng.integers(0, 300_000, n), strict=True)
    return SIZES + [(int(b), int(t), int(s)) for b, t, s in extra]


def test_covers_most_models():
    covered = [n for n in registry.names() if cp.compiled(registry.spec(n), "flash", *_device()) is not None]
    assert len(covered) >= len(registry.names()) // 2
    assert "llama-3-8b" in covered and "gemma-2-9b" in covered  # full and sliding-window attention


def _device(name="h100-sxm", p=None, mode="expected"):
    hw = get(name)
    return hw, p or Precision(), efficiency(mode, hw)


@pytest.mark.parametrize("attention", ["flash", "eager"])
def test_monomials_equal_the_operator_formulas_exactly(attention):
    rng = np.random.default_rng(0)
    checked = 0
    for name in registry.names():
        spec = registry.spec(name)
        for stage in ("prefill", "decode"):
            t = table(spec, stage, attention)
            fns = cp.monomial_functions(t.monos, spec.moe)
            if fns is None or spec.is_encoder_decoder or spec.prefix_positions:
                continue
            for B, T, S0 in _sizes(rng, 10):
                ref = Scenario(B, T, S0).monomials(t.monos, spec)
                got = [f(B, T, S0) for f in fns]
                assert got == [ref[m] for m in t.monos], (name, stage, B, T, S0)
            checked += 1
    assert checked > 100


def test_stage_and_generation_times_equal_the_general_path():
    rng = np.random.default_rng(1)
    devices = [_device(), _device("a100-sxm-80gb", Precision.uniform("fp8")), _device(mode="ideal")]
    for name in registry.names():
        spec = registry.spec(name)
        for hw, p, eff in devices:
            c = cp.compiled(spec, "flash", hw, p, eff)
            if c is None:
                continue
            for B, P, N in _sizes(rng, 3)[2:6]:
                N = max(N, 1)
                pre, dec, d = c.times(B, P, N)
                ref_pre = stage_times(table(spec, "prefill"), Scenario(B, P, 0), hw, p, eff, False)[0]
                ref_dec = stage_times(table(spec, "decode"), Scenario(B, 1, P), hw, p, eff, True)[0]
                ref_d = decode_generation(table(spec, "decode"), hw, p, eff, B, P, N, 0)
                np.testing.assert_allclose(pre, ref_pre, rtol=1e-12, err_msg=name)
                np.testing.assert_allclose(dec, ref_dec, rtol=1e-12, err_msg=name)
                assert float(d.total_s) == pytest.approx(float(ref_d.total_s), rel=1e-12)


def test_scenario_takes_the_general_path_where_not_compiled():
    # an encoder-decoder (T5) is not compiled; scenario() answers as the exact per-op report does, TTFT
    # including the encoder pass
    hw, p, eff = _device()
    spec = registry.spec("t5-base")
    assert cp.compiled(spec, "flash", hw, p, eff) is None
    s = scenario("t5-base", "h100-sxm", 2, 300, 50)
    a = analyze("t5-base", "h100-sxm", workload=Workload(batch=2, prompt=300, gen=50))
    assert s["ttft_s"] == pytest.approx(a.generation["ttft_s"], rel=1e-12)
    assert s["tpot_s"] == pytest.approx(a.generation["tpot_s"], rel=1e-12)
    enc = stage_times(table(spec, "encoder"), Scenario(2, 300), hw, cp.spec_precision(spec), eff, False)[0]
    assert s["ttft_s"] > float(enc.sum()) > 0


def test_plain_sizes_defers_every_bad_value_to_the_workload_checks():
    assert cp.plain_sizes(8, 1024, 1024, "flash")
    bad_sizes = [(0, 1, 1, "flash"), (1, 1, 1, "sdpa"), (True, 1, 1, "flash"), (np.int64(2), 1, 1, "flash")]
    for bad in bad_sizes + [(1.0, 1, 1, "flash"), (1, 2**32 + 1, 1, "flash")]:
        assert not cp.plain_sizes(*bad)
    with pytest.raises(Exception, match="batch"):
        scenario("llama-3-8b", "h100-sxm", 0, 10, 10)


@pytest.mark.parametrize("name", ["llama-3-8b", "gemma-2-9b", "mixtral-8x7b"])
def test_eager_attention_times_equal_the_general_path(name):
    # eager attention's score matrices (E monomials), full and sliding-window, and MoE routing
    hw, p, eff = _device()
    spec = registry.spec(name)
    c = cp.compiled(spec, "eager", hw, p, eff)
    assert c is not None
    for B, P, N in SIZES[2:]:
        pre, dec, d = c.times(B, max(P, 1), max(N, 1))
        ref_pre = stage_times(table(spec, "prefill", "eager"), Scenario(B, max(P, 1), 0), hw, p, eff, False)[0]
        ref_dec = stage_times(table(spec, "decode", "eager"), Scenario(B, 1, max(P, 1)), hw, p, eff, True)[0]
        ref_d = decode_generation(table(spec, "decode", "eager"), hw, p, eff, B, max(P, 1), max(N, 1), 0)
        np.testing.assert_allclose(pre, ref_pre, rtol=1e-12)
        np.testing.assert_allclose(dec, ref_dec, rtol=1e-12)
        assert float(d.total_s) == pytest.approx(float(ref_d.total_s), rel=1e-12)
