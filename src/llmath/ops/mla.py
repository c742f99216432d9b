"""DeepSeek multi-head latent attention: eager (re-expanded cache) and flash (absorbed decode).

Letters: C latent rank, R rotary head width, H no-rope head width, J value head width, L query rank.
A block is :data:`STEPS` in order; the attention core is one of three executions (:func:`core`):
absorbed (flash decode), decompressed + eager products, or decompressed + flash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from llmath.model.spec_mla import MLASpec
from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, ROTARY_FLOPS, ROUTER_FLOPS, SOFTMAX_FLOPS, Builder, Site, Window
from llmath.ops.kernel import Kernel
from llmath.ops.launches import launched
from llmath.ops.split import Split


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
    m: MLASpec  # the widths of this layer group (the sliding layers' own: ModelSpec.mla_of)

    @property
    def Hq(self) -> int:
        return self.Hn + self.R


def q_path(a: Mla) -> None:
    """One query projection, or DeepSeek-V2/V3's low-rank pair with a norm between."""
    s, site, Ql = a.site.spec, a.site, a.Ql
    if Ql is None:
        site.linear("q_proj", "BTD,DNQ->BTNQ", a.D, a.N * a.Hq, bias=False, pkey="attention.q",
                    sizes=dict(site.sizes, Q=a.Hq), sym_out="N·(H+R)", split=Split.COLUMN)  # fmt: skip
        return
    sizes = dict(site.sizes, L=Ql)
    site.linear(
        "q_a_proj",
        "BTD,DL->BTL",
        a.D,
        Ql,
        bias=s.q_bias,
        pkey="attention.mla.q_a",
        sizes=sizes,
        sym_out="L",
        split=Split.REPLICATED,
    )
    site.norm("q_a_norm", Ql, pkey="attention.mla.q_a_norm", sym="L")
    if a.m.q_gate:  # A.X K2: the query and the output gate from [normed; raw] latent
        site.linear("q_gate_proj", "BTL,LNQ->BTNQ", 2 * Ql, a.N * (a.Hq + a.Hv), bias=False,
                    pkey="attention.mla.q_gate", sizes=dict(sizes, Q=a.Hq + a.Hv), sym_in="2·L",
                    sym_out="N·(H+R+J)")  # fmt: skip
        return
    site.linear("q_b_proj", "BTL,LNQ->BTNQ", Ql, a.N * a.Hq, bias=False, pkey="attention.mla.q_b", sizes=sizes,
                sym_in="L", sym_out="N·(H+R)", split=Split.COLUMN)  # fmt: skip


def kv_latent(a: Mla) -> None:
    """The compressed KV (C latent + R rotary key) written to the cache, and its norm."""
    s = a.site.spec
    a.site.linear("kv_a_proj", "BTD,DC->BTC", a.D, a.C + a.R, bias=s.k_bias, pkey="attention.mla.kv_a",
                  sym_out="(C+R)", out="kv_write", split=Split.REPLICATED)  # fmt: skip
    if a.Ql is not None:
        launched(a.site.b, "kv_a_with_q_a")
    a.site.norm("kv_a_norm", a.C, pkey="attention.mla.kv_a_norm", sym="C")
    if a.m.k_rope_norm:  # Dots 3 Note: k_rope_only_layernorm (modeling_dots3_note.py Dots3NoteTextAttention)
        a.site.norm("k_rope_norm", a.R, pkey="attention.mla.k_rope_norm", sym="R")


def rotary(a: Mla) -> None:
    a.site.vector("rotary", "BTNR->BTNR", ROTARY_FLOPS, (a.N + 1) * a.R, "BT", "(N+1)·R", split=Split.QK_HEADS)


def absorbed_flops_per_head(latent: int, rope: int) -> int:
    """The absorbed decode kernel's FLOPs per head per visible position: scores over the latent and the rotary
    part (2·(C + R)), values over the latent (2·C)."""
    return 2 * (2 * latent + rope)


def absorbed(a: Mla) -> None:
    """W_UK folded into the query, W_UV applied after attention: the cache stays latent."""
    N, C, R, Hn, Hv, P = a.N, a.C, a.R, a.Hn, a.Hv, a.win.P
    a.site.op(
        "q_absorb", "matmul", "BTNH,CNH->BTNC", params=[("attention.mla.kv_b.weight", C * N * Hn)],
        flops=[(2 * N * Hn * C, "BT", "2·N·H·C")], weight=[(C * N * Hn, "1", "C·N·H")],
        act_in=[(N * Hn, "BT", "N·H")], act_out=[(N * C, "BT", "N·C")], split=Split.HEADS
    )  # fmt: skip
    a.site.op(
        "flash_mla", "matmul", "BTNC,BSC->BTNC",
        flops=[(N * absorbed_flops_per_head(C, R), P, "2·N·(2C+R)")], vflops=[(SOFTMAX_FLOPS * N, P, "5·N")],
        act_in=[(N * (C + R), "BT", "N·(C+R)")], kv_read=[(C + R, a.win.K, "(C+R)")], act_out=[(N * C, "BT", "N·C")],
        split=Split.HEADS, kernel=Kernel.MLA_DECODE
    )  # fmt: skip
    a.site.op(
        "v_absorb", "matmul", "BTNC,CNJ->BTNJ", params=[("attention.mla.kv_b.weight", C * N * Hv)],
        flops=[(2 * N * C * Hv, "BT", "2·N·C·J")], weight=[(C * N * Hv, "1", "C·N·J")],
        act_in=[(N * C, "BT", "N·C")], act_out=[(N * Hv, "BT", "N·J")], split=Split.HEADS
    )  # fmt: skip


def kv_b_proj(a: Mla) -> None:
    """Decompress every visible latent position (transformers: each step; serving prefill: same)."""
    N, Hn, Hv, kv = a.N, a.Hn, a.Hv, a.win.K
    kvb = a.C * N * (Hn + Hv)
    a.site.op(
        "kv_b_proj", "matmul", "BSC,CNX->BSNX", sizes=dict(a.site.sizes, X=Hn + Hv),
        params=[("attention.mla.kv_b.weight", kvb)], flops=[(2 * kvb, kv, "2·C·N·(H+J)")],
        weight=[(kvb, "1", "C·N·(H+J)")], kv_read=[(a.C + a.R, kv, "(C+R)")],
        act_out=[(N * (a.Hq + Hv), kv, "N·(H+R+J)")], split=Split.HEADS
    )  # fmt: skip


def eager_products(a: Mla) -> None:
    """Scores, softmax and context over the decompressed heads, each written and read."""
    N, Hq, Hv, kv, e = a.N, a.Hq, a.Hv, a.win.K, a.win.E
    a.site.op(
        "scores", "matmul", "BTNQ,BSNQ->BNTS", sizes=dict(a.site.sizes, Q=Hq), flops=[(2 * N * Hq, e, "2·N·(H+R)")],
        act_in=[(N * Hq, "BT", "N·(H+R)"), (N * Hq, kv, "N·(H+R)")], act_out=[(N, e, "N")], split=Split.HEADS
    )  # fmt: skip
    a.site.vector("softmax", "BNTS->BNTS", SOFTMAX_FLOPS, N, e, "N", split=Split.HEADS)
    a.site.op(
        "context", "matmul", "BNTS,BSNJ->BTNJ", flops=[(2 * N * Hv, e, "2·N·J")],
        act_in=[(N, e, "N"), (N * Hv, kv, "N·J")], act_out=[(N * Hv, "BT", "N·J")], split=Split.HEADS
    )  # fmt: skip


def flash(a: Mla) -> None:
    """Fused attention over the decompressed heads, causal pairs only."""
    N, Hq, Hv, p = a.N, a.Hq, a.Hv, a.win.P
    a.site.op(
        "flash", "matmul", "BTNQ,BSNQ,BSNJ->BTNJ", sizes=dict(a.site.sizes, Q=Hq),
        flops=[(2 * N * (Hq + Hv), p, "2·N·(H+R+J)")], vflops=[(SOFTMAX_FLOPS * N, p, "5·N")],
        act_in=[(N * Hq, "BT", "N·(H+R)"), (N * (Hq + Hv), a.win.K, "N·(H+R+J)")], act_out=[(N * Hv, "BT", "N·J")],
        split=Split.HEADS, kernel=Kernel.MLA_CONTEXT
    )  # fmt: skip


Step = Callable[[Mla], None]
EXECUTIONS: dict[str, tuple[Step, ...]] = {
    "absorbed": (absorbed,),
    "eager": (kv_b_proj, eager_products),
    "flash": (kv_b_proj, flash),
}


def indexer(a: Mla) -> None:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2; transformers' DeepseekV32Indexer):
    its query from the query latent (wq_b), one shared key (wk, LayerNorm) cached per position, per-head
    weights (weights_proj), then scores q·k over the visible keys (ReLU, weighted sum over its heads) and
    top-k. ``eager``: the full T × visible rectangle, as transformers computes it; ``flash``: the causal
    pairs only, fused (vLLM's indexer kernels). Letters: I indexer heads, X indexer width, L query rank.
    A layer that reuses an earlier layer's top-k (GLM-5's ``indexer_types`` "shared") has no indexer: no
    weights, no indexer keys cached, no scoring; its attention still reads exactly the top-k positions."""
    m = a.m
    if not m.index_topk or a.Ql is None or not a.site.b.own_indexer:
        return
    site, In, X, L, D = a.site, m.index_heads, m.index_head_dim, a.Ql, a.D
    sizes = dict(site.sizes, I=In, X=X, L=L)
    site.linear("indexer.wq_b", "BTL,LIX->BTIX", L, In * X, bias=False, pkey="attention.indexer.wq_b", sizes=sizes,
                sym_in="L", sym_out="I·X", split=Split.REPLICATED)  # fmt: skip
    site.linear("indexer.wk", "BTD,DX->BTX", D, X, bias=False, pkey="attention.indexer.wk", sizes=sizes,
                sym_out="X", out="kv_write", split=Split.REPLICATED)  # fmt: skip
    site.vector("indexer.k_norm", "BTX->BTX", NORM_FLOPS["layer"], X, "BT", "X", sizes=sizes,
                params=[("attention.indexer.k_norm", 2 * X)], weight=[(2 * X, "1", "2·X")],
                split=Split.REPLICATED)  # fmt: skip
    site.linear("indexer.weights_proj", "BTD,DI->BTI", D, In, bias=False, pkey="attention.indexer.weights",
                sizes=sizes, sym_out="I", split=Split.REPLICATED)  # fmt: skip
    if site.b.attention == "eager":
        e = a.win.E
        site.op("indexer.scores", "matmul", "BTIX,BSX->BTIS", sizes=sizes, flops=[(2 * In * X, e, "2·I·X")],
                act_in=[(In * X, "BT", "I·X")], kv_read=[(X, a.win.K, "X")], act_out=[(In, e, "I")],
                split=Split.REPLICATED)  # fmt: skip
        site.op("indexer.weigh", "matmul", "BTI,BTIS->BTS", sizes=sizes, flops=[(2 * In, e, "2·I")],
                act_in=[(In, e, "I")], act_out=[(1, e, "1")], split=Split.REPLICATED)  # fmt: skip
        site.op("indexer.topk", "vector", "BTS->BTk", sizes=sizes, vflops=[(ROUTER_FLOPS, e, "5")],
                act_in=[(1, e, "1")], act_out=[(m.index_topk, "BT", "k")], split=Split.REPLICATED)  # fmt: skip
        return
    p = a.win.P
    site.op("indexer.flash", "matmul", "BTIX,BSX->BTk", sizes=sizes, flops=[(2 * In * X + 2 * In, p, "2·I·(X+1)")],
            vflops=[(In + ROUTER_FLOPS, p, "I+5")], act_in=[(In * X + In, "BT", "I·(X+1)")],
            kv_read=[(X, a.win.K, "X")], act_out=[(m.index_topk, "BT", "k")], split=Split.REPLICATED)  # fmt: skip


def core(a: Mla) -> None:
    """Flash decode runs absorbed (vLLM/SGLang); otherwise the latent cache is decompressed.

    Sparse attention (DSA) under ``flash`` runs absorbed in both stages over exactly the top-k positions
    each query selects, min(visible, k) (DeepSeek-V3.2 report: DSA is built on MLA's MQA mode; vLLM's
    FlashMLA sparse kernels); decode reads those k latent positions. ``eager`` is transformers': the full
    rectangle with the unselected keys masked.
    """
    b, m = a.site.b, a.m
    if m.index_topk and b.attention == "flash":
        k = m.index_topk
        keys = f"K:{k}" if b.stage == "decode" else a.win.K
        saved, b.window = b.window, k  # the op attends min(S + 1, k) positions per decode step
        absorbed(replace(a, win=Window(keys, f"P:{k}", f"E:{k}")))
        b.window = saved
        return
    for step in EXECUTIONS["absorbed" if b.attention == "flash" and b.stage == "decode" else b.attention]:
        step(a)


def output_gate(site: Site, n_heads: int, width: int) -> None:
    """A sigmoid gate on the attention output before ``o_proj`` (gated attention, Qiu et al. 2025,
    arXiv:2505.06708): ``full`` gates each of the N·H channels (Qwen3-Next / Qwen3.5: the gate is the second
    half of q_proj's output), ``head`` one scalar per head (Ling hybrid's ``g_proj`` D -> N)."""
    gate = site.spec.attn_gate
    if gate == "none":
        return
    g = n_heads * width if gate == "full" else n_heads
    site.linear("gate_proj", "BTD,DG->BTG", site.spec.d_model, g, bias=False, pkey="attention.gate",
                sizes=dict(site.sizes, G=g), sym_out="N·H" if gate == "full" else "N", split=Split.COLUMN)  # fmt: skip
    site.vector("gate", "BTNH->BTNH", ACT_FLOPS + 1, n_heads * width, "BT", "N·H", split=Split.HEADS)


def gate(a: Mla) -> None:
    """The output gate: its own projection (:func:`output_gate`), or (A.X K2's ``q_gate``) the gate half of
    q_gate_proj's output, sigmoid times the N·J attention output (modeling_axk2.py AXK2Attention)."""
    if a.m.q_gate:
        a.site.vector("gate", "BTNJ->BTNJ", ACT_FLOPS + 1, a.N * a.Hv, "BT", "N·J", split=Split.HEADS)
        return
    output_gate(a.site, a.N, a.Hv)


def o_proj(a: Mla) -> None:
    a.site.linear("o_proj", "BTNJ,NJD->BTD", a.N * a.Hv, a.D, bias=a.site.spec.o_bias, pkey="attention.o",
                  sym_in="N·J", sym_out="D", split=Split.ROW)  # fmt: skip


def sinks(a: Mla) -> None:
    """Learned per-head sink logits (HY-V4's MLA, as gpt-oss's attention)."""
    if a.site.spec.attn_sinks:
        N = a.N
        a.site.op(
            "sinks",
            "vector",
            "N",
            sizes=dict(N=N),
            params=[("attention.sinks", N)],
            weight=[(N, "1", "N")],
            split=Split.HEADS,
        )


STEPS: tuple[Step, ...] = (q_path, kv_latent, rotary, indexer, core, sinks, gate, o_proj)


def mla_block(b: Builder, w: int | None, count: int, lk: str) -> None:
    s, m = b.spec, b.spec.mla_of(w)
    if m is None:  # pragma: no cover - attention_block only sends MLA specs here
        raise AssertionError(f"{s.name}: an MLA block without an MLA spec")
    D, N = s.d_model, m.heads or s.n_heads
    C, R, Hn, Hv = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    site = Site(b, count, lk, "attn", "attention", dict(D=D, N=N, C=C, R=R, H=Hn, J=Hv))
    a = Mla(site, Window.of(w), D, N, C, R, Hn, Hv, m.q_lora_rank, m)
    for step in STEPS:
        step(a)
