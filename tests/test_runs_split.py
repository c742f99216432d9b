"""The error split of measured runs: each series' lowest-concurrency row, and the spread of repeats."""

import pytest
from test_serving_runs import _csv, _row

from llmath.measure.runs_split import lowest_concurrency_split, lowest_rows, repeat_spread


def test_lowest_row_of_each_series():
    rows = [
        _row(id="a16", batch_size=16, source_notes="silicon_concurrency=16"),
        _row(id="a4", batch_size=4, source_notes="silicon_concurrency=4"),
        _row(id="b8", isl=8192, batch_size=8),  # another series: other lengths
        _row(id="d", mode="disagg", batch_size=""),  # disaggregated rows have no such series
    ]
    assert sorted(r["id"] for r in lowest_rows(rows)) == ["a4", "b8"]


def test_repeat_spread_is_the_deviation_from_the_configuration_median(tmp_path):
    f = _csv(tmp_path, [
        _row(id="x1", silicon_ttft_ms=100, silicon_tpot_ms=10),
        _row(id="x2", silicon_ttft_ms=120, silicon_tpot_ms=10),
        _row(id="x3", silicon_ttft_ms=120, silicon_tpot_ms=10),  # the same measurement under another id: once
        _row(id="y", isl=2048, silicon_ttft_ms=300),  # measured once: not a repeat
    ])  # fmt: skip
    s = repeat_spread(f)["agg"]
    assert (s["configurations"], s["measurements"]) == (1, 2)
    # median of {100, 120} = 110: |100 − 110| / 100 = 0.1, |120 − 110| / 120 = 0.0833; their median 0.09167
    assert s["ttft_abs_median"] == pytest.approx((0.1 + 10 / 120) / 2)
    assert s["tpot_abs_median"] == 0.0 and s["ttft_within_25"] == 1.0


def test_split_puts_the_prefill_alone_below_the_queued_prediction(tmp_path):
    f = _csv(tmp_path, [_row(id="a", batch_size=8, silicon_ttft_ms=200)])
    (r,) = lowest_concurrency_split(f)
    assert (r["model"], r["engine"], r["rows"], r["concurrency"]) == ("deepseek-ai/DeepSeek-R1", "trtllm", 1, 8)
    # 8 requests in flight wait at least for their own prefill: never less than one request alone
    assert r["predicted_over_alone"] >= 1.0
    # one row: (p − m) / m with p = predicted/alone · alone and m = measured/alone · alone
    assert r["ttft_signed_median"] == pytest.approx(r["predicted_over_alone"] / r["measured_over_alone"] - 1)
