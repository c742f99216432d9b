"""Tables that fit the terminal: the console takes the real width, and a table too wide for it drops its least
important columns (named in a line under it) instead of wrapping values or truncating headers."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from typing import Any

#: Width when stdout is not a terminal and COLUMNS is unset (a file, a pipe into grep): wide enough for every
#: table's full set of columns, so saved output keeps them all.
PIPED_WIDTH = 160
#: Narrower than this, the COLUMNS value is taken as a mistake and ignored.
MIN_WIDTH = 40


def terminal_width() -> int:
    """COLUMNS when set (as shells and ``rich`` honour it), else the terminal's size, else :data:`PIPED_WIDTH`."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) >= MIN_WIDTH:
        return int(env)
    if sys.stdout.isatty():
        cols = shutil.get_terminal_size(fallback=(PIPED_WIDTH, 24)).columns
        if cols >= MIN_WIDTH:
            return cols
    return PIPED_WIDTH


#: Where a line of text may break on a terminal, the first tried first: between the items of a list, never inside
#: an item ("TTFT 13.533 ms", "embedding bf16 (2 B/el; default)"), and only outside parentheses.
ITEM_SEPARATORS = (" | ", "; ", ", ", " + ", " = ")
#: A line continued on the next one starts with this indent (beyond the line's own).
CONTINUATION = "  "


def item_breaks(line: str, width: int) -> list[int]:
    """Offsets at which to break ``line`` so that each piece (continuations indented: :func:`continuation`)
    fits ``width``.

    A piece ends just after a separator of :data:`ITEM_SEPARATORS` outside parentheses, as late as still fits;
    an item too long for the width breaks at a separator inside its parentheses, else is left whole (the
    caller's word wrap takes it)."""
    outside, anywhere = _separator_ends(line, nested=False), _separator_ends(line, nested=True)
    breaks: list[int] = []
    start, room = 0, width
    while len(line) - start > room:
        fitting = [e for e in outside if start < e and len(line[start:e].rstrip()) <= room]
        nested = [e for e in anywhere if start < e and len(line[start:e].rstrip()) <= room]
        later = [e for e in outside if e > start]
        end = fitting[-1] if fitting else nested[-1] if nested else later[0] if later else None
        if end is None:
            break
        breaks.append(end)
        start, room = end, width - len(continuation(line))
    return breaks


def continuation(line: str) -> str:
    """The indent of ``line``'s continuations: its own leading spaces and :data:`CONTINUATION`."""
    return line[: len(line) - len(line.lstrip(" "))] + CONTINUATION


def _separator_ends(line: str, nested: bool) -> list[int]:
    """The offset just after each separator of :data:`ITEM_SEPARATORS`, in order: outside parentheses only
    unless ``nested``."""
    ends, depth = [], 0
    for i, ch in enumerate(line):
        depth += (ch == "(") - (ch == ")")
        sep = next((sep for sep in ITEM_SEPARATORS if line.startswith(sep, i)), None)
        if sep and (depth == 0 or nested):
            ends.append(i + len(sep))
    return ends


def console():
    """A rich console as wide as the terminal. On a terminal a line of text too long for it breaks between its
    items (:func:`item_breaks`), so no value is split; into a file or a pipe each line stays whole (for grep and
    scripts)."""
    from rich.console import Console

    class ItemConsole(Console):
        def print(self, *objects, **kwargs):
            if self.soft_wrap or kwargs.get("soft_wrap"):
                return super().print(*objects, **kwargs)
            opts = {k: kwargs[k] for k in ("markup", "highlight") if kwargs.get(k) is not None}
            objects = tuple(
                _broken(self.render_str(o, **opts), self.width) if isinstance(o, str) else o for o in objects
            )
            return super().print(*objects, **kwargs)

    return ItemConsole(soft_wrap=not sys.stdout.isatty(), width=terminal_width())


def _broken(text, width: int):
    """``text`` (a rich ``Text``) with each of its lines broken at :func:`item_breaks`, continuations indented."""
    from rich.text import Text

    pieces = []
    for line in text.split("\n", allow_blank=True):
        parts = line.divide(item_breaks(line.plain, width))
        for i, part in enumerate(parts):
            part.rstrip()
            pieces.append(Text(continuation(line.plain)) + part if i else part)
    return Text("\n").join(pieces)


@dataclass(frozen=True)
class Col:
    """One column: its header, justification and how readily it goes when the table is too wide (the highest
    ``drop`` goes first; 0 never goes)."""

    header: str
    right: bool = True
    drop: int = 0


def fit_table(title: str, cols: list[Col], rows: list[list[Any]], width: int):
    """A ``rich`` table of ``rows`` keeping the columns that fit ``width``, and the headers of those dropped.

    Columns are dropped in decreasing ``drop`` order (later columns first among equals) until the table's
    natural width (every header and cell on one line) fits; cells never wrap. Columns with ``drop == 0`` stay
    even when they alone exceed the width."""
    keep = list(range(len(cols)))
    order = sorted((i for i in keep if cols[i].drop > 0), key=lambda i: (-cols[i].drop, -i))
    dropped: list[str] = []
    table = _build(title, cols, rows, keep)
    while _natural_width(table) > width and order:
        i = order.pop(0)
        keep.remove(i)
        dropped.append(cols[i].header)
        table = _build(title, cols, rows, keep)
    return table, dropped


def print_table(c, title: str, cols: list[Col], rows: list[list[Any]]) -> None:
    """Print :func:`fit_table` on console ``c`` and name the columns it left out."""
    table, dropped = fit_table(title, cols, rows, c.width)
    c.print(table)
    if dropped:
        c.print(f"({', '.join(dropped)} left out to fit {c.width} columns; --json has them all)", highlight=False)


def _build(title: str, cols: list[Col], rows: list[list[Any]], keep: list[int]):
    from rich.table import Table

    t = Table(title=title)
    for i in keep:
        n = len(cols[i].header)
        t.add_column(cols[i].header, justify="right" if cols[i].right else "left", no_wrap=True, min_width=n)
    for r in rows:
        t.add_row(*(r[i] for i in keep))
    return t


def _natural_width(table) -> int:
    """The width ``table`` takes with no cell wrapped (rich's own measurement at an unbounded width)."""
    from rich.console import Console
    from rich.measure import Measurement

    c = Console(width=100_000)
    return Measurement.get(c, c.options, table).maximum
