"""Manifold-constrained hyper-connections (mHC; DeepSeek-V4 report section 2.2, Xie et al. 2026): the residual
is ``n`` = :attr:`~llmath.model.spec.ModelSpec.mhc_streams` streams of width D (B·T·n·D) instead of one.

Around each attention and each FFN block (transformers 5.23 ``DeepseekV4HyperConnection``): the n streams
are flattened (n·D), RMS-normed without weight, projected by ``fn`` (n·D -> (2 + n)·n: pre, post and the
n × n comb logits, plus ``base`` and 3 ``scale`` parameters), turned into weights (sigmoids; the comb's
softmax and Sinkhorn normalisation), collapsed to the block's input Σ pre·stream, and after the block
re-expanded: post ⊙ output + combᵀ · streams (a matmul of n × n by n × D per token). Before the final norm
``DeepseekV4HyperHead`` collapses the streams once more (``hc_fn`` n·D -> n, ``hc_base`` n, ``hc_scale`` 1).
HY-V4's independent hyper-connections (iHC, modeling_hy_v4.py ``HYV4HyperConnection``, :attr:`ModelSpec.mhc_comb`
False) project to pre and post only (2·n logits, 2 scales) and add the streams unmixed: no comb.

Vector costs here: the weights 5 FLOPs per logit (as a router's), collapse and expand 2 per stream element.
The Sinkhorn iterations on the n × n comb (n² elements each) are left out: tens of FLOPs per token against
the projections' 2·n·D·(2 + n)·n.
"""

from __future__ import annotations

from llmath.ops.core import NORM_FLOPS, ROUTER_FLOPS, Builder, Site
from llmath.ops.split import Split


def _project(site: Site, n: int, D: int, out: int, pkey: str, extra: int) -> None:
    """Unweighted RMSNorm over the n·D flattened streams, then ``fn`` (n·D -> ``out`` logits) and the weights."""
    site.vector("norm", "BTND->BTND", NORM_FLOPS["rms_noparam"], n * D, "BT", "n·D")
    site.op(
        "fn", "matmul", "BTND,NDO->BTO", sizes=dict(site.sizes, O=out),
        params=[(f"{pkey}.fn", out * n * D), (f"{pkey}.base_scale", extra)],
        flops=[(2 * n * D * out, "BT", "2·n·D·O")], weight=[(out * n * D + extra, "1", "n·D·O")],
        act_in=[(n * D, "BT", "n·D")], act_out=[(out, "BT", "O")],
    )  # fmt: skip
    site.vector("weights", "BTO->BTO", ROUTER_FLOPS, out, "BT", "O", sizes=dict(site.sizes, O=out))
    site.op("collapse", "vector", "BTN,BTND->BTD", vflops=[(2 * n * D, "BT", "2·n·D")],
            act_in=[(n * D + n, "BT", "n·(D+1)")], act_out=[(D, "BT", "D")])  # fmt: skip


def mhc_in(b: Builder, which: str, count: int, lk: str) -> None:
    """The weights of one block's hyper-connection and the collapse of the streams to its input: mHC projects
    to (2 + n)·n logits (``base`` as many, 3 ``scale``), the independent HC to 2·n (pre, post; 2 ``scale``)."""
    s = b.spec
    n, D = s.mhc_streams, s.d_model
    out = (2 + n) * n if s.mhc_comb else 2 * n
    site = Site(b, count, lk, f"hyper.{which}", "hyper", dict(n=n, D=D), Split.REPLICATED)
    _project(site, n, D, out, "hyper.layers", out + (3 if s.mhc_comb else 2))


def mhc_out(b: Builder, which: str, count: int, lk: str) -> None:
    """After the block: mHC's combᵀ · streams (matmul, n × n by n × D per token; the independent HC adds the
    streams unmixed), then post ⊙ output added."""
    n, D = b.spec.mhc_streams, b.spec.d_model
    site = Site(b, count, lk, f"hyper.{which}", "hyper", dict(n=n, D=D), Split.REPLICATED)
    if b.spec.mhc_comb:
        site.op("comb", "matmul", "BTNM,BTMD->BTND", flops=[(2 * n * n * D, "BT", "2·n·n·D")],
                act_in=[(n * n + n * D, "BT", "n·(n+D)")], act_out=[(n * D, "BT", "n·D")])  # fmt: skip
    site.op("expand", "vector", "BTN,BTD,BTND->BTND", vflops=[(2 * n * D, "BT", "2·n·D")],
            act_in=[(n * D + D + n, "BT", "n·D+D+n")], act_out=[(n * D, "BT", "n·D")])  # fmt: skip


def mhc_embed(b: Builder) -> None:
    """The token embeddings copied into the n streams (B·T·n·D written)."""
    n, D = b.spec.mhc_streams, b.spec.d_model
    Site(b, 1, "", "hyper.embed", "hyper", dict(n=n, D=D), Split.REPLICATED).op(
        "streams", "memory", "BTD->BTND", act_in=[(D, "BT", "D")], act_out=[(n * D, "BT", "n·D")]
    )


def mhc_head(b: Builder) -> None:
    """The final collapse of the streams before the final norm (every position, before logits are sliced)."""
    n, D = b.spec.mhc_streams, b.spec.d_model
    if not n:
        return
    _project(Site(b, 1, "", "hyper.head", "hyper", dict(n=n, D=D), Split.REPLICATED), n, D, n, "hyper.head", n + 1)
