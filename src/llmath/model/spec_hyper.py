"""Spec parts of Qwen4-Exp (transformers 5.23 ``models/qwen4_exp``): hyper-connection residual streams,
the QSA block-sparse indexer and hashed n-gram per-layer embeddings (PLE). Operators: :mod:`llmath.ops.hyper`,
:mod:`llmath.ops.qsa`, :mod:`llmath.ops.ngram`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from llmath.errors import SpecError
from llmath.model.part_traits import LayerCollective

if TYPE_CHECKING:
    from llmath.model.spec import ModelSpec


def _positive(name: str, fieldname: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"{name!r}: {fieldname}={value!r} must be a positive integer")


@dataclass(frozen=True)
class HyperSpec:
    """Gated-residual hyper-connections (``Qwen4ExpTextGatedResidual``): the residual is ``streams`` copies
    of the hidden state (S·D wide). Before each sub-layer (mixer or attention, then the MoE) an RMSNorm over
    each stream (weight S·D), a low-rank mixer S·D -> ``rank`` -> S·D (silu, sigmoid) whose output weighs the
    normed streams, averaged to the D-wide sub-layer input, and an injection weight S·D -> S (2·sigmoid)
    that scales the sub-layer output added back into each stream. After the last layer the same mixer
    without the injection (``hyper_connection_mixer``) gives the D-wide state the LM head reads."""

    streams: int
    rank: int

    def validate(self, name: str) -> None:
        _positive(name, "hyper.rank", self.rank)
        if isinstance(self.streams, bool) or not isinstance(self.streams, int) or self.streams < 2:
            raise SpecError(f"{name!r}: hyper.streams={self.streams!r} must be an integer >= 2 (hc_count)")


@dataclass(frozen=True)
class QSASpec:
    """Qwen4-Exp's QSA indexer (``Qwen4ExpTextQSAIndexer``) on the attention layers: ``heads`` query heads
    and one key head of width ``head_dim`` from one projection D -> (heads + 1)·head_dim; the keys are cached
    per position, averaged over blocks of ``compress`` positions, and each query keeps the ``budget /
    compress`` best-scoring complete blocks plus the positions after the last complete block."""

    heads: int
    head_dim: int
    budget: int
    compress: int

    def validate(self, name: str) -> None:
        for f in ("heads", "head_dim", "budget", "compress"):
            _positive(name, f"qsa.{f}", getattr(self, f))
        if self.budget % self.compress:
            raise SpecError(
                f"{name!r}: qsa.budget={self.budget} must be a multiple of qsa.compress={self.compress} "
                "(whole blocks are selected)"
            )


@dataclass(frozen=True)
class NGramSpec:
    """Hashed n-gram per-layer embeddings (``Qwen4ExpTextPLELayer``) on the layers marked ``ple+``: for
    n = 2..``ngram_size``, ``heads_per_ngram`` hash heads each look up a row of width ``embed_dim`` / heads
    in its own table of a prime number of rows (the primes after ``vocab_base`` − 1, in turn over every
    PLE layer's heads), the tables of a layer concatenated and padded to a multiple of ``divisor``; then
    key (E -> S·D) and value (E -> D) projections, a gate per stream, and a depthwise causal conv of width
    ``conv_kernel`` dilated by ``ngram_size`` over the S·D stream channels."""

    embed_dim: int
    ngram_size: int
    heads_per_ngram: int
    vocab_base: int
    divisor: int
    conv_kernel: int

    @property
    def heads(self) -> int:
        return (self.ngram_size - 1) * self.heads_per_ngram

    @property
    def conv_state(self) -> int:
        """Positions the dilated conv keeps per channel: (kernel − 1)·dilation."""
        return (self.conv_kernel - 1) * self.ngram_size

    def tp_problem(self, spec: ModelSpec, tp: int) -> str | None:
        """Each rank holds W/T of every table row's W = embed_dim / heads columns (transformers' plan:
        ``embedding_colwise``); llmath keeps the split exact, so T | W (docs/parallel.md)."""
        w = self.embed_dim // self.heads
        if w % tp:
            return f"tp={tp} must divide the n-gram tables' row width {w} (llmath keeps the split exact)"
        return None

    def tp_collectives(self, spec: ModelSpec) -> tuple[LayerCollective, ...]:
        """Each n-gram layer (``ple+<kind>``) under TP: each rank looks up W/T columns of its rows, then the
        E = heads·W wide lookup of every token is all-gathered."""
        return (LayerCollective("ple.all_gather", "all_gather", "ple+", self.embed_dim, "E"),)

    def table_rows(self, ple_index: int) -> int:
        """Rows of the ``ple_index``-th PLE layer's table (0-based among the PLE layers)."""
        return _table_rows(self.vocab_base, self.heads, self.divisor, ple_index)

    def validate(self, name: str) -> None:
        for f in ("embed_dim", "heads_per_ngram", "vocab_base", "divisor", "conv_kernel"):
            _positive(name, f"ngram.{f}", getattr(self, f))
        if self.ngram_size < 2 or self.embed_dim % self.heads:
            raise SpecError(
                f"{name!r}: ngram.ngram_size={self.ngram_size} must be >= 2 and ngram.embed_dim={self.embed_dim} "
                f"a multiple of the {self.heads} hash heads ((ngram_size − 1)·heads_per_ngram)"
            )


# Deterministic Miller-Rabin bases for n < 3.3·10^24 (Sorenson & Webster 2015): exact for every 64-bit n.
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


def is_prime(n: int) -> bool:
    """Exact primality of ``n`` (deterministic Miller-Rabin for n < 3.3·10^24)."""
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


@lru_cache(maxsize=64)
def primes_from(base: int, count: int) -> tuple[int, ...]:
    """The first ``count`` primes >= ``base``."""
    out: list[int] = []
    n = base
    while len(out) < count:
        if is_prime(n):
            out.append(n)
        n += 1
    return tuple(out)


@lru_cache(maxsize=256)
def _table_rows(base: int, heads: int, divisor: int, ple_index: int) -> int:
    """Σ of the layer's ``heads`` primes (its heads are global heads ple_index·heads ..), rounded up to a
    multiple of ``divisor`` (``Qwen4ExpTextNGramEmbedding.__init__``)."""
    rows = sum(primes_from(base, (ple_index + 1) * heads)[ple_index * heads :])
    return -(-rows // divisor) * divisor


__all__ = ["HyperSpec", "NGramSpec", "QSASpec", "is_prime", "primes_from"]
