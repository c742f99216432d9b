"""Option values without pydantic, for the command group of :mod:`llmath.cli.app`.

typer >= 0.2x coerces every parameter's value, its default included, through a pydantic ``TypeAdapter``
built on the parameter's first use (``typer.core._TyperParameter.get_runtime_param``): any command imports
pydantic and builds an adapter per option, about 0.1 s of CPU, a third of ``llmath analyze``'s start-up
(docs/speed.md). The CLI's parameters are plain ``str``, ``int``, ``float``, ``bool``, ``Enum`` options and
``list[str]`` arguments. :class:`PlainCoercion` gives their ordinary values what typer's adapter gives
(``tests/test_cli_coerce.py`` compares the two, value by value, on every parameter of every command) and
hands any other value, and so every error message, to typer's own coercion, built then. On a typer without
that hook (older releases coerce with click's types) :func:`install` changes nothing.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

_INT = re.compile(r"-?[0-9]{1,18}")
_FLOAT = re.compile(r"-?[0-9]{1,18}(\.[0-9]{1,18})?([eE]-?[0-9]{1,2})?")
NOT_PLAIN = object()  # a value :func:`plain_value` leaves to typer's coercion


def _plain_leaf(annotation: Any, value: Any, ctx: Any) -> Any:
    """``value`` as an ``annotation`` (one of the plain kinds), or :data:`NOT_PLAIN`."""
    kind = type(value)
    if annotation is str:
        return value if kind is str else NOT_PLAIN
    if annotation is int:
        if kind is int:
            return value
        return int(value) if kind is str and _INT.fullmatch(value) else NOT_PLAIN
    if annotation is float:
        if kind is float:
            return value
        return float(value) if kind is str and _FLOAT.fullmatch(value) else NOT_PLAIN
    if annotation is bool:
        return value if kind is bool else NOT_PLAIN
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if kind is annotation:
            return value
        if kind is str and getattr(ctx, "token_normalize_func", None) is None:
            return next((m for m in annotation if str(m.value) == value), NOT_PLAIN)
    return NOT_PLAIN


def plain_value(descriptor: Any, value: Any, multiple: bool, ctx: Any) -> Any:
    """What typer's coercion returns for ``value`` of a parameter with this type descriptor (``multiple``:
    it takes several values), or :data:`NOT_PLAIN` where this module leaves the value to typer."""
    info = descriptor.parameter_info
    if info.parser is not None or getattr(descriptor, "file_annotation", None) is not None:
        return NOT_PLAIN
    if getattr(info, "min", None) is not None or getattr(info, "max", None) is not None:
        return NOT_PLAIN
    if not getattr(info, "case_sensitive", True):
        return NOT_PLAIN
    annotation = descriptor.annotation
    if value is None:
        return () if multiple else None
    if annotation == list[str]:
        if multiple and type(value) is tuple and all(type(v) is str for v in value):
            return list(value)
        return NOT_PLAIN
    return NOT_PLAIN if multiple else _plain_leaf(annotation, value, ctx)


class PlainCoercion:
    """A parameter's coercion: :func:`plain_value`, else typer's own (built on the first value that needs it)."""

    def __init__(self, param: Any) -> None:
        self._param = param
        self._typer: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multiple = bool(param.multiple or param.nargs == -1)
        out = plain_value(param.type_descriptor, value, multiple, ctx)
        if out is not NOT_PLAIN:
            return out
        return self.typer_coercion().coerce(value, param=param, ctx=ctx)

    def typer_coercion(self) -> Any:
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self._param.type_descriptor)
        return self._typer


def install(command: Any, ctx: Any) -> None:
    """Give each of ``command``'s parameters (its ``--help`` included) that coerces through typer's adapters a
    :class:`PlainCoercion` (once; a parameter without typer's hook keeps its own)."""
    if command is None:
        return
    for param in [*command.params, command.get_help_option(ctx)]:
        if getattr(param, "_runtime_param", NOT_PLAIN) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = PlainCoercion(param)
