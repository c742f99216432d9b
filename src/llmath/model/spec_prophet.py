"""Spec part of ProphetNet's decoder (Qi et al. 2020, arXiv:2001.04063; transformers 5.23
``models/prophetnet/modeling_prophetnet.py``); operators: :mod:`llmath.ops.prophet`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from llmath.errors import SpecError
from llmath.model.spec_hyper import _positive


@dataclass(frozen=True)
class ProphetSpec:
    """ProphetNet's n-stream decoder: beside the main stream, ``ngram`` predicting streams (stream i predicts
    the token i + 1 ahead) run through every decoder layer; the self-attention adds a relative-position bias
    of ``buckets`` buckets (distances up to ``max_distance``) projected from each query row (a D -> buckets·N
    linear with bias per layer, ``relative_pos_embeddings``), and an ``ngram`` × D table of stream embeddings
    marks the predicting streams' inputs.

    ``streams``: the predicting streams the ``flash`` (serving) execution runs in a decode step and through the
    LM head: 1 by default, the stream whose logits ``generate`` reads; training computes all ``ngram`` (its loss
    reads every stream), and so does transformers' forward (the ``eager`` execution) whatever this says."""

    # parallel trait (model/traits.py): its decoder runs (1 + streams)·T rows per layer, which llmath's tensor- and
    # pipeline-parallel collectives do not carry yet
    no_tp_pp: ClassVar[str] = "ProphetNet's decoder layers, of (1 + streams)·T rows each,"

    ngram: int
    buckets: int
    max_distance: int
    streams: int = 1
    # ProphetNetForCausalLM (the decoder alone, no encoder): its layers skip cross-attention, whose weights
    # (``add_cross_attention``, true by default) are allocated all the same
    cross_weights: bool = True

    def training(self) -> ProphetSpec:
        """The spec as a training step runs it: every predicting stream."""
        return replace(self, streams=self.ngram)

    def validate(self, name: str) -> None:
        for f in ("ngram", "buckets", "max_distance"):
            _positive(name, f"prophet.{f}", getattr(self, f))
        if not 1 <= self.streams <= self.ngram:
            raise SpecError(f"{name!r}: prophet.streams={self.streams} must be between 1 and ngram={self.ngram}")
        if self.buckets < 2:
            raise SpecError(f"{name!r}: prophet.buckets={self.buckets} must be >= 2 (half exact, half log-spaced)")
