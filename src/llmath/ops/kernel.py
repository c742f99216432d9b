"""Which fused kernel an operator runs: an execution trait each operator declares where it is built.

The layers above ``ops/`` time an operator with a kernel model fitted to measurements of that kernel
(:mod:`llmath.hardware.fitted_ops`) only where the operator says it runs that kernel; they never match
operator names. With no trait (the default) an operator keeps the generic roofline fractions.

* ``DENSE_ATTENTION``: fused attention over the dense (causal, windowed or full) pairs of a layer's own
  self-attention (FlashAttention / FlashInfer): what the attention kernel fit measured. A block-sparse
  selection that keeps the whole model's pairs sparse (Qwen4-Exp's QSA), cross-attention and MLA's
  absorbed attention do not declare it.
* ``FUSED_QKV`` / ``FUSED_GATE_UP``: weight GEMMs of one layer that read the same input and that serving
  engines run as one GEMM over their concatenated weights: the query, key and value projections (vLLM
  ``QKVParallelLinear``, SGLang's and TensorRT-LLM's fused ``qkv_proj``) and a gated FFN's gate and up
  projections (vLLM ``MergedColumnParallelLinear`` ``gate_up_proj``, TensorRT-LLM ``GatedMLP``'s fused
  ``gate_up_proj``). They are declared in the serving (``flash``) execution only: transformers' eager modules
  run them as separate GEMMs. The operators stay separate (their FLOPs, bytes and parameters are their own);
  the roofline times each at the fused GEMM's shape and charges the group one kernel launch
  (:func:`llmath.ops.table.compile_table`'s ``launches`` and ``gemm_weights``).
"""

from __future__ import annotations


class Kernel:
    """The kernel traits (plain strings, so an :class:`~llmath.ops.core.Op` stays hashable data)."""

    NONE = ""
    DENSE_ATTENTION = "dense_attention"
    FUSED_QKV = "fused_qkv"
    FUSED_GATE_UP = "fused_gate_up"
    FUSED_GEMMS = frozenset({FUSED_QKV, FUSED_GATE_UP})


__all__ = ["Kernel"]
