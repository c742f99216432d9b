"""Single-device predictions against public end-to-end results (``data/device_results.json``, docs/devices.md).

Each row is a batch-1 llama-bench test: ``tg`` generates N tokens from an empty context (its tokens/s is N over
the N decode steps, so llmath's mean TPOT over a generation of N after a one-token prompt), ``pp`` processes a
prompt of N tokens (N over llmath's prefill time). The engine is the row's (llama.cpp: no activation rule, so
the weights' formats run as given, ``llmath.hardware.kernels``); efficiency ``expected``; attention ``eager``
where the run materialised the scores (flash attention off or absent in its build), else ``flash``. The
results validate: nothing here sets a coefficient.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from statistics import median


@lru_cache(maxsize=1)
def rows() -> tuple[dict, ...]:
    """The sourced rows of ``data/device_results.json``."""
    return tuple(json.loads((resources.files("llmath") / "data" / "device_results.json").read_text())["rows"])


@dataclass(frozen=True)
class Check:
    """One row: the measured and predicted tokens/s and the signed error (predicted / measured − 1)."""

    row: dict
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / float(self.row["tokens_per_s"]) - 1


def _precision(row: dict):
    from llmath.model.checkpoint import precision_for

    if row["weights"] == "checkpoint":
        return precision_for(row["model"])
    return precision_for(row["model"], dtype="fp16", weights=row["weights"])  # llama.cpp: activations, KV in f16


def predict(row: dict) -> float:
    """Predicted tokens/s of one row (see the module docstring)."""
    import llmath

    n = int(row["tokens"])
    kw = {"precision": _precision(row), "engine": row["engine"], "attention": row.get("attention", "flash")}
    if row["test"] == "tg":
        a = llmath.analyze(row["model"], row["device"], workload=llmath.Workload(prompt=1, gen=n), **kw)
        return 1.0 / float(a.generation["tpot_s"])
    t = llmath.analyze(row["model"], row["device"], workload=llmath.Workload(prompt=n, gen=1), **kw).prefill.time_s
    assert t is not None  # a registry device always gives a time
    return n / t


def checks() -> list[Check]:
    return [Check(r, predict(r)) for r in rows()]


def summary(results: list[Check]) -> dict[str, dict[str, float]]:
    """Median |error| per test (``tg``, ``pp``) overall and per device class, with the row counts."""
    out: dict[str, dict[str, float]] = {}
    for test in ("tg", "pp"):
        sel = [c for c in results if c.row["test"] == test]
        classes = sorted({c.row["class"] for c in sel})
        groups = {"all": sel} | {k: [c for c in sel if c.row["class"] == k] for k in classes}
        out[test] = {k: median(abs(c.error) for c in v) for k, v in groups.items() if v}
    return out
