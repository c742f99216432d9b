"""scripts/completion_wait.py: the collection's rows in units of a completion's spacing, checked against arithmetic
written out here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import script_module
from test_serving_runs import HEADER, _csv

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return script_module("completion_wait")


def _row(conc: int, gen: int, tpot: float, measured: float, predicted: float, **kw) -> dict:
    r = {"id": "r", "engine": "trtllm", "model": "m", "mode": "agg", "concurrency": conc, "lengths": f"1024/{gen}",
         "measured_ttft_s": measured, "predicted_ttft_s": predicted, "measured_tpot_s": tpot}  # fmt: skip
    r.update(kw)
    return r


def test_excess_is_measured_less_predicted_with_the_closed_loops_spacing_and_lifetime():
    cw = _script()
    # 8 clients, 512 tokens at 4 ms: completions 512 · 0.004 / 8 = 0.256 s apart; lifetime 0.3 + 511 · 0.004 = 2.344 s
    ex, spacing, life = cw.excess(_row(8, 512, 0.004, 0.3, 0.05))
    assert (ex, spacing, life) == pytest.approx((0.25, 0.256, 2.344))


def test_spacings_are_medians_by_engine_model_and_clients():
    cw = _script()
    rows = [
        _row(8, 128, 0.01, 0.2 + 0.16, 0.2),  # 0.16 / (128 · 0.01 / 8 = 0.16) = 1
        _row(8, 256, 0.01, 0.2 + 0.16, 0.2),  # 0.16 / 0.32 = 0.5
        _row(8, 512, 0.01, 0.2 + 0.96, 0.2),  # 0.96 / 0.64 = 1.5
        _row(16, 128, 0.01, 0.1, 0.1),  # no excess
    ]
    got = cw.spacings(rows)
    assert got[("trtllm", "m", 8)] == pytest.approx(1.0)
    assert got[("trtllm", "m", 16)] == pytest.approx(0.0)


def test_share_fit_recovers_a_share_of_one_over_c_less_a_constant():
    cw = _script()
    rows = []
    for conc in (8, 16, 32):
        gen, tpot = 256, 0.005
        # choose the measured TTFT t so that (t − p) / (t + 255 · tpot) = 0.9 / C − 0.02, p = 0.1:
        # t − p = s · (t + 255 · tpot)  =>  t = (p + s · 255 · tpot) / (1 − s)
        s = 0.9 / conc - 0.02
        t = (0.1 + s * 255 * tpot) / (1 - s)
        rows.append(_row(conc, gen, tpot, t, 0.1))
    a, b = cw.share_fit(rows)
    assert (a, b) == pytest.approx((0.9, -0.02))


def test_share_fit_refuses_a_single_client_count():
    cw = _script()
    with pytest.raises(ValueError, match="two or more client counts"):
        cw.share_fit([_row(8, 128, 0.01, 0.3, 0.2)])


def test_collection_rows_keep_the_collections_own_aggregated_rows(tmp_path):
    cw = _script()
    base = dict.fromkeys(HEADER, "")
    own = {**base, "id": "own", "mode": "agg", "source_notes": "silicon_concurrency=8"}
    ix = {**base, "id": "ix", "mode": "agg", "source_notes": "model=x measured=2026-01-01"}
    runs = _csv(tmp_path, [own, ix])
    out = tmp_path / "v.json"
    rows = [_row(8, 128, 0.01, 0.3, 0.2, id="own"), _row(8, 128, 0.01, 0.3, 0.2, id="ix"),
            _row(8, 128, 0.01, 0.3, None, id="own")]  # fmt: skip
    out.write_text(json.dumps({"rows": rows}))
    assert [r["id"] for r in cw.collection_rows(str(out), str(runs))] == ["own"]


def test_spacing_quartiles_pool_every_client_count_of_an_engine_and_model():
    cw = _script()
    # spacings 1, 0.5, 1.5 (as above) and 0: sorted 0, 0.5, 1, 1.5; inclusive quartiles 0.375, 0.75, 1.125
    rows = [
        _row(8, 128, 0.01, 0.2 + 0.16, 0.2),
        _row(8, 256, 0.01, 0.2 + 0.16, 0.2),
        _row(8, 512, 0.01, 0.2 + 0.96, 0.2),
        _row(16, 128, 0.01, 0.1, 0.1),
    ]
    assert cw.spacing_quartiles(rows)[("trtllm", "m")] == pytest.approx((4, 0.375, 0.75, 1.125))
