"""Engine overhead terms (llmath.deploy.overheads) with a stand-in preset: arithmetic in the comments."""

from __future__ import annotations

import pytest

import llmath
from llmath import Workload
from llmath.deploy.overheads import TERMS, Overheads, apply
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
    a = llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=1, prompt=128, gen=16)).generation
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


# ---- the engine presets' terms, applied in the serving steady state ----------------------------------------


def test_every_preset_loads_its_sourced_terms():
    from llmath.deploy import engines

    for name in engines.names():
        ov = engines.overheads(name)  # a non-zero term without a source would raise here
        assert ov.name == name
        assert all(ov.sources.get(k) for k in TERMS if getattr(ov, k))
    vllm = engines.overheads("vllm")
    assert vllm.per_iteration_s == pytest.approx(0.62e-3)  # tenstorrent/vllm#305: 0.62 ms per step, no-op model
    assert vllm.per_prompt_token_s == pytest.approx(2.2e-6)  # 220 ms per 100k prompt tokens
    assert engines.overheads("trtllm").per_iteration_s == 0.0  # overlap scheduler on by default


def _serve(engine="vllm", mode="expected", **kw):
    from llmath.deploy.service import serve

    args = dict(workload=Workload(prompt=1024, gen=256, concurrency=1), max_num_batched_tokens=2048) | kw
    return serve("llama-3-8b", "h100-sxm", engine=engine, efficiency_mode=mode, **args).metrics


def test_serving_adds_the_engine_terms_under_expected_only():
    o = _serve()["overheads_s"]
    # one request at a time, its 1024-token prompt in one iteration (budget 2048):
    # TTFT += 1024 tokens × 2.2 µs (tokenisation) + 1 prefill iteration × 0.62 ms = 2.2528 + 0.62 = 2.8728 ms
    assert o["ttft"] == pytest.approx(1024 * 2.2e-6 + 0.62e-3)
    # TPOT += one decode iteration's 0.62 ms (batch 1, per_token 0)
    assert o["tpot"] == pytest.approx(0.62e-3)
    assert o["engine"] == "vllm" and o["terms"]["per_iteration_s"] == pytest.approx(0.62e-3)
    assert "tenstorrent/vllm/pull/305" in o["sources"]["per_iteration_s"]
    ideal = _serve(mode="ideal")
    assert ideal["overheads_s"]["ttft"] == 0.0 and ideal["overheads_s"]["tpot"] == 0.0
    # SGLang overlaps its scheduler: only the tokenisation, 1024 × 2.2 µs = 2.2528 ms, and nothing per step
    s = _serve("sglang")["overheads_s"]
    assert s["ttft"] == pytest.approx(1024 * 2.2e-6) and s["tpot"] == 0.0


def test_overheads_are_the_difference_they_make():
    from dataclasses import replace

    from llmath.deploy import engines
    from llmath.deploy.serving import Requests, steady_state
    from llmath.deploy.serving_memory import memory
    from llmath.deploy.step import Device
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency
    from llmath.model.dtypes import Precision
    from llmath.model.registry import resolve

    hw = get("h100-sxm")
    dev = Device(resolve("llama-3-8b"), hw, Precision(), efficiency("expected", hw))
    eng = engines.preset("vllm", hw)
    req = Requests(512, 128)
    c = [1.0, 8.0, 64.0, 4096.0]  # the last one queues (KV pool / max_num_seqs)
    b_max = memory(dev, eng, req).max_resident
    with_ov = steady_state(dev, eng, req, c, b_max)
    without = steady_state(dev, replace(eng, overheads=Overheads("vllm")), req, c, b_max)
    # the reported shares are exactly what the terms add to TTFT and TPOT (the steady state is linear in them)
    assert with_ov.ttft_s - without.ttft_s == pytest.approx(with_ov.overhead_ttft_s, rel=1e-9)
    assert with_ov.tpot_s - without.tpot_s == pytest.approx(with_ov.overhead_tpot_s, rel=1e-9)
    assert (with_ov.overhead_tpot_s >= 0.62e-3 - 1e-12).all()  # every iteration pays its 0.62 ms


def test_published_rows_get_their_frameworks_terms():
    from llmath.measure.published import _with_overheads

    gen = {"ttft_s": 0.050, "tpot_s": 0.010}
    row = {"framework": "vLLM 0.6.x (nightly CI)", "batch": 4, "prompt": 1000, "gen": 11}
    out, engine = _with_overheads(row, gen)
    assert engine == "vllm"
    # TTFT: 50 ms + 1000 × 2.2 µs + one eager prefill iteration 0.62 ms = 52.82 ms; TPOT: 10 ms + 0.62 ms
    assert out["ttft_s"] == pytest.approx(0.05282)
    assert out["tpot_s"] == pytest.approx(0.01062)
    assert out["e2e_s"] == pytest.approx(0.05282 + 10 * 0.01062)
    same, none = _with_overheads({**row, "framework": "gpt-fast"}, gen)
    assert none is None and same is gen  # no engine preset: unchanged
