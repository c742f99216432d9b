"""The command line: a thin typer app (:mod:`.app`: the app and the error mapping); one module a command group.

Importing a command module registers its commands on the app, in the order ``--help`` lists them. A run
imports only the group its command lives in (:data:`COMMANDS`; ``--help``, no command or an unknown one:
every group), so a command pays neither for the others' imports nor for typer building their options.
``llmath.cli.app`` read as an attribute is the app with every group registered.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from importlib import import_module
from typing import Any

import llmath.cli.app as _app_module

GROUPS = ("listing", "analyze", "compare", "measure", "serve", "plan", "bench")
COMMANDS = {
    "models": "listing",
    "hardware": "listing",
    "params": "listing",
    "ops": "listing",
    "analyze": "analyze",
    "sweep": "compare",
    "compare": "compare",
    "estimates": "compare",
    "seeds": "compare",
    "calibrate": "measure",
    "validate": "measure",
    "serve": "serve",
    "plan": "plan",
    "bench": "bench",
}  # command → the group module that registers it (a test checks it against the registered commands)

GC_FIRST_GENERATION = 500_000  # allocations between two collections of the youngest generation

del globals()["app"]  # the submodule's name: ``llmath.cli.app`` is the app itself (see __getattr__)


def load(argv: list[str] | None = None) -> None:
    """Register the groups a command line needs: its command's group, or every group (``argv`` None, help,
    or a name not listed)."""
    command = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    for group in [COMMANDS[command]] if command in COMMANDS else GROUPS:
        import_module(f"llmath.cli.{group}")


def main(argv: list[str] | None = None) -> None:
    """Entry point (:func:`llmath.cli.app.main`), after registering the groups ``argv`` needs.

    OpenBLAS runs on the calling thread unless the environment says otherwise: a command's products are
    small (the library splits large ones into single-thread blocks, :func:`llmath.ops.table.matmul_rows`),
    and starting the BLAS thread pool would be a large part of a command's start-up (docs/speed.md).

    A command is one short process that makes many small arrays and tuples, which reference counting frees;
    the cyclic collector's first generation runs every :data:`GC_FIRST_GENERATION` allocations instead of
    Python's 700: a plan, even on 4,096 GPUs, keeps fewer new containers than that and so never collects
    (its CPU and peak memory under other thresholds: docs/speed.md). At exit the objects it made are frozen
    (``gc.freeze``): the interpreter's last collection then skips them, where it would otherwise walk every
    container the command left (2.5% of the 512-GPU plan's instructions, docs/speed.md) only for the process to
    end."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read once, when numpy loads (in ``load``)
    gc.set_threshold(GC_FIRST_GENERATION, *gc.get_threshold()[1:])
    atexit.unregister(gc.freeze)  # once, however many commands a process runs
    atexit.register(gc.freeze)
    load(sys.argv[1:] if argv is None else argv)
    _app_module.main(argv)


def __getattr__(name: str) -> Any:
    if name == "app":
        load()
        return _app_module.app
    raise AttributeError(f"module 'llmath.cli' has no attribute {name!r}")


__all__ = ["COMMANDS", "GROUPS", "app", "load", "main"]
