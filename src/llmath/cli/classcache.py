"""Compiled dataclass methods, cached on disk the way Python caches a module's bytecode.

``@dataclass`` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` (and a frozen class's
``__setattr__`` / ``__delattr__``) as source text and compiles it with ``exec`` every time the class is
defined: bytecode files cache the modules, not these. ``llmath analyze`` defines about 70 dataclasses, and
compiling their methods took about half of its library import time (docs/speed.md).
:func:`cached_dataclass_methods` compiles each distinct text once and afterwards reuses the code object from a
file per module beside the package's bytecode, read when the module defines its first dataclass.

Safe by construction: an entry is found by the exact source text it was compiled from, in a file named by the
module, the interpreter's cache tag, bytecode magic number and optimisation level, so a changed class (or
another Python) compiles anew, and a reused code object is the one ``exec`` would have compiled (the same
text, file name ``<string>``, no ``__future__`` flags: the ``exec`` in :mod:`dataclasses` inherits none).
Files are written as bytecode is: not under ``PYTHONDONTWRITEBYTECODE``, under ``PYTHONPYCACHEPREFIX`` when
set, atomically, and not at all where the directory is read-only; an unreadable or foreign file is ignored.
Other packages' dataclasses compile as always, and where :mod:`dataclasses` does not compile through
``exec``, nothing changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import marshal
import os
import sys
from collections.abc import Iterator
from importlib.util import MAGIC_NUMBER, cache_from_source
from pathlib import Path
from types import CodeType
from typing import Any

MAX_ENTRIES = 256  # per module: past this many texts (stale ones of edited classes), keep only this run's
_PACKAGE_INIT = Path(__file__).resolve().parent.parent / "__init__.py"


def cache_path(module: str) -> Path | None:
    """The cache file of ``module``'s dataclasses, beside the bytecode of ``llmath/__init__.py``; None where
    this Python writes no bytecode files."""
    try:
        pyc = Path(cache_from_source(str(_PACKAGE_INIT), optimization=""))
    except NotImplementedError:  # sys.implementation.cache_tag is None
        return None
    tag = f"{sys.implementation.cache_tag}.{MAGIC_NUMBER.hex()}.opt{sys.flags.optimize}"
    return pyc.parent / f"{module}.{tag}.dataclasses.marshal"


def _read(path: Path | None) -> dict[str, CodeType]:
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            entries = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    ok = isinstance(entries, dict) and all(isinstance(k, str) and isinstance(v, CodeType) for k, v in entries.items())
    return entries if ok else {}


def _write(path: Path, entries: dict[str, CodeType]) -> None:
    """Write ``entries`` as importlib writes bytecode: a new file beside, then renamed over (atomic)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = (_PACKAGE_INIT.stat().st_mode | 0o200) & 0o666
        fd = os.open(tmp, os.O_EXCL | os.O_CREAT | os.O_WRONLY, mode)
        try:
            with os.fdopen(fd, "wb") as f:
                marshal.dump(entries, f)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only install: every run compiles, as without the cache


class _Cache:
    """The entries of the modules whose dataclasses this run defined (each file read on first use)."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, CodeType]] = {}
        self.used: dict[str, set[str]] = {}
        self.missed: set[str] = set()

    def code(self, module: str, source: str) -> CodeType:
        entries = self.entries.get(module)
        if entries is None:
            entries = self.entries[module] = _read(cache_path(module))
        code = entries.get(source)
        if code is None:
            code = entries[source] = compile(source, "<string>", "exec", dont_inherit=True)
            self.missed.add(module)
        self.used.setdefault(module, set()).add(source)
        return code

    def write(self) -> None:
        for module in self.missed:
            path, entries = cache_path(module), self.entries[module]
            if path is not None:
                _write(path, entries if len(entries) <= MAX_ENTRIES else {s: entries[s] for s in self.used[module]})


@contextlib.contextmanager
def cached_dataclass_methods() -> Iterator[None]:
    """Within this block, the generated methods of llmath's dataclasses come from the cache (compiled and
    added on a miss); other packages' dataclasses compile as always."""
    if "exec" in vars(dataclasses):  # already inside such a block
        yield
        return
    cache = _Cache()

    def exec_cached(source: Any, globals: Any = None, locals: Any = None) -> None:
        module = globals.get("__name__") if isinstance(globals, dict) else None
        if isinstance(source, str) and isinstance(module, str) and module.split(".")[0] == "llmath":
            source = cache.code(module, source)
        elif isinstance(source, str):  # compiled here, exec would inherit this module's __future__ flags
            source = compile(source, "<string>", "exec", dont_inherit=True)
        exec(source, globals, locals)

    dataclasses.exec = exec_cached  # type: ignore[attr-defined]  # found before the builtin by its ``exec`` calls
    try:
        yield
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
        if not sys.dont_write_bytecode:
            cache.write()
