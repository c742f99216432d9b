"""How an operator splits across the ranks of a parallel layout: a trait each operator declares where it is built.

An operator's declaration (``site.linear(..., split=Split.COLUMN)``) says which of its dimensions a
tensor-parallel rank takes a share of, as vLLM's model files build each projection as a column- or
row-parallel linear; :mod:`llmath.deploy.shard` then applies one rule per trait and never asks which model
or which operator it is. With T = tp ranks:

* ``REPLICATED``: whole on every rank that runs it (norms, residual adds, routers, replicated latents).
* ``COLUMN``: the output width /T, the input read whole (vLLM ``ColumnParallelLinear``).
* ``ROW``: the input width /T, the full-width partial output written whole, then all-reduced (its output
  needs a cross-rank reduction: :data:`REDUCES`); a bias is held whole (vLLM ``RowParallelLinear``).
* ``KV_HEADS``: the rank's K/V heads, K/T or one replicated head when K < T (vLLM ``QKVParallelLinear``).
* ``HEADS``: N/T query heads; its K/V cache traffic by the rank's K/V heads.
* ``QK_HEADS``: an elementwise op over the query and K/V heads together (q/k norms, rotary).
* ``SHARE``: every cost and parameter /T (an op over the rank's heads or channels only).
* ``VOCAB_ROWS`` / ``VOCAB_COLUMN``: the embedding's rows / the LM head's columns ⌈V/T⌉ per rank (vLLM
  ``VocabParallelEmbedding``, ``ParallelLMHead``); the embedding's output is all-reduced.
* ``EXPERTS_COLUMN`` / ``EXPERTS_ROW`` / ``EXPERTS``: routed experts spread over the expert-parallel groups,
  each sharded expert-TP ways (the up/gate side reads the routed tokens, the down side writes them).
* ``EMBEDDING_COLUMNS``: a table whose W columns of every row split /T, its lookups all-gathered
  (transformers' ``embedding_colwise``).
* named rules of a mixer (``MAMBA_SCAN``, ``MAMBA2_IN_PROJ``, ``MAMBA2_CONV``, ``MAMBA2_SCAN``,
  ``GATED_NORM``): a share that mixes split and whole parts (:mod:`llmath.deploy.shard_mixers`).
* ``HELD``: the weights of a block several layers share (Zamba2's shared block, HRM-Text's two stacks), held
  once per rank and split as the projections that use them.
* ``NONE`` (the default): no rule; the operator runs only on one GPU per replica (tp = pp = 1).
"""

from __future__ import annotations


class Split:
    """The split traits (plain strings, so an :class:`~llmath.ops.core.Op` stays hashable data)."""

    NONE = ""
    REPLICATED = "replicated"
    COLUMN = "column"
    ROW = "row"
    KV_HEADS = "kv_heads"
    HEADS = "heads"
    QK_HEADS = "qk_heads"
    SHARE = "share"
    VOCAB_ROWS = "vocab_rows"
    VOCAB_COLUMN = "vocab_column"
    EXPERTS_COLUMN = "experts_column"
    EXPERTS_ROW = "experts_row"
    EXPERTS = "experts"
    EMBEDDING_COLUMNS = "embedding_columns"
    MAMBA_SCAN = "mamba.scan"
    MAMBA2_IN_PROJ = "mamba2.in_proj"
    MAMBA2_CONV = "mamba2.conv"
    MAMBA2_SCAN = "mamba2.scan"
    GATED_NORM = "gated_norm"
    HELD = "held"  # a weight-shared block's weights, held once per rank and split as the projections using them


# traits whose partial outputs need a cross-rank reduction (an all-reduce) under tensor parallelism
REDUCES = frozenset({Split.ROW, Split.VOCAB_ROWS})
# the traits of the routed experts (expert parallelism applies to these)
EXPERT_SPLITS = frozenset({Split.EXPERTS_COLUMN, Split.EXPERTS_ROW, Split.EXPERTS})
# named rules of a mixer's operators
MIXER_SPLITS = frozenset(
    {Split.MAMBA_SCAN, Split.MAMBA2_IN_PROJ, Split.MAMBA2_CONV, Split.MAMBA2_SCAN, Split.GATED_NORM}
)

__all__ = ["EXPERT_SPLITS", "MIXER_SPLITS", "REDUCES", "Split"]
