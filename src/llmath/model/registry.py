"""The bundled model registry: config.json snapshots under ``data/models`` with their sources.

``data/models/index.json`` maps each name (the lowercase HF repo name without the organisation) to its
hub repo (``repo``) and source URL; ``data/models/<name>.json`` is the config.json as the hub file has
it, and ``data/models/<name>.hf_quant_config.json`` a ModelOpt sidecar where the checkpoint has one.
Every bundled model also answers to its hub id, case-insensitively (:func:`lookup`). The registry holds
data only; :func:`resolve` turns a name, a hub id, a path or a ``.gguf`` into a :class:`ModelSpec`
(:mod:`llmath.model.checkpoint` adds the formats the checkpoint states).
"""

from __future__ import annotations

import difflib
import json
import os
import re
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmath.errors import UnknownNameError
from llmath.model.config_check import file_kind, local_paths
from llmath.model.hf import read_config, spec_from_config
from llmath.model.spec import ModelSpec

if TYPE_CHECKING:
    from llmath.model.checkpoint import Checkpoint


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


@lru_cache(maxsize=1)
def _by_repo() -> dict[str, str]:
    return {e["repo"].lower(): n for n, e in index().items() if e.get("repo")}


def lookup(model: str) -> str | None:
    """The registry name for a registry name or a bundled model's hub id (case-insensitive), else None."""
    if model in index():
        return model
    low = model.strip().lower()
    if low in index():
        return low
    return _by_repo().get(low.removeprefix("https://huggingface.co/").strip("/"))


def sidecar(name: str) -> dict[str, Any] | None:
    """The bundled ``hf_quant_config.json`` of a registry model, if its checkpoint has one."""
    f = _dir() / f"{name}.hf_quant_config.json"
    return json.loads(f.read_text()) if f.is_file() else None


def checkpoint(name: str):
    """The :class:`~llmath.model.checkpoint.Checkpoint` of a registry model (spec + stated formats)."""
    from llmath.model.checkpoint import from_config

    return from_config(config(name), spec(name), sidecar(name), f"registry {name}")


@lru_cache(maxsize=64)
def format_checkpoint(name: str, weights: str):
    """The :class:`~llmath.model.checkpoint.Checkpoint` of the model's published checkpoint in ``weights``
    (``checkpoints.<weights>`` of its index entry: the bundled sidecar of that checkpoint), or None."""
    from llmath.model.checkpoint import from_config

    entry = (index().get(name, {}).get("checkpoints") or {}).get(weights)
    if entry is None:
        return None
    side = json.loads((_dir() / entry["sidecar"]).read_text())
    return from_config(config(name), spec(name), side, entry["repo"])


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
        "pass a path to a config.json or .gguf, or a hub id (org/name)"
    )


@lru_cache(maxsize=512)
def spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of a registry model."""
    entry = info(name)
    return spec_from_config(config(name), name=name, source=entry.get("source", ""))


@lru_cache(maxsize=1)
def family_groups() -> dict[str, str]:
    """model_type -> the family it is listed under, where the rule of :func:`family` does not give it
    (``data/model_families.json``: mixtral -> mistral, falcon_h1 -> falcon, ...)."""
    data = json.loads((resources.files("llmath") / "data" / "model_families.json").read_text())
    return dict(data["groups"])


def family(name: str) -> str:
    """A registry model's family: its index entry's ``family`` when it has one; else its model_type (a
    wrapper's, else its language model's) looked up in :func:`family_groups`; else that model_type without
    the version, ``_text`` or ``_moe`` suffix (gemma3_text -> gemma, qwen2_moe -> qwen, deepseek_v3 ->
    deepseek)."""
    given = info(name).get("family")
    if given:
        return str(given)
    s = spec(name)
    mt = s.wrapper or s.model_type
    if mt in family_groups():
        return family_groups()[mt]
    base = re.sub(r"(_text|_moe)$", "", mt)
    base = re.sub(r"[_-]?v?\d[\d._]*$", "", base)
    return base if len(base) >= 3 else mt


def by_family() -> dict[str, list[str]]:
    """Registry names grouped by :func:`family`, families and names sorted."""
    out: dict[str, list[str]] = {}
    for n in names():
        out.setdefault(family(n), []).append(n)
    return {f: out[f] for f in sorted(out)}


def resolve(model: str | ModelSpec | Checkpoint) -> ModelSpec:
    """A registry name, a config.json path (or a directory holding one), a spec, or a checkpoint read -> spec."""
    if isinstance(model, ModelSpec):
        return model
    from llmath.model.checkpoint import Checkpoint

    if isinstance(model, Checkpoint):
        return model.spec
    if not isinstance(model, str | os.PathLike):
        raise UnknownNameError(
            f"model={model!r} must be a registry name or hub id (see 'llmath models'), a config.json or .gguf path, "
            "or a llmath.ModelSpec"
        )
    model = os.fspath(model)
    name = lookup(model)
    if name is not None:
        return spec(name)
    p = Path(model)
    if local_paths() and p.suffix.lower() != ".gguf" and (p.suffix == ".json" or file_kind(p) != "missing"):
        cfg = read_config(p)
        stem = p.parent.name if p.name == "config.json" else (p.name if file_kind(p) == "dir" else p.stem)
        return spec_from_config(cfg, name=stem, source=str(p))
    from llmath.model.checkpoint import load  # .gguf files and hub ids not bundled

    return load(model).spec
