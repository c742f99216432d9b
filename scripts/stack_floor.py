"""The TTFT floor at few clients by serving stack: measured − predicted TTFT on the aggregated rows with at most
``--max-clients`` requests in flight per replica, grouped by the stack a row's provenance names, engine and model,
and the one constant per stack that a per-request front end would be, with its leave-one-model-out error.

Stacks (read from ``source_notes``, the only column that tells them apart): ``dynamo`` (an ``image=`` of
``nvcr.io/nvidia/ai-dynamo/…-runtime``: the one statement of the stack in the file), ``inferencex`` (SemiAnalysis
InferenceX provenance, ``wip=`` / ``workflow_run_id=``: the engine's own OpenAI server, its image where named) and
``launcher`` (the rows that state nothing but their concurrency: aiconfigurator's automation, whose templates
serve every engine behind Dynamo's frontend; docs/serving-runs.md, "The serving stack of the collection's own runs").

Usage: python scripts/stack_floor.py [--runs RUNS.csv] [--max-clients N] [--no-harness-lengths] [--by-gen] [--lifetime]
``--by-gen``: the launcher rows at each configuration's lowest concurrency, by output length, with the floor as a
share of the request's measured end-to-end time. ``--lifetime``: every launcher row's measured − predicted TTFT as a
share of its request's measured lifetime (TTFT + (G − 1)·TPOT), medians by engine, model, TP and clients.
"""

from __future__ import annotations

import argparse
import os
import sys
from statistics import median

from doc_section import RUNS_CSV

from llmath.measure.inferencex_harness import INFERENCEX_NOTES
from llmath.measure.serving_runs import read_runs, validate_runs


def stack_of(notes: str) -> str:
    if "/ai-dynamo/" in notes:
        return "dynamo"
    return "inferencex" if INFERENCEX_NOTES.search(notes) else "launcher"


def gap(r: dict) -> float:
    return r["measured_ttft_s"] - r["predicted_ttft_s"]


def clients(r: dict) -> float:
    return r["replica_concurrency"] or r["concurrency"]


def ttft_err(rows: list[dict], shift: float = 0.0) -> tuple[float, float]:
    e = [(r["predicted_ttft_s"] + shift) / r["measured_ttft_s"] - 1 for r in rows]
    return median(e), median(map(abs, e))


def floor_table(rows: list[dict], limit: float) -> list[str]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if clients(r) <= limit:
            groups.setdefault((r["stack"], r["engine"], r["model"], r["system"]), []).append(r)
    out = ["| stack | engine | model | system | rows | clients | floor ms median [min, max] | TTFT signed |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for key in sorted(groups):
        rs, cs = groups[key], sorted(clients(r) for r in groups[key])
        d = [gap(r) * 1e3 for r in rs]
        out.append(f"| {' | '.join(key)} | {len(rs)} | {cs[0]:g}–{cs[-1]:g} | {median(d):.0f} [{min(d):.0f}, "
                   f"{max(d):.0f}] | {ttft_err(rs)[0]:+.0%} |")  # fmt: skip
    return out


def stack_fit(rows: list[dict], stack: str, limit: float) -> list[str]:
    """One constant for the stack (the median floor of its rows at ≤ ``limit`` clients), each model held out."""
    mine = [r for r in rows if r["stack"] == stack]
    fit = [r for r in mine if clients(r) <= limit]
    if not fit:
        return [f"no {stack} rows at <= {limit:g} clients per replica"]
    value = median(map(gap, fit))
    out = [f"{stack}: {value * 1e3:.1f} ms from {len(fit)} rows at <= {limit:g} clients per replica", "",
           "| held-out model | its rows | value from the others | TTFT signed / abs: none → held-out value |",
           "|---|---|---|---|"]  # fmt: skip
    for model in sorted({r["model"] for r in fit}):
        rest = [gap(r) for r in fit if r["model"] != model]
        if not rest:
            continue
        held, v = [r for r in mine if r["model"] == model], median(rest)
        (s0, a0), (s1, a1) = ttft_err(held), ttft_err(held, v)
        out.append(f"| {model} | {len(held)} | {v * 1e3:.0f} ms | {s0:+.1%} / {a0:.1%} → {s1:+.1%} / {a1:.1%} |")
    out.append("")
    for label, sel in (("all aggregated", rows), *((e, [r for r in mine if r["engine"] == e])
                                                   for e in sorted({r["engine"] for r in mine}))):  # fmt: skip
        shifted = [ttft_err([r], value if r["stack"] == stack else 0.0)[0] for r in sel]
        s0, a0 = ttft_err(sel)
        out.append(f"{label} ({len(sel)} rows): TTFT signed / abs {s0:+.1%} / {a0:.1%} → "
                   f"{median(shifted):+.1%} / {median(map(abs, shifted)):.1%}")  # fmt: skip
    return out


def by_gen(rows: list[dict], limit: float) -> list[str]:
    low: dict[tuple, dict] = {}
    for r in rows:
        if r["stack"] != "launcher" or clients(r) > limit:
            continue
        key = (r["engine"], r["model"], r["system"], r["config"], r["lengths"])
        if key not in low or r["concurrency"] < low[key]["concurrency"]:
            low[key] = r
    groups: dict[tuple, list[dict]] = {}
    for (eng, model, system, _, lengths), r in low.items():
        groups.setdefault((eng, model, system, int(lengths.split("/")[1])), []).append(r)
    out = ["| engine | model | system | output | configurations | floor ms | floor / measured e2e |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for key in sorted(groups):
        rs = groups[key]
        share = [gap(r) / (r["measured_ttft_s"] + (key[3] - 1) * r["measured_tpot_s"]) for r in rs]
        out.append(f"| {' | '.join(map(str, key))} | {len(rs)} | {median(map(gap, rs)) * 1e3:.0f} | "
                   f"{median(share):+.3f} |")  # fmt: skip
    return out


def lifetime_share(rows: list[dict]) -> list[str]:
    """Medians of (measured − predicted TTFT) / measured lifetime over the launcher rows, by engine × model × TP
    (columns: the clients per replica); a mean TTFT holding k whole lifetimes in 10·C requests shows k / (10·C)."""
    groups: dict[tuple, dict[float, list[float]]] = {}
    for r in rows:
        if r["stack"] != "launcher":
            continue
        life = r["measured_ttft_s"] + (int(r["lengths"].split("/")[1]) - 1) * r["measured_tpot_s"]
        key = (r["engine"], r["version"], r["model"], r["config"].split("/")[0])
        groups.setdefault(key, {}).setdefault(clients(r), []).append(gap(r) / life)
    cols = sorted({c for g in groups.values() for c in g})
    out = ["| engine | version | model | TP | " + " | ".join(f"{c:g}" for c in cols) + " |",
           "|---|---|---|---|" + "---|" * len(cols)]  # fmt: skip
    for key in sorted(groups):
        g = groups[key]
        cells = [f"{median(g[c]):+.1%}" if c in g else "" for c in cols]
        out.append(f"| {' | '.join(key)} | " + " | ".join(cells) + " |")
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default=os.environ.get("LLMATH_RUNS", RUNS_CSV))
    p.add_argument("--max-clients", type=float, default=4.0)
    p.add_argument("--harness-lengths", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--by-gen", action="store_true")
    p.add_argument("--lifetime", action="store_true")
    a = p.parse_args(argv[1:])
    raw = {r["id"]: r for r in read_runs(a.runs)}
    rows = [r for r in validate_runs(a.runs, harness_lengths=a.harness_lengths)["rows"] if r["mode"] == "agg"]
    for r in rows:
        w = raw[r["id"]]
        r["stack"] = stack_of(w["source_notes"])
        r["config"] = "/".join(w[k] for k in ("tp_size", "pp_size", "attention_dp_size", "moe_ep_size"))
        r["version"] = w["backend_version"]
    if a.lifetime:
        print("\n".join(lifetime_share(rows)))
        return 0
    if a.by_gen:
        print("\n".join(by_gen(rows, a.max_clients)))
        return 0
    print("\n".join([*floor_table(rows, a.max_clients), "", *stack_fit(rows, "launcher", a.max_clients)]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
