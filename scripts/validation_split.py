"""Regenerate the error-split section of docs/validation.md (lowest-concurrency rows against the prefill
alone; repeat measurements of one configuration) from :mod:`llmath.measure.runs_split`.

Usage: python scripts/validation_split.py [RUNS.csv]  (default: as scripts/validation_runs.py). Replaces the
text between the two markers below in docs/validation.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from doc_section import ROOT, RUNS_CSV, commit, replace_section

from llmath.measure.runs_split import lowest_concurrency_split, repeat_spread

DOC = ROOT / "docs" / "validation.md"
BEGIN = "<!-- split-table:begin (scripts/validation_split.py) -->"
END = "<!-- split-table:end -->"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def markdown(path: Path, rev: str) -> str:
    lines = [f"Computed by `python scripts/validation_split.py {path.name}` at commit {rev or '?'}.", ""]
    lines += ["| model | engine | series | median concurrency | measured / alone | predicted / alone | TTFT signed |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in lowest_concurrency_split(path):
        lines.append(
            f"| {r['model']} | {r['engine']} | {r['rows']} | {r['concurrency']:g} | {r['measured_over_alone']:.2f}"
            f" | {r['predicted_over_alone']:.2f} | {100 * r['ttft_signed_median']:+.0f}% |"
        )
    lines += ["", "| mode | configurations | measurements | TTFT deviation | TPOT deviation | TTFT ≤25% | TPOT ≤25% |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for mode, s in repeat_spread(path).items():
        if not s["measurements"]:
            continue
        lines.append(
            f"| {mode} | {s['configurations']} | {s['measurements']} | {_pct(s['ttft_abs_median'])}"
            f" | {_pct(s['tpot_abs_median'])} | {_pct(s['ttft_within_25'])} | {_pct(s['tpot_within_25'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else os.environ.get("LLMATH_RUNS", RUNS_CSV))
    replace_section(DOC, BEGIN, END, markdown(path, commit()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
