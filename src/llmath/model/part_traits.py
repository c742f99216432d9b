"""The collective a family's layers add under tensor parallelism, as its spec part declares it (model/traits.py).

A spec part that owns layers with their own tensor-parallel exchanges (beyond the all-reduce after every
row-parallel block, which ``deploy/comm.py`` derives for all models) lists them as :class:`LayerCollective`
rows from its ``tp_collectives(spec)`` method; ``deploy/comm.py`` turns each into a collective of its message
per token, run once per layer of the kinds it names. Kept apart from :mod:`llmath.model.traits` so that the
spec parts, which :mod:`llmath.model.spec` imports, can import it.
"""

# no ``from __future__ import annotations``: the NamedTuple's field types are read as objects, not compiled
# from strings on every import (docs/speed.md)

from typing import NamedTuple


class LayerCollective(NamedTuple):
    """A collective run ``per_layer`` times on each layer whose kind starts with ``layers`` (``"shared+"``), its
    message ``elements`` activation elements per token (written ``label``) over the tensor-parallel group."""

    name: str
    kind: str  # all_reduce, all_gather, ...
    layers: str
    elements: int
    label: str
    per_layer: int = 1


__all__ = ["LayerCollective"]
