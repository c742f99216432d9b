"""The CLI's option values without pydantic (llmath.cli.coerce) are what typer's own coercion gives, value by value,
on every parameter of every command; any other value goes to typer's coercion, its error messages included."""

from enum import Enum

import pytest
import typer.main
from typer._click import Context

import llmath.cli as cli
from llmath.cli import coerce

pytest.importorskip("typer._coercion", reason="typers before 0.2x coerce with click's types: nothing to compare")
from typer._coercion import build_runtime_param  # noqa: E402

RAW = [
    None, "", " ", "0", "-0", "7", "+7", "-7", "007", "1_000", " 12", "12 ", "12.0", "1.5", "-1.5", ".5", "5.",
    "1e3", "1E3", "2.5e-3", "1e+3", "1e400", "1e-400", "inf", "-inf", "nan", "9" * 18, "9" * 19, "9" * 30,
    "0x10", "abc", "true", "false", "yes", "eager", "flash", "ideal", "expected", "prefill", "decode", "encoder",
    "Flash", "FLASH", "llama-3-8b", "h100-sxm", "bf16,fp8", "١٢", 3, 3.0, 2.5, True, False,
]  # fmt: skip


def _params():
    group = typer.main.get_command(cli.app)
    ctx = Context(group)
    for name, command in sorted(group.commands.items()):
        for param in [*command.params, command.get_help_option(ctx)]:
            yield pytest.param(command, param, id=f"{name}:{param.name}")


def _values(param):
    annotation = param.type_descriptor.annotation
    members = list(annotation) if isinstance(annotation, type) and issubclass(annotation, Enum) else []
    return [*RAW, *members, param.default, (), ("a", "b"), ("x",), ["a"]]


def _typer(param, value, ctx):
    try:
        return "ok", build_runtime_param(param.type_descriptor).coerce(value, param=param, ctx=ctx)
    except Exception as e:  # what typer refuses, compared by its message
        return "error", f"{type(e).__name__}: {e}"


@pytest.mark.parametrize(("command", "param"), list(_params()))
def test_plain_values_equal_typers_coercion(command, param):
    ctx = Context(command)
    multiple = bool(param.multiple or param.nargs == -1)
    plain = 0
    for value in _values(param):
        mine = coerce.plain_value(param.type_descriptor, value, multiple, ctx)
        if mine is coerce.NOT_PLAIN:
            continue
        plain += 1
        status, theirs = _typer(param, value, ctx)
        assert status == "ok", (value, theirs)
        assert (type(mine), mine) == (type(theirs), theirs), value
    assert plain >= 1  # None at least: every parameter takes the plain path for its default


@pytest.mark.parametrize(("command", "param"), list(_params()))
def test_other_values_get_typers_result_and_message(command, param):
    ctx = Context(command)
    mine = coerce.PlainCoercion(param)
    for value in _values(param):
        try:
            got = ("ok", mine.coerce(value, param, ctx))
        except Exception as e:
            got = ("error", f"{type(e).__name__}: {e}")
        assert repr(got) == repr(_typer(param, value, ctx)), value  # repr: NaN equals itself


def test_ints_and_floats_take_the_plain_path():
    ctx = Context(typer.main.get_command(cli.app))
    group = typer.main.get_command(cli.app)
    batch = next(p for p in group.commands["analyze"].params if p.name == "batch")
    assert coerce.plain_value(batch.type_descriptor, "64", False, ctx) == 64
    assert coerce.plain_value(batch.type_descriptor, "6.4", False, ctx) is coerce.NOT_PLAIN
    eff = next(p for p in group.commands["analyze"].params if p.name == "matmul_eff")
    assert coerce.plain_value(eff.type_descriptor, "0.5", False, ctx) == 0.5
