"""Qwen4-Exp's QSA indexer and block-sparse attention (transformers 5.23 ``modeling_qwen4_exp.py``,
``Qwen4ExpTextQSAIndexer`` and ``Qwen4ExpTextAttention``).

Per attention layer: one projection D -> (I + 1)·X gives I query heads and one key of width X (transformers
fuses them in ``index_qk_proj``; here ``indexer.q_proj`` and ``indexer.k_proj``, whose key is cached per
position); the queries get an RMSNorm of width X and the rotary. A query seeing v keys splits them into
⌊v/c⌋ complete blocks of c (``compress``) and a tail; each block's keys are averaged, normed (a second
RMSNorm of width X) and rotated at the block's first position, scored against the query (ReLU(q·k) summed
over the I heads) and the best budget/c blocks kept; the query attends the kept blocks and the tail.

Letters: I indexer heads, X indexer width, c block, R rotary width. Monomials: ``Z:c`` = B·Σ over the
new queries of their complete blocks (:func:`llmath.ops.pair_counts.qsa_blocks`), ``Y:budget/c`` = B·Σ of the
positions each query attends (:func:`llmath.ops.pair_counts.qsa_pairs`).

Executions: transformers runs the indexer as a loop over batch rows and queries, pooling, norming and
rotating every block again for each query, and scoring with one q·kᵀ matmul per query (2·I·X per block,
the matmul FlopCounterMode counts); its attention is then the full causal rectangle with the unselected
keys masked (``masked_fill`` over the T × S scores). ``flash`` (no serving engine has a QSA kernel we could
cite; this is the fused form of the same algorithm): each complete block pooled once per pass (``N:c`` =
B·⌊(S0+T)/c⌋ blocks), the same scores, and attention over the selected positions only (pairs ``Y``; a
decode step reads those keys, a prefill every key once). Both cache the raw indexer keys, X per position,
as transformers does.
"""

from __future__ import annotations

from llmath.ops.core import NORM_FLOPS, ROTARY_FLOPS, ROUTER_FLOPS, Site, Window
from llmath.ops.split import Split


def indexer(site: Site, K: str, E: str) -> None:
    """The indexer operators of one attention block; ``K`` / ``E``: the layer's visible-key and score
    monomials."""
    s, b = site.spec, site.b
    q = s.qsa
    if q is None:
        return
    I, X, c, D = q.heads, q.head_dim, q.compress, s.d_model
    R = min(s.rotary_dim or s.head_dim, X)
    sizes = dict(site.sizes, I=I, X=X, c=c)
    z = f"Z:{c}"
    site.linear("indexer.q_proj", "BTD,DIX->BTIX", D, I * X, bias=False, pkey="attention.indexer.q", sizes=sizes,
                sym_out="I·X", split=Split.REPLICATED)  # fmt: skip
    site.linear("indexer.k_proj", "BTD,DX->BTX", D, X, bias=False, pkey="attention.indexer.k", sizes=sizes,
                sym_out="X", out="kv_write", split=Split.REPLICATED)  # fmt: skip
    rms = NORM_FLOPS["rms"]
    site.op(
        "indexer.q_norm_rotary", "vector", "BTIX->BTIX", sizes=sizes, component="norm",
        params=[("norm.indexer.q", X)], vflops=[(rms * I * X + ROTARY_FLOPS * I * R, "BT", f"{rms}·I·X + 3·I·R")],
        weight=[(X, "1", "X")], act_in=[(I * X, "BT", "I·X")], act_out=[(I * X, "BT", "I·X")], split=Split.REPLICATED
    )  # fmt: skip
    if b.attention == "eager":
        moved = [(X, K, "X"), (-X, "BT", "X")]  # DynamicCache appends the indexer keys by concatenation
        site.op(
            "indexer.cache_append",
            "memory",
            "BSX,BTX->B(S+T)X",
            sizes=sizes,
            kv_read=moved,
            kv_write=moved,
            split=Split.REPLICATED,
        )
    per = (c + rms) * X + ROTARY_FLOPS * R
    # eager: per query and complete block, gather c keys, mean, RMSNorm, rotary at the block start; flash:
    # each complete block once per pass
    pooled = z if b.attention == "eager" else f"N:{c}"
    site.op(
        "indexer.pool", "vector", "BScX->BZX", sizes=sizes, component="norm", params=[("norm.indexer.k", X)],
        vflops=[(per, pooled, f"({c}+{rms})·X + 3·R")], weight=[(X, "1", "X")],
        kv_read=[(c * X, pooled, "c·X")], act_out=[(X, pooled, "X")], split=Split.REPLICATED
    )  # fmt: skip
    site.op(
        "indexer.scores", "matmul", "BTIX,BTZX->BTZ", sizes=sizes, flops=[(2 * I * X, z, "2·I·X")],
        vflops=[(2 * I + ROUTER_FLOPS, z, "2·I + 5")], act_in=[(I * X, "BT", "I·X"), (X, z, "X")],
        act_out=[(1, z, "1")], split=Split.REPLICATED
    )  # fmt: skip
    if b.attention == "eager":  # the selection mask laid over the causal mask, one element per score
        site.op("indexer.mask", "vector", "BTS->BTS", sizes=sizes, vflops=[(1, E, "1")], act_in=[(1, E, "1")],
                act_out=[(1, E, "1")], split=Split.REPLICATED)  # fmt: skip


def sparse_window(site: Site, win: Window) -> Window:
    """The monomials of QSA's flash attention: the selected pairs; a decode step reads the selected keys,
    a prefill every key once."""
    q = site.spec.qsa
    if q is None:  # pragma: no cover - attention only asks for QSA specs
        raise AssertionError(site.spec.name)
    y = f"Y:{q.budget}/{q.compress}"
    return Window(y if site.b.stage == "decode" else win.K, y, win.E)
