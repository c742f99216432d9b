"""The sweep's totals-only paths equal the general evaluation they replace, to a relative 1e-12.

References: :func:`llmath.hardware.roofline.monomial_times` (every op's time, summed here) and
:func:`llmath.hardware.decode.decode_generation` (first and last step, per-op totals), on the same tables, for
every registry model, several devices, efficiency modes and precisions, and random sizes; and the sweep's
answer equal to one scenario's at the same point.
"""

import numpy as np
import pytest

from llmath import Precision
from llmath.analysis import scenario
from llmath.hardware import get
from llmath.hardware.decode import decode_generation, decode_total
from llmath.hardware.roofline import efficiency, monomial_times, prefill_total
from llmath.model import registry
from llmath.ops import Scenario, table
from llmath.sweep import grid

DEVICES = [("h100-sxm", "expected", Precision()), ("h100-sxm", "ideal", Precision()), ("mi300x", "expected",
           Precision(weights="fp8", activations="fp8", kv="fp8"))]  # fmt: skip
REL = 1e-12


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.maximum(np.abs(np.asarray(b)), 1e-300)))


def _points(rng, n=300):
    """Batches, prompts and generations; many points share a batch, as a sweep's do."""
    return (rng.integers(1, 200, n).astype(float), rng.integers(1, 40_000, n).astype(float),
            rng.integers(1, 20_000, n).astype(float))  # fmt: skip


def _models(hw_name: str, mode: str, seed: int):
    """(device, efficiency, random generator, every registry model's spec)."""
    hw = get(hw_name)
    return hw, efficiency(mode, hw), np.random.default_rng(seed), [registry.spec(n) for n in registry.names()]


@pytest.mark.parametrize(("hw_name", "mode", "p"), DEVICES)
def test_prefill_total_equals_the_sum_of_op_times(hw_name, mode, p):
    hw, eff, rng, specs = _models(hw_name, mode, 1)
    checked = 0
    for spec in specs:
        name = spec.name
        if spec.is_encoder_decoder:  # the sweep times encoder-decoders by the general path
            continue
        t = table(spec, "prefill", "flash")
        B, P, _ = _points(rng)
        mv = t.monomial_matrix(Scenario(B, P, 0))
        want = monomial_times(t, mv, hw, p, eff, B, B * P, False)[0].sum(-1)
        assert _rel(prefill_total(t, mv, hw, p, eff, B, B * P), want) <= REL, name
        assert _rel(prefill_total(t, mv[:7], hw, p, eff, B[:7], B[:7] * P[:7]), want[:7]) <= REL, name
        checked += 1
    assert checked >= 80


@pytest.mark.parametrize(("hw_name", "mode", "p"), DEVICES)
def test_decode_total_equals_the_generations_total(hw_name, mode, p):
    hw, eff, rng, specs = _models(hw_name, mode, 2)
    grouped = 0
    for spec in specs:
        name = spec.name
        t = table(spec, "decode", "flash")
        B, P, N = _points(rng)
        if any(m.startswith("z") or m in ("LL", "I", "BTI") for m in t.monos):  # stepwise: a loop per point
            B, P, N = B[:3], P[:3], N[:3]
        grouped += len(B) > 64  # over 64 points the totals-only path groups the batches
        src = P if spec.is_encoder_decoder else 0.0
        P0 = np.ones_like(P) if spec.is_encoder_decoder else P
        want = decode_generation(t, hw, p, eff, B, P0, N, src).total_s
        assert _rel(decode_total(t, hw, p, eff, B, P0, N, src), want) <= REL, name
        if spec.is_encoder_decoder:  # one source length for all points: the grouped path
            want = decode_generation(t, hw, p, eff, B, 1.0, N, 512.0).total_s
            assert _rel(decode_total(t, hw, p, eff, B, 1.0, N, 512.0), want) <= REL, name
    assert grouped >= 80


@pytest.mark.parametrize("name", ["llama-3-8b", "gemma-2-9b", "mixtral-8x7b", "deepseek-v3", "t5-base"])
def test_sweep_equals_one_scenario_per_point(name):
    hw, rng = get("h100-sxm"), np.random.default_rng(3)
    B, P, N = (a.astype(int) for a in _points(rng, 200))  # over 64 points: the grouped totals-only paths
    g = grid(name, hw, B, P, N)
    for i in range(0, 200, 40):
        s = scenario(name, hw, int(B[i]), int(P[i]), int(N[i]))
        assert _rel(g["ttft_s"][i], s["ttft_s"]) <= REL, (name, i)
        assert _rel(g["e2e_s"][i], s["e2e_s"]) <= REL, (name, i)
