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
  apply): its operators run on one GPU per replica (data parallelism still applies);
* ``no_tp_pp``: what no tensor- or pipeline-parallel rule covers (data and expert parallelism still apply);
* ``no_pp``: why the model cannot be split into pipeline stages;
* ``no_layout``: what no parallel rule covers at all (one GPU only);
* ``tp_problem(spec, tp)`` (a part's method, :func:`tp_problem`): why the engine it follows refuses ``tp``-way
  tensor parallelism (a divisibility rule), or None;
* ``tp_collectives(spec)`` (a part's method, :func:`layer_collectives`): the collectives its layers add under
  tensor parallelism (:class:`~llmath.model.part_traits.LayerCollective`).

Parts declare these as class attributes (or properties); the traits of a family's scalar knobs (a field of
:class:`~llmath.model.spec.ModelSpec` rather than a part) are stated here, in :func:`_knob_traits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from llmath.model.part_traits import LayerCollective
from llmath.model.spec import ModelSpec


@dataclass(frozen=True)
class Traits:
    reruns_context: bool = False
    reads_target_cache: bool = False
    unsharded: str = ""
    no_tp_pp: str = ""
    no_pp: str = ""
    no_layout: str = ""


def _parts(spec: ModelSpec) -> tuple[object, ...]:
    """The family parts ``spec`` carries (model/spec_parts.py): the parts that declare traits."""
    return spec.parts.family


@lru_cache(maxsize=512)
def traits(spec: ModelSpec) -> Traits:
    """The traits the parts of ``spec`` declare (module doc)."""
    parts = [*_parts(spec), _knob_traits(spec)]

    def first(name: str) -> str:
        return next((str(v) for p in parts if (v := getattr(p, name, ""))), "")

    return Traits(
        reruns_context=any(getattr(p, "reruns_context", False) for p in parts),
        reads_target_cache=any(getattr(p, "reads_target_cache", False) for p in parts),
        unsharded=first("unsharded"),
        no_tp_pp=first("no_tp_pp"),
        no_pp=first("no_pp"),
        no_layout=first("no_layout"),
    )


def _knob_traits(spec: ModelSpec) -> Traits:
    """The parallel traits of the families that are knobs of the spec, not parts of their own."""
    streams = spec.mhc_streams or (spec.hyper.streams if spec.hyper is not None else 0)
    no_pp = (
        f"layers are repeated runs of two weight-shared stacks (recurrence={spec.recurrence}), which llmath cannot "
        "split into pipeline stages"  # HRM-Text
        if spec.recurrence is not None
        else f"hyper-connections carry {streams} residual streams between stages, which llmath does not model"
        if streams
        else ""
    )
    no_layout = (  # MusicGen: no serving engine's split to follow
        f"{spec.codebooks} codebook tables and heads (MusicGen)"
        if spec.codebooks > 1 or spec.text_encoder is not None
        else ""
    )
    no_tp_pp = "ZAYA's compressed convolutional attention layers" if spec.cca_kernels is not None else ""
    return Traits(no_tp_pp=no_tp_pp, no_pp=no_pp, no_layout=no_layout)


def tp_problem(spec: ModelSpec, tp: int) -> str | None:
    """Why a part of ``spec`` refuses ``tp``-way tensor parallelism (each part's ``tp_problem``: a divisibility
    rule of the engine it follows), or None."""
    if tp == 1:
        return None
    for p in _parts(spec):
        check = getattr(p, "tp_problem", None)
        if check is not None and (why := check(spec, tp)):
            return str(why)
    return None


def layer_collectives(spec: ModelSpec) -> tuple[LayerCollective, ...]:
    """The collectives the parts of ``spec`` add to their layers under tensor parallelism (model/part_traits.py)."""
    return tuple(c for p in _parts(spec) if (f := getattr(p, "tp_collectives", None)) is not None for c in f(spec))


def draft_problem(draft: ModelSpec, target: ModelSpec) -> str | None:
    """Why ``draft`` cannot run on ``target``'s cache (a part that reads it states its own rule), or None."""
    for p in _parts(draft):
        check = getattr(p, "target_problem", None)
        if check is not None and (why := check(draft, target)):
            return str(why)
    return None


__all__ = ["LayerCollective", "Traits", "draft_problem", "layer_collectives", "tp_problem", "traits"]
