"""Gemma 4's per-layer embeddings (PLE; transformers ``modeling_gemma4.py``, Gemma4TextModel and
Gemma4TextDecoderLayer; the same design as Gemma 3n).

Once per pass, each token gets a vector of width P for each of the L layers: a lookup in a table of U rows ×
L·P (scaled by √P), plus the projection of the token's embedding D -> L·P (scaled by 1/√D) through one norm
of width P applied to each layer's slice, the two summed and scaled by 1/√2. In each layer, after the FFN's
residual: gate D -> P, the activation, times that layer's slice, projection P -> D, a norm of width D, a
residual add. No bias anywhere. The letters: U = ``per_layer_vocab``, P = ``per_layer_width``, L = layers.
"""

from __future__ import annotations

from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, Builder, Site
from llmath.ops.ffn import residual
from llmath.ops.split import Split


def per_layer_inputs(b: Builder) -> None:
    """The per-layer inputs of every layer, computed once per pass from the token ids and embeddings."""
    s = b.spec
    P, U, L, D = s.per_layer_width, s.per_layer_vocab, s.n_layers, s.d_model
    if not P:
        return
    LP = L * P
    site = Site(b, 1, "", "per_layer", "per_layer", dict(U=U, L=L, P=P, D=D), Split.REPLICATED)
    site.op(
        "tokens", "memory", "BT,ULP->BTLP", component="embedding", params=[("embedding.per_layer", U * LP)],
        weight=[(LP, "BT", "L·P")], act_out=[(LP, "BT", "L·P")],
    )  # fmt: skip
    site.vector("tokens_scale", "BTLP->BTLP", 1, LP, "BT", "L·P")
    site.linear("model_projection", "BTD,DLP->BTLP", D, LP, bias=False, pkey="per_layer.model_projection")
    site.vector("projection_scale", "BTLP->BTLP", 1, LP, "BT", "L·P")
    site.op(  # one RMSNorm of width P over each layer's slice: P weights, L·P elements normed
        "projection_norm", "vector", "BTLP->BTLP", component="norm", params=[("norm.per_layer", P)],
        vflops=[(NORM_FLOPS[s.norm] * LP, "BT", f"{NORM_FLOPS[s.norm]}·L·P")], weight=[(P, "1", "P")],
        act_in=[(LP, "BT", "L·P")], act_out=[(LP, "BT", "L·P")],
    )  # fmt: skip
    site.vector("combine", "BTLP,BTLP->BTLP", 2, LP, "BT", "L·P")


def per_layer_block(b: Builder, count: int, lk: str) -> None:
    """A layer's use of its per-layer input, after the FFN residual (``count`` layers of kind ``lk``)."""
    s = b.spec
    P, D = s.per_layer_width, s.d_model
    if not P:
        return
    site = Site(b, count, lk, "per_layer", "per_layer", dict(D=D, P=P), Split.REPLICATED)
    site.linear("input_gate", "BTD,DP->BTP", D, P, bias=False, pkey="per_layer.input_gate", sym_out="P")
    site.vector("act_mul", "BTP,BTP->BTP", ACT_FLOPS + 1, P, "BT", "P")
    site.linear("projection", "BTP,PD->BTD", P, D, bias=False, pkey="per_layer.projection", sym_in="P")
    site.norm("post_norm", D, pkey="norm.layers")
    A = s.altup_inputs
    if A:  # Gemma 3n: added to AltUp's copies 1..A−1 (ops/altup.py)
        site.vector("altup_add", "BTD->ABTD", 1, (A - 1) * D, "BT", "(A−1)·D", component="residual")
    else:
        residual(b, "residual.per_layer", count, lk)
