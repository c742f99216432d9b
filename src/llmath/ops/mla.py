"""DeepSeek multi-head latent attention: eager (re-expanded cache) and flash (absorbed decode).

Letters: C latent rank, R rotary head width, H no-rope head width, J value head width, L query rank.
A block is :data:`STEPS` in order; the attention core is one of three executions (:func:`core`):
absorbed (flash decode), decompressed + eager products, or decompressed + flash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llmath.ops.core import ROTARY_FLOPS, SOFTMAX_FLOPS, Builder, Site, Window


@dataclass(frozen=True)
class Mla:
    """One MLA block being built: its site, window monomials and sizes."""

    site: Site
    win: Window
    D: int
    N: int
    C: int
    R: int
    Hn: int
    Hv: int
    Ql: int | None  # query low-rank width (None: one query projection)

    @property
    def Hq(self) -> int:
        return self.Hn + self.R


def q_path(a: Mla) -> None:
    """One query projection, or DeepSeek-V2/V3's low-rank pair with a norm between."""
    s, site, Ql = a.site.spec, a.site, a.Ql
    if Ql is None:
        site.linear("q_proj", "BTD,DNQ->BTNQ", a.D, a.N * a.Hq, bias=False, pkey="attention.q",
                    sizes=dict(site.sizes, Q=a.Hq), sym_out="N·(H+R)")  # fmt: skip
        return
    sizes = dict(site.sizes, L=Ql)
    site.linear("q_a_proj", "BTD,DL->BTL", a.D, Ql, bias=s.q_bias, pkey="attention.mla.q_a", sizes=sizes, sym_out="L")
    site.norm("q_a_norm", Ql, pkey="attention.mla.q_a_norm", sym="L")
    site.linear("q_b_proj", "BTL,LNQ->BTNQ", Ql, a.N * a.Hq, bias=False, pkey="attention.mla.q_b", sizes=sizes,
                sym_in="L", sym_out="N·(H+R)")  # fmt: skip


def kv_latent(a: Mla) -> None:
    """The compressed KV (C latent + R rotary key) written to the cache, and its norm."""
    s = a.site.spec
    a.site.linear("kv_a_proj", "BTD,DC->BTC", a.D, a.C + a.R, bias=s.k_bias, pkey="attention.mla.kv_a",
                  sym_out="(C+R)", out="kv_write")  # fmt: skip
    a.site.norm("kv_a_norm", a.C, pkey="attention.mla.kv_a_norm", sym="C")


def rotary(a: Mla) -> None:
    a.site.vector("rotary", "BTNR->BTNR", ROTARY_FLOPS, (a.N + 1) * a.R, "BT", "(N+1)·R")


def absorbed(a: Mla) -> None:
    """W_UK folded into the query, W_UV applied after attention: the cache stays latent."""
    N, C, R, Hn, Hv, P = a.N, a.C, a.R, a.Hn, a.Hv, a.win.P
    a.site.op(
        "q_absorb", "matmul", "BTNH,CNH->BTNC", params=[("attention.mla.kv_b.weight", C * N * Hn)],
        flops=[(2 * N * Hn * C, "BT", "2·N·H·C")], weight=[(C * N * Hn, "1", "C·N·H")],
        act_in=[(N * Hn, "BT", "N·H")], act_out=[(N * C, "BT", "N·C")],
    )  # fmt: skip
    a.site.op(
        "flash_mla", "matmul", "BTNC,BSC->BTNC",
        flops=[(2 * N * (2 * C + R), P, "2·N·(2C+R)")], vflops=[(SOFTMAX_FLOPS * N, P, "5·N")],
        act_in=[(N * (C + R), "BT", "N·(C+R)")], kv_read=[(C + R, a.win.K, "(C+R)")], act_out=[(N * C, "BT", "N·C")],
    )  # fmt: skip
    a.site.op(
        "v_absorb", "matmul", "BTNC,CNJ->BTNJ", params=[("attention.mla.kv_b.weight", C * N * Hv)],
        flops=[(2 * N * C * Hv, "BT", "2·N·C·J")], weight=[(C * N * Hv, "1", "C·N·J")],
        act_in=[(N * C, "BT", "N·C")], act_out=[(N * Hv, "BT", "N·J")],
    )  # fmt: skip


def kv_b_proj(a: Mla) -> None:
    """Decompress every visible latent position (transformers: each step; serving prefill: same)."""
    N, Hn, Hv, kv = a.N, a.Hn, a.Hv, a.win.K
    kvb = a.C * N * (Hn + Hv)
    a.site.op(
        "kv_b_proj", "matmul", "BSC,CNX->BSNX", sizes=dict(a.site.sizes, X=Hn + Hv),
        params=[("attention.mla.kv_b.weight", kvb)], flops=[(2 * kvb, kv, "2·C·N·(H+J)")],
        weight=[(kvb, "1", "C·N·(H+J)")], kv_read=[(a.C + a.R, kv, "(C+R)")],
        act_out=[(N * (a.Hq + Hv), kv, "N·(H+R+J)")],
    )  # fmt: skip


def eager_products(a: Mla) -> None:
    """Scores, softmax and context over the decompressed heads, each written and read."""
    N, Hq, Hv, kv, e = a.N, a.Hq, a.Hv, a.win.K, a.win.E
    a.site.op(
        "scores", "matmul", "BTNQ,BSNQ->BNTS", sizes=dict(a.site.sizes, Q=Hq), flops=[(2 * N * Hq, e, "2·N·(H+R)")],
        act_in=[(N * Hq, "BT", "N·(H+R)"), (N * Hq, kv, "N·(H+R)")], act_out=[(N, e, "N")],
    )  # fmt: skip
    a.site.vector("softmax", "BNTS->BNTS", SOFTMAX_FLOPS, N, e, "N")
    a.site.op(
        "context", "matmul", "BNTS,BSNJ->BTNJ", flops=[(2 * N * Hv, e, "2·N·J")],
        act_in=[(N, e, "N"), (N * Hv, kv, "N·J")], act_out=[(N * Hv, "BT", "N·J")],
    )  # fmt: skip


def flash(a: Mla) -> None:
    """Fused attention over the decompressed heads, causal pairs only."""
    N, Hq, Hv, p = a.N, a.Hq, a.Hv, a.win.P
    a.site.op(
        "flash", "matmul", "BTNQ,BSNQ,BSNJ->BTNJ", sizes=dict(a.site.sizes, Q=Hq),
        flops=[(2 * N * (Hq + Hv), p, "2·N·(H+R+J)")], vflops=[(SOFTMAX_FLOPS * N, p, "5·N")],
        act_in=[(N * Hq, "BT", "N·(H+R)"), (N * (Hq + Hv), a.win.K, "N·(H+R+J)")], act_out=[(N * Hv, "BT", "N·J")],
    )  # fmt: skip


Step = Callable[[Mla], None]
EXECUTIONS: dict[str, tuple[Step, ...]] = {
    "absorbed": (absorbed,),
    "eager": (kv_b_proj, eager_products),
    "flash": (kv_b_proj, flash),
}


def core(a: Mla) -> None:
    """Flash decode runs absorbed (vLLM/SGLang); otherwise the latent cache is decompressed."""
    b = a.site.b
    for step in EXECUTIONS["absorbed" if b.attention == "flash" and b.stage == "decode" else b.attention]:
        step(a)


def o_proj(a: Mla) -> None:
    a.site.linear("o_proj", "BTNJ,NJD->BTD", a.N * a.Hv, a.D, bias=a.site.spec.o_bias, pkey="attention.o",
                  sym_in="N·J", sym_out="D")  # fmt: skip


STEPS: tuple[Step, ...] = (q_path, kv_latent, rotary, core, o_proj)


def mla_block(b: Builder, w: int | None, count: int, lk: str) -> None:
    s, m = b.spec, b.spec.mla
    if m is None:  # pragma: no cover - attention_block only sends MLA specs here
        raise AssertionError(f"{s.name}: an MLA block without an MLA spec")
    D, N = s.d_model, s.n_heads
    C, R, Hn, Hv = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    site = Site(b, count, lk, "attn", "attention", dict(D=D, N=N, C=C, R=R, H=Hn, J=Hv))
    a = Mla(site, Window.of(w), D, N, C, R, Hn, Hv, m.q_lora_rank)
    for step in STEPS:
        step(a)
