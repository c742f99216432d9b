"""``analyze --calibration``: a saved bench run sets the matmul and bandwidth fractions of its deployment."""

from __future__ import annotations

import json

import pytest

from llmath.errors import WorkloadError
from llmath.measure.bench_calibration import calibrate, load, saved_predictor
from tests.helpers import run_cli

DEPLOYMENT = {
    "model": "meta-llama/Llama-3.1-8B",
    "engine": "vllm",
    "gpus": None,
    "tp": None,
    "pp": None,
    "ep": None,
    "dp": None,
    "overlap": "none",
    "weights": None,
    "kv_dtype": None,
    "max_num_seqs": None,
    "max_num_batched_tokens": None,
    "gpu_memory_utilization": None,
    "cuda_graphs": None,
}


def _report(ttft_s: float, tpot_s: float, hardware: str = "h100-sxm") -> dict:
    """A run as 'llmath bench --save' writes it: a server measured at TTFT/TPOT means of our choosing."""
    return {
        "config": {"url": "http://127.0.0.1:8000", "model": "m", "concurrency": 16, "prompt": 256, "gen": 32,
                   "requests": 64, "rate": None},
        "completed": 64, "failed": 0, "errors": {}, "duration_s": 10.0, "notes": [],
        "metrics": {"ttft_s": {"mean": ttft_s}, "tpot_s": {"mean": tpot_s}},
        "prediction": {"hardware": hardware, "model": "llama-3.1-8b", "deployment": DEPLOYMENT},
    }  # fmt: skip


def test_calibrated_prediction_meets_the_measured_run():
    # a server 120 ms to first token and 16 ms per output token at 16 in flight, 256 + 32 tokens
    rep = _report(0.120, 0.016)
    cal = calibrate(rep, saved_predictor(rep))
    assert cal.predicted["ttft_s"] == pytest.approx(0.120, rel=0.03)
    assert cal.predicted["tpot_s"] == pytest.approx(0.016, rel=0.03)
    assert 0 < cal.matmul[1] <= 1 and 0 < cal.bandwidth[1] <= 1
    lines = cal.lines("run.json")
    assert "matmul fraction" in lines[0] and "bandwidth fraction" in lines[0] and "TPOT" in lines[1]


def test_slower_measurement_gives_smaller_fractions_than_a_faster_one():
    slow, fast = _report(0.240, 0.032), _report(0.120, 0.016)
    cs, cf = calibrate(slow, saved_predictor(slow)), calibrate(fast, saved_predictor(fast))
    assert cs.bandwidth[1] < cf.bandwidth[1] and cs.matmul[1] < cf.matmul[1]


def test_analyze_calibration_states_what_it_changed(capsys, tmp_path):
    f = tmp_path / "run.json"
    f.write_text(json.dumps(_report(0.120, 0.016)), encoding="utf-8")
    args = ["analyze", "llama-3.1-8b", "-H", "h100-sxm", "-c", "64", "--prompt", "256", "--gen", "32", "--json"]
    code, out, err = run_cli(capsys, *args, "--calibration", str(f))
    assert code == 0, err
    notes = [ln for ln in err.splitlines() if "calibration" in ln]
    assert len(notes) == 2 and "->" in notes[0]
    code, _, err = run_cli(capsys, *args[:3], "h200", *args[4:], "--calibration", str(f))
    assert code == 2 and "measured on h100-sxm" in err
    code, _, err = run_cli(capsys, "analyze", "llama-3.1-8b", "--calibration", str(f))
    assert code == 2 and "applies to serving" in err


def test_a_report_without_prediction_or_measurement_is_refused(tmp_path):
    bare = _report(0.014, 0.011)
    del bare["prediction"]
    f = tmp_path / "a.json"
    f.write_text(json.dumps(bare), encoding="utf-8")
    with pytest.raises(WorkloadError, match="-H DEVICE --save"):
        load(str(f))
    failed = _report(0.014, 0.011)
    failed["metrics"]["tpot_s"]["mean"] = None
    f.write_text(json.dumps(failed), encoding="utf-8")
    with pytest.raises(WorkloadError, match="no measured tpot_s"):
        load(str(f))
    with pytest.raises(WorkloadError, match="not JSON"):
        (tmp_path / "b.json").write_text("{", encoding="utf-8")
        load(str(tmp_path / "b.json"))
