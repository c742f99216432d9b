"""Residuals of the measured serving runs, grouped as you need (an analysis aid beside `llmath validate`).

Usage: python scripts/serving_residuals.py [--runs RUNS.csv] [--by engine,model,band] [--arrival closed|staggered]
  [--mode agg|disagg] [--no-harness-lengths]
Groups: any row key of :func:`llmath.measure.serving_runs.validate_runs` (engine, system, model, concurrency,
lengths, mode) and ``band``: requests in flight per replica (<=4, 5-16, 17-64, >64). Prints, per group, the
rows, the signed and absolute median TTFT and TPOT errors and the median measured and predicted TTFT (ms).
``--no-harness-lengths``: the InferenceX rows with the fixed lengths the columns state instead of the lengths
its client draws (:func:`llmath.measure.serving_runs.validate_runs`).
"""

from __future__ import annotations

import argparse
import os
import sys
from statistics import median

from doc_section import RUNS_CSV

from llmath.measure.serving_runs import validate_runs


def band(r: dict) -> str:
    c = r["replica_concurrency"] or r["concurrency"]
    return "<=4" if c <= 4 else "5-16" if c <= 16 else "17-64" if c <= 64 else ">64"


def table(rows: list[dict], keys: list[str]) -> list[str]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(band(r) if k == "band" else str(r[k]) for k in keys), []).append(r)
    out = [f"| {' | '.join(keys)} | rows | TTFT signed | TTFT abs | TPOT signed | TPOT abs | TTFT meas ms | pred ms |"]
    out.append("|" + "---|" * (len(keys) + 7))
    for g in sorted(groups):
        rs = groups[g]
        e, t = [r["ttft_error"] for r in rs], [r["tpot_error"] for r in rs]
        cells = [f"{median(e):+.0%}", f"{median(map(abs, e)):.0%}", f"{median(t):+.0%}", f"{median(map(abs, t)):.0%}"]
        ms = [f"{median(r[k] for r in rs) * 1e3:.0f}" for k in ("measured_ttft_s", "predicted_ttft_s")]
        out.append(f"| {' | '.join(g)} | {len(rs)} | {' | '.join(cells + ms)} |")
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default=os.environ.get("LLMATH_RUNS", RUNS_CSV))
    p.add_argument("--by", default="engine,band")
    p.add_argument("--arrival", default=None, choices=["closed", "staggered"])
    p.add_argument("--mode", default="agg", choices=["agg", "disagg"])
    p.add_argument("--harness-lengths", action=argparse.BooleanOptionalAction, default=True)
    a = p.parse_args(argv[1:])
    out = validate_runs(a.runs, arrival=a.arrival, harness_lengths=a.harness_lengths)
    rows = [r for r in out["rows"] if r["mode"] == a.mode]
    print("\n".join(table(rows, a.by.split(","))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
