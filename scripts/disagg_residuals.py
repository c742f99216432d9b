"""Residuals of the disaggregated rows of a runs CSV, grouped (run by hand, prints markdown).

    python scripts/disagg_residuals.py [RUNS.csv] [--by engine,system,decode,lengths] [--stated] [--spec mtp:1:1.85]

Groups: any of ``model engine system precision decode prefill lengths concurrency`` (``decode`` / ``prefill``
= the pool's layout ``tpT dpD epE ×workers``; ``concurrency`` in power-of-four buckets). Per group: rows,
median signed TTFT and TPOT error, and the median measured / predicted TPOT (how much faster the runs
decoded than the stated layout predicts). ``--stated``: the columns alone, without the engines' recipe defaults
for unstated decode settings (:func:`llmath.measure.serving_runs.recipe_defaults`); ``--spec METHOD:K:A``: both
pools speculating (no column states it), METHOD ``mtp``/``eagle``, K draft tokens, acceptance length A.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from statistics import median

from doc_section import RUNS_CSV

from llmath.deploy.speculative import Speculation
from llmath.errors import LLMathError
from llmath.measure.run_record import Layout
from llmath.measure.serving_runs import predict_run, read_runs, to_run

KEYS = ("model", "engine", "system", "precision", "decode", "prefill", "lengths", "concurrency")


def _lay(x: Layout | None) -> str:
    return "-" if x is None else f"tp{x.tp} dp{x.dp} ep{x.ep} ×{x.workers}"


def _bucket(c: int) -> str:
    lo = 1
    while lo * 4 <= c:
        lo *= 4
    return f"{lo}–{lo * 4 - 1}"


def _natural(x: str) -> tuple[int, str]:
    head = re.match(r"\d+", x)
    return (int(head.group()) if head else -1, x)


def rows(path, recipe: bool = True, spec: Speculation | None = None) -> list[dict]:
    out = []
    for raw in read_runs(path):
        if raw["mode"] != "disagg":
            continue
        try:
            run = to_run(raw, recipe)
            p = predict_run(run, speculation=spec)
        except LLMathError:
            continue
        out.append({"model": run.model, "engine": run.engine, "system": run.system, "precision": run.precision,
                    "decode": _lay(run.decode), "prefill": _lay(run.prefill), "lengths": run.lengths,
                    "concurrency": _bucket(run.concurrency), "ttft": p["ttft_s"] / run.ttft_s - 1,
                    "tpot": p["tpot_s"] / run.tpot_s - 1, "speed": run.tpot_s / p["tpot_s"]})  # fmt: skip
    return out


def main(argv: list[str]) -> None:
    by = ("engine", "system", "decode", "lengths")
    if "--by" in argv:
        i = argv.index("--by")
        by = tuple(argv[i + 1].split(","))
        argv = argv[:i] + argv[i + 2 :]
        if bad := [k for k in by if k not in KEYS]:
            sys.exit(f"--by {','.join(bad)}: not a grouping; use any of {','.join(KEYS)}")
    recipe = "--stated" not in argv
    argv = [a for a in argv if a != "--stated"]
    spec = None
    if "--spec" in argv:
        i = argv.index("--spec")
        method, k, a = argv[i + 1].split(":")
        spec = Speculation(method, int(k), float(a))
        argv = argv[:i] + argv[i + 2 :]
    data = rows(argv[0] if argv else RUNS_CSV, recipe, spec)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in data:
        groups[tuple(r[k] for k in by)].append(r)
    print(f"| {' | '.join(by)} | rows | TTFT signed | TPOT signed | measured / predicted TPOT |")
    print("|" + "---|" * (len(by) + 4))
    for k in sorted(groups, key=lambda k: tuple(_natural(x) for x in k)):
        g = groups[k]
        t, d, s = (median(r[x] for r in g) for x in ("ttft", "tpot", "speed"))
        print(f"| {' | '.join(k)} | {len(g)} | {100 * t:+.0f}% | {100 * d:+.0f}% | {s:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
