"""One helper for the scripts that regenerate a section of a doc: the text between two HTML-comment markers
(appended at the end when the doc lacks them), headed by the command and the commit that computed it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS_CSV = next(
    (p / "shared" / "validation" / "serving_runs.csv" for p in ROOT.parents if (p / "shared" / "validation").is_dir()),
    ROOT / "serving_runs.csv",
)


def commit() -> str:
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    return rev.strip() or "?"


def replace_section(doc: Path, begin: str, end: str, body: str) -> None:
    """Write ``body`` between the lines ``begin`` and ``end`` of ``doc``."""
    text = doc.read_text()
    if begin not in text or end not in text:
        text += f"\n{begin}\n{end}\n"
    pre, rest = text.split(begin, 1)
    post = rest.split(end, 1)[1]
    doc.write_text(f"{pre}{begin}\n{body}{end}{post}")
