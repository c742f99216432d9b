"""docs/devices.md holds llmath's predictions against the sourced public results of data/device_results.json as
scripts/device_table.py recomputes them (so the table cannot drift from the model), and every row is sourced."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from llmath import hardware
from llmath.measure import devices
from llmath.model import registry

ROOT = Path(__file__).resolve().parents[1]


def test_rows_are_sourced_and_name_known_devices_and_models():
    rows = devices.rows()
    assert len({r["device"] for r in rows}) >= 25  # the validation table spans at least 25 devices
    for r in rows:
        assert r["source"].startswith("https://") and r["note"], r
        assert r["device"] in hardware.names() and r["model"] in registry.index(), r
        assert r["test"] in ("tg", "pp") and r["tokens"] >= 1 and r["tokens_per_s"] > 0, r


def test_docs_table_is_current():
    spec = importlib.util.spec_from_file_location("device_table", ROOT / "scripts" / "device_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    table = mod.lines()
    assert all(math.isfinite(c.predicted) and c.predicted > 0 for c in devices.checks())
    doc = (ROOT / "docs" / "devices.md").read_text()
    missing = [line for line in table if line and line not in doc]
    assert not missing, f"run: PYTHONPATH=src python scripts/device_table.py (first stale line: {missing[0]})"
