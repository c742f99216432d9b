"""``llmath bench`` against a loopback stand-in server that streams tokens with set delays."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from llmath.errors import WorkloadError
from llmath.measure.bench import BenchConfig, RequestResult, arrivals, run, summarise
from tests.helpers import run_cli

TTFT, TPOT = 1.0, 0.1  # the stand-in's delays (s): a 1 s TTFT keeps 32 loopback connections' setup (~tens of ms
# on a busy 2-core machine) well inside the 5% tolerance


@contextmanager
def standin(mode: str = "ok"):
    """The stand-in server (tests/standin_server.py) in its own process, so its threads do not share the
    load generator's interpreter lock; stopped (by its process id) when the test leaves."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("standin_server.py")), mode, str(TTFT), str(TPOT)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "the stand-in server did not start within 30 s"
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("concurrency", [1, 32])
def test_measures_the_configured_delays_within_5_percent(concurrency):
    with standin() as url:
        rep = run(BenchConfig(url, "m", concurrency, prompt=64, gen=8, requests=2 * concurrency, timeout_s=10))
    assert rep.completed == 2 * concurrency and rep.failed == 0
    m = rep.metrics
    assert m["ttft_s"]["mean"] == pytest.approx(TTFT, rel=0.05)
    assert m["tpot_s"]["mean"] == pytest.approx(TPOT, rel=0.05)
    assert m["itl_s"]["median"] == pytest.approx(TPOT, rel=0.05)
    # e2e = TTFT + (gen - 1)·TPOT = 1.0 + 7·0.1 = 1.7 s
    assert m["e2e_s"]["mean"] == pytest.approx(1.7, rel=0.05)
    assert m["output_tokens"] == 8 * 2 * concurrency


def test_cli_reports_measured_beside_the_prediction(capsys, tmp_path):
    with standin() as url:
        code, out, err = run_cli(
            capsys,
            "bench",
            url,
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "-c",
            "32",
            "--prompt",
            "64",
            "--gen",
            "8",
            "--requests",
            "64",
            "-H",
            "h100-sxm",
            "--json",
            "--save",
            str(tmp_path / "run.json"),
        )
    assert code == 0, err
    d = json.loads(out)
    assert d["completed"] == 64
    assert d["metrics"]["ttft_s"]["mean"] == pytest.approx(TTFT, rel=0.05)
    assert d["metrics"]["tpot_s"]["mean"] == pytest.approx(TPOT, rel=0.05)
    pred = d["prediction"]
    assert pred["model"] == "llama-3.1-8b" and pred["hardware"] == "h100-sxm"
    assert pred["ttft_s"] > 0 and pred["tpot_s"] > 0 and pred["throughput_tok_s"] > 0
    assert "bench:" not in err  # no progress line with --json
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["metrics"] == d["metrics"] and saved["prediction"]["deployment"]["engine"] == "vllm"


def test_engine_args_give_the_predicted_deployment(capsys):
    with standin() as url:
        code, out, err = run_cli(
            capsys,
            "bench",
            url,
            "--model",
            "served",
            "-c",
            "4",
            "--prompt",
            "64",
            "--gen",
            "8",
            "-H",
            "h100-sxm",
            "--engine-args",
            "vllm serve meta-llama/Llama-3.1-70B -tp 4 --max-num-seqs 64",
            "--json",
        )
    assert code == 0, err
    d = json.loads(out)
    assert d["prediction"]["model"] == "llama-3.1-70b" and d["prediction"]["layout"]["tp"] == 4


@pytest.mark.parametrize(
    "mode,kind", [("error", "HTTP 500"), ("stall", "stalled"), ("close", "closed mid-stream after 2 chunks")]
)
def test_a_failing_server_gives_a_clear_report_not_a_hang(mode, kind, capsys):
    t0 = time.perf_counter()
    with standin(mode) as url:
        rep = run(BenchConfig(url, "m", 2, prompt=8, gen=8, requests=2, timeout_s=0.5))
        code, out, err = run_cli(
            capsys, "bench", url, "--model", "m", "-c", "2", "--gen", "8", "--requests", "2", "--timeout", "0.5"
        )
    assert time.perf_counter() - t0 < 8  # bounded by --timeout, not by the server
    assert rep.completed == 0 and rep.failed == 2
    assert any(n.startswith(kind) for n in rep.notes), rep.notes
    assert code == 1 and "no request completed" in err and "Traceback" not in err
    assert kind.split(" after")[0] in out


def test_a_closed_port_fails_fast():
    with standin() as url:
        pass  # the server is gone: the port refuses
    rep = run(BenchConfig(url, "m", 1, prompt=8, gen=4, requests=1, timeout_s=2))
    assert rep.failed == 1 and rep.notes[0].startswith("connection")


def test_metric_definitions_of_vllm_bench_serve():
    # two requests: chunks at 0.1, 0.3, 0.5 s (3 tokens) and 0.2, 0.6 s (2 tokens)
    rs = [RequestResult(0.0, [0.1, 0.3, 0.5], 3, 0.5), RequestResult(0.0, [0.2, 0.6], 2, 0.6)]
    rep = summarise(BenchConfig("http://127.0.0.1:1", "m", 2, 8, 3, 2), rs, 0.6)
    # TPOT per request: (0.5 - 0.1) / (3 - 1) = 0.2 and (0.6 - 0.2) / (2 - 1) = 0.4; mean 0.3
    assert rep.metrics["tpot_s"]["mean"] == pytest.approx(0.3)
    # ITL pooled: 0.2, 0.2, 0.4 -> mean 0.8 / 3
    assert rep.metrics["itl_s"]["mean"] == pytest.approx(0.8 / 3)
    assert rep.metrics["ttft_s"]["mean"] == pytest.approx(0.15)
    # 5 output tokens over the span 0 .. 0.6 s
    assert rep.metrics["throughput_tok_s"] == pytest.approx(5 / 0.6)


def test_poisson_arrivals_have_the_rate_asked():
    t = arrivals(20_000, 50.0, seed=1)
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.03)  # exponential gaps of mean 1/rate
    assert gaps.std() == pytest.approx(1 / 50, rel=0.05)  # an exponential's sd equals its mean
    assert (arrivals(5, None, 0) == 0).all()


@pytest.mark.parametrize(
    "kw,needle",
    [({"concurrency": 0}, "--concurrency"), ({"rate": float("nan")}, "--rate"), ({"url": "127.0.0.1:8000"}, "http://")],
)
def test_bad_settings_are_refused(kw, needle):
    base = {"url": "http://127.0.0.1:8000", "model": "m", "concurrency": 1, "prompt": 8, "gen": 8, "requests": 1}
    with pytest.raises(WorkloadError, match=needle):
        BenchConfig(**{**base, **kw})
