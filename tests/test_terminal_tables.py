"""Human tables fit the terminal they print to: the CLI runs in a pseudo-terminal (python's ``pty``) at 80 and 120
columns, and every line fits, no header or value is truncated ("…") and no value is split over two lines."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_in_pty(args: list[str], columns: int | None, tty_columns: int = 200) -> str:
    """The CLI's output as a terminal shows it: stdout is a pty ``tty_columns`` wide; COLUMNS set unless None."""
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 50, tty_columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    proc = subprocess.Popen([sys.executable, "-m", "llmath", *args], stdout=sub, stderr=sub, env=env)
    os.close(sub)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(main)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r", "")


def table_rows(text: str) -> list[list[str]]:
    """The cells of every body row of every table (the lines between box rules)."""
    body = [line for line in text.splitlines() if line.startswith("│")]
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in body]


def assert_fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert len(line) <= width, f"{len(line)} > {width}: {line!r}"
    assert "…" not in text  # nothing truncated
    for cells in table_rows(text):
        # a value split over two lines leaves a continuation line whose other cells are blank
        assert all(cells), f"a row with a blank cell (a wrapped value): {cells}"


@pytest.mark.parametrize("width", [80, 120])
def test_stage_table_fits(width):
    text = run_in_pty(["analyze", "llama-3.1-8b", "-H", "h100-sxm", "--gpus", "2"], width)
    assert_fits(text, width)
    stage_rows = [r for r in table_rows(text) if r[0] in ("prefill", "decode step 0")]
    assert len(stage_rows) == 2
    # the columns kept always include the stage, its time and its bound
    assert all(any(re.fullmatch(r"\d+\.\d{3} ms", c) for c in r) for r in stage_rows)
    assert all({"compute", "memory", "comm"} & set(r) for r in stage_rows)
    header = next(line for line in text.splitlines() if line.startswith("┃") and "stage" in line)
    assert "time" in header and "bound" in header
    if width == 80:  # 12 columns do not fit 80: those left out are named
        assert "left out to fit 80 columns" in text


@pytest.mark.parametrize("width", [80, 120])
def test_plan_table_fits_and_shows_top_rows(width):
    args = ["plan", "llama-3.1-70b", "-H", "h100-sxm", "--gpus", "8", "--disagg", "--top", "10"]
    text = run_in_pty(args, width)
    assert_fits(text, width)
    front = json.loads(
        subprocess.run(
            [sys.executable, "-m", "llmath", *args, "--json"], capture_output=True, check=True, text=True
        ).stdout
    )["pareto"]
    assert len(front) >= 10
    assert len(table_rows(text)) == 10  # --top 10 prints 10 rows when the front has at least 10
    for cells in table_rows(text):
        for c in cells:
            # times keep their unit on the line; concurrency is whole requests (no "170.5")
            assert not c.endswith(".") and c != "ms"


@pytest.mark.parametrize("width", [80, 120])
def test_serving_report_fits(width):
    args = ["analyze", "llama-3.1-8b", "-H", "h100-sxm", "--concurrency", "16"]
    text = run_in_pty(args, width)
    assert_fits(text, width)
    metrics = {r[0]: r[1] for r in table_rows(text) if len(r) == 2}
    for k in ("TTFT (mean)", "TPOT (mean)", "ITL p50", "ITL p90", "ITL p99"):
        assert re.fullmatch(r"\d+\.\d+ (ms|s)", metrics[k]), (k, metrics.get(k))


def test_terminal_size_read_without_columns():
    """No COLUMNS: the width is the terminal's own (TIOCGWINSZ), not a forced 120 or 180."""
    text = run_in_pty(["analyze", "llama-3.1-8b", "-H", "h100-sxm"], None, tty_columns=90)
    assert_fits(text, 90)
    assert max(len(line) for line in text.splitlines()) > 70  # it did use the room


def test_piped_output_keeps_every_column():
    """Piped (not a terminal) and no COLUMNS: a wide default, so a saved report has every column."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    res = subprocess.run(
        [sys.executable, "-m", "llmath", "analyze", "llama-3.1-8b", "-H", "h100-sxm"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "left out" not in res.stdout
    assert "vector FLOPs" in res.stdout and "KV read" in res.stdout


# A list's items are separated by these (outside or inside parentheses); a line may break only just after one.
SEPARATOR = re.compile(r" \| |; |, | \+ | = ")
BOX = tuple("│┃┏┡└┌├╭╰")


def piped(args: list[str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    res = subprocess.run([sys.executable, "-m", "llmath", *args], capture_output=True, text=True, env=env, check=True)
    return res.stdout


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "llama-3-8b", "-H", "h100-sxm"],
        ["analyze", "llama-3-8b", "-H", "h100-sxm", "-c", "64"],
        ["plan", "llama-3-8b", "-H", "h100-sxm", "--gpus", "8"],
    ],
    ids=["analyze", "serving", "plan"],
)
def test_text_lines_break_between_items(args, width):
    """Every line of the whole output fits; a text line too long breaks only between items, so each item of
    the one-line-per-item piped output is found whole on one line of the terminal's."""
    text = run_in_pty(args, width)
    assert_fits(text, width)
    shown = [line.strip() for line in text.splitlines()]
    for line in piped(args).splitlines():
        if line.startswith(BOX) or "configurations in" in line:  # tables; the search's own run time
            continue
        for item in SEPARATOR.split(line.strip()):
            if len(item) <= width - 2:
                assert any(item in s for s in shown), f"{item!r} split over lines at {width} columns"
    if width == 80:  # the lines this is about did not fit 80 columns whole
        assert max(len(line) for line in piped(args).splitlines() if not line.startswith(BOX)) > 80


def test_item_breaks_fill_lines_and_keep_parentheses():
    from llmath.output.tables import item_breaks

    line = "formats: a bf16 (2 B/el; default), b fp8 (1 B/el; default); KV bf16 (default)"
    # 40 columns: "formats: a bf16 (2 B/el; default)," is 34 long and the next item would make it 59, so it breaks
    # there (not inside "(2 B/el; default)"); the continuation has 38: 2 + 24 fits, 2 + 24 + 18 = 44 does not
    cuts = item_breaks(line, 40)
    pieces = [line[a:b].rstrip() for a, b in zip([0, *cuts], [*cuts, len(line)], strict=True)]
    assert pieces == ["formats: a bf16 (2 B/el; default),", "b fp8 (1 B/el; default);", "KV bf16 (default)"]
    assert item_breaks("short, line", 40) == []
    # an indented line keeps its indent on continuations: "  where k=1," is 12 of 14 columns; "    m=2, n=3"
    # (its own 2 spaces + 2) is 12 again, so one break, after the ", " that ends at offset 13
    assert item_breaks("  where k=1, m=2, n=3", 14) == [13]
