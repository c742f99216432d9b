"""The README's examples are what the commands print today.

Each example is a fenced block whose first line is ``$ llmath …``. The block may leave lines out (a line ``…``
marks the gap) and may shorten a line (ending it in ``…``: the printed line starts with what comes before). Every
other line must be printed by the command, in the block's order. A run time (``in 112 ms``) varies by machine and
is compared as a shape only.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```\n\$ (llmath [^\n]*)\n(.*?)```", README.read_text(), re.S)
TIMING = re.compile(r"\bin [0-9.]+ (ms|s)\b")


def _same(shown: str, printed: str) -> bool:
    shown, printed = TIMING.sub("in T", shown), TIMING.sub("in T", printed)
    if shown.endswith("…)") or shown.endswith("…"):
        return printed.startswith(shown.rstrip(")").rstrip("…"))
    return shown == printed


def _missing(shown: list[str], printed: list[str]) -> list[str]:
    """The shown lines not found in ``printed`` in order (an empty list when the block is true)."""
    missing, at = [], 0
    for line in shown:
        if line.strip() == "…":
            continue
        hit = next((j for j in range(at, len(printed)) if _same(line, printed[j])), None)
        if hit is None:
            missing.append(line)
        else:
            at = hit + 1
    return missing


def test_the_readme_has_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("command,block", EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_example_is_printed(command, block):
    argv = shlex.split(command)[1:]
    env = dict(os.environ, COLUMNS="400")
    r = subprocess.run(
        [sys.executable, "-m", "llmath.cli", *argv], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert r.returncode == 0, r.stderr
    printed = [line.rstrip() for line in r.stdout.splitlines()]
    shown = [line.rstrip() for line in block.rstrip("\n").splitlines()]
    assert not _missing(shown, printed), "README example differs; the command prints:\n" + r.stdout


def test_a_changed_line_is_caught():
    # the checker itself: a line that was never printed, or printed out of order, is reported
    printed = ["a", "b in 12 ms", "c"]
    assert _missing(["a", "…", "b in 99 ms", "c"], printed) == []
    assert _missing(["c", "a"], printed) == ["a"]
    assert _missing(["x"], printed) == ["x"]
    assert _missing(["b in 1 s…"], ["b in 3 s and more"]) == []
