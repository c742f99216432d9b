"""Calibration and validation end to end on a tiny model (quick=True): structure and sanity, not speed.

Timings run with one torch thread: on a small shared machine another process descheduling one of two
OpenMP threads stalls every parallel kernel, which would make the measured-monotonicity checks flaky.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llmath.errors import HardwareError, LLMathError, UnknownNameError, WorkloadError  # noqa: E402
from llmath.hardware import from_dict, load_file  # noqa: E402
from llmath.hardware.roofline import efficiency  # noqa: E402
from llmath.measure.calibrate import SKINNY_M, calibrate  # noqa: E402
from llmath.measure.validate import CLASSES, validate_model, validate_published  # noqa: E402


def _pos(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def profile(one_thread):
    return calibrate(device="cpu", dtypes=["fp32"], quick=True, progress=False)


@pytest.fixture(scope="module")
def report(profile):
    return validate_model(None, hardware=profile, device="cpu", dtype="fp32", quick=True, progress=False)


@pytest.fixture(scope="module")
def published():
    return validate_published()


# ---- calibrate -------------------------------------------------------------------------------------


def test_profile_is_a_hardware_file(profile, tmp_path):
    hw = from_dict(profile)
    assert hw.name == "cpu-profile"
    assert profile["source"].startswith("llmath calibrate ")
    for v in (hw.memory_bytes, hw.memory_bandwidth_bytes_per_s, hw.vector_peak, hw.peak("fp32")):
        assert _pos(v)
    # JSON round trip, as --hardware profile.json reads it
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps(profile))
    assert load_file(p).peak("fp32") == pytest.approx(hw.peak("fp32"))


def test_profile_efficiency_is_used(profile):
    eff = efficiency("expected", from_dict(profile))
    assert eff.matmul == 1.0 and 0 < eff.memory <= 1
    # the profile's bandwidth is the copy's, or a faster read-only stream with memory = copy / it
    raw = profile["measured"]["raw"]
    assert eff.memory * profile["memory_bandwidth_bytes_per_s"] == pytest.approx(raw["copy"]["bytes_per_s"], rel=1e-5)
    assert [r for r, _ in eff.skinny_rows] == sorted(SKINNY_M)
    for _, f in eff.skinny_rows:
        assert 0 < f <= 1
    for f in (eff.vector, eff.attention_decode, eff.skinny):
        assert 0 < f <= 1
    assert eff.overhead_s > 0 and eff.decode_overhead_s > 0


def test_profile_raw_records_every_measurement(profile):
    raw = profile["measured"]["raw"]
    assert isinstance(profile["measured"]["method"], str) and profile["measured"]["method"]
    assert {s["rows"] for s in raw["skinny"]} == set(SKINNY_M)
    for s in raw["skinny"]:
        assert s["k"] > 0 and s["n"] > 0 and s["repeats"] == len(s["times_s"]) >= 1
        assert _pos(s["median_s"]) and _pos(s["flops_per_s"]) and _pos(s["weight_bytes_per_s"])
        assert min(s["times_s"]) <= s["median_s"] <= max(s["times_s"])
    for g in raw["gemm"]:
        assert g["m"] == g["n"] == g["k"] and _pos(g["flops_per_s"])
    for key in ("copy", "gemv", "attention_decode", "overhead"):
        assert _pos(raw[key]["median_s"])
    # more rows against the same weight never take less work: FLOPs per call grow with rows
    fl = [2 * s["rows"] * s["k"] * s["n"] for s in sorted(raw["skinny"], key=lambda s: s["rows"])]
    assert fl == sorted(fl)


def test_calibrate_rejects_bad_input():
    with pytest.raises(WorkloadError, match="device"):
        calibrate(device="tpu", quick=True, progress=False)
    with pytest.raises(WorkloadError, match="int4"):
        calibrate(dtypes=["int4"], quick=True, progress=False)
    with pytest.raises(WorkloadError, match="empty"):
        calibrate(dtypes=[], quick=True, progress=False)
    if not torch.cuda.is_available():
        with pytest.raises(HardwareError, match="CUDA"):
            calibrate(device="cuda", quick=True, progress=False)


# ---- validate_model ----------------------------------------------------------------------------------


def test_validate_reports_machine_drift(report):
    # the profile's GEMM and copy re-measured now: a positive ratio, and a second prediction per row
    d = report["drift"]
    assert _pos(d["matmul"]) and _pos(d["copy"]) and d["matmul"] == pytest.approx(d["matmul_now"] / d["matmul_then"])
    for r in report["prefill"] + report["decode"]:
        assert _pos(r["predicted_drift_s"])
        assert r["error_drift"] == pytest.approx(r["predicted_drift_s"] / r["measured_s"] - 1)


def test_validate_structure(report):
    assert report["device"] == "cpu" and report["dtype"] == "fp32" and report["attention"] == "eager"
    assert report["hardware"] == "cpu-profile" and report["params"] > 0
    assert len(report["prefill"]) >= 2 and len(report["decode"]) >= 2
    for r in report["prefill"] + report["decode"]:
        assert _pos(r["measured_s"]) and _pos(r["predicted_s"])
        assert r["ratio"] == pytest.approx(r["predicted_s"] / r["measured_s"])
        assert r["error"] == pytest.approx(r["ratio"] - 1)
        assert r["repeats"] == len(r["times_s"]) >= 1
        assert r["bound"] in ("compute", "memory")
    for g in ("prefill", "decode_batch1", "decode_batched"):
        s = report["summary"][g]
        assert s["n"] >= 1 and 0 <= s["median_abs_error"] <= s["worst_abs_error"]


def test_validate_monotone(report):
    pre = sorted(report["prefill"], key=lambda r: r["prompt"])
    assert pre[0]["prompt"] < pre[-1]["prompt"]
    # a longer prompt is never faster: predicted strictly, measured (fastest repeat) too
    assert pre[-1]["predicted_s"] > pre[0]["predicted_s"]
    assert pre[-1]["measured_min_s"] > pre[0]["measured_min_s"]
    by_batch = {}
    for r in report["decode"]:
        by_batch.setdefault(r["context"], []).append(r)
    for rows in by_batch.values():
        rows.sort(key=lambda r: r["batch"])
        # more sequences in a step never cost less predicted; measured, allow timer noise
        assert rows[-1]["predicted_s"] >= rows[0]["predicted_s"]
        assert rows[-1]["measured_min_s"] >= 0.8 * rows[0]["measured_min_s"]


def test_validate_breakdown(report):
    for stage in ("prefill", "decode"):
        classes = report["breakdown"][stage]["classes"]
        assert [c["class"] for c in classes] == list(CLASSES)
        assert sum(c["measured_share"] for c in classes) == pytest.approx(1)
        assert sum(c["predicted_share"] for c in classes) == pytest.approx(1)
        for c in classes:
            assert c["measured_s"] >= 0 and c["predicted_s"] >= 0
        # weight GEMMs exist in both views
        mm = classes[0]
        assert mm["measured_s"] > 0 and mm["predicted_s"] > 0
    json.dumps(report)  # plain data


def test_validate_registry_model_quick_and_progress(one_thread, profile, capsys):
    rep = validate_model(
        "qwen2.5-0.5b", hardware=profile, quick=True, progress=True, prompts=[8], batches=[1], contexts=[8]
    )
    out = capsys.readouterr()
    assert out.out == ""  # the library never prints to stdout
    assert "validate [" in out.err
    assert "tiny" in rep["model"] and rep["layers"] == 2
    assert _pos(rep["prefill"][0]["measured_s"]) and _pos(rep["decode"][0]["predicted_s"])


def test_validate_rejects_bad_input(profile):
    with pytest.raises(UnknownNameError, match="no-such-model"):
        validate_model("no-such-model", hardware=profile, quick=True, progress=False)
    with pytest.raises(WorkloadError, match="int4"):
        validate_model(None, hardware=profile, dtype="int4", quick=True, progress=False)
    with pytest.raises(HardwareError, match="bf16"):
        validate_model(None, hardware=profile, dtype="bf16", quick=True, progress=False)
    with pytest.raises(WorkloadError, match="prompts"):
        validate_model(None, hardware=profile, quick=True, progress=False, prompts=[0])
    with pytest.raises(WorkloadError, match="model"):
        validate_model(None, hardware=profile, quick=False, progress=False)
    with pytest.raises(LLMathError):
        validate_model(None, hardware=profile, device="mps", quick=True, progress=False)


# ---- validate_published --------------------------------------------------------------------------------


def test_published_rows(published):
    rows = published["rows"]
    assert rows
    ids = {r["id"] for r in rows} | {s["id"] for s in published["skipped"]}
    assert len(ids) == len(rows) + len(published["skipped"])
    for r in rows:
        assert _pos(r["measured"]) and _pos(r["predicted"])
        assert math.isfinite(r["error"]) and r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1)
        assert r["metric"] in ("ttft_s", "tpot_s", "throughput_tok_s", "e2e_s", "prefill_tok_s")
    for s in published["skipped"]:
        assert s["reason"]
    overall = published["summary"]["overall"]
    assert overall["n"] == len(rows)
    assert 0 <= overall["median_abs_error"] <= overall["worst_abs_error"] < math.inf
    for m, s in published["summary"]["by_metric"].items():
        assert s["n"] == sum(r["metric"] == m for r in rows)


def test_published_multi_device_rows_run_their_layout_and_unknown_batch_is_skipped(published):
    for s in published["skipped"]:
        assert s["reason"]
    reasons = " ".join(s["reason"] for s in published["skipped"])
    assert "devices" not in reasons and "batch not stated" in reasons
    assert all(r["batch"] is not None for r in published["rows"])
    multi = [r for r in published["rows"] if r["layout"]]
    assert multi and all(r["layout"]["tp"] * r["layout"]["pp"] * r["layout"]["dp"] > 1 for r in multi)
    # the TensorRT-LLM v0.5 low-latency rows say "TP=4" in their notes
    assert {r["layout"]["tp"] for r in multi if r["id"].startswith("trtllm05-")} == {4}


def test_published_layout_read_from_the_row():
    from llmath.measure.published import _layout_for

    assert _layout_for({"n_devices": 1}) == {}
    assert _layout_for({"n_devices": 8, "notes": "serving one instance (tensor parallel 8)"})["tp"] == 8
    assert _layout_for({"n_devices": 4, "notes": "TP=2 with two replicas"}) == {"gpus": 4, "tp": 2, "ep": 1}
    assert _layout_for({"n_devices": 2, "notes": ""}) == {"gpus": 2, "tp": 2, "ep": 1}


def test_published_bad_file(tmp_path):
    with pytest.raises(LLMathError, match="no such"):
        validate_published(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(LLMathError, match="cannot parse"):
        validate_published(bad)


# ---- formatters ----------------------------------------------------------------------------------------


def test_formatters_print_tables(profile, report, published, capsys):
    from llmath.output.validation import calibration_human, published_human, validation_human

    calibration_human(profile, "cpu.json")
    validation_human(report)
    published_human(published)
    out = capsys.readouterr().out
    for s in ("skinny", "prefill", "decode", "where the time went", "published", "median"):
        assert s in out


def test_published_fp4_rows_run_as_nvfp4():
    """NVIDIA's FP4 published rows are ModelOpt NVFP4 checkpoints (their notes say so): weights NVFP4 (e2m1 +
    one e4m3 scale per 16 elements = 4 + 8/16 = 4.5 bits, ignoring the per-tensor fp32 scale) and NVFP4 GEMM
    inputs."""
    from llmath.measure.published import _precision_for

    p, assumed = _precision_for({"weights_dtype": "fp4", "kv_dtype": None})
    assert p.weights == "nvfp4" and p.act_quant == "nvfp4"
    assert abs(p.bytes_per_element("nvfp4") - 4.5 / 8) < 1e-3
    assert any("NVFP4" in a for a in assumed)
