"""Weight GEMMs that serving engines run as one kernel: projections reading the same activation, concatenated.

vLLM, SGLang and TensorRT-LLM load a layer's query, key and value projections as one weight matrix and run them
as one GEMM (vLLM ``QKVParallelLinear``, SGLang's port of it, TensorRT-LLM's ``Attention.qkv_proj``), and a
gated FFN's gate and up projections likewise (vLLM ``MergedColumnParallelLinear`` ``gate_up_proj``, TensorRT-LLM
``GatedMLP.gate_up_proj``); sources in docs/efficiency.md, "Fused projections". The operator tables keep the
checkpoint's modules, one operator each (their FLOPs and bytes are the same either way); what fusion changes is
the kernel: one launch, one per-kernel time, and the weight size the fitted GEMM model reads its fractions at is
the run's, not each operator's.

A run is a maximal sequence of consecutive weight GEMMs of a table with the same checkpoint module, layer kind,
layer count and input (their ``act_in`` terms equal: they read the same activation) and the same rows (token or
logit rows). Routed experts are not grouped here: their grouped kernel already runs a whole expert layer
(:mod:`llmath.hardware.fitted_ops`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from llmath.ops import Table
from llmath.ops.table import op_weights


def _key(table: Table, i: int) -> tuple | None:
    """What a weight GEMM must share with its neighbour to run in one kernel with it (``None``: never grouped)."""
    op = table.ops[i]
    routed = op_weights(table)[1]
    if not table.is_weight_mm[i] or routed[i]:
        return None
    inputs = tuple(sorted((t.mono, float(t.coef)) for t in op.terms("act_in")))
    return op.module, op.layer_kind, op.count, bool(table.weight_logit_rows[i]), inputs


@lru_cache(maxsize=512)
def gemm_runs(table: Table) -> tuple[np.ndarray, np.ndarray]:
    """(weight elements of the run each op belongs to, the op's share of that run's kernel launches), each
    (n_ops,), read-only: an op outside a run of two or more is its own run (its weights, share 1)."""
    elements = op_weights(table)[0]
    run_elements, share = elements.copy(), np.ones(len(table.ops))
    i = 0
    while i < len(table.ops):
        key, j = _key(table, i), i + 1
        while key is not None and j < len(table.ops) and _key(table, j) == key:
            j += 1
        if j - i > 1:
            run_elements[i:j] = elements[i:j].sum()
            share[i:j] = 1.0 / (j - i)
        i = j
    for a in (run_elements, share):
        a.setflags(write=False)
    return run_elements, share
