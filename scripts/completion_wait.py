"""The collection's aggregated rows in units of a completion: how much of a closed loop's spacing between two
completions (G·TPOT / C, G output tokens, C clients) each row's measured TTFT holds beyond llmath's, and, for the
TensorRT-LLM Llama-3.1-8B rows at TP 1, the iteration-level simulation run with C and with C − 1 request slots
(docs/serving-runs.md, "The collection's Llama-3.1-8B rows: what was checked").

Usage: python scripts/completion_wait.py VALIDATE.json [--simulate] [--runs RUNS.csv]
(VALIDATE.json from ``llmath validate --runs RUNS.csv --json``.)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections import defaultdict
from statistics import median, quantiles

from doc_section import RUNS_CSV

COLLECTION_NOTES = "silicon_concurrency="  # rows whose source_notes state nothing but their concurrency
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def excess(row: dict) -> tuple[float, float, float]:
    """(measured − predicted TTFT, the spacing G·TPOT / C, the request's lifetime TTFT + (G − 1)·TPOT), in s, all
    from the row's measured TPOT and its output length G."""
    gen, conc, tpot = int(row["lengths"].split("/")[1]), float(row["concurrency"]), row["measured_tpot_s"]
    ttft = row["measured_ttft_s"]
    return ttft - row["predicted_ttft_s"], gen * tpot / conc, ttft + (gen - 1) * tpot


def spacings(rows: list[dict]) -> dict[tuple[str, str, int], float]:
    """Median of (measured − predicted TTFT) / (G·TPOT / C) by engine, model and clients."""
    groups: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in rows:
        ex, spacing, _ = excess(r)
        groups[(r["engine"], r["model"], int(r["concurrency"]))].append(ex / spacing)
    return {k: median(v) for k, v in sorted(groups.items())}


def spacing_quartiles(rows: list[dict]) -> dict[tuple[str, str], tuple[int, float, float, float]]:
    """(rows, lower quartile, median, upper quartile) of (measured − predicted TTFT) / (G·TPOT / C) by engine and
    model, over all clients."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        ex, spacing, _ = excess(r)
        groups[(r["engine"], r["model"])].append(ex / spacing)
    out = {}
    for key, vals in sorted(groups.items()):
        q = quantiles(vals, n=4, method="inclusive") if len(vals) > 1 else [vals[0]] * 3
        out[key] = (len(vals), q[0], q[1], q[2])
    return out


def share_fit(rows: list[dict]) -> tuple[float, float]:
    """Least-squares (a, b) of (measured − predicted TTFT) / lifetime = a / C + b over the rows."""
    xs = [1.0 / float(r["concurrency"]) for r in rows]
    ys = [excess(r)[0] / excess(r)[2] for r in rows]
    n, sx, sy = len(xs), sum(xs), sum(ys)
    sxx, sxy = sum(x * x for x in xs), sum(x * y for x, y in zip(xs, ys, strict=True))
    den = n * sxx - sx * sx
    if n < 2 or den == 0:
        raise ValueError(f"share_fit needs rows at two or more client counts, got {n} rows")
    a = (n * sxy - sx * sy) / den
    return a, (sy - a * sx) / n


def collection_rows(path: str, runs: str) -> list[dict]:
    """The aggregated rows of a ``validate --json`` output that belong to the collection's own runs."""
    with open(runs, newline="") as f:
        own = {r["id"] for r in csv.DictReader(f) if r["source_notes"].startswith(COLLECTION_NOTES)}
    with open(path) as f:
        rows = json.load(f)["rows"]
    return [r for r in rows if r["mode"] == "agg" and r["id"] in own and r["predicted_ttft_s"]]


def simulated(prompt: int, gen: int, conc: int) -> tuple[float, float]:
    """Mean TTFT (s) of the iteration-level simulation of the TensorRT-LLM Llama-3.1-8B TP 1 H100 rows' closed loop
    (10 requests per client, started together; the generator's budget C + ISL + 1500, no chunking) with C and with
    C − 1 request slots."""
    from llmath.deploy import engines
    from llmath.deploy.serving import Requests
    from llmath.deploy.simulate import simulate
    from llmath.deploy.step import Device
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency
    from llmath.model.dtypes import Precision
    from llmath.model.registry import resolve

    hw = get("h100-sxm")
    dev = Device(resolve("llama-3.1-8b"), hw, Precision(), efficiency("expected", hw))
    eng = engines.preset("trtllm", hw, max_num_batched_tokens=conc + prompt + 1500, chunked_prefill=False)
    req = Requests(prompt, gen)
    full, short = (simulate(dev, eng, req, conc, cap, iterations=200_000, arrival="closed", prompts_per_client=10)
                   for cap in (conc, conc - 1))  # fmt: skip
    return full.ttft_s, short.ttft_s


def simulation_table(rows: list[dict]) -> list[str]:
    out = ["| ISL/OSL | clients | measured | C slots | C − 1 slots |", "| --- | --- | --- | --- | --- |"]
    picked = [r for r in rows if r["engine"] == "trtllm" and r["model"] == LLAMA_8B and r.get("tp") == 1]
    for r in sorted(picked, key=lambda r: (r["lengths"], r["concurrency"])):
        prompt, gen = (int(v) for v in r["lengths"].split("/"))
        m, (full, short) = r["measured_ttft_s"], simulated(prompt, gen, int(r["concurrency"]))
        out.append(f"| {r['lengths']} | {r['concurrency']} | {m * 1e3:.0f} | {full * 1e3:.0f} ({full / m - 1:+.0%}) "
                   f"| {short * 1e3:.0f} ({short / m - 1:+.0%}) |")  # fmt: skip
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("validate_json")
    p.add_argument("--runs", default=os.environ.get("LLMATH_RUNS", RUNS_CSV))
    p.add_argument("--simulate", action="store_true")
    p.add_argument("--max-clients", type=int, default=32)
    a = p.parse_args(argv)
    rows = [r for r in collection_rows(a.validate_json, a.runs) if r["concurrency"] <= a.max_clients]
    print("| engine | model | clients | spacings (median) |\n| --- | --- | --- | --- |")
    for (eng, model, conc), k in spacings(rows).items():
        print(f"| {eng} | {model} | {conc} | {k:.2f} |")
    for (eng, model), (n, q1, q2, q3) in spacing_quartiles(rows).items():
        print(f"{eng} {model} over all clients: {n} rows, spacings median {q2:.2f}, quartiles {q1:.2f} … {q3:.2f}")
    for model in sorted({r["model"] for r in rows if r["engine"] == "trtllm"}):
        sel = [r for r in rows if r["engine"] == "trtllm" and r["model"] == model]
        fa, fb = share_fit(sel)
        print(f"TensorRT-LLM {model}, {len(sel)} rows at <= {a.max_clients} clients: share of a lifetime = "
              f"{fa:.3f} / C {fb:+.4f}")  # fmt: skip
    if a.simulate:
        with open(a.runs, newline="") as f:
            tp = {r["id"]: int(float(r["tp_size"])) for r in csv.DictReader(f) if r["tp_size"]}
        for r in rows:
            r["tp"] = tp.get(r["id"])
        print("\n".join(simulation_table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
