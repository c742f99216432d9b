"""Which fused kernel an operator runs: an execution trait each operator declares where it is built.

The layers above ``ops/`` time an operator with a kernel model fitted to measurements of that kernel
(:mod:`llmath.hardware.fitted_ops`) only where the operator says it runs that kernel; they never match
operator names. With no trait (the default) an operator keeps the generic roofline fractions.

* ``DENSE_ATTENTION``: fused attention over the dense (causal, windowed or full) pairs of a layer's own
  self-attention (FlashAttention / FlashInfer): what the attention kernel fit measured. A block-sparse
  selection that keeps the whole model's pairs sparse (Qwen4-Exp's QSA), cross-attention and MLA's
  absorbed attention do not declare it.
* ``MLA_CONTEXT``: multi-head latent attention's prefill kernel over the decompressed heads (causal pairs,
  queries and keys of qk_nope + qk_rope, values of v_head_dim per head; TensorRT-LLM's context MLA,
  FlashInfer/FlashAttention MLA prefill): what the MLA context fit measured.
* ``MLA_DECODE``: multi-head latent attention's absorbed kernel over the latent cache (each query head scores the
  latent + rope values of every cached position and sums the latent values; FlashMLA, TensorRT-LLM's MLA
  generation kernel): what an engine's MLA decode fit measured.
"""

from __future__ import annotations


class Kernel:
    """The kernel traits (plain strings, so an :class:`~llmath.ops.core.Op` stays hashable data)."""

    NONE = ""
    DENSE_ATTENTION = "dense_attention"
    MLA_CONTEXT = "mla_context"
    MLA_DECODE = "mla_decode"


__all__ = ["Kernel"]
