"""The command line: a thin typer app over the library (:mod:`.app`); errors become one line."""

from llmath.cli.app import app, main

__all__ = ["app", "main"]
