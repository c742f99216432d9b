"""Regenerate the measured-serving-runs section of docs/validation.md from ``llmath validate --runs``.

Usage: python scripts/validation_runs.py [RUNS.csv]  (default: ../shared/validation/serving_runs.csv, or the
path in $LLMATH_RUNS). Replaces the text between the two markers below in docs/validation.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from doc_section import ROOT, RUNS_CSV, commit, replace_section

from llmath.measure.serving_runs import validate_runs
from llmath.output.validation import runs_markdown

DOC = ROOT / "docs" / "validation.md"
BEGIN = "<!-- runs-table:begin (scripts/validation_runs.py) -->"
END = "<!-- runs-table:end -->"


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else os.environ.get("LLMATH_RUNS", RUNS_CSV))
    head = f"Computed by `llmath validate --runs {path.name}` at commit {commit()}.\n\n"
    replace_section(DOC, BEGIN, END, f"{head}{runs_markdown(validate_runs(path))}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
