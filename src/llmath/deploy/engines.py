"""Engine presets: the scheduler and memory defaults vLLM, SGLang, TensorRT-LLM and llama.cpp ship.

Every value comes from ``data/engines.json``, which names the file and commit (or document) it was read
from; values that depend on the device follow the engine's own rule (vLLM: larger budgets on devices with
>= 70 GiB that are not A100s; SGLang: chunk size by GPU memory, memory fraction by tensor-parallel size).
``offline=True`` takes vLLM's ``LLM`` class defaults (what its offline throughput benchmark runs) instead of
the OpenAI server's. Flags override any value (:func:`preset` keyword arguments). Each preset also carries
its overhead terms (:func:`overheads`, :mod:`llmath.deploy.overheads`), each with its source.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.overheads import Overheads
from llmath.errors import WorkloadError
from llmath.hardware import Hardware

GIB = 2**30


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    return json.loads((resources.files("llmath") / "data" / "engines.json").read_text())["engines"]


def names() -> list[str]:
    return sorted(_data())


def info(name: str) -> dict[str, Any]:
    """The raw preset: each setting with its value(s) and source."""
    return _data()[_check(name)]


def _check(name: str) -> str:
    if name not in _data():
        raise WorkloadError(f"--engine {name!r} is not a known engine; use one of {', '.join(names())}")
    return name


def _value(name: str, key: str, hw: Hardware | None, tp: int, offline: bool):
    s = _data()[name]["settings"].get(key)
    if s is None:
        return None
    mem = hw.memory_bytes if hw is not None else 0.0
    large = name == "vllm" and mem >= 70 * GIB and "a100" not in (hw.name if hw else "")
    if name == "vllm" and offline:
        return s.get("offline_large_gpu" if large else "offline", s["value"])
    if large and "large_gpu" in s:
        return s["large_gpu"]
    if name == "sglang" and key == "max_num_batched_tokens" and hw is not None:
        return s["small_gpu"] if mem < 35e9 else s["huge_gpu"] if mem >= 160e9 else s["value"]
    if name == "sglang" and key == "gpu_memory_utilization":
        return s["tp8"] if tp >= 8 else s["tp4"] if tp >= 4 else s["tp2"] if tp >= 2 else s["value"]
    return s["value"]


def disaggregation(name: str, key: str) -> float | None:
    """A value of the engine's ``disaggregation`` entry in ``data/engines.json`` (how its published recipes run a
    disaggregated pool), or None where the engine states none."""
    s = _data()[_check(name)].get("disaggregation", {}).get(key)
    return None if s is None else s["value"]


def overheads(name: str, hw: Hardware | None = None) -> Overheads:
    """The engine's per-request and per-iteration overhead terms (``overheads`` in ``data/engines.json``); on
    ``hw``, a term's ``by_device`` value for that device where the entry has one (a host time measured on it)."""
    terms = _data()[_check(name)].get("overheads", {})
    if hw is not None:
        terms = {k: _on_device(v, hw.name) for k, v in terms.items()}
    return Overheads.from_dict(name, terms)


def _on_device(term, device: str):
    """An overhead entry with its ``by_device`` value for ``device`` as its value (the entry as it is without)."""
    by_device = term.get("by_device", {}) if isinstance(term, dict) else {}
    return {**term, "value": by_device[device]} if device in by_device else term


def preset(name: str, hw: Hardware | None = None, tp: int = 1, offline: bool = False, **overrides) -> EngineConfig:
    """The engine's defaults on ``hw`` at tensor-parallel size ``tp``; keyword arguments override them
    (``None`` leaves the preset's value)."""
    _check(name)
    keys = [f.name for f in fields(EngineConfig) if f.name not in ("name", "sources", "overheads")]
    vals = {k: _value(name, k, hw, tp, offline) for k in keys}
    vals = {k: v for k, v in vals.items() if v is not None or k in ("max_num_seqs",)}
    if vals.get("max_num_seqs") is None:
        vals["max_num_seqs"] = 1 << 20  # no fixed cap: the KV pool limits the resident requests
    sources = {k: s["source"] for k, s in _data()[name]["settings"].items()}
    eng = EngineConfig(name=name, sources=sources, overheads=overheads(name, hw), **vals)
    unknown = set(overrides) - set(keys)
    if unknown:
        raise WorkloadError(f"unknown engine setting(s) {sorted(unknown)}; settable: {', '.join(keys)}")
    over = {k: v for k, v in overrides.items() if v is not None}
    given = {k: f"given ({v!r}), not the preset's value" for k, v in over.items() if v != getattr(eng, k)}
    eng = replace(eng, **over, sources={**eng.sources, **given}) if over else eng
    return _with_prompt_tokenisation(eng) if eng.prompt_token_s is not None else eng


def _with_prompt_tokenisation(eng: EngineConfig) -> EngineConfig:
    """``eng`` with its ``prompt_token_s`` as the overheads' ``per_prompt_token_s`` (a launcher's text prompts)."""
    ov = eng.overheads
    src = {**ov.sources, "per_prompt_token_s": "the launcher's text prompts (EngineConfig.prompt_token_s)"}
    return replace(eng, overheads=replace(ov, per_prompt_token_s=float(eng.prompt_token_s or 0.0), sources=src))
