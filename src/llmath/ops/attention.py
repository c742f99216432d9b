"""Attention (MHA/GQA/MQA, sliding windows, cross-attention): eager and flash executions."""

from __future__ import annotations

from llmath.ops.core import NORM_FLOPS, ROTARY_FLOPS, SOFTCAP_FLOPS, SOFTMAX_FLOPS, Builder, wkey
from llmath.ops.mla import mla_block


def attention_block(b: Builder, w: int | None, count: int, lk: str, prefix: str = "attn", cross: bool = False):
    s = b.spec
    D, N, K, G, H = s.d_model, s.n_heads, s.n_kv_heads, s.group_size, s.head_dim
    wk = wkey(w)
    Kmono, Pmono, Emono = f"K:{wk}", f"P:{wk}", f"E:{wk}"
    pk = "attention.cross" if cross else "attention"
    comp = "attention"
    if s.mla is not None and not cross:
        mla_block(b, w, count, lk)
        return
    sizes = dict(D=D, N=N, K=K, G=G, H=H)
    b.linear(
        f"{prefix}.q_proj",
        comp,
        "BTD,DNH->BTNH",
        sizes,
        D,
        N * H,
        bias=s.q_bias,
        count=count,
        pkey=f"{pk}.q",
        layer_kind=lk,
        sym_out="N·H",
    )
    kv_out = "act_out" if cross else "kv_write"
    for which, bias in (("k", s.k_bias), ("v", s.v_bias)):
        b.linear(
            f"{prefix}.{which}_proj",
            comp,
            "BTD,DKH->BTKH",
            sizes,
            D,
            K * H,
            bias=bias,
            count=count,
            pkey=f"{pk}.{which}",
            layer_kind=lk,
            sym_out="K·H",
            out=kv_out,
        )
    if s.qk_norm != "none" and not cross:
        qw, kw = (H, H) if s.qk_norm == "head" else (N * H, K * H)
        per = 2 if (s.norm == "layer" and s.norm_bias) else 1
        b.add(
            f"{prefix}.qk_norm",
            "norm",
            "vector",
            "BTNH->BTNH",
            sizes,
            count,
            [("attention.qk_norm", per * (qw + kw))],
            lk,
            vflops=[(NORM_FLOPS[s.norm] * (N + K) * H, "BT", f"{NORM_FLOPS[s.norm]}·(N+K)·H")],
            weight=[(per * (qw + kw), "1", "q,k norm weights")],
            act_in=[((N + K) * H, "BT", "(N+K)·H")],
            act_out=[((N + K) * H, "BT", "(N+K)·H")],
        )
    if s.position == "rotary" and not cross:
        r = s.rotary_dim or H
        b.add(
            f"{prefix}.rotary",
            "attention",
            "vector",
            "BTNR->BTNR",
            dict(N=N, K=K, R=r),
            count,
            (),
            lk,
            vflops=[(ROTARY_FLOPS * (N + K) * r, "BT", "3·(N+K)·R")],
            act_in=[((N + K) * r, "BT", "(N+K)·R")],
            act_out=[((N + K) * r, "BT", "(N+K)·R")],
        )
    if s.attn_sinks:
        b.add(
            f"{prefix}.sinks",
            "attention",
            "vector",
            "N",
            dict(N=N),
            count,
            [("attention.sinks", N)],
            lk,
            weight=[(N, "1", "N")],
        )
    if s.relative_buckets and not cross:
        # T5: only the first layer of a stack owns the table; it is read once per pass.
        b.add(
            f"{prefix}.relative_bias",
            "attention",
            "memory",
            "UN",
            dict(U=s.relative_buckets, N=N),
            1,
            [("attention.relative_bias", s.relative_buckets * N)],
            "",
            weight=[(s.relative_buckets * N, "1", "buckets·N")],
        )
    softcap = SOFTCAP_FLOPS if s.attn_softcap else 0
    if b.attention == "eager":
        if not cross:
            # transformers' DynamicCache appends by concatenation: the cached K/V are read and written
            # again into a new buffer every step (the new tokens' write is the K/V projections').
            b.add(
                f"{prefix}.cache_append",
                comp,
                "memory",
                "BSKH,BTKH->B(S+T)KH",
                sizes,
                count,
                (),
                lk,
                kv_read=[(2 * K * H, Kmono, "2·K·H"), (-2 * K * H, "BT", "2·K·H")],
                kv_write=[(2 * K * H, Kmono, "2·K·H"), (-2 * K * H, "BT", "2·K·H")],
            )
        if G > 1:
            # repeat_kv materialises K and V for every query head before the matmuls
            b.add(
                f"{prefix}.repeat_kv",
                comp,
                "memory",
                "BSKH->BSKGH",
                sizes,
                count,
                (),
                lk,
                kv_read=[(2 * K * H, Kmono, "2·K·H")],
                act_out=[(2 * N * H, Kmono, "2·N·H")],
            )
            kv_in = {"act_in": [(N * H, "BT", "N·H"), (N * H, Kmono, "N·H")]}
            v_in = {"act_in": [(N, Emono, "N"), (N * H, Kmono, "N·H")]}
        else:
            kv_in = {"act_in": [(N * H, "BT", "N·H")], "kv_read": [(K * H, Kmono, "K·H")]}
            v_in = {"act_in": [(N, Emono, "N")], "kv_read": [(K * H, Kmono, "K·H")]}
        b.add(
            f"{prefix}.scores",
            comp,
            "matmul",
            "BTKGH,BSKH->BKGTS",
            sizes,
            count,
            (),
            lk,
            flops=[(2 * N * H, Emono, "2·N·H")],
            act_out=[(N, Emono, "N")],
            **kv_in,
        )
        b.add(
            f"{prefix}.softmax",
            comp,
            "vector",
            "BKGTS->BKGTS",
            sizes,
            count,
            (),
            lk,
            vflops=[((SOFTMAX_FLOPS + softcap) * N, Emono, f"{SOFTMAX_FLOPS + softcap}·N")],
            act_in=[(N, Emono, "N")],
            act_out=[(N, Emono, "N")],
        )
        b.add(
            f"{prefix}.context",
            comp,
            "matmul",
            "BKGTS,BSKH->BTKGH",
            sizes,
            count,
            (),
            lk,
            flops=[(2 * N * H, Emono, "2·N·H")],
            act_out=[(N * H, "BT", "N·H")],
            **v_in,
        )
    else:
        b.add(
            f"{prefix}.flash",
            comp,
            "matmul",
            "BTKGH,BSKH,BSKH->BTKGH",
            sizes,
            count,
            (),
            lk,
            flops=[(4 * N * H, Pmono, "4·N·H")],
            vflops=[((SOFTMAX_FLOPS + softcap) * N, Pmono, f"{SOFTMAX_FLOPS + softcap}·N")],
            act_in=[(N * H, "BT", "N·H")],
            kv_read=[(2 * K * H, Kmono, "2·K·H")],
            act_out=[(N * H, "BT", "N·H")],
        )
    b.linear(
        f"{prefix}.o_proj",
        comp,
        "BTNH,NHD->BTD",
        sizes,
        N * H,
        D,
        bias=s.o_bias,
        count=count,
        pkey=f"{pk}.o",
        layer_kind=lk,
        sym_in="N·H",
        sym_out="D",
    )
