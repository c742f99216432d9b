"""The command line: a thin typer app over the library (:mod:`.app`); errors become one line."""

from llmath.cli import plan as _plan  # noqa: F401  (registers the ``plan`` command on the app)
from llmath.cli.app import app, main

__all__ = ["app", "main"]
