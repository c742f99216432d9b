"""The measured SGLang rows' own signatures, from the columns alone (no prediction): how many of the run's own
decode steps its first token took, the output tokens per second the replica delivered while decoding, and the
first token's share of a request's lifetime.

Usage: python scripts/sglang_signatures.py [--runs RUNS.csv] [--model SUBSTR]

For every aggregated SGLang row of ``serving_runs.csv``, grouped by model, system, TP and clients per replica:

* ``steps`` = measured TTFT / measured TPOT: a wait counted in the run's own decode iterations (a scheduler
  that polls for requests every N decode iterations puts about N/2 there; a prefill alone about one);
* ``tok/s`` = clients per replica / measured TPOT: the replica's output rate while every client decodes, which
  a GPU-bound decode raises with TP and a ceiling outside the GPU holds level;
* ``life`` = TTFT / (TTFT + (G − 1) · TPOT), G the column's output length: a wait behind whole requests is a
  fixed share of the lifetime, a queue of prefills is not.

docs/serving-runs.md ("SGLang: the host time per eager kernel by device, ..., and the rows' own signatures") quotes its
tables.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from statistics import median

from doc_section import RUNS_CSV

from llmath.measure.inferencex_harness import INFERENCEX_NOTES, harness_warmed
from llmath.measure.serving_runs import read_runs, to_run

CLIENT_BINS = ((8, "≤ 8"), (32, "≤ 32"), (128, "≤ 128"), (10**9, "> 128"))


def signature(ttft_s: float, tpot_s: float, clients: int, gen: int) -> dict[str, float]:
    """The three signatures of one row (module docstring): decode steps, output tokens per second, lifetime share."""
    if ttft_s <= 0 or tpot_s <= 0 or clients < 1 or gen < 1:
        raise ValueError(f"ttft {ttft_s}, tpot {tpot_s}, clients {clients}, gen {gen}: all must be positive")
    return {
        "steps": ttft_s / tpot_s,
        "tok_s": clients / tpot_s,
        "life": ttft_s / (ttft_s + (gen - 1) * tpot_s),
    }


def client_bin(clients: int) -> str:
    """The clients-per-replica band a row falls in."""
    return next(name for top, name in CLIENT_BINS if clients <= top)


def grouped(path: str, model: str = "") -> dict[tuple, list[dict[str, float]]]:
    """The aggregated SGLang rows' signatures by (model, system, version, TP, clients band)."""
    out: dict[tuple, list[dict[str, float]]] = defaultdict(list)
    for r in read_runs(path):
        if r["backend"] != "sglang" or r["mode"] != "agg" or model not in r["model_path"]:
            continue
        run = to_run(r)
        per_replica = max(run.concurrency // run.layout.dp, 1)
        sig = signature(run.ttft_s, run.tpot_s, per_replica, run.gen)
        cold = INFERENCEX_NOTES.search(r["source_notes"]) and not harness_warmed(r)
        version = (r["backend_version"] or "-") + (" (no warm-up)" if cold else "")
        key = (r["model_path"].split("/")[-1], r["system"], version, run.layout.tp, client_bin(per_replica))
        out[key].append(sig)
    return out


def table(groups: dict[tuple, list[dict[str, float]]]) -> str:
    """A markdown table of the groups' medians."""
    lines = ["| model | system | version | TP | clients | rows | steps | tok/s | life |", "|" + "---|" * 9]
    order = {name: i for i, (_, name) in enumerate(CLIENT_BINS)}
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2], k[3], order[k[4]])):
        sigs = groups[key]
        med = {k: median(s[k] for s in sigs) for k in ("steps", "tok_s", "life")}
        lines.append(f"| {' | '.join(str(v) for v in key)} | {len(sigs)} | {med['steps']:.0f} | {med['tok_s']:,.0f} | "
                     f"{med['life']:.1%} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=RUNS_CSV)
    ap.add_argument("--model", default="", help="only models whose path contains this")
    args = ap.parse_args()
    print(table(grouped(args.runs, args.model)))


if __name__ == "__main__":
    main()
