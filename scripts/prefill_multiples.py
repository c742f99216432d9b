"""The collection's own aggregated rows in units of one prompt's pass: each row's measured and predicted TTFT
divided by llmath's TTFT for its prompt alone (one client, the row's layout, formats and engine settings), medians
by engine, model, clients and prompt length, as ``measured / predicted`` (docs/serving-runs.md, "The Qwen3 rows in
units of one prompt's pass"). The division takes the kernels out, so what is left is how many passes a request
waits and how many prompts share them.

Usage: python scripts/prefill_multiples.py [--runs RUNS.csv] [--engine trtllm] [--max-clients 32]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections import defaultdict
from statistics import median

from doc_section import RUNS_CSV

from llmath.deploy.layout import ParallelConfig
from llmath.deploy.service import serve
from llmath.deploy.workload import Workload
from llmath.errors import LLMathError
from llmath.measure.serving_runs import engine_settings, precision, predict_run, read_runs, to_run

COLLECTION_NOTES = "silicon_concurrency="  # rows whose source_notes state nothing but their concurrency


def one_prompt_s(run) -> float:
    """llmath's TTFT for the run's prompt alone: one client, the run's layout, formats and engine settings."""
    L = run.layout
    work = Workload(prompt=run.prompt, gen=2, concurrency=1)
    rep = serve(run.model, run.system, workload=work, engine=run.engine,
                parallel=ParallelConfig(tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep), precision=precision(run),
                **engine_settings(run))  # fmt: skip
    return float(rep.metrics["ttft_s"])


def multiples(path: str, engine: str, max_clients: int) -> dict[tuple, list[tuple[float, float]]]:
    """(engine, model, clients, prompt) → [(measured, predicted) TTFT over one prompt's TTFT] for the collection's
    aggregated rows of ``engine`` at up to ``max_clients`` clients (rows llmath refuses are left out)."""
    out: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    alone: dict[tuple, float] = {}
    for r in read_runs(path):
        if r["mode"] != "agg" or r["backend"] != engine or not r["source_notes"].startswith(COLLECTION_NOTES):
            continue
        try:
            run = to_run(r)
            if run.concurrency > max_clients or run.layout is None:
                continue
            key = (run.model, run.system, run.prompt, run.layout, run.engine_settings)
            if key not in alone:
                alone[key] = one_prompt_s(run)
            predicted = predict_run(run)["ttft_s"]
        except LLMathError:
            continue
        one = alone[key]
        out[(run.engine, run.model, run.concurrency, run.prompt)].append((run.ttft_s / one, predicted / one))
    return out


def table(groups: dict[tuple, list[tuple[float, float]]]) -> list[str]:
    lines = ["| engine | model | clients | prompt | rows | measured / predicted |", "|" + " --- |" * 6]
    for key in sorted(groups):
        v = groups[key]
        m, p = median(a for a, _ in v), median(b for _, b in v)
        lines.append(f"| {' | '.join(map(str, key))} | {len(v)} | {m:.1f} / {p:.1f} |")
    return lines


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default=os.environ.get("LLMATH_RUNS", RUNS_CSV))
    p.add_argument("--engine", default="trtllm")
    p.add_argument("--max-clients", type=int, default=32)
    a = p.parse_args(argv[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        groups = multiples(a.runs, a.engine, a.max_clients)
    print("\n".join(table(groups)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
