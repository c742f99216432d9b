"""Fit each engine's per-request front-end time (``overheads.front_end_s`` in data/engines.json) from the
measured serving runs, with its leave-one-model-out (LOMO) error.

The term is what the server spends on a request outside the GPU iterations before its first token reaches
the client: the HTTP request and its parsing, handing the request to the engine's scheduler, the first
detokenisation and the first streamed chunk (tokenisation is the separate, sourced ``per_prompt_token_s``).
It adds once to every request's TTFT, so it is read where queueing is smallest: the aggregated rows with at
most ``MAX_CONCURRENCY`` requests in flight per replica. Value = median over those rows of (measured −
predicted TTFT + the term already in the preset) (the L1 fit of a constant); LOMO = the same median over the
other models' rows, applied to the held-out model's rows (all concurrencies).

Usage: python scripts/fit_front_end.py [RUNS.csv]   (default ../shared/validation/serving_runs.csv)
Prints a markdown table (the one in docs/serving.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from statistics import median

from doc_section import RUNS_CSV

from llmath.deploy import engines
from llmath.measure.serving_runs import validate_runs

MAX_CONCURRENCY = 8


def _ttft_err(rows: list[dict], shift: float) -> float:
    return median(abs((r["predicted_ttft_s"] + shift) / r["measured_ttft_s"] - 1) for r in rows)


def fit(rows: list[dict], engine: str) -> tuple[float, list[tuple[str, int, float, float, float]]]:
    """(the engine's value, per held-out model: (model, rows, value without it, its |TTFT err| with the
    LOMO value, with the full fit))."""
    a0 = engines.overheads(engine).front_end_s
    mine = [r for r in rows if r["engine"] == engine]
    low = [r for r in mine if r["replica_concurrency"] <= MAX_CONCURRENCY]
    gap = {id(r): r["measured_ttft_s"] - r["predicted_ttft_s"] + a0 for r in low}
    value = median(gap.values())
    out = []
    for model in sorted({r["model"] for r in low}):
        rest = [gap[id(r)] for r in low if r["model"] != model]
        held = [r for r in mine if r["model"] == model]
        if not rest:
            continue
        lomo = median(rest)
        out.append((model, len(held), lomo, _ttft_err(held, lomo - a0), _ttft_err(held, value - a0)))
    return value, out


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else os.environ.get("LLMATH_RUNS", RUNS_CSV))
    rows = [r for r in validate_runs(path)["rows"] if r["mode"] == "agg"]
    print("| engine | fit rows | front_end_s | held-out model | its rows | LOMO value | TTFT abs (LOMO) | (full) |")
    print("|---|---|---|---|---|---|---|---|")
    for engine in sorted({r["engine"] for r in rows}):
        n = sum(r["engine"] == engine and r["replica_concurrency"] <= MAX_CONCURRENCY for r in rows)
        value, lomo = fit(rows, engine)
        for i, (model, k, v, e_lomo, e_full) in enumerate(lomo):
            head = f"| {engine} | {n} | {value * 1e3:.1f} ms" if i == 0 else "| | |"
            print(f"{head} | {model} | {k} | {v * 1e3:.1f} ms | {e_lomo:.1%} | {e_full:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
