"""MiniMax-M3's block-sparse attention (:class:`~llmath.model.spec.BlockIndexSpec`; transformers
``modeling_minimax_m3_vl.py`` MiniMaxM3VLAttention, MiniMaxM3VLIndexer): the lightning indexer of a sparse
layer and the key budget its attention keeps. Letters: I indexer heads, X indexer width, k the blocks kept.

``eager`` is transformers': the indexer scores the whole T × visible-keys rectangle (a matmul of I·X per
entry), pools and picks blocks (vector work), and attention runs the full rectangle with the unselected
blocks masked (so selection changes no attention FLOP there). ``flash`` is the serving form (MiniMax's
block-sparse kernel): the indexer scores only the causal pairs, fused, and each query attends at most
k·block keys, min(visible, k·block), read per KV head from the blocks it selected.
"""

from __future__ import annotations

from llmath.ops.core import NORM_FLOPS, ROTARY_FLOPS, Site, Window


def kept_keys(site: Site) -> int | None:
    """Keys a sparse layer's query attends at most under ``flash`` (k·block); None: a dense layer or eager."""
    bi = site.spec.block_index
    if bi is None or not site.b.own_indexer or site.b.attention != "flash":
        return None
    return bi.topk_blocks * bi.block


def block_indexer(site: Site, win: Window, D: int) -> None:
    """The indexer of a block-sparse layer (nothing on dense layers): projections, norms, rotary, scores."""
    bi = site.spec.block_index
    if bi is None or not site.b.own_indexer:
        return
    I, X, k = bi.heads, bi.head_dim, bi.topk_blocks
    sizes = dict(site.sizes, I=I, X=X, k=k)
    site.linear("indexer.q_proj", "BTD,DIX->BTIX", D, I * X, bias=False, pkey="attention.indexer.q", sizes=sizes,
                sym_out="I·X")  # fmt: skip
    site.linear("indexer.k_proj", "BTD,DX->BTX", D, X, bias=False, pkey="attention.indexer.k", sizes=sizes,
                sym_out="X", out="kv_write")  # fmt: skip
    norm = dict(component="norm", params=[("attention.indexer.qk_norm", 2 * X)], weight=[(2 * X, "1", "2·X")])
    site.vector("indexer.qk_norm", "BTIX->BTIX", NORM_FLOPS["rms"], (I + 1) * X, "BT", "(I+1)·X", sizes=sizes, **norm)
    site.vector("indexer.rotary", "BTIX->BTIX", ROTARY_FLOPS, (I + 1) * X, "BT", "(I+1)·X", sizes=sizes)
    if site.b.attention == "eager":
        e = win.E
        site.op("indexer.scores", "matmul", "BTIX,BSX->BITS", sizes=sizes, flops=[(2 * I * X, e, "2·I·X")],
                act_in=[(I * X, "BT", "I·X")], kv_read=[(X, win.K, "X")], act_out=[(I, e, "I")])  # fmt: skip
        site.op("indexer.block_topk", "vector", "BITS->BITk", sizes=sizes, vflops=[(2 * I, e, "2·I")],
                act_in=[(I, e, "I")], act_out=[(I * k, "BT", "I·k")])  # fmt: skip
        return
    site.op("indexer.flash", "matmul", "BTIX,BSX->BTIk", sizes=sizes, flops=[(2 * I * X, win.P, "2·I·X")],
            vflops=[(2 * I, win.P, "2·I")], act_in=[(I * X, "BT", "I·X")], kv_read=[(X, win.K, "X")],
            act_out=[(I * k, "BT", "I·k")])  # fmt: skip
