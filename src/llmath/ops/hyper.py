"""Decoder layers with hyper-connection residual streams (Qwen4-Exp; transformers 5.23
``modeling_qwen4_exp.py``: ``Qwen4ExpTextGatedResidual``, ``Qwen4ExpTextDecoderLayer``, ``Qwen4ExpTextModel``).

The token embedding is repeated into S streams (S·D wide). Each layer: its n-gram embeddings (``ple+``
layers, :mod:`llmath.ops.ngram`), then for the mixer (attention or linear attention) and for the MoE in
turn a gated residual (:class:`llmath.model.spec_hyper.HyperSpec`) whose D-wide output feeds the
sub-layer, the sub-layer, and its output times the S injection weights added to each stream. No other norm
is in the layer. After the last layer the gated residual without injection gives the D-wide state; there is
no final norm. Letters: S streams, r the low-rank width.
"""

from __future__ import annotations

from collections.abc import Callable

from llmath.model.spec import HyperSpec
from llmath.ops.attention import attention_block
from llmath.ops.core import ACT_FLOPS, Builder, Site
from llmath.ops.ffn import ffn_block
from llmath.ops.mixers import mixer_block
from llmath.ops.moe import moe_block
from llmath.ops.ngram import ngram_tables, ple_block
from llmath.ops.split import Split

LayerKind = Callable[..., str]  # ops.assemble.layer_kind


def _hyper(b: Builder) -> HyperSpec:
    h = b.spec.hyper
    if h is None:  # pragma: no cover - hyper_layers only runs for specs with hyper-connections
        raise AssertionError(b.spec.name)
    return h


def gated_residual(b: Builder, count: int, lk: str, prefix: str, inject: bool = True) -> None:
    """Norm per stream (weight S·D), S·D -> r (/S, silu) -> S·D (sigmoid) weights times the normed streams,
    mean over the streams -> D; with ``inject``, S·D -> S (/S, 2·sigmoid) injection weights."""
    h, D = _hyper(b), b.spec.d_model
    S, r, SD = h.streams, h.rank, h.streams * D
    site = Site(b, count, lk, prefix, "hyper", dict(S=S, D=D, r=r), Split.REPLICATED)
    site.norm("norm", SD, pkey="norm.hyper", sym="S·D")
    site.linear("down", "BTJ,Jr->BTr", SD, r, bias=False, pkey="hyper.down", sym_in="S·D", sym_out="r")
    site.vector("down_act", "BTr->BTr", ACT_FLOPS + 1, r, "BT", "r")
    site.linear("up", "BTr,rJ->BTJ", r, SD, bias=False, pkey="hyper.up", sym_in="r", sym_out="S·D")
    site.vector("mix", "BTSD,BTSD->BTD", ACT_FLOPS + 2, SD, "BT", "S·D")  # sigmoid, times the streams, mean
    if inject:
        site.linear("inject", "BTJ,JS->BTS", SD, S, bias=False, pkey="hyper.inject", sym_in="S·D", sym_out="S")
        site.vector("inject_act", "BTS->BTS", ACT_FLOPS + 2, S, "BT", "S")


def combine(b: Builder, count: int, lk: str, name: str) -> None:
    """The sub-layer's D-wide output times each stream's injection weight, added to the streams."""
    S, D = _hyper(b).streams, b.spec.d_model
    Site(b, count, lk, "", "residual", dict(S=S, D=D)).op(
        name, "vector", "BTD,BTS,BTSD->BTSD", vflops=[(2 * S * D, "BT", "2·S·D")],
        act_in=[(D + S + S * D, "BT", "D + S + S·D")], act_out=[(S * D, "BT", "S·D")],
    )  # fmt: skip


def _groups(b: Builder) -> dict[tuple[str, bool, int | None], int]:
    s, out = b.spec, dict[tuple[str, bool, int | None], int]()
    for kind, moe, w in zip(s.layer_mixers, s.layer_moe, s.layer_windows, strict=True):
        out[(kind, moe, w)] = out.get((kind, moe, w), 0) + 1
    return out


def hyper_layers(b: Builder, layer_kind: LayerKind) -> None:
    """Every decoder layer and the final stream mixer of a spec with hyper-connections."""
    s, S = b.spec, _hyper(b).streams
    ngram_tables(b)
    Site(b, 1, "", "hyper", "hyper", dict(S=S, D=s.d_model), Split.REPLICATED).op(
        "expand", "memory", "BTD->BTSD", act_in=[(s.d_model, "BT", "D")], act_out=[(S * s.d_model, "BT", "S·D")]
    )
    for (kind, moe, w), count in _groups(b).items():
        attn = kind.startswith("attention")
        ffn = "moe" if moe else "dense"
        lk = layer_kind(s, w, moe, True, kind) if attn else f"{kind}/{ffn}"
        b.window = w
        if kind.startswith("ple+"):
            ple_block(b, count, lk)
        gated_residual(b, count, lk, "hyper.attn")
        if attn:
            attention_block(b, w, count, lk)
        else:
            mixer_block(b, count, lk)
        combine(b, count, lk, "residual.attn")
        gated_residual(b, count, lk, "hyper.ffn")
        if moe:
            moe_block(b, count, lk)
        else:
            ffn_block(b, s.d_ff, count, lk, "ffn", "ffn", "ffn")
        combine(b, count, lk, "residual.ffn")
    b.window = None
    gated_residual(b, 1, "", "hyper.final", inject=False)
