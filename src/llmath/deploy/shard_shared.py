"""Tensor-parallel rule of Zamba2's shared transformer block (:mod:`llmath.ops.shared_block`), as vLLM shards
it (``vllm/model_executor/models/zamba2.py``):

* ``Zamba2Attention``: q, k, v in one ``QKVParallelLinear`` over the block's W = 2·D input (N/T heads per
  rank, the K = N KV heads and their cache K/T), ``RowParallelLinear`` o_proj (W' -> D, all-reduced);
* ``Zamba2MLP``: gate/up ``MergedColumnParallelLinear`` (F/T each), ``RowParallelLinear`` down (all-reduced);
* ``Zamba2LoRA`` adapters (per hybrid layer): A ``ColumnParallelLinear(.., gather_output=True)`` (r/T
  outputs per rank, then an all-gather of the r outputs of every token), B ``ColumnParallelLinear`` or
  ``MergedColumnParallelLinear`` (its outputs split /T like the projection it adds to);
* ``Zamba2HybridLayer.linear``: ``ReplicatedLinear`` (D x D whole on every rank); the concatenation, the
  two ``RMSNorm`` and the add into the Mamba layer's input: whole on every rank.

The block's operators declare these splits (ops/shared_block.py); its weights (held once per weight set by the
``shared.<component>.weights`` ops, split trait ``held``) split as the projection that uses them. Needs T | N
heads, T | F and T | r (vLLM's divisibility asserts; the block's spec part states them:
:meth:`~llmath.model.spec_mixer.SharedBlockSpec.tp_problem`, and its collectives,
:meth:`~llmath.model.spec_mixer.SharedBlockSpec.tp_collectives`).
vLLM implements Zamba2 only (no ``zamba.py``): Zamba (v1) stays refused.
"""

from __future__ import annotations

from fractions import Fraction as Fr
from typing import Any

from llmath.model.spec import ModelSpec
from llmath.ops.core import Op

ONE = Fr(1)


def holder_params(op: Op, spec: ModelSpec, tp: int, kv: Fr) -> tuple[tuple[str, Any], ...]:
    """A rank's share of the block's own weights: q and o (and the FFN's) /T, k and v by ``kv`` (the rank's
    KV heads over K), norms whole, a row-parallel bias (o, down) whole."""
    out: list[tuple[str, Any]] = []
    for key, n in op.params:
        if op.component == "norm" or (key.endswith(".bias") and (".o." in key or ".down." in key)):
            f = ONE
        elif ".k." in key or ".v." in key:
            f = kv
        else:
            f = Fr(1, tp)
        v = n * f
        out.append((key, int(v) if v.denominator == 1 else float(v)))
    return tuple(out)


__all__ = ["holder_params"]
