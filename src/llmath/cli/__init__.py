"""The command line: a thin typer app (:mod:`.app`: the app and the error mapping); one module a command group.

Importing a command module registers its commands on the app, in the order ``--help`` lists them.
"""

from importlib import import_module

from llmath.cli.app import app, main

for _group in ("listing", "analyze", "compare", "measure", "serve", "plan", "bench"):
    import_module(f"llmath.cli.{_group}")

__all__ = ["app", "main"]
