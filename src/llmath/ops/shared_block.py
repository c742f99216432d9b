"""Zamba / Zamba2's shared transformer block (:class:`~llmath.model.spec.SharedBlockSpec`): run by every
hybrid layer before its Mamba mixer, with one set of weights per ``n_blocks`` used in turn.

Operators, per hybrid layer (transformers' ``ZambaAttentionDecoderLayer`` / ``Zamba2AttentionDecoderLayer``
and ``*HybridLayer``, 5.23): the hidden state concatenated with the token embeddings (width W = 2·D), a norm
over W, attention whose q/k/v read W (Zamba2: plus each layer's LoRA adapters W -> r -> W), o_proj to D,
a norm, the gated MLP (Zamba2: plus a LoRA adapter D -> r -> 2·F on gate/up), the layer's own D × D
``linear``, then added to the hidden state that enters the Mamba layer's norm. There is no residual around
the block: its output is the added term. Eager and flash differ only in the attention core
(:mod:`llmath.ops.attention`).

Parameters: the block's own weights are counted once per weight set (min(n_blocks, hybrid layers), as
transformers ties them), the adapters and ``linear`` once per hybrid layer; FLOPs and weight reads count
every use.
"""

from __future__ import annotations

from dataclasses import replace

from llmath.model.spec import SharedBlockSpec
from llmath.ops.attention import Attn, execution, kv_proj, o_proj, q_proj, rotary
from llmath.ops.core import Builder, Op, Site, Window
from llmath.ops.ffn import ffn_block
from llmath.ops.split import Split


def _sb(b: Builder) -> SharedBlockSpec:
    sb = b.spec.shared_block
    if sb is None:  # pragma: no cover - the assembly sends shared layers only for specs with a shared block
        raise AssertionError(b.spec.name)
    return sb


def _adapter(site: Site, name: str, din: int, dout: int, sin: str, sout: str) -> None:
    """A LoRA adapter din -> r -> dout beside a projection (its output added to the projection's); its
    weights are the hybrid layer's own (``<component>.adapters.<name>``)."""
    r, pk = _sb(site.b).adapter_rank, f"{site.component}.adapters.{name}"
    site.linear(f"{name}_adapter.down", f"BT{sin},{sin}r->BTr", din, r, bias=False, pkey=f"{pk}.down",
                sym_in=sin, sym_out="r", sizes=dict(r=r, **{sin: din}), split=Split.COLUMN)  # fmt: skip
    site.linear(f"{name}_adapter.up", f"BTr,r{sout}->BT{sout}", r, dout, bias=False, pkey=f"{pk}.up",
                sym_in="r", sym_out=sout, sizes=dict(r=r, **{sout: dout}), split=Split.COLUMN)  # fmt: skip


def _attention(b: Builder, count: int, lk: str) -> None:
    s, sb = b.spec, _sb(b)
    W, N, K, H = sb.d_in, s.n_heads, s.n_kv_heads, s.head_dim
    site = Site(b, count, lk, "shared.attn", "attention", dict(W=W, D=s.d_model, N=N, K=K, G=s.group_size, H=H))
    site.op(
        "concat",
        "memory",
        "BTD,BTD->BTW",
        act_in=[(2 * s.d_model, "BT", "2·D")],
        act_out=[(W, "BT", "W")],
        split=Split.REPLICATED,
    )
    b.norm("shared.norm.attn_in", W, count=count, pkey="norm.shared", layer_kind=lk, sym="W")
    a = Attn(site, Window.of(None), False, "attention.shared", W, N, K, s.group_size, H)
    q_proj(a)
    kv_proj(a)
    if sb.attention_adapters:
        for which in ("q", "k", "v"):
            _adapter(site, which, W, W, "W", "W")
    rotary(a)
    execution(a)
    o_proj(replace(a, D=s.d_model))


def _mlp(b: Builder, count: int, lk: str) -> None:
    s, sb = b.spec, _sb(b)
    b.norm("shared.norm.ffn_in", s.d_model, count=count, pkey="norm.shared", layer_kind=lk)
    ffn_block(b, s.d_ff, count, lk, "shared.ffn", "ffn.shared", "ffn")
    if sb.adapter_rank:
        site = Site(b, count, lk, "shared.ffn", "ffn", dict(D=s.d_model, F=s.d_ff))
        _adapter(site, "gate_up", s.d_model, 2 * s.d_ff, "D", "2F")


def _own_weights(b: Builder, before: int, sets: int) -> None:
    """Move the block's own weights (not the adapters) onto one holder op per component, counted once per
    weight set: the uses keep their FLOPs and weight reads."""
    held: dict[str, list[tuple[str, int]]] = {}
    for i in range(before, len(b.ops)):
        op = b.ops[i]
        own = [(k, n) for k, n in op.params if ".adapters." not in k]
        if own:
            held.setdefault(op.component, []).extend(own)
            b.ops[i] = replace(op, params=tuple(p for p in op.params if p not in own))
    for component, params in held.items():
        b.ops.append(
            Op(f"shared.{component}.weights", component, "memory", "", (), sets, tuple(params), split=Split.HELD)
        )


def shared_block(b: Builder, count: int, lk: str) -> None:
    """The shared block of ``count`` hybrid layers, then each layer's ``linear`` and the add into the
    Mamba layer's input."""
    D = b.spec.d_model
    before = len(b.ops)
    _attention(b, count, lk)
    _mlp(b, count, lk)
    _own_weights(b, before, min(_sb(b).n_blocks, count))
    site = Site(b, count, lk, "shared", "ffn", dict(D=D))
    site.linear("linear", "BTD,DE->BTE", D, D, bias=False, pkey="shared.linear", sym_out="D", split=Split.REPLICATED)
    site.op("add", "vector", "BTD,BTD->BTD", vflops=[(D, "BT", "D")], act_in=[(2 * D, "BT", "2·D")],
            act_out=[(D, "BT", "D")], split=Split.REPLICATED)  # fmt: skip
