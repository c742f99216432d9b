"""Regenerate the measured-serving-runs section of docs/validation.md from ``llmath validate --runs``.

Usage: python scripts/validation_runs.py [RUNS.csv]  (default: ../shared/validation/serving_runs.csv, or the
path in $LLMATH_RUNS). Replaces the text between the two markers below in docs/validation.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from llmath.measure.serving_runs import validate_runs
from llmath.output.validation import runs_markdown

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "validation.md"
BEGIN = "<!-- runs-table:begin (scripts/validation_runs.py) -->"
END = "<!-- runs-table:end -->"
DEFAULT = next(
    (p / "shared" / "validation" / "serving_runs.csv" for p in ROOT.parents if (p / "shared" / "validation").is_dir()),
    ROOT / "serving_runs.csv",
)


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else os.environ.get("LLMATH_RUNS", DEFAULT))
    rep = validate_runs(path)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    head = f"Computed by `llmath validate --runs {path.name}` at commit {rev.strip() or '?'}.\n\n"
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        text += f"\n{BEGIN}\n{END}\n"
    pre, rest = text.split(BEGIN, 1)
    post = rest.split(END, 1)[1]
    DOC.write_text(f"{pre}{BEGIN}\n{head}{runs_markdown(rep)}\n{END}{post}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
