"""Mixture-of-experts blocks: router, routed experts (expected experts hit), shared experts."""

from __future__ import annotations

from llmath.ops.core import ROUTER_FLOPS, Builder, Op
from llmath.ops.ffn import ffn_block


def moe_block(b: Builder, count: int, lk: str):
    s, m = b.spec, b.spec.moe
    D, E, k, F = s.d_model, m.n_experts, m.top_k, m.d_ff_expert
    b.linear(
        "moe.router",
        "moe",
        "BTD,DE->BTE",
        dict(D=D, E=E),
        D,
        E,
        bias=m.router_bias,
        count=count,
        pkey="moe.router",
        layer_kind=lk,
        sym_out="E",
    )
    # DeepSeek-V3's e_score_correction_bias is a buffer in transformers, not a parameter: not counted.
    b.add(
        "moe.topk",
        "moe",
        "vector",
        "BTE->BTk",
        dict(E=E),
        count,
        (),
        lk,
        vflops=[(ROUTER_FLOPS * E, "BT", "5·E")],
        act_in=[(E, "BT", "E")],
        act_out=[(2 * k, "BT", "2·k")],
    )
    # Weight operands of all E experts; bytes: the experts actually hit.
    before = len(b.ops)
    ffn_block(b, F, count, lk, "moe.experts", "moe.experts", "moe", bias=m.expert_bias, weight_read="U:moe", mult=k)
    for i in range(before, len(b.ops)):
        op = b.ops[i]
        params = tuple((key, n * E) for key, n in op.params)
        b.ops[i] = Op(
            op.name,
            op.component,
            op.kind,
            op.signature,
            op.sizes + (("E", E), ("k", k)),
            op.count,
            params,
            op.costs,
            op.layer_kind,
            op.window,
        )
    if m.d_ff_shared:
        ffn_block(b, m.d_ff_shared, count, lk, "moe.shared", "moe.shared", "moe", bias=False, letter="F")
        if m.shared_gate:
            b.linear(
                "moe.shared_gate",
                "moe",
                "BTD,D1->BT1",
                dict(D=D),
                D,
                1,
                bias=False,
                count=count,
                pkey="moe.shared_gate",
                layer_kind=lk,
                sym_out="1",
            )
