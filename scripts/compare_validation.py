"""Before/after tables of two ``llmath validate --published [--serving] --json`` outputs (run by hand).

    python scripts/compare_validation.py before.json after.json

Prints markdown: per group (hardware, engine/framework, model, metric) the row count and median |error| before
and after, the overall median and worst, and every row whose prediction changed.
"""

from __future__ import annotations

import json
import statistics
import sys


def _summary(errs: list[float]) -> str:
    if not errs:
        return "– | –"
    worst = max(errs, key=abs)
    return f"{statistics.median(abs(e) for e in errs):.1%} | {worst:+.1%}"


def main(before_path: str, after_path: str) -> None:
    with open(before_path) as fb, open(after_path) as fa:
        before = {r["id"]: r for r in json.load(fb)["rows"]}
        after = {r["id"]: r for r in json.load(fa)["rows"]}
    ids = sorted(set(before) & set(after))
    print(f"{len(ids)} rows in both; {len(set(before) ^ set(after))} in one only\n")
    for key in ("hardware", "engine", "framework", "model", "metric"):
        vals = sorted({str(after[i].get(key)) for i in ids})
        if len(vals) < 2 and key in ("engine",):
            continue
        print(f"| {key} | n | before median \\|err\\| | before worst | after median \\|err\\| | after worst |")
        print("|---|---|---|---|---|---|")
        for v in vals:
            sel = [i for i in ids if str(after[i].get(key)) == v]
            b = _summary([before[i]["error"] for i in sel])
            a = _summary([after[i]["error"] for i in sel])
            print(f"| {v} | {len(sel)} | {b} | {a} |")
        print()
    b_all, a_all = _summary([before[i]["error"] for i in ids]), _summary([after[i]["error"] for i in ids])
    print(f"overall: before {b_all}; after {a_all}")
    print("\n| row | metric | measured | before | after |")
    print("|---|---|---|---|---|")
    for i in ids:
        b, a = before[i]["error"], after[i]["error"]
        if abs(a - b) > 1e-9:
            print(f"| {i} | {after[i]['metric']} | {after[i]['measured']:.4g} | {b:+.1%} | {a:+.1%} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
