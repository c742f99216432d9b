"""Where the InferenceX rows' first-token delay sits: measured TTFT at few clients against one prompt's prefill.

Usage: python scripts/first_token_split.py [--runs RUNS.csv] [--engines sglang,vllm] [--max-clients 8]

For the aggregated rows with SemiAnalysis InferenceX's provenance (its client draws every length from
[0.8·L, L]), at most ``--max-clients`` requests in flight per replica, grouped by engine, model, system, TP,
prompt length and whether the client warmed the server up first
(:func:`llmath.measure.inferencex_harness.harness_warmed`): the median measured TTFT, the drifting loop's
(``validate --runs --harness-lengths``), one request's alone (concurrency 1: its prefill and the engine's
per-request terms), and the measured time above that single request, in ms and as a ratio. An excess that
falls with TP and grows with the prompt is GPU work in the prefill; one that does neither is per request.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from statistics import median

from doc_section import RUNS_CSV

from llmath.errors import LLMathError
from llmath.measure.inferencex_harness import INFERENCEX_NOTES, harness_warmed
from llmath.measure.serving_runs import predict_run, read_runs, to_run


def rows(path: str, engines: set[str], max_clients: int) -> list[dict]:
    """Each selected row's measured, drifting and single-request TTFT (seconds) and its group key."""
    out = []
    for raw in read_runs(path):
        notes = raw.get("source_notes", "")
        if raw["mode"] != "agg" or raw["backend"] not in engines or not INFERENCEX_NOTES.search(notes):
            continue
        try:
            run = to_run(raw)
            if run.layout is None or run.concurrency / run.layout.dp > max_clients:
                continue
            drifting = predict_run(run)["ttft_s"]
            single = predict_run(replace(run, concurrency=run.layout.dp))["ttft_s"]
        except LLMathError:
            continue
        warm = "yes" if harness_warmed(raw) else "no"
        key = (run.engine, run.model, run.system, f"tp{run.layout.tp}", str(run.prompt), warm)
        out.append({"key": key, "measured": run.ttft_s, "drifting": drifting, "single": single})
    return out


def table(selected: list[dict]) -> list[str]:
    groups: dict[tuple, list[dict]] = {}
    for r in selected:
        groups.setdefault(r["key"], []).append(r)
    head = "| engine | model | system | TP | prompt | warm-up | rows | measured ms | drifting ms | single ms |"
    out = [head + " measured / single | excess ms |", "|" + "---|" * 12]
    for g in sorted(groups):
        rs = groups[g]
        ms = {k: median(r[k] for r in rs) * 1e3 for k in ("measured", "drifting", "single")}
        ratio = median(r["measured"] / r["single"] for r in rs)
        excess = median(r["measured"] - r["single"] for r in rs) * 1e3
        cells = [f"{ms[k]:.0f}" for k in ("measured", "drifting", "single")] + [f"{ratio:.2f}", f"{excess:.0f}"]
        out.append(f"| {' | '.join(g)} | {len(rs)} | {' | '.join(cells)} |")
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default=os.environ.get("LLMATH_RUNS", RUNS_CSV))
    p.add_argument("--engines", default="sglang,vllm")
    p.add_argument("--max-clients", type=int, default=8)
    a = p.parse_args(argv[1:])
    print("\n".join(table(rows(a.runs, set(a.engines.split(",")), a.max_clients))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
