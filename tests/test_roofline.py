"""The roofline: hand arithmetic in ideal mode, closed form vs step-by-step, physical monotonicity, the
hardware registry's hygiene."""

import json
from importlib import resources

import numpy as np
import pytest

from llmath import Precision, Workload, analyze
from llmath.hardware import Hardware, get, names
from llmath.hardware.decode import decode_generation
from llmath.hardware.roofline import IDEAL, efficiency, op_times
from llmath.model import registry
from llmath.ops import Scenario, table


def test_ideal_decode_is_bytes_over_bandwidth():
    a = analyze("llama-2-7b", "h100-sxm", workload=Workload(batch=1, prompt=128, gen=2), efficiency_mode="ideal")
    # batch-1 decode is memory-bound: time = bytes / 3.35e12 B/s (H100 SXM datasheet bandwidth)
    assert a.decode.bound == "memory"
    assert a.decode.time_s == pytest.approx(a.decode.bytes["total"] / 3.35e12, rel=1e-12)
    # bytes: every weight but the embedding table once in bf16, + the KV cache of 129 positions:
    # weights (6,738,415,616 - 32000*4096 + 4096)*2 = 13,214,695,424; KV 2*32*4096*2*129 = 67,633,152
    weights = (6_738_415_616 - 32000 * 4096 + 4096) * 2
    assert a.decode.bytes["weights"] == weights == 13_214_695_424
    assert a.decode.bytes["kv_read"] == 2 * 32 * 4096 * 2 * 129


def test_ideal_large_prefill_is_flops_over_peak():
    a = analyze("llama-2-7b", "h100-sxm", workload=Workload(batch=16, prompt=2048, gen=2), efficiency_mode="ideal")
    assert a.prefill.bound == "compute"
    # 989.5e12 dense bf16 FLOP/s (H100 SXM datasheet: 1979 with sparsity, halved)
    gemm_ops = [r for r in a.prefill.ops if r.kind == "matmul" and r.bound == "compute"]
    for r in gemm_ops:
        assert r.time_s == pytest.approx(r.flops / 989.5e12 + r.vflops / 67e12)


def test_closed_form_generation_equals_step_by_step():
    p = Precision()
    hw = get("h100-sxm")
    for name, B, P, N in (("llama-3-8b", 64, 100, 3000), ("gpt-oss-20b", 8, 50, 400), ("gemma-2-9b", 32, 10, 6000)):
        spec = registry.spec(name)
        t = table(spec, "decode", "flash")
        for mode in ("ideal", "expected"):
            eff = efficiency(mode, hw)
            d = decode_generation(t, hw, p, eff, B, P, N)
            S = np.arange(P, P + N - 1)
            times, _, _, _ = op_times(t.values(Scenario(B, 1, S)), t, hw, p, eff, B, B, True, context=S)
            # ideal: exact; expected: the fitted decode attention is summed per context band [2^k, 2^(k+1))
            # on its secants (fitted_ops), within 1.5% of the attention time itself, far less of the total
            assert float(d.total_s) == pytest.approx(times.sum(), rel=1e-9 if mode == "ideal" else 2e-3)
            assert float(d.first_s) == pytest.approx(times[0].sum(), rel=1e-12)
            assert float(d.last_s) == pytest.approx(times[-1].sum(), rel=1e-12)


def _hw(bw):
    return Hardware(name="x", memory_bytes=80e9, memory_bandwidth_bytes_per_s=bw, peak_flops_per_s={"bf16": 1e15})


@pytest.mark.parametrize("mode", ["ideal", "expected"])
def test_more_bandwidth_never_slower(mode):
    slow = analyze("qwen3-8b", _hw(1e12), workload=Workload(batch=4, prompt=256, gen=64), efficiency_mode=mode)
    fast = analyze("qwen3-8b", _hw(2e12), workload=Workload(batch=4, prompt=256, gen=64), efficiency_mode=mode)
    assert fast.generation["e2e_s"] <= slow.generation["e2e_s"]
    assert fast.generation["tpot_s"] < slow.generation["tpot_s"]


def test_batch_never_lowers_ideal_throughput_and_tpot_grows_with_context():
    prev = 0.0
    for b in (1, 2, 4, 8, 16, 32, 64, 128):
        a = analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=b, prompt=512, gen=128), efficiency_mode="ideal")
        assert a.generation["throughput_tok_s"] >= prev
        prev = a.generation["throughput_tok_s"]
    a = analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=8, prompt=512, gen=4096), efficiency_mode="ideal")
    assert a.generation["tpot_last_s"] > a.generation["tpot_first_s"]


def test_format_missing_falls_back_and_says_so():
    # The A100 has no fp8 tensor cores: fp8 weights run as W8A16 in bf16 (vLLM's Marlin fp8 path), stated in
    # the warnings, never an error. Its bf16 peak (312e12) is what the prefill is timed at, so the prefill
    # matches a bf16-compute run with the same (fp8) bytes.
    a = analyze("llama-3-8b", "a100-sxm-80gb", precision=Precision.uniform("fp8"))
    assert any("no fp8 peak" in w and "bf16" in w for w in a.warnings)
    assert a.precision["compute"]["fp8"] == "bf16"
    b = analyze("llama-3-8b", "a100-sxm-80gb", precision=Precision("fp8", "bf16", "fp8"))
    assert a.prefill.compute_s == pytest.approx(b.prefill.compute_s, rel=1e-9)


def test_model_that_does_not_fit_is_reported_not_raised():
    a = analyze("llama-3.1-405b", "h100-sxm", workload=Workload(batch=1, prompt=128, gen=16))
    assert a.memory.fits is False
    # 405,853,388,800 params * 2 bytes = 811.7 GB on an 80 GB device
    assert a.memory.over_by_bytes > 405_853_388_800 * 2 - 80e9


def test_hardware_registry_hygiene():
    data = json.loads((resources.files("llmath") / "data" / "hardware.json").read_text())["accelerators"]
    ns = [a["name"] for a in data]
    assert len(ns) == len(set(ns)) >= 25
    for a in data:
        assert a["source"].startswith("http"), a["name"]
        assert a["name"] == a["name"].lower() and " " not in a["name"]
        peaks = a["peak_flops_per_s"]
        # dense matmul peaks: fp8 never above int8-or-2x-bf16, bf16 never above fp8 (where both exist)
        if "bf16" in peaks and "fp8" in peaks:
            assert peaks["fp8"] <= 2.05 * peaks["bf16"]  # L40S datasheet: 733 vs 362.05 dense
    h = get("h100-sxm")
    # H100 SXM: datasheet 1,979 TFLOPS bf16 "with sparsity"; dense = 989.5
    assert h.peak("bf16") == pytest.approx(989.5e12)
    assert "bf16" in h.sparse_halved
    assert set(names()) >= {
        "a100-sxm-80gb",
        "a100-pcie-40gb",
        "h100-sxm",
        "h100-pcie",
        "h200",
        "l40s",
        "rtx-4090",
        "mi300x",
        "tpu-v5e",
    }


def test_ideal_efficiency_has_no_overhead():
    assert IDEAL.overhead_s == 0 and IDEAL.matmul == 1 and IDEAL.memory == 1


def test_scalar_and_vector_generation_paths_agree():
    # the scalar fast path and the broadcasting path of the same closed form
    p, hw = Precision(), get("h100-sxm")
    for name in ("llama-3-8b", "gpt-oss-20b", "deepseek-v3", "mixtral-8x7b"):
        t = table(registry.spec(name), "decode", "flash")
        for mode in ("ideal", "expected"):
            eff = efficiency(mode, hw)
            for B, P, N in ((1, 10, 2), (8, 100, 5000), (300, 7, 129), (64, 4000, 1)):
                s = decode_generation(t, hw, p, eff, B, P, N)
                v = decode_generation(t, hw, p, eff, np.array([B]), np.array([P]), np.array([N]))
                assert float(s.total_s) == pytest.approx(float(v.total_s[0]), rel=1e-12, abs=1e-15)
                assert float(s.first_s) == pytest.approx(float(v.first_s[0]), rel=1e-12)
                assert float(s.last_s) == pytest.approx(float(v.last_s[0]), rel=1e-12)


def test_fast_scenario_path_equals_the_report():
    # analysis.scenario (cached BLAS tables, scalar closed form) and analysis.analyze (exact per-op report)
    # evaluate the same operator lists; they must agree
    from llmath.analysis import scenario

    for name in ("llama-3-8b", "mixtral-8x7b", "gpt-oss-20b", "deepseek-v2-lite"):
        a = analyze(name, "h100-sxm", workload=Workload(batch=8, prompt=700, gen=300))
        f = scenario(name, "h100-sxm", 8, 700, 300)
        assert f["ttft_s"] == pytest.approx(a.generation["ttft_s"], rel=1e-12)
        assert f["tpot_s"] == pytest.approx(a.generation["tpot_s"], rel=1e-12)
        assert f["params"] == a.params.total
        assert float(f["decode_op_s"].sum()) == pytest.approx(a.decode.time_s, rel=1e-12)
