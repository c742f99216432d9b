"""The bundled model registry: config.json snapshots under ``data/models`` with their sources.

``data/models/index.json`` maps each name (the lowercase HF repo name without the organisation) to its
repo and source URL; ``data/models/<name>.json`` is the config.json as the hub file has it. The
registry holds data only; :func:`resolve` turns a name or a path into a :class:`ModelSpec`.
"""

from __future__ import annotations

import difflib
import json
import os
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from llmath.errors import UnknownNameError
from llmath.model.config_check import file_kind
from llmath.model.hf import read_config, spec_from_config
from llmath.model.spec import ModelSpec


def _dir():
    return resources.files("llmath") / "data" / "models"


@lru_cache(maxsize=1)
def index() -> dict[str, dict[str, Any]]:
    return json.loads((_dir() / "index.json").read_text())


def names() -> list[str]:
    return sorted(index())


@cache
def _config_text(name: str) -> str:
    return (_dir() / f"{name}.json").read_text()


def config(name: str) -> dict[str, Any]:
    """The config.json snapshot of a registry model (a fresh dict)."""
    if name not in index():
        raise unknown_model(name)
    return json.loads(_config_text(name))


def info(name: str) -> dict[str, Any]:
    if name not in index():
        raise unknown_model(name)
    return dict(index()[name])


def closest(name: str, choices: list[str], n: int = 3) -> list[str]:
    low = name.lower()
    out = difflib.get_close_matches(low, choices, n=n, cutoff=0.5)
    for c in choices:
        if low and low in c and c not in out:
            out.append(c)
    return out[:n]


def unknown_model(name: str) -> UnknownNameError:
    close = closest(name, names())
    hint = f"; closest: {', '.join(close)}" if close else ""
    return UnknownNameError(
        f"unknown model {name!r}{hint}. Run 'llmath models' for the {len(index())} known models, "
        "or pass a path to a config.json"
    )


@lru_cache(maxsize=512)
def spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of a registry model."""
    entry = info(name)
    return spec_from_config(config(name), name=name, source=entry.get("source", ""))


def resolve(model: str | ModelSpec) -> ModelSpec:
    """A registry name, a config.json path (or a directory holding one), or a spec -> spec."""
    if isinstance(model, ModelSpec):
        return model
    if not isinstance(model, str | os.PathLike):
        raise UnknownNameError(
            f"model={model!r} must be a registry name (see 'llmath models'), a config.json path or a llmath.ModelSpec"
        )
    if model in index():
        return spec(model)
    p = Path(model)
    if p.suffix == ".json" or file_kind(p) != "missing":
        cfg = read_config(p)
        stem = p.parent.name if p.name == "config.json" else (p.name if file_kind(p) == "dir" else p.stem)
        return spec_from_config(cfg, name=stem, source=str(p))
    raise unknown_model(model)
