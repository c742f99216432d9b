"""Attention (MHA/GQA/MQA, sliding windows, encoder and cross-attention): eager and flash executions.

An encoder's self-attention is bidirectional and uncached: its K/V are activations. Cross-attention
(encoder-decoder models) projects the encoder output to K/V once, in the decoder prefill, and caches them;
decode steps read that cache and run no K/V projection (the serving form, and what transformers'
``EncoderDecoderCache`` does too).

A block is the operators of :data:`STEPS` in order; each step is a small function that declares its
operators (signature, sizes, parameters, costs with their formulas) through the block's :class:`Attn`,
or nothing when the spec lacks that feature. The score/softmax/value core is one of :data:`EXECUTIONS`.
A new attention variant adds one step function (or one execution) and a place in these tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from llmath.ops.block_sparse import block_indexer, kept_keys
from llmath.ops.cca import cca_conv, cca_kv, l2_qk_norm
from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, ROTARY_FLOPS, SOFTCAP_FLOPS, SOFTMAX_FLOPS, Builder, Site, Window
from llmath.ops.kernel import Kernel
from llmath.ops.launches import launched
from llmath.ops.mla import mla_block, output_gate
from llmath.ops.moe import as_experts, router
from llmath.ops.qsa import indexer, sparse_window
from llmath.ops.split import Split
from llmath.ops.variants import DIFF_EXECUTIONS, alibi, dynamic_mask


@dataclass(frozen=True)
class Attn:
    """One attention block being built: where its operators go, its sizes and its window's monomials."""

    site: Site
    win: Window
    cross: bool
    pk: str  # parameter key prefix
    D: int
    N: int
    K: int
    G: int
    H: int
    cached: bool = True  # K/V live in a cache (decoder self- and cross-attention), not an encoder's activations
    Hv: int = 0  # value head width J when it differs from H (MiMo-V2-Flash); 0: H

    @property
    def kernel(self) -> str:
        """The layer's own self-attention runs the dense attention kernel (ops/kernel.py); a QSA model's
        attention keeps only its selected blocks, so none of its attention does."""
        dense = not self.cross and self.pk == "attention" and self.site.spec.qsa is None
        return Kernel.DENSE_ATTENTION if dense else Kernel.NONE

    @property
    def J(self) -> int:
        return self.Hv or self.H

    @property
    def kv_width(self) -> tuple[int, str]:
        """Elements (and formula) of one position's K and V per layer: 2·K·H, or K·(H+J)."""
        if self.J == self.H:
            return 2 * self.K * self.H, "2·K·H"
        return self.K * (self.H + self.J), "K·(H+J)"

    @property
    def kv_cls(self) -> str:
        """The class of the K/V operands the products read: the cache, or (encoder) activations."""
        return "kv_read" if self.cached else "act_in"

    @property
    def softmax_flops(self) -> int:
        return SOFTMAX_FLOPS + (SOFTCAP_FLOPS if self.site.spec.attn_softcap else 0)


def q_proj(a: Attn) -> None:
    s = a.site.spec
    a.site.linear(
        "q_proj", "BTD,DNH->BTNH", a.D, a.N * a.H, bias=s.q_bias, pkey=f"{a.pk}.q", sym_out="N·H", split=Split.COLUMN
    )
    _experts(a, a.D * a.K * a.H)


def _experts(a: Attn, per_expert: int) -> None:
    """JetMoE's mixture of attention: the op just added is a routed expert's (E of them, top-k = N/K per
    token, each D·K·H); the router runs once, with the query projection."""
    s, b = a.site.spec, a.site.b
    if not s.attn_experts or a.cross or s.moe is None:
        return
    b.ops[-1] = as_experts(b.ops[-1], s.moe, per_expert)
    if b.ops[-1].name.endswith("q_proj"):
        router(Site(b, a.site.count, a.site.lk, a.site.prefix, "attention", dict(D=a.D, E=s.moe.n_experts)),
               pkey="attention.router")  # fmt: skip


def kv_proj(a: Attn) -> None:
    """K and V projections written into the cache (an encoder's are activations). Cross-attention projects
    the ``src`` encoder positions once, in the decoder prefill; a decode step reads them from the cache."""
    s = a.site.spec
    if (a.cross and a.site.b.stage == "decode") or shared_kv(a):
        return
    if s.cca_kernels is not None and not a.cross:  # ZAYA: k and the current / delayed value halves (ops/cca.py)
        cca_kv(a)
        return
    out = "kv_write" if a.cached else "act_out"
    sig, rows = ("BXD,DKH->BXKH", "X") if a.cross else ("BTD,DKH->BTKH", "BT")
    din = (s.encoder.d_model or a.D) if a.cross and s.encoder is not None else a.D  # TrOCR: the image encoder's width
    k_eq_v = s.full_k_eq_v and a.site.b.window is None and not a.cross
    for which, bias, width in (("k", s.k_bias, a.H), ("v", s.v_bias, a.J))[: 1 if k_eq_v else 2]:
        a.site.linear(
            f"{which}_proj", sig, din, a.K * width, bias=bias, pkey=f"{a.pk}.{which}",
            sym_out="K·H" if width == a.H else "K·J", out=out, rows=rows, split=Split.KV_HEADS
        )  # fmt: skip
        if not a.cross:
            launched(a.site.b, "kv_proj_with_q")
    if k_eq_v:  # Gemma 4's attention_k_eq_v: V is the K projection's output (its own norm), cached beside K
        a.site.op("v_from_k", "memory", "BTKH->BTKH", act_in=[(a.K * a.H, "BT", "K·H")],
                  kv_write=[(a.K * a.H, "BT", "K·H")], split=Split.KV_HEADS)  # fmt: skip


def shared_kv(a: Attn) -> bool:
    """Whether the block's layers reuse the K/V an earlier layer of their kind cached (Gemma 3n / 4's
    ``num_kv_shared_layers``): no K/V projection, norm, rotary or cache write of their own."""
    return a.site.b.kv_shared and not a.cross


def nope(a: Attn) -> bool:
    """Whether the block's layers use no positional encoding: Llama-4's full-attention layers
    (``chunked_windows``: its layer types are chunked exactly where ``no_rope_layers`` is 1,
    configuration_llama4.py), which skip the rotary and the q/k L2 norm (modeling_llama4.py gates both on
    ``use_rope``), and Beam's and Cohere Compass's (``nope_full``: rotary on the sliding layers only,
    modeling_beam.py; modeling_cohere_compass.py, ``rope_parameters["full_attention"]`` null). A Llama-4
    config without chunk windows marks no layer, so every layer keeps its rotary."""
    s, full = a.site.spec, a.site.b.window is None
    return full and (s.nope_full or (s.chunked_windows and any(w is not None for w in s.layer_windows)))


def qk_norm(a: Attn) -> None:
    """Norms over the query and key heads: of width H (one weight shared by the heads, or its own per head:
    StableLM 2's ``StableLmLayerNormPerHead``, LayerNorms without bias), or over all heads' width."""
    s = a.site.spec
    if s.qk_norm == "none" or a.cross or (nope(a) and s.chunked_windows):
        return
    if s.qk_norm == "l2":
        l2_qk_norm(a)
        return
    N, K, H = a.N, 0 if shared_kv(a) else a.K, a.H
    qw, kw = (H, H if K else 0) if s.qk_norm == "head" else (N * H, K * H)
    per = 2 if (s.norm == "layer" and s.norm_bias and s.qk_norm != "per_head") else 1
    a.site.vector(
        "qk_norm", "BTNH->BTNH", NORM_FLOPS[s.norm], (N + K) * H, "BT", "(N+K)·H", component="norm",
        params=[("attention.qk_norm", per * (qw + kw))], weight=[(per * (qw + kw), "1", "q,k norm weights")],
        split=Split.QK_HEADS
    )  # fmt: skip


def rotary(a: Attn) -> None:
    """Rotary on q and k; Beam's NoPE layers instead scale each query by (1 + position / 2048)^0.1 (one
    multiply per query element, modeling_beam.py compute_attention_scaling)."""
    s = a.site.spec
    if s.nope_query_scale and nope(a) and not a.cross:
        a.site.vector("query_scale", "BTNH->BTNH", 1, a.N * a.H, "BT", "N·H")
    if s.position != "rotary" or a.cross or nope(a):
        return
    r, K = s.rotary_dim or a.H, 0 if shared_kv(a) else a.K
    a.site.vector("rotary", "BTNR->BTNR", ROTARY_FLOPS, (a.N + K) * r, "BT", "(N+K)·R" if K else "N·R",
                  sizes=dict(N=a.N, K=a.K, R=r), split=Split.QK_HEADS)  # fmt: skip


def sinks(a: Attn) -> None:
    """Learned per-head sink logits (gpt-oss; MiMo-V2-Flash: on its sliding-window layers only)."""
    s = a.site.spec
    if s.attn_sinks and not (s.window_sinks_only and a.site.b.window is None):
        a.site.op(
            "sinks",
            "vector",
            "N",
            sizes=dict(N=a.N),
            params=[("attention.sinks", a.N)],
            weight=[(a.N, "1", "N")],
            split=Split.HEADS,
        )


def relative_bias(a: Attn) -> None:
    """T5: only the first layer of a stack owns the bucket table; it is read once per pass."""
    s = a.site.spec
    if not s.relative_buckets or a.cross:
        return
    n = s.relative_buckets * a.N
    a.site.b.add(
        a.site.name("relative_bias"), "attention", "memory", "UN", dict(U=s.relative_buckets, N=a.N), 1,
        [("attention.relative_bias", n)], "", Split.HEADS, weight=[(n, "1", "buckets·N")],
    )  # fmt: skip
    a.site.b.ops[-1] = replace(a.site.b.ops[-1], first_stage=True)  # read by the stack's first layer


def cache_append(a: Attn) -> None:
    """transformers' DynamicCache appends by concatenation: the cached K/V are read and written again
    into a new buffer every step (the new tokens' write is the K/V projections')."""
    if a.cross or not a.cached or shared_kv(a):
        return
    kh, sym = a.kv_width
    moved = [(kh, a.win.K, sym), (-kh, "BT", sym)]
    a.site.op("cache_append", "memory", "BSKH,BTKH->B(S+T)KH", kv_read=moved, kv_write=moved, split=Split.HEADS)


def repeat_kv(a: Attn) -> None:
    """repeat_kv materialises K and V for every query head before the matmuls (GQA/MQA)."""
    if a.G > 1:
        kv, (kh, sym) = a.win.K, a.kv_width
        t = [(kh, kv, sym)]
        a.site.op("repeat_kv", "memory", "BSKH->BSKGH", kv_read=t if a.cached else [],
                  act_in=[] if a.cached else t, act_out=[(kh * a.G, kv, sym.replace("K", "N"))],
                  split=Split.HEADS)  # fmt: skip


def eager_products(a: Attn) -> None:
    """Scores, softmax and context over the full T × visible-keys rectangle, each written and read."""
    N, H, J, keys, e = a.N, a.H, a.J, a.win.K, a.win.E
    j = "H" if J == H else "J"
    if a.G > 1:  # K and V come from repeat_kv's copies
        k_in, v_in, kk, kv = (
            [(N * H, "BT", "N·H"), (N * H, keys, "N·H")],
            [(N, e, "N"), (N * J, keys, f"N·{j}")],
            [],
            [],
        )
    else:
        k_in, v_in, kk, kv = (
            [(N * H, "BT", "N·H")],
            [(N, e, "N")],
            [(a.K * H, keys, "K·H")],
            [(a.K * J, keys, f"K·{j}")],
        )
    if not a.cached:  # an encoder's K/V are activations
        k_in, v_in, kk, kv = k_in + kk, v_in + kv, [], []
    a.site.op("scores", "matmul", "BTKGH,BSKH->BKGTS", flops=[(2 * N * H, e, "2·N·H")], act_out=[(N, e, "N")],
              act_in=k_in, kv_read=kk, split=Split.HEADS)  # fmt: skip
    a.site.vector("softmax", "BKGTS->BKGTS", a.softmax_flops, N, e, "N", split=Split.HEADS)
    a.site.op("context", "matmul", f"BKGTS,BSK{j}->BTKG{j}", flops=[(2 * N * J, e, f"2·N·{j}")],
              act_out=[(N * J, "BT", f"N·{j}")], act_in=v_in, kv_read=kv, split=Split.HEADS)  # fmt: skip


def flash(a: Attn) -> None:
    """Fused scores, softmax and values over the causal (and window) pairs only; no score traffic.
    An encoder's and a cross-attention's pairs are the whole rectangle (no mask).

    A chunked layer (Llama-4) computes only the pairs inside each query's chunk and reads the keys from
    the chunk start (vLLM's chunked local attention); eager (transformers) runs it as a window of the chunk.
    """
    w = a.site.b.window
    win = Window.chunk(w) if a.site.spec.chunked_windows and w is not None and not a.cross else a.win
    N, H, J, p = a.N, a.H, a.J, win.P
    q = [(N * H, "BT", "N·H")]
    kh, sym = a.kv_width
    kv = [(kh, win.K, sym)]
    a.site.op(
        "flash", "matmul", "BTKGH,BSKH,BSKH->BTKGH" if J == H else "BTKGH,BSKH,BSKJ->BTKGJ",
        flops=[(4 * N * H, p, "4·N·H")] if J == H else [(2 * N * (H + J), p, "2·N·(H+J)")],
        vflops=[(a.softmax_flops * N, p, f"{a.softmax_flops}·N")],
        act_out=[(N * J, "BT", "N·H" if J == H else "N·J")],
        act_in=q if a.cached else q + kv,
        kv_read=kv if a.cached else [], split=Split.HEADS, kernel=a.kernel
    )  # fmt: skip


def out_gate(a: Attn) -> None:
    """A gate on the attention output from the layer input: ``gate_proj`` D -> N·J and out · act(gate) per
    element (AFMoE: sigmoid), or D -> N and one act(gate) per head (Laguna: softplus); ACT_FLOPS per gate
    value, 1 per output element."""
    s = a.site.spec
    if not s.attn_out_gate or a.cross:
        return
    j = "H" if a.J == a.H else "J"
    width, sym = (a.N, "N") if s.attn_gate_per_head else (a.N * a.J, f"N·{j}")
    letters = sym.replace("·", "")
    a.site.linear("gate_proj", f"BTD,D{letters}->BT{letters}", a.D, width, bias=s.gate_proj_bias,
                  pkey=f"{a.pk}.gate", sym_out=sym, split=Split.COLUMN)  # fmt: skip
    n, bias = a.N * a.J, s.attn_gate_bias  # Beam: + one bias per head, broadcast over its J gate values
    a.site.op(
        "out_gate", "vector", f"BTN{j},BT{sym.replace('·', '')}->BTN{j}",
        vflops=[((ACT_FLOPS + bias) * width + n, "BT", f"{ACT_FLOPS + bias}·{sym} + N·{j}")],
        act_in=[(n + width, "BT", f"N·{j} + {sym}")], act_out=[(n, "BT", f"N·{j}")],
        params=[("attention.gate_bias", a.N)] if bias else [], weight=[(a.N, "1", "N")] if bias else [],
        split=Split.HEADS
    )  # fmt: skip


def gate(a: Attn) -> None:
    if not a.cross:
        output_gate(a.site, a.N, a.H)


def o_proj(a: Attn) -> None:
    s = a.site.spec
    j = "H" if a.J == a.H else "J"
    a.site.linear("o_proj", f"BTN{j},N{j}D->BTD", a.N * a.J, a.D, bias=s.o_bias, pkey=f"{a.pk}.o", sym_in=f"N·{j}",
                  sym_out="D", split=Split.ROW)  # fmt: skip
    _experts(a, a.K * a.J * a.D)


def head_gate(a: Attn) -> None:
    """LFM3: the attention output of each head times σ(g_proj(x)), g_proj D -> N without bias."""
    if a.site.spec.attn_head_gate and not a.cross:
        a.site.linear("head_gate", "BTD,DN->BTN", a.D, a.N, bias=False, pkey=f"{a.pk}.g", sym_out="N")
        a.site.vector("head_gate_mul", "BTNH->BTNH", 5, a.N * a.H, "BT", "N·H")


def sub_norm(a: Attn) -> None:
    """BitNet: a norm over the attention output (width N·H) before the output projection."""
    if a.site.spec.sub_norms and not a.cross:
        a.site.norm("sub_norm", a.N * a.H, pkey="norm.layers", sym="N·H")


Step = Callable[[Attn], None]
EXECUTIONS: dict[str, tuple[Step, ...]] = {
    "eager": (cache_append, repeat_kv, eager_products),
    "flash": (flash,),
}


def block_sparse_indexer(a: Attn) -> None:
    if not a.cross:  # MiniMax-M3's block-sparse layers (ops/block_sparse.py)
        block_indexer(a.site, a.win, a.D)


def qsa_indexer(a: Attn) -> None:
    """Qwen4-Exp's QSA indexer (ops/qsa.py) on self-attention layers."""
    if a.site.spec.qsa is not None and not a.cross and a.cached:
        indexer(a.site, a.win.K, a.win.E)


def execution(a: Attn) -> None:
    k = None if a.cross else kept_keys(a.site)
    if k is not None:  # a block-sparse layer served: at most k keys per query (ops/block_sparse.py)
        b = a.site.b
        saved, b.window = b.window, k
        flash(replace(a, win=Window(f"K:{k}" if b.stage == "decode" else a.win.K, f"P:{k}", f"E:{k}")))
        b.window = saved
        return
    if a.site.spec.qsa is not None and a.site.b.attention == "flash" and not a.cross and a.cached:
        a = replace(a, win=sparse_window(a.site, a.win))  # QSA: only the selected positions
    if a.site.spec.diff_attention and not a.cross:  # DiffLlama (ops/variants.py)
        if a.site.b.attention == "eager":
            cache_append(a)
        DIFF_EXECUTIONS[a.site.b.attention](a)
        return
    for step in EXECUTIONS[a.site.b.attention]:
        step(a)


STEPS: tuple[Step, ...] = (
    q_proj, kv_proj, cca_conv, qk_norm, rotary, sinks, relative_bias, alibi, dynamic_mask, qsa_indexer,
    block_sparse_indexer, execution, head_gate, sub_norm, gate, out_gate, o_proj,
)  # fmt: skip


def attention_block(
    b: Builder, w: int | None, count: int, lk: str, prefix: str = "attn", cross: bool = False, encoder: bool = False
) -> None:
    """One attention block per layer of a group (MLA specs go to :func:`~llmath.ops.mla.mla_block`).
    ``encoder``: bidirectional and uncached; ``cross``: over the ``src`` cached encoder positions."""
    s = b.spec
    if s.mla is not None and not cross and not encoder:
        mla_block(b, w, count, lk)
        return
    D, N = s.d_model, s.n_heads
    K, H = (s.n_kv_heads, s.head_dim) if cross or encoder else s.attention_widths(w)
    J, G = s.v_head_dim or H, N // K
    site = Site(b, count, lk, prefix, "attention", dict(D=D, N=N, K=K, G=G, H=H) | ({"J": J} if J != H else {}))
    win = Window.cross() if cross else Window.bidirectional() if encoder else Window.of(w)
    pk = "attention.cross" if cross else "attention"
    a = Attn(site, win, cross, pk, D, N, K, G, H, cached=not encoder, Hv=J if J != H else 0)
    for step in STEPS:
        step(a)
