"""Engine overhead terms (llmath.deploy.overheads) with a stand-in preset: arithmetic in the comments."""

from __future__ import annotations

import pytest

import llmath
from llmath.deploy.overheads import Overheads, apply
from llmath.errors import WorkloadError

# a stand-in preset (not an engine's: the real presets' terms need their sources first)
STAND_IN = {
    "per_request_s": {"value": 2e-3, "source": "stand-in for the test"},
    "per_iteration_s": {"value": 50e-6, "source": "stand-in for the test"},
    "per_iteration_eager_s": {"value": 400e-6, "source": "stand-in for the test"},
    "per_token_s": {"value": 1e-6, "source": "stand-in for the test"},
}


def test_overheads_add_to_ttft_and_tpot():
    ov = Overheads.from_dict("stand-in", STAND_IN)
    m = {"ttft_s": 0.010, "tpot_s": 0.005}
    out = apply(m, ov, batch=8, gen=101)
    # TTFT: 10 ms + 2 ms per request + one eager prefill iteration 0.4 ms = 12.4 ms
    assert out["ttft_s"] == pytest.approx(0.0124)
    # TPOT: 5 ms + 50 µs (graph iteration) + 8 sequences × 1 µs = 5.058 ms
    assert out["tpot_s"] == pytest.approx(0.005058)
    # e2e = 12.4 ms + 100 × 5.058 ms = 518.2 ms; throughput = 8 × 101 / 0.5182 s
    assert out["e2e_s"] == pytest.approx(0.5182)
    assert out["throughput_tok_s"] == pytest.approx(808 / 0.5182)
    eager = apply(m, ov, batch=8, gen=101, cuda_graphs=False)
    assert eager["tpot_s"] == pytest.approx(0.005 + 400e-6 + 8e-6)  # no graphs: the eager iteration
    assert apply(m, ov, batch=8, gen=1)["tpot_s"] == 0.005  # one token: no decode iteration
    assert m == {"ttft_s": 0.010, "tpot_s": 0.005}  # the input is not changed


def test_overheads_apply_to_an_analysis():
    a = llmath.analyze("llama-3-8b", "h100-sxm", batch=1, prompt=128, gen=16).generation
    out = apply(a, Overheads.from_dict("stand-in", STAND_IN), batch=1, gen=16)
    assert out["ttft_s"] - a["ttft_s"] == pytest.approx(2.4e-3)
    assert out["tpot_s"] - a["tpot_s"] == pytest.approx(51e-6)
    assert Overheads().per_request_s == 0 and apply(a, Overheads(), 1, 16)["ttft_s"] == a["ttft_s"]


def test_bad_overheads_are_clear_errors():
    with pytest.raises(WorkloadError, match="has no source"):
        Overheads("x", per_request_s=1e-3)
    with pytest.raises(WorkloadError, match="must be seconds"):
        Overheads("x", per_token_s=-1.0)
    with pytest.raises(WorkloadError, match="unknown overhead term"):
        Overheads.from_dict("x", {"per_step": {"value": 1e-3, "source": "s"}})
    with pytest.raises(WorkloadError, match="prefill_iterations"):
        apply({"ttft_s": 1.0, "tpot_s": 1.0}, Overheads(), 1, 2, prefill_iterations=0)
