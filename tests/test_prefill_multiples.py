"""scripts/prefill_multiples.py: the collection's rows in units of one prompt's pass; which rows it reads and the
medians it prints, checked against arithmetic written out here."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import script_module
from test_serving_runs import HEADER, _csv

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return script_module("prefill_multiples")


def _row(**kw) -> dict:
    r = dict.fromkeys(HEADER, "")
    r.update(id="r", backend="trtllm", backend_version="1.0.0rc3", model_path="meta-llama/Llama-3.1-8B-Instruct",
             system="h100_sxm", mode="agg", isl="1024", osl="128", batch_size="8", tp_size="1", pp_size="1",
             moe_ep_size="1", silicon_ttft_ms="200", silicon_tpot_ms="8",
             source_notes="silicon_concurrency=8")  # fmt: skip
    r.update({k: str(v) for k, v in kw.items()})
    return r


def test_table_prints_medians_of_both_multiples():
    # measured multiples 3, 5, 4 → median 4.0; predicted 2, 4, 3 → median 3.0
    groups = {("trtllm", "m", 8, 1024): [(3.0, 2.0), (5.0, 4.0), (4.0, 3.0)]}
    assert _script().table(groups)[-1] == "| trtllm | m | 8 | 1024 | 3 | 4.0 / 3.0 |"


def test_reads_only_the_collections_aggregated_rows_of_the_engine(tmp_path):
    rows = [
        _row(id="own"),
        _row(id="inferencex", source_notes="model=Llama; silicon_concurrency=8; wip=False"),
        _row(id="vllm", backend="vllm", backend_version="0.12.0"),
        _row(id="crowded", batch_size="64", source_notes="silicon_concurrency=64"),
    ]
    f = _csv(tmp_path, rows)
    groups = _script().multiples(str(f), "trtllm", 32)
    assert list(groups) == [("trtllm", "llama-3.1-8b", 8, 1024)]
    ((measured, predicted),) = groups[("trtllm", "llama-3.1-8b", 8, 1024)]
    # one prompt alone is no slower than eight clients' closed loop, so both multiples are at least 1; the
    # measured one is the row's 200 ms over the same one-prompt time as the predicted one's
    assert predicted >= 1.0
    assert measured / predicted == pytest.approx(0.2 / _script().predict_run(_script().to_run(rows[0]))["ttft_s"])
