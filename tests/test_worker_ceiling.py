"""scripts/worker_ceiling.py: the collection's measured output rates, one completion spacing added to the
predictions, and the two-stage closed loop, checked against arithmetic written out here."""

from __future__ import annotations

import json

import pytest
from helpers import script_module
from test_serving_runs import HEADER, _csv


def _script():
    return script_module("worker_ceiling")


def _run(rid: str, notes: str, mode: str = "agg", ttft_ms: float = 100.0, tpot_ms: float = 10.0) -> dict:
    r = dict.fromkeys(HEADER, "")
    r.update(id=rid, backend="trtllm", backend_version="1.0.0rc3", model_path="m", system="h100_sxm", mode=mode,
             isl="1024", osl="128", tp_size="1", silicon_ttft_ms=str(ttft_ms), silicon_tpot_ms=str(tpot_ms),
             source_notes=notes)  # fmt: skip
    return r


def test_own_rows_are_the_concurrency_only_aggregated_rows_with_their_closed_loop_rate(tmp_path):
    ws = _script()
    runs = _csv(tmp_path, [_run("a", "silicon_concurrency=8"), _run("b", "silicon_concurrency=8; image=x"),
                           _run("c", "silicon_concurrency=8", mode="disagg")])  # fmt: skip
    rows = ws.own_rows(str(runs))
    assert [r["id"] for r in rows] == ["a"]
    # lifetime 0.1 + 127 · 0.01 = 1.37 s; 8 clients · 128 tokens / 1.37 s = 747.45 tokens/s; TTFT share 0.1 / 1.37
    assert rows[0]["rate"] == pytest.approx(8 * 128 / 1.37)
    assert rows[0]["share"] == pytest.approx(0.1 / 1.37)


def test_spacing_table_adds_k_predicted_completion_spacings(tmp_path):
    ws = _script()
    runs = _csv(tmp_path, [_run("a", "silicon_concurrency=8")])
    row = {"id": "a", "engine": "trtllm", "model": "m", "mode": "agg", "concurrency": 8, "lengths": "1024/128",
           "measured_ttft_s": 0.2, "predicted_ttft_s": 0.1, "predicted_tpot_s": 0.01}  # fmt: skip
    out = tmp_path / "v.json"
    out.write_text(json.dumps({"rows": [row]}))
    line = ws.spacing_table(str(out), str(runs))[-1]
    # predicted lifetime 0.1 + 127 · 0.01 = 1.37 s, spacing 1.37 / 8 = 0.17125 s; against the measured 0.2 s:
    # k = 0: 0.1 → −50%; 0.25: 0.1428 → −29%; 0.5: 0.1856 → −7%; 1: 0.2713 → +36%
    assert line == "| trtllm | m | 1 | -50% / 50% | -29% / 29% | -7% / 7% | +36% / 36% |"


def test_two_stage_without_a_serial_stage_runs_at_the_engines_own_pace():
    ws = _script()
    # one client, 4 tokens: the prompt's step takes 0.03 s, each later step 0.01 s, the next request is admitted at
    # once: TTFT 0.03 s, TPOT 0.01 s, 4 tokens per 0.03 + 3 · 0.01 = 0.06 s
    ttft, tpot, rate = ws.two_stage(1, 4, 0.01, 0.03, 0.0, 0.0)
    assert (ttft, tpot, rate) == pytest.approx((0.03, 0.01, 4 / 0.06))


def test_a_serial_stage_slower_than_the_engine_sets_the_streams_pace():
    ws = _script()
    # 0.02 s per token behind 0.01 s steps: token i is ready at 0.03 + 0.01·i and served at 0.05 + 0.02·i, so TTFT
    # 0.05 s (0.03 prefill + 0.02 service) and TPOT 0.02 s; the next request goes in when the last token is served
    ttft, tpot, _ = ws.two_stage(1, 4, 0.01, 0.03, 0.02, 0.0)
    assert (ttft, tpot) == pytest.approx((0.05, 0.02))
