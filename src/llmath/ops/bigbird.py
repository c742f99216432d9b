"""BigBird-Pegasus' block-sparse encoder (:attr:`EncoderSpec.block_size`; sizes and transformers' rules in
ops/bigbird_sizes.py): the encoder's operators as transformers runs them, over the padded source rows.

``eager`` is transformers' block-sparse path: the score and value products of the global, sliding and
(gathered) random blocks, masked entries included, each written and read (softmax over them). ``flash`` fuses
the same block pairs (a block-sparse kernel computes exactly the blocks the pattern selects, with no score
traffic); no serving engine runs BigBird-Pegasus, so this form is llmath's, stated here. At or below the
full-attention threshold both run the whole T × T rectangle, as transformers does.
"""

from __future__ import annotations

from dataclasses import replace

from llmath.model.spec_encoder import EncoderSpec
from llmath.ops.core import Builder, Op, Term


def block_sparse_rows(op: Op, enc: EncoderSpec) -> Op:
    """``op`` of the encoder stack run over BigBird's rows: per-token terms per encoder row (⌈T / b⌉·b under
    block-sparse), a query's visible keys the same rows, and the score rectangle the block-sparse entries."""
    rows, entries = f"bR:{enc.block_size}:{enc.random_blocks}", f"bE:{enc.block_size}:{enc.random_blocks}"
    swap = {"BT": rows, "K:full": rows, "E:full": entries}
    costs = tuple((c, tuple(Term(t.coef, swap.get(t.mono, t.mono), t.sym) for t in ts)) for c, ts in op.costs)
    return replace(op, costs=costs)


def dense_probs(b: Builder, enc: EncoderSpec) -> None:
    """eager only: transformers 5.23's block-sparse attention also returns the dense Tp × Tp probabilities per
    head (``attention_probs``: a zeros tensor with the attended blocks scattered in), written once per layer."""
    if b.attention != "eager":
        return
    mono, N = f"bF:{enc.block_size}:{enc.random_blocks}", b.spec.n_heads
    b.add("encoder.self_attn.dense_probs", "attention", "memory", "BNTS->BNTS", {"N": N}, enc.n_layers,
          layer_kind="encoder", act_out=[(N, mono, "N")])  # fmt: skip
