"""Execution traits: what the layers above ``ops/`` ask of a model instead of which family it is.

A family's spec part (``model/spec_*.py``) states its traits as class attributes beside its fields; a spec's
traits are those of the parts it has. ``deploy/`` and ``hardware/`` read :func:`traits` and apply one generic
rule per trait, so a new family with the same behaviour declares the trait and touches nothing above ``ops/``:

* ``reruns_context``: every pass reruns all positions and keeps no cache (the Byte Latent Transformer's stacks,
  ops/blt.py): a decode step has the rows of a prefill of the whole context, and an engine's continuous
  batching of cached decode steps does not describe it;
* ``reads_target_cache``: a draft model with no prefill and no cache of its own, run only on its target's
  cache (Gemma 4's assistants, model/spec_assistant.py): each draft step reads the target's cached positions;
* ``unsharded``: what in the model no tensor-, pipeline- or expert-parallel rule covers ('' when the layer rules
  apply): its operators run on one GPU per replica (data parallelism still applies).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from functools import lru_cache

from llmath.model.spec import ModelSpec


@dataclass(frozen=True)
class Traits:
    reruns_context: bool = False
    reads_target_cache: bool = False
    unsharded: str = ""


def _parts(spec: ModelSpec) -> list[object]:
    return [v for f in fields(spec) if is_dataclass(v := getattr(spec, f.name)) and not isinstance(v, ModelSpec)]


@lru_cache(maxsize=512)
def traits(spec: ModelSpec) -> Traits:
    """The traits the parts of ``spec`` declare (module doc)."""
    parts = _parts(spec)
    return Traits(
        reruns_context=any(getattr(p, "reruns_context", False) for p in parts),
        reads_target_cache=any(getattr(p, "reads_target_cache", False) for p in parts),
        unsharded=next((u for p in parts if (u := getattr(p, "unsharded", ""))), ""),
    )


def draft_problem(draft: ModelSpec, target: ModelSpec) -> str | None:
    """Why ``draft`` cannot run on ``target``'s cache (a part that reads it states its own rule), or None."""
    for p in _parts(draft):
        check = getattr(p, "target_problem", None)
        if check is not None and (why := check(draft, target)):
            return str(why)
    return None


__all__ = ["Traits", "draft_problem", "traits"]
