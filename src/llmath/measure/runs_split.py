"""Where the serving error of measured runs comes from: the queue or the prefill, and how far repeats agree.

Two views of a CSV in ``serving_runs.csv``'s format (:mod:`llmath.measure.serving_runs` reads it):

* :func:`lowest_concurrency_split`: of every series (one engine, system, model, formats, layout and lengths
  measured at several concurrencies) its lowest-concurrency aggregated row, with the measured TTFT, the
  closed-loop prediction and the prediction for the same row with one request in flight (no queue: the
  prefill alone). measured / alone near 1 says the run's requests did not queue behind each other; predicted /
  alone is how much queueing the closed-loop model puts there. Summarised per model × engine (medians).
* :func:`repeat_spread`: rows of the same configuration measured more than once with different results
  (identical rows under two ids count once): each measurement's deviation from its configuration's median,
  |x − median| / x. No prediction of one number per configuration can do better than this on those rows.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

from llmath.errors import LLMathError
from llmath.measure.serving_runs import predict_run, read_runs, to_run

_SKIP = ("id", "backend_version", "silicon_ttft_ms", "silicon_tpot_ms", "source_notes")


def _config(raw: dict[str, str]) -> tuple:
    """A row's configuration: every column but its id, version, measurements and notes, plus its concurrency."""
    m = re.search(r"silicon_concurrency=(\d+)", raw.get("source_notes", ""))
    return tuple(v for k, v in raw.items() if k not in _SKIP) + (m.group(1) if m else "",)


def _series(raw: dict[str, str]) -> tuple:
    """A row's series: its configuration without the concurrency (``batch_size`` and the notes' count)."""
    return tuple(v for k, v in raw.items() if k not in (*_SKIP, "batch_size"))


def lowest_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The lowest-concurrency aggregated row of every series (the first one read on a tie)."""
    best: dict[tuple, tuple[int, dict[str, str]]] = {}
    for raw in rows:
        if raw.get("mode") != "agg":
            continue
        try:
            c = to_run(raw).concurrency
        except LLMathError:
            continue
        key = _series(raw)
        if key not in best or c < best[key][0]:
            best[key] = (c, raw)
    return [raw for _, raw in best.values()]


def lowest_concurrency_split(path: str | Path) -> list[dict[str, Any]]:
    """Per model × engine, over the series' lowest-concurrency rows: rows, median concurrency, median
    measured / alone and predicted / alone TTFT, and the median signed TTFT error (module docstring)."""
    groups: dict[tuple[str, str], list[tuple[float, float, float, int]]] = {}
    for raw in lowest_rows(read_runs(path)):
        try:
            run = to_run(raw)
            pred = predict_run(run)["ttft_s"]
            alone = predict_run(replace(run, concurrency=1))["ttft_s"]
        except LLMathError:
            continue
        groups.setdefault((run.source_model, run.engine), []).append((run.ttft_s, pred, alone, run.concurrency))
    out = []
    for (model, engine), v in sorted(groups.items()):
        out.append({
            "model": model, "engine": engine, "rows": len(v), "concurrency": median(x[3] for x in v),
            "measured_over_alone": median(m / a for m, _, a, _ in v),
            "predicted_over_alone": median(p / a for _, p, a, _ in v),
            "ttft_signed_median": median((p - m) / m for m, p, _, _ in v),
        })  # fmt: skip
    return out


def repeat_spread(path: str | Path) -> dict[str, dict[str, Any]]:
    """Per mode: configurations measured more than once with different results, their measurements, and the
    median deviation of TTFT and TPOT from the configuration's median, with the fraction within 25%."""
    seen: dict[tuple, set[tuple[float, float]]] = {}
    modes: dict[tuple, str] = {}
    for raw in read_runs(path):
        key = _config(raw)
        ms = (round(float(raw["silicon_ttft_ms"]), 3), round(float(raw["silicon_tpot_ms"]), 3))  # µs: one value twice
        seen.setdefault(key, set()).add(ms)
        modes[key] = raw["mode"]
    out: dict[str, dict[str, Any]] = {}
    for mode in sorted(set(modes.values())):
        dev: list[tuple[float, float]] = []
        n = 0
        for key, vals in seen.items():
            if modes[key] != mode or len(vals) < 2:
                continue
            n += 1
            mt, mp = median(t for t, _ in vals), median(p for _, p in vals)
            dev += [(abs(t - mt) / t, abs(p - mp) / p) for t, p in vals]
        if not dev:
            out[mode] = {"configurations": 0, "measurements": 0}
            continue
        out[mode] = {
            "configurations": n, "measurements": len(dev),
            "ttft_abs_median": median(d for d, _ in dev), "tpot_abs_median": median(d for _, d in dev),
            "ttft_within_25": sum(d <= 0.25 for d, _ in dev) / len(dev),
            "tpot_within_25": sum(d <= 0.25 for _, d in dev) / len(dev),
        }  # fmt: skip
    return out
