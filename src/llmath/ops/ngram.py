"""Qwen4-Exp's hashed n-gram per-layer embeddings (PLE; transformers 5.23 ``modeling_qwen4_exp.py``,
``Qwen4ExpTextNGramEmbedding`` and ``Qwen4ExpTextPLELayer``), on the layers ``layer_mixers`` marks
``ple+<mixer kind>``, before the layer's first hyper-connection.

Per token and PLE layer: the ids of the n-grams ending at the token (n = 2..N, hashed with per-layer
multipliers, XOR and the remainder by each head's prime, plus the head's table offset), one row of width
E/H per hash head (H = (N − 1)·heads per n-gram) looked up and concatenated to E; a key projection
E -> S·D, RMSNorm per stream, and a value projection E -> D; the RMS-normed streams (queries) dotted with
the keys per stream give a gate (signed square root, sigmoid) that scales the value into each stream;
that S·D-wide value, RMS-normed, goes through a depthwise causal conv of width k dilated by N (no bias),
silu, and is added to the value, then to the residual streams. No bias anywhere.

Each PLE layer has its own table: Σ of its H primes, padded to a multiple of the divisor, × E/H
(:meth:`llmath.model.spec_hyper.NGramSpec.table_rows`); the tables are one parameter entry,
``embedding.ngram``, beside the token table (as checkpoints store them, inside the layers; a token reads
E elements of each). Per sequence the layer keeps the conv's last (k − 1)·N positions of its S·D
channels and the last N − 1 token ids (transformers: int64; counted here as state elements like the
cache's other tensors). The hashing is integer arithmetic: no FLOPs are counted for it.
"""

from __future__ import annotations

from llmath.ops.core import ACT_FLOPS, Builder, Site
from llmath.ops.split import Split


def ngram_tables(b: Builder) -> None:
    """The n-gram tables of all PLE layers (parameters only; each layer's lookup reads its rows)."""
    s, g = b.spec, b.spec.ngram
    n_ple = sum(k.startswith("ple+") for k in s.layer_mixers)
    if g is None or not n_ple:
        return
    width = g.embed_dim // g.heads
    rows = sum(g.table_rows(i) for i in range(n_ple))
    b.add(
        "ple.ngram_tables",
        "embedding",
        "memory",
        "RW",
        dict(R=rows, W=width),
        1,
        [("embedding.ngram", rows * width)],
        split=Split.EMBEDDING_COLUMNS,
    )


def ple_block(b: Builder, count: int, lk: str) -> None:
    """One PLE layer's operators (``count`` layers of kind ``lk``)."""
    s, g, h = b.spec, b.spec.ngram, b.spec.hyper
    if g is None or h is None:  # pragma: no cover - spec validation requires both for 'ple+' layers
        raise AssertionError(s.name)
    E, S, D, N, k = g.embed_dim, h.streams, s.d_model, g.ngram_size, g.conv_kernel
    SD, decode = S * D, b.stage == "decode"
    site = Site(b, count, lk, "ple", "ple", dict(E=E, S=S, D=D), Split.REPLICATED)
    ids = [(N - 1, "B", "N−1")]
    site.op(
        "lookup", "memory", "BT,RW->BTE", component="embedding", weight=[(E, "BT", "E")], act_out=[(E, "BT", "E")],
        kv_write=ids, kv_read=ids if decode else [], split=Split.EMBEDDING_COLUMNS
    )  # fmt: skip
    site.linear("key_proj", "BTE,ESD->BTSD", E, SD, bias=False, pkey="ple.key", sym_in="E", sym_out="S·D")
    site.linear("value_proj", "BTE,ED->BTD", E, D, bias=False, pkey="ple.value", sym_in="E", sym_out="D")
    for name in ("norm_key", "norm_query"):
        site.norm(name, SD, pkey="norm.ple", sym="S·D")
    site.vector("gate", "BTSD,BTSD,BTD->BTSD", 3, SD, "BT", "S·D")  # k·q per stream, σ(gate)·value
    site.norm("norm_conv", SD, pkey="norm.ple", sym="S·D")
    state = g.conv_state * SD
    site.op(
        "conv", "matmul", "BTJ,Jk->BTJ", sizes=dict(J=SD, k=k), params=[("ple.conv.weight", SD * k)],
        flops=[(2 * SD * k, "BT", "2·S·D·k")], vflops=[(ACT_FLOPS * SD, "BT", f"{ACT_FLOPS}·S·D")],
        weight=[(SD * k, "1", "S·D·k")], act_in=[(SD, "BT", "S·D")], act_out=[(SD, "BT", "S·D")],
        kv_write=[(state, "B", "(k−1)·N·S·D")], kv_read=[(state, "B", "(k−1)·N·S·D")] if decode else [],
    )  # fmt: skip
    site.vector("add", "BTSD,BTSD->BTSD", 2, SD, "BT", "S·D", component="residual")  # value + conv, + streams


__all__ = ["ngram_tables", "ple_block"]
