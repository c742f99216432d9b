"""DeepSeek multi-head latent attention: eager (re-expanded cache) and flash (absorbed decode)."""

from __future__ import annotations

from llmath.ops.core import ROTARY_FLOPS, SOFTMAX_FLOPS, Builder, wkey


def mla_block(b: Builder, w: int | None, count: int, lk: str):
    s, m = b.spec, b.spec.mla
    D, N = s.d_model, s.n_heads
    C, R, Hn, Hv = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    Hq = Hn + R
    wk = wkey(w)
    Kmono, Pmono, Emono = f"K:{wk}", f"P:{wk}", f"E:{wk}"
    sizes = dict(D=D, N=N, C=C, R=R, H=Hn, J=Hv)
    comp = "attention"
    if m.q_lora_rank is None:
        b.linear(
            "attn.q_proj",
            comp,
            "BTD,DNQ->BTNQ",
            dict(sizes, Q=Hq),
            D,
            N * Hq,
            bias=False,
            count=count,
            pkey="attention.q",
            layer_kind=lk,
            sym_out="N·(H+R)",
        )
    else:
        Ql = m.q_lora_rank
        b.linear(
            "attn.q_a_proj",
            comp,
            "BTD,DL->BTL",
            dict(sizes, L=Ql),
            D,
            Ql,
            bias=s.q_bias,
            count=count,
            pkey="attention.mla.q_a",
            layer_kind=lk,
            sym_out="L",
        )
        b.norm("attn.q_a_norm", Ql, count=count, pkey="attention.mla.q_a_norm", layer_kind=lk, sym="L")
        b.linear(
            "attn.q_b_proj",
            comp,
            "BTL,LNQ->BTNQ",
            dict(sizes, L=Ql),
            Ql,
            N * Hq,
            bias=False,
            count=count,
            pkey="attention.mla.q_b",
            layer_kind=lk,
            sym_in="L",
            sym_out="N·(H+R)",
        )
    b.linear(
        "attn.kv_a_proj",
        comp,
        "BTD,DC->BTC",
        sizes,
        D,
        C + R,
        bias=s.k_bias,
        count=count,
        pkey="attention.mla.kv_a",
        layer_kind=lk,
        sym_out="(C+R)",
        out="kv_write",
    )
    b.norm("attn.kv_a_norm", C, count=count, pkey="attention.mla.kv_a_norm", layer_kind=lk, sym="C")
    b.add(
        "attn.rotary",
        comp,
        "vector",
        "BTNR->BTNR",
        sizes,
        count,
        (),
        lk,
        vflops=[(ROTARY_FLOPS * (N + 1) * R, "BT", "3·(N+1)·R")],
        act_in=[((N + 1) * R, "BT", "(N+1)·R")],
        act_out=[((N + 1) * R, "BT", "(N+1)·R")],
    )
    absorbed = b.attention == "flash" and b.stage == "decode"
    kvb = C * N * (Hn + Hv)
    if absorbed:
        # W_UK folded into the query, W_UV applied after attention: the cache stays latent.
        b.add(
            "attn.q_absorb",
            comp,
            "matmul",
            "BTNH,CNH->BTNC",
            sizes,
            count,
            [("attention.mla.kv_b.weight", C * N * Hn)],
            lk,
            flops=[(2 * N * Hn * C, "BT", "2·N·H·C")],
            weight=[(C * N * Hn, "1", "C·N·H")],
            act_in=[(N * Hn, "BT", "N·H")],
            act_out=[(N * C, "BT", "N·C")],
        )
        b.add(
            "attn.flash_mla",
            comp,
            "matmul",
            "BTNC,BSC->BTNC",
            sizes,
            count,
            (),
            lk,
            flops=[(2 * N * (2 * C + R), Pmono, "2·N·(2C+R)")],
            vflops=[(SOFTMAX_FLOPS * N, Pmono, "5·N")],
            act_in=[(N * (C + R), "BT", "N·(C+R)")],
            kv_read=[(C + R, Kmono, "(C+R)")],
            act_out=[(N * C, "BT", "N·C")],
        )
        b.add(
            "attn.v_absorb",
            comp,
            "matmul",
            "BTNC,CNJ->BTNJ",
            sizes,
            count,
            [("attention.mla.kv_b.weight", C * N * Hv)],
            lk,
            flops=[(2 * N * C * Hv, "BT", "2·N·C·J")],
            weight=[(C * N * Hv, "1", "C·N·J")],
            act_in=[(N * C, "BT", "N·C")],
            act_out=[(N * Hv, "BT", "N·J")],
        )
    else:
        # Decompress every visible latent position (transformers: each step; serving prefill: same).
        b.add(
            "attn.kv_b_proj",
            comp,
            "matmul",
            "BSC,CNX->BSNX",
            dict(sizes, X=Hn + Hv),
            count,
            [("attention.mla.kv_b.weight", kvb)],
            lk,
            flops=[(2 * kvb, Kmono, "2·C·N·(H+J)")],
            weight=[(kvb, "1", "C·N·(H+J)")],
            kv_read=[(C + R, Kmono, "(C+R)")],
            act_out=[(N * (Hq + Hv), Kmono, "N·(H+R+J)")],
        )
        if b.attention == "eager":
            b.add(
                "attn.scores",
                comp,
                "matmul",
                "BTNQ,BSNQ->BNTS",
                dict(sizes, Q=Hq),
                count,
                (),
                lk,
                flops=[(2 * N * Hq, Emono, "2·N·(H+R)")],
                act_in=[(N * Hq, "BT", "N·(H+R)"), (N * Hq, Kmono, "N·(H+R)")],
                act_out=[(N, Emono, "N")],
            )
            b.add(
                "attn.softmax",
                comp,
                "vector",
                "BNTS->BNTS",
                sizes,
                count,
                (),
                lk,
                vflops=[(SOFTMAX_FLOPS * N, Emono, "5·N")],
                act_in=[(N, Emono, "N")],
                act_out=[(N, Emono, "N")],
            )
            b.add(
                "attn.context",
                comp,
                "matmul",
                "BNTS,BSNJ->BTNJ",
                sizes,
                count,
                (),
                lk,
                flops=[(2 * N * Hv, Emono, "2·N·J")],
                act_in=[(N, Emono, "N"), (N * Hv, Kmono, "N·J")],
                act_out=[(N * Hv, "BT", "N·J")],
            )
        else:
            b.add(
                "attn.flash",
                comp,
                "matmul",
                "BTNQ,BSNQ,BSNJ->BTNJ",
                dict(sizes, Q=Hq),
                count,
                (),
                lk,
                flops=[(2 * N * (Hq + Hv), Pmono, "2·N·(H+R+J)")],
                vflops=[(SOFTMAX_FLOPS * N, Pmono, "5·N")],
                act_in=[(N * Hq, "BT", "N·(H+R)"), (N * (Hq + Hv), Kmono, "N·(H+R+J)")],
                act_out=[(N * Hv, "BT", "N·J")],
            )
    b.linear(
        "attn.o_proj",
        comp,
        "BTNJ,NJD->BTD",
        sizes,
        N * Hv,
        D,
        bias=s.o_bias,
        count=count,
        pkey="attention.o",
        layer_kind=lk,
        sym_in="N·J",
        sym_out="D",
    )
