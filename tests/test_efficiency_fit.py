"""The fitted kernel-efficiency models (llmath.hardware.efficiency_fit) against raw measured kernel rows.

The fixture tests/data/efficiency_kernels.json holds 24 raw rows of aiconfigurator-core 0.12.0 (Apache-2.0)
per-kernel tables, each with its table path and parquet row number: shapes that were HELD OUT of the fit
(scripts/fit_efficiency.py). The fitted model must reproduce them within the held-out error the fit reports.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from llmath import Workload, hardware
from llmath.deploy.layout import ParallelConfig
from llmath.errors import UnknownNameError, WorkloadError
from llmath.hardware import efficiency_fit as ef

FIXTURE = json.loads((Path(__file__).parent / "data" / "efficiency_kernels.json").read_text())
ROWS = FIXTURE["rows"]


def _fmts(cls, fmt):
    """The shape arguments' formats the fit used for a row of ``cls`` measured in ``fmt``."""
    if cls in ("attn_context", "attn_mla_context"):
        return {"fmt": fmt, "kv_fmt": fmt}
    if cls == "attn_decode":
        return {"kv_fmt": fmt}
    return {"fmt": fmt}


def _shape(row):
    s, cls = row["shape"], row["class"]
    if cls == "gemm":
        args = {"m": s["m"], "n": s["n"], "k": s["k"]}
    elif cls == "moe":
        names = ("tokens", "hidden", "inter", "topk", "experts")
        keys = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts")
        args = {a: s[k] for a, k in zip(names, keys, strict=True)}
    elif cls == "attn_mla_context":
        # the context MLA table times DeepSeek-V3/R1's heads: qk_nope 128 + qk_rope 64, v_head_dim 128 (config.json)
        args = {"batch": s["batch_size"], "context": s["isl"], "heads": s["num_heads"], "qk_dim": 192, "v_dim": 128}
    else:
        ctx = s["isl"] if cls == "attn_context" else s["step"]
        args = {"batch": s["batch_size"], "context": ctx, "heads": s["num_heads"]}
        args |= {"kv_heads": s["num_key_value_heads"], "head_dim": s["head_dim"]}
    return args | _fmts(cls, row["format"])


def test_fixture_is_small_and_sourced():
    assert 0 < len(ROWS) <= 30
    assert "aiconfigurator-core 0.12.0" in FIXTURE["source"]
    files = ef.data()["provenance"]["files_sha256"]
    for r in ROWS:
        assert r["table"] in files and isinstance(r["row"], int) and r["latency_ms"] > 0


def _row_errors():
    """(row, predicted / measured − 1, the class's reported held-out p90 |error|) for every fixture row."""
    out = []
    for row in ROWS:
        pred = ef.kernel_time_on(hardware.get(row["device"]), row["class"], **_shape(row))
        fit = ef.data()["devices"][row["device"]][row["class"]][row["format"]]
        out.append((row, pred / (row["latency_ms"] * 1e-3) - 1, fit["held_out"]["p90_abs_err"]))
    return out


def test_held_out_kernel_times_within_reported_error():
    errs = _row_errors()
    # the rows sit at the 10/50/90% latency quantiles of each held-out set; a p90 leaves 10% of rows beyond
    # it, so at least 90% of them must lie within their class's reported held-out p90 |error| (+10% slack)
    within = [abs(e) <= 1.1 * p90 for _, e, p90 in errs]
    assert sum(within) >= 0.9 * len(errs), [(r["class"], r["shape"], round(e, 3)) for r, e, _ in errs]
    # GEMM and MoE rows (what the roofline uses most): every one within its class's p90
    for row, e, p90 in errs:
        if row["class"] in ("gemm", "moe"):
            assert abs(e) <= p90, (row, e)


def test_held_out_median_errors_reported_for_every_fit():
    for dev, classes in ef.data()["devices"].items():
        for cls in ef.ROOFLINE_CLASSES:
            for fmt, fit in classes.get(cls, {}).items():
                assert len(fit["coef"]) == 9, (dev, cls, fmt)
                assert fit["rows_held_out"] > 0 and 0 <= fit["held_out"]["median_abs_err"] < 1


def _grid():
    x = np.logspace(0, 12, 25)
    return np.meshgrid(x, x, x, indexing="ij")


@pytest.mark.parametrize("device", sorted(ef.data()["devices"]))
def test_fractions_are_in_zero_one(device):
    x1, x2, xm = _grid()
    for cls in ef.ROOFLINE_CLASSES:
        for fmt, fit in ef.data()["devices"][device].get(cls, {}).items():
            ec, em, t0 = ef.fractions(fit["coef"], x1, x2, xm)
            assert np.all((ec > 0) & (ec <= 1)) and np.all((em > 0) & (em <= 1)), (cls, fmt)
            assert 0 <= t0 < 1e-3


@pytest.mark.parametrize("device", sorted(ef.data()["devices"]))
def test_more_rows_never_lower_gemm_throughput(device):
    hw = hardware.get(device)
    for fmt in ef.data()["devices"][device]["gemm"]:
        for n, k in ((4096, 4096), (14336, 4096), (512, 512), (128256, 8192)):
            ms = 2 ** np.arange(0, 16)
            t = np.array([ef.kernel_time_on(hw, "gemm", m=int(m), n=n, k=k, fmt=fmt) for m in ms])
            tput = 2.0 * ms * n * k / t
            assert np.all(np.diff(tput) >= -1e-9 * tput[1:]), (fmt, n, k)
            # the compute fraction rises with rows and with the weight size
            ec = [ef.evaluate(device, "gemm", fmt, float(m), n * k, 1e9).compute for m in ms]
            assert np.all(np.diff(ec) >= 0)
            ec_nk = [ef.evaluate(device, "gemm", fmt, 256.0, float(s), 1e9).compute for s in (1e4, 1e6, 1e8)]
            assert ec_nk == sorted(ec_nk)


@pytest.mark.parametrize("device", sorted(ef.data()["devices"]))
def test_longer_context_never_lowers_decode_attention_bandwidth(device):
    hw = hardware.get(device)
    for fmt in ef.data()["devices"][device].get("attn_decode", {}):
        shape = {"batch": 16, "heads": 32, "kv_heads": 8, "head_dim": 128, "kv_fmt": fmt}
        ctx = 2 ** np.arange(4, 18)
        t = np.array([ef.kernel_time_on(hw, "attn_decode", context=int(s), **shape) for s in ctx])
        achieved = ef.attn_decode_cost(16, ctx, 32, 8, 128, fmt)[4] / t
        assert np.all(np.diff(achieved) >= -1e-9 * achieved[1:])
        assert np.all(achieved <= hw.memory_bandwidth_bytes_per_s)


def test_inheritance_rule():
    assert ef.resolve("h100-sxm").rule == "measured"
    r = ef.resolve("h100-pcie")  # Hopper, no table: Hopper's reference device
    assert (r.measured_on, r.rule.split(":")[0]) == ("h100-sxm", "same-arch")
    r = ef.resolve("v100-sxm-32gb")  # Volta: nothing measured; the nearest measured architecture is Ampere
    assert (r.measured_on, r.rule.split(":")[0]) == ("a100-sxm-80gb", "nearest-arch")
    for other in ("mi300x", "apple-m2-ultra", "xeon-8480", "tpu-v5e"):
        assert ef.resolve(other).rule == "none"
        assert ef.evaluate(other, "gemm", "bf16", 1.0, 1.0, 1.0) is None


def test_inherited_fractions_run_at_own_peaks():
    # a compute-bound GEMM: H100 PCIe uses H100 SXM's fractions at its own dense bf16 peak, so its kernel
    # body takes 989.5 / 756.5 = 1.308 times as long (datasheet peaks, docs/hardware.md)
    sxm, pcie = hardware.get("h100-sxm"), hardware.get("h100-pcie")
    shape = {"m": 8192, "n": 8192, "k": 8192, "fmt": "bf16"}
    t0 = ef.evaluate("h100-sxm", "gemm", "bf16", 8192, 8192 * 8192, 1.0).overhead_s
    body_sxm = ef.kernel_time_on(sxm, "gemm", **shape) - t0
    body_pcie = ef.kernel_time_on(pcie, "gemm", **shape) - t0
    assert math.isclose(body_pcie / body_sxm, 989.5 / 756.5, rel_tol=1e-9)
    assert ef.evaluate("h100-pcie", "gemm", "fp16", 64, 1e7, 1e7).rule.startswith("same-arch")


def test_collectives_alpha_beta():
    t, rule = ef.collective_time("h100-sxm", "all_reduce", 8, 2**27)
    alpha, beta = ef.data()["devices"]["h100-sxm"]["all_reduce"]["8"]["coef"]
    assert rule == "measured" and math.isclose(t, alpha + 2**27 / beta)
    assert ef.collective_time("mi300x", "all_reduce", 8, 1e6) is None
    assert ef.collective_time("h100-sxm", "all_reduce", 3, 1e6) is None


def test_bad_input_is_a_clear_error():
    with pytest.raises(UnknownNameError, match="efficiency class"):
        ef.evaluate("h100-sxm", "conv", "bf16", 1, 1, 1)
    with pytest.raises(UnknownNameError, match="collective"):
        ef.collective_time("h100-sxm", "broadcast", 8, 1)
    with pytest.raises(WorkloadError, match="must be > 0"):
        ef.evaluate("h100-sxm", "gemm", "bf16", 0, 1, 1)


def test_data_file_is_small_and_has_provenance():
    path = Path(ef.__file__).parents[1] / "data" / "efficiency_fit.json"
    assert path.stat().st_size < 1_000_000
    p = ef.data()["provenance"]
    assert p["package"] == "aiconfigurator-core" and p["script"] == "scripts/fit_efficiency.py"
    assert all(len(h) == 64 for h in p["files_sha256"].values())


# ---- the fitted models in the roofline's ``expected`` efficiency ---------------------------------------


def test_expected_efficiency_says_which_rule_applied():
    from llmath.hardware.roofline import IDEAL, expected

    assert expected(hardware.get("h100-sxm")).rule == "fitted kernels (measured)"
    assert expected(hardware.get("h100-pcie")).rule == "fitted kernels (same-arch: h100-sxm (hopper))"
    assert expected(hardware.get("mi300x")).rule.startswith("defaults")
    assert not expected(hardware.get("mi300x")).gemm_fit
    assert IDEAL.matmul == 1 and IDEAL.overhead_s == 0 and not IDEAL.gemm_fit
    prof = hardware.from_dict(
        {"name": "cpu-test", "memory_bytes": 1e9, "memory_bandwidth_bytes_per_s": 2e10,
         "peak_flops_per_s": {"fp32": 1e11}, "measured": {"efficiency": {"matmul": 0.9, "overhead_s": 1e-6}}}
    )  # fmt: skip
    e = expected(prof)
    assert (e.rule, e.matmul, e.gemm_fit) == ("calibrated profile", 0.9, ())


def test_weight_gemm_compute_time_uses_the_fitted_fraction():
    from llmath.hardware.roofline import efficiency, op_times
    from llmath.model.dtypes import Precision
    from llmath.model.registry import resolve
    from llmath.ops import Scenario, table

    hw, p = hardware.get("h100-sxm"), Precision.uniform("bf16")
    t = table(resolve("llama-3-8b"), "prefill")
    sc = Scenario(2, 256, 0)
    _, comp, _, _ = op_times(t.values(sc), t, hw, p, efficiency("expected", hw), 2, 512, decode=False)
    i = [op.name for op in t.ops].index("attn.q_proj")
    # q_proj: 32 layers × 2·m·n·k with m = 2·256 token rows, n = k = 4096 (Llama-3-8B config.json)
    flops = 32 * 2 * 512 * 4096 * 4096
    coef = ef.data()["devices"]["h100-sxm"]["gemm"]["bf16"]["coef"]
    eta = ef.fractions(coef, 512, 4096 * 4096, 1.0, tile=64)[0]  # the GEMM form's tile floor (Hopper: m64)
    c, _, _, h2, p2 = coef[:5]
    assert math.isclose(eta, c / (1 + (h2 / 4096**2) ** p2))  # 512 rows: 8 whole 64-row tiles, c · sat(n·k)
    assert math.isclose(comp[i], flops / (989.5e12 * eta), rel_tol=1e-9)
    ideal = op_times(t.values(sc), t, hw, p, efficiency("ideal", hw), 2, 512, decode=False)[1]
    assert math.isclose(ideal[i], flops / 989.5e12, rel_tol=1e-9)  # ideal stays the datasheet roofline


def test_analyze_reports_the_rule():
    import llmath

    d = llmath.analyze("llama-3-8b", "a100-pcie-80gb", workload=Workload(batch=1, prompt=128, gen=4)).to_dict()
    assert d["efficiency"]["rule"] == "fitted kernels (same-arch: a100-sxm-80gb (ampere))"
    assert d["efficiency"]["name"] == "expected"  # existing key kept


def test_weight_only_quantised_decode_streams_the_narrow_weights():
    """W4A16 at batch 1 on a fitted device: the GEMMs stream int4 weights (0.5 + 2/128 bytes per weight vs 2
    for bf16, a 3.9× smaller stream) and compute whole 64-row tiles at the large-GEMM fraction, so every
    weight GEMM is memory-bound and the step is well under 0.6 of the bf16 step (kernel overheads remain)."""
    import llmath
    from llmath.model.dtypes import Precision

    bf16 = llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=1, prompt=512, gen=2))
    int4 = llmath.analyze(
        "llama-3-8b", "h100-sxm", workload=Workload(batch=1, prompt=512, gen=2), precision=Precision("int4")
    )
    gemms = [o for o in int4.decode.ops if o.kind == "matmul" and o.name.endswith(("proj", "gate", "up", "down"))]
    assert gemms and all(o.bound == "memory" for o in gemms)
    assert int4.decode.time_s < 0.6 * bf16.decode.time_s


def test_batch_one_decode_of_a_dense_8b_model_is_memory_bound_on_every_device():
    """A dense 8B model at batch 1 does 2 FLOPs per weight read (about 1 FLOP per byte in bf16), far below the
    ridge (peak / bandwidth) of every registry device, and the measured GEMM tables run such GEMMs (m ≤ 16,
    n, k ≥ 4096) at 0.67–0.97 of the datasheet bandwidth on every measured system (scripts/small_m_bandwidth.py,
    docs/efficiency.md): no device may predict it compute-bound, nor any of its weight GEMMs."""
    import llmath

    for name in hardware.names():
        a = llmath.analyze("llama-3-8b", name, workload=Workload(batch=1, prompt=512, gen=2))
        assert a.decode.bound == "memory", name
        gemms = [o for o in a.decode.ops if o.kind == "matmul" and o.name.endswith(("proj", "gate", "up", "down"))]
        assert gemms and all(o.bound == "memory" for o in gemms), name


def test_routed_expert_rows_come_from_every_data_parallel_replica():
    """With attention data-parallel over dp replicas, a rank's experts receive the tokens of every replica:
    one expert's GEMM sees B·T · dp · top-k / E rows (DeepSeek-V3 config.json: top-8 of 256 routed experts),
    the rank table's ``moe_tokens`` = dp."""
    from llmath.deploy import cost
    from llmath.deploy.layout import make_layout
    from llmath.hardware.roofline import _gemm_shapes
    from llmath.model.registry import resolve

    spec = resolve("deepseek-v3")
    t = cost.rank_table(spec, "decode", "flash", make_layout(spec, ParallelConfig(None, None, None, 8, 8, "none")), 0)
    i = [op.name for op in t.ops].index("moe.experts.gate")
    assert t.moe_tokens == 8 and math.isclose(_gemm_shapes(t)[1][i], 8 / 256 * 8)
