"""The collection's own aggregated rows (``source_notes`` holding nothing but ``silicon_concurrency=N``) by the output
rate a closed loop of C clients measured, C·G / (TTFT + (G − 1)·TPOT), per engine, release, model, system and TP;
with ``--validate``, what one completion spacing added to every predicted TTFT would do per engine and model; with
``--simulate``, a two-stage closed loop (a batching engine and one serial stage that every streamed token and every
new request passes through, first come first served) against the rows at 128 clients
(docs/serving-runs.md, "The collection's rows at many clients: a ceiling inside the TensorRT-LLM worker").

Usage: python scripts/worker_ceiling.py [--runs RUNS.csv] [--validate VALIDATE.json] [--simulate]
(VALIDATE.json from ``llmath validate --runs RUNS.csv --json``.)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
from collections import defaultdict, deque
from statistics import median

from doc_section import RUNS_CSV

OWN = re.compile(r"^silicon_concurrency=(\d+)$")


def own_rows(runs: str) -> list[dict]:
    """The collection's own aggregated rows, each with its clients C and measured output rate (tokens/s)."""
    out = []
    with open(runs, newline="") as f:
        for r in csv.DictReader(f):
            m = OWN.match(r["source_notes"])
            if r["mode"] != "agg" or not m:
                continue
            conc, gen = int(m.group(1)), int(r["osl"])
            ttft, tpot = float(r["silicon_ttft_ms"]) / 1e3, float(r["silicon_tpot_ms"]) / 1e3
            life = ttft + (gen - 1) * tpot
            out.append({**r, "clients": conc, "rate": conc * gen / life, "share": ttft / life})
    return out


def rate_table(rows: list[dict]) -> list[str]:
    """Highest measured output rate per engine, release, model, system and TP, with that row's shape."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["backend"], r["backend_version"], r["model_path"], r["system"], r["tp_size"])].append(r)
    out = ["| engine | release | model | system | TP | rows | highest tokens/s | at ISL/OSL, clients | TTFT share |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for key, grp in sorted(groups.items()):
        top = max(grp, key=lambda r: r["rate"])
        out.append(f"| {' | '.join(key)} | {len(grp)} | {top['rate']:,.0f} | {top['isl']}/{top['osl']}, "
                   f"{top['clients']} | {top['share']:.2f} |")  # fmt: skip
    return out


def spacing_table(validate_json: str, runs: str) -> list[str]:
    """Median signed / absolute TTFT error per engine and model with k predicted spacings L / C added, L the
    predicted lifetime TTFT + (G − 1)·TPOT."""
    ids = {r["id"] for r in own_rows(runs)}
    with open(validate_json) as f:
        rows = [r for r in json.load(f)["rows"] if r["id"] in ids and r["predicted_ttft_s"]]
    ks = (0.0, 0.25, 0.5, 1.0)
    out = ["| engine | model | rows | " + " | ".join(f"+{k:g} spacing" for k in ks) + " |",
           "| --- | --- | --- |" + " --- |" * len(ks)]  # fmt: skip
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["engine"], r["model"])].append(r)
    for (eng, model), grp in sorted(groups.items()):
        cells = []
        for k in ks:
            errs = []
            for r in grp:
                gen = int(r["lengths"].split("/")[1])
                life = r["predicted_ttft_s"] + (gen - 1) * r["predicted_tpot_s"]
                errs.append((r["predicted_ttft_s"] + k * life / r["concurrency"]) / r["measured_ttft_s"] - 1)
            cells.append(f"{median(errs):+.0%} / {median(abs(e) for e in errs):.0%}")
        out.append(f"| {eng} | {model} | {len(grp)} | " + " | ".join(cells) + " |")
    return out


def two_stage(conc: int, gen: int, step_s: float, prefill_s: float, token_s: float, request_s: float) -> tuple:
    """Mean TTFT, mean TPOT (s) and output rate of C clients, 10 requests each, started together, against an engine
    that admits at most two waiting prompts per step (the generator's budget of about two prompts), runs a step that
    admits any in ``prefill_s`` and one without in ``step_s``, and emits one token per running request per step,
    behind one first-come-first-served stage that costs ``token_s`` per streamed token and ``request_s`` per new
    request (its submission). The first wave is left out of the means."""
    queue: deque = deque((0.0, -1, rid, 0) for rid in range(conc))  # (ready at, kind: -1 request / 1 token, id, i)
    served, clock, running, waiting = 0.0, 0.0, {}, deque()
    sent, first, last, owner, left = {r: 0.0 for r in range(conc)}, {}, {}, {r: r for r in range(conc)}, [9] * conc
    while len(last) < 10 * conc:
        while queue and max(served, queue[0][0]) <= clock:
            ready, kind, rid, i = queue.popleft()
            served = max(served, ready) + (request_s if kind < 0 else token_s)
            if kind < 0:
                waiting.append((served, rid))
                continue
            first.setdefault(rid, served)
            if i == gen - 1:
                last[rid], who = served, owner[rid]
                if left[who]:
                    new = len(owner)
                    sent[new], owner[new], left[who] = served, who, left[who] - 1
                    queue.append((served, -1, new, 0))
        admitted = 0
        while waiting and waiting[0][0] <= clock and len(running) < conc and admitted < 2:
            running[waiting.popleft()[1]], admitted = 0, admitted + 1
        if not running:
            ready = [waiting[0][0]] if waiting else []
            ready += [max(served, queue[0][0])] if queue else []
            clock = max(clock + 1e-6, min(ready)) if ready else clock + 1e-3
            continue
        clock += prefill_s if admitted else step_s
        for rid in list(running):
            queue.append((clock, 1, rid, running[rid]))
            running[rid] += 1
            if running[rid] == gen:
                del running[rid]
    later = [r for r in last if r >= conc]
    ttft = sum(first[r] - sent[r] for r in later) / len(later)
    tpot = sum((last[r] - first[r]) / (gen - 1) for r in later) / len(later)
    return ttft, tpot, conc * gen / (ttft + (gen - 1) * tpot)


# (label, clients, G, decode step = llmath's predicted TPOT of the row (s), a step with prompts = the model's eager
# floor (s; docs/serving-runs.md, "The eager floor per launch": 19.1 ms Llama-3.1-8B, 42.2 ms Qwen3-32B), measured
# TTFT ms / TPOT ms): TensorRT-LLM 1.0.0rc3 H100 rows of the collection, from serving_runs.csv and `validate --runs`
SIMULATED = (("Llama-3.1-8B TP 8 1024/512", 128, 512, 0.0059, 0.0191, "2020 / 10.2"),
             ("Llama-3.1-8B TP 8 1024/256", 64, 256, 0.0050, 0.0191, "854 / 7.4"),
             ("Llama-3.1-8B TP 4 2048/512", 128, 512, 0.0120, 0.0219, "2034 / 10.9"),
             ("Qwen3-32B TP 8 1024/512", 128, 512, 0.0131, 0.0422, "552 / 19.8"),
             ("Qwen3-32B TP 8 1024/256", 128, 256, 0.0177, 0.0422, "1011 / 25.6"))  # fmt: skip


def simulation_table(token_s: float = 80e-6, request_s: float = 0.010) -> list[str]:
    out = [f"| row | measured TTFT / TPOT (ms) | no serial stage | {token_s * 1e6:.0f} µs per token, "
           f"{request_s * 1e3:.0f} ms per request |", "| --- | --- | --- | --- |"]  # fmt: skip
    for label, conc, gen, step, prefill, measured in SIMULATED:
        cells = []
        for ts, rs in ((0.0, 0.0), (token_s, request_s)):
            ttft, tpot, rate = two_stage(conc, gen, step, prefill, ts, rs)
            cells.append(f"{ttft * 1e3:.0f} / {tpot * 1e3:.1f} ({rate:,.0f} tokens/s)")
        out.append(f"| {label}, {conc} clients | {measured} | {cells[0]} | {cells[1]} |")
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default=os.environ.get("LLMATH_RUNS", RUNS_CSV))
    p.add_argument("--validate", help="a `llmath validate --runs … --json` output")
    p.add_argument("--simulate", action="store_true")
    a = p.parse_args(argv)
    print("\n".join(rate_table(own_rows(a.runs))))
    if a.validate:
        print("\n" + "\n".join(spacing_table(a.validate, a.runs)))
    if a.simulate:
        print("\n" + "\n".join(simulation_table()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
