"""The command line: thin wrappers over the library, one output layer (human tables, --json, --csv).

Errors are mapped in one place, :func:`main`, to one line on stderr: a usage error (unknown option,
a value that breaks its rule: click's, or the library's :class:`~llmath.errors.UsageError`) names the
option, the value and the rule, exit code 2; any other library error (:class:`~llmath.errors.LLMathError`: a
file or spec that cannot be read or run) exit code 1; anything else is a bug, reported as such, exit code 1.
``LLMATH_DEBUG=1`` shows the traceback. Numeric options are checked by :mod:`llmath.validation` as they
are parsed. Works with typer's vendored click (``typer._click``, typer >= 0.2x) and with older typers
that use the ``click`` package; this module never imports ``click`` itself.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Protocol, TypeGuard

import typer
import typer.core

from llmath.cli import coerce
from llmath.errors import LLMathError, UsageError


class _Group(typer.core.TyperGroup):
    """typer's command group, whose commands coerce their plain option values without pydantic
    (:mod:`llmath.cli.coerce`)."""

    def get_params(self, ctx):
        coerce.install(self, ctx)
        return super().get_params(ctx)

    def get_command(self, ctx, cmd_name: str):
        command = super().get_command(ctx, cmd_name)
        coerce.install(command, ctx)
        return command


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Exact parameters, FLOPs, bytes, intensity and roofline latency of transformer LLMs, offline.",
)


@app.callback()
def _group() -> None:
    """Keeps the app a command group when a run registers only its own command (:mod:`llmath.cli`)."""


def _click_module():
    """The click that typer runs on: typer's vendored copy (``typer._click``, typer >= 0.2x) or, for older
    typers, the ``click`` package that ``typer.main`` imported. Never imported here directly."""
    import typer.main as typer_main

    return getattr(typer, "_click", None) or getattr(typer_main, "_click", None) or getattr(typer_main, "click", None)


class _ClickError(Protocol):
    """What this module uses of a click exception (whichever click typer runs on)."""

    exit_code: int

    def format_message(self) -> str: ...

    def show(self) -> None: ...


def _is_click_error(e: BaseException) -> TypeGuard[_ClickError]:
    """A click exception: an instance of the click's ``ClickException``, or one shaped like it."""
    mod = _click_module()
    base = getattr(mod, "ClickException", None) or getattr(getattr(mod, "exceptions", None), "ClickException", None)
    is_click = isinstance(e, base) if isinstance(base, type) else False
    return is_click or (hasattr(e, "format_message") and isinstance(getattr(e, "exit_code", None), int))


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _usage_error(e: BaseException) -> int | None:
    """Print a click-style error (usage: exit 2; other click errors: their code) as one line; its exit code.
    None when ``e`` is not one."""
    if not _is_click_error(e):
        return None
    if type(e).__name__ == "NoArgsIsHelpError":  # bare 'llmath' or 'llmath COMMAND': the help text
        e.show()
        return 2
    ctx = getattr(e, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    print(f"error: {_one_line(e.format_message())}{where}", file=sys.stderr)
    return e.exit_code


def main(argv: list[str] | None = None) -> None:
    """Entry point: one line on stderr for every error; exit 2 for usage errors, 1 for the rest."""
    warnings.simplefilter("default")
    warnings.showwarning = lambda msg, *a, **k: print(f"warning: {msg}", file=sys.stderr)
    debug = bool(os.environ.get("LLMATH_DEBUG"))
    try:
        rv = app(args=argv, standalone_mode=False)
    except LLMathError as e:
        if debug:
            raise
        print(f"error: {_one_line(e)}", file=sys.stderr)
        sys.exit(2 if isinstance(e, UsageError) else 1)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        code = _usage_error(e)
        if code is not None:
            sys.exit(code)
        if debug:
            raise
        if isinstance(e, OSError) and e.strerror:  # e.g. --plot or --out in a folder that does not exist
            print(f"error: {e.filename or ''}: {e.strerror}; check the path".lstrip(": "), file=sys.stderr)
        elif isinstance(e, MemoryError):
            print("error: out of memory; try a smaller workload or grid", file=sys.stderr)
        else:
            print(
                f"error: internal error ({type(e).__name__}: {_one_line(e)[:300]}). This is a bug in llmath: "
                "rerun with LLMATH_DEBUG=1 for the traceback and report it",
                file=sys.stderr,
            )
        sys.exit(1)
    if isinstance(rv, int) and rv:  # standalone_mode=False returns the exit code of ctx.exit(n)
        sys.exit(rv)
