"""Tensor-parallel rules of DeepSeek-V4's compressed attention, of hyper-connections and of Qwen4-Exp's n-gram
layers and QSA indexer: the sources of the split traits their operators declare (ops/compressed.py,
ops/hyper.py, ops/mhc.py, ops/ngram.py, ops/qsa.py), and the divisibility checks of a layout. As vLLM shards
DeepSeek-V4 (vllm-project/vllm):

* ``vllm/model_executor/models/deepseek_v4.py`` (``DeepseekV4Attention``, ``DeepseekV4DecoderLayer``):
  ``fused_wqa_wkv`` (q_a and the one latent KV projection) a replicated ``MergedColumnParallelLinear``
  (``disable_tp=True``), so the latent cache is whole on every rank; ``wq_b`` ``ColumnParallelLinear`` (N/T
  heads; their weightless per-head norm per rank); ``attn_sink`` N/T heads; ``wo_a`` ``ColumnParallelLinear``
  over the o_groups (G/T groups, each reading its heads' outputs); ``wo_b`` ``RowParallelLinear``
  (all-reduced). The hyper-connection weights (``hc_attn_fn``, ``hc_ffn_fn``, bases, scales) are plain
  ``nn.Parameter`` and the mHC pre/post ops run on the whole residual streams: replicated, no collective.
* ``vllm/model_executor/layers/deepseek_compressor.py`` (``DeepseekCompressor``: ``fused_wkv_wgate`` with
  ``disable_tp=True``, its position bias, norm and state cache whole on every rank) and
  ``vllm/model_executor/layers/deepseek_v4_attention.py`` (``DeepseekV4Indexer``: ``wq_b`` and
  ``weights_proj`` ``ReplicatedLinear``, "no tensor parallel, just replicated", with its own compressor):
  replicated.

HY-V4 (MLA, the DSA indexer and hyper-connections) has no vLLM model file: its attention shards by the MLA
and indexer rules of :mod:`llmath.deploy.shard`, its hyper-connections replicated as vLLM's DeepSeek-V4 runs
them (llmath's choice). Qwen4-Exp has no vLLM model file either (llmath's choice, the same conservative rule
as DeepSeek-V4's mHC and the DSA indexer): its hyper-connections (down/up projections of the streams), its QSA
indexer (``attn.indexer.*``) and its n-gram layers' projections, norms, gate and conv are whole on every rank
with no collective; its n-gram tables (80 billion parameters in the default config) split as transformers'
plan splits them (``ngram_embedding``: ``embedding_colwise``, ``EmbeddingParallel(shard_dim=1)`` in
transformers/distributed/tensor_parallel.py: each rank holds W/T of every row's W columns, looks up its slice
and the E-wide lookups are all-gathered), the token-id state whole; its Gated DeltaNet layers and attention
shard as vLLM's Qwen3-Next (:mod:`llmath.deploy.shard_mixers`, :mod:`llmath.deploy.shard`). Needs T | N heads,
T | o_groups (DeepSeek-V4) and T | W (Qwen4-Exp; transformers allows an uneven split, llmath keeps counts
exact). Pipeline parallelism is refused for
hyper-connection models: the hidden state crossing stages is several residual streams, not modelled.
"""

from __future__ import annotations

from llmath.model.spec import ModelSpec


def hyper_tp_problem(spec: ModelSpec, tp: int) -> str | None:
    """Why vLLM would refuse ``tp``-way TP of DeepSeek-V4's attention, or None."""
    c, g = spec.compressed, spec.ngram
    if c is not None and c.o_groups % tp:
        return f"tp={tp} must divide the {c.o_groups} output groups (vLLM DeepseekV4Attention wo_a)"
    if g is not None and (g.embed_dim // g.heads) % tp:
        w = g.embed_dim // g.heads
        return f"tp={tp} must divide the n-gram tables' row width {w} (llmath keeps the split exact)"
    return None


__all__ = ["hyper_tp_problem"]
