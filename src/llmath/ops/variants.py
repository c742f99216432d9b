"""Attention variants of dense decoders: ALiBi's bias, differential attention, a last-layer output bias.

**ALiBi** (Press et al. 2022, arXiv:2108.12409; BLOOM, MPT, Falcon with ``alibi``): each head h adds
m_h · (j − i) to the score of query i and key j. ``eager`` (transformers: BLOOM's ``baddbmm``, MPT's
broadcast add of a N × S bias) adds a bias tensor of N rows per visible key to the T × S score rectangle:
1 FLOP per score entry, the scores read and written again, N·S bias elements read per sequence.
``flash`` (flash-attn's / vLLM's ``alibi_slopes``) computes m_h · (j − i) inside the kernel: 2 FLOPs (a
multiply and an add) per computed pair and no traffic but the N slopes.

**Differential attention** (DiffLlama; Ye et al. 2024, arXiv:2410.05258): the N query heads form N/2
pairs; each pair's output is softmax(Q₁K₁ᵀ)·V − λ·softmax(Q₂K₂ᵀ)·V with V of width 2·H (two KV heads'
values side by side), then a parameter-free RMSNorm over 2·H and a scale by (1 − λ_init).
λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init, from four learned vectors of width H per layer.
transformers 5.23 (modeling_diffllama.py) runs it as *two* attention calls over the same Q and K, one per
half of V: ``eager`` is that, so the N × T × S scores and their softmax are computed twice,
2 × (2·N·H + 2·N·H) = 8·N·H FLOPs per score entry. ``flash`` models one fused call with the value width
doubled (the scores once): 2·N·H + 2·N·(2·H) = 6·N·H FLOPs per causal pair.

**Dynamic-mask attention** (Doge, SmallDoge; transformers 5.23 modeling_doge.py ``DogeAttention``): per layer a
projection ``dt_proj`` of each key position's values (K·H -> K, bias when ``attention_bias``) and a vector A
(K); exp(A · softplus(dt)) per KV head and key is added to the scores as a mask (beyond ``keep_window_size``
keys only the top ones stay visible: the scores are still all computed). transformers computes dt from the
values the cache *returns*, so ``eager`` re-projects every visible key each step: 2·K·H·K FLOPs per key,
plus 4 FLOPs per (K, key) for softplus, the multiply by A and exp, and the mask add of 1 FLOP per score
entry. ``flash`` (llmath's serving default) projects only the new tokens (2·K·H·K per token): dt depends on
nothing but its own position's values, so a server keeps it beside the cache instead of recomputing it
(K values per position, 1/(2·H) of its K/V; not added to the cache bytes), and counts every causal pair
(a dynamic-mask kernel may skip masked blocks: not modelled).

**Last-layer output bias** (GPT-NeoX-Japanese): only the last layer's attention output adds a learned
bias of width D (``dense_bias``): D parameters, 1 FLOP per element.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmath.model.spec import ModelSpec
from llmath.ops.core import NORM_FLOPS, Builder, Site
from llmath.ops.split import Split

if TYPE_CHECKING:  # pragma: no cover
    from llmath.ops.attention import Attn


def alibi(a: Attn) -> None:
    """ALiBi's per-head linear bias on the scores (formulas in the module docstring)."""
    if a.site.spec.position != "alibi" or a.cross:
        return
    N = a.N
    if a.site.b.attention == "eager":
        a.site.op(
            "alibi", "vector", "BKGTS,NS->BKGTS", vflops=[(N, a.win.E, "N")],
            act_in=[(N, a.win.E, "N"), (N, a.win.K, "N")], act_out=[(N, a.win.E, "N")],
        )  # fmt: skip
    else:
        a.site.op("alibi", "vector", "BKGTS->BKGTS", vflops=[(2 * N, a.win.P, "2·N")], act_in=[(N, "1", "N")])


def diff_eager(a: Attn) -> None:
    """transformers' two calls: K and both halves of V repeated per call, then scores, softmax and context
    twice over the full T × visible-keys rectangle (each written and read)."""
    N, K, H, keys, e = a.N, a.K, a.H, a.win.K, a.win.E
    a.site.op("repeat_kv", "memory", "BSKH->2·BSNH", kv_read=[(2 * K * H, keys, "2·K·H")],
              act_out=[(4 * N * H, keys, "2 calls·2·N·H")], split=Split.HEADS)  # fmt: skip
    a.site.op("scores", "matmul", "BTNH,BSNH->BNTS", flops=[(4 * N * H, e, "2 calls·2·N·H")],
              act_in=[(2 * N * H, "BT", "2·N·H")] + [(2 * N * H, keys, "2·N·H")],
              act_out=[(2 * N, e, "2·N")], split=Split.HEADS)  # fmt: skip
    a.site.vector("softmax", "BNTS->BNTS", a.softmax_flops, 2 * N, e, "2·N", split=Split.HEADS)
    a.site.op("context", "matmul", "BNTS,BSNH->BTNH", flops=[(4 * N * H, e, "2 calls·2·N·H")],
              act_in=[(2 * N, e, "2·N")] + [(2 * N * H, keys, "2·N·H")],
              act_out=[(2 * N * H, "BT", "2·N·H")], split=Split.HEADS)  # fmt: skip
    _diff_combine(a)


def diff_flash(a: Attn) -> None:
    """One fused call per head: scores once (2·N·H), values of width 2·H (4·N·H) per causal pair."""
    N, H, win = a.N, a.H, a.win
    a.site.op(
        "flash", "matmul", "BTNH,BSKH,BSK(2H)->BTN(2H)",
        flops=[(6 * N * H, win.P, "2·N·H + 2·N·2H")],
        vflops=[(a.softmax_flops * N, win.P, f"{a.softmax_flops}·N")],
        act_in=[(N * H, "BT", "N·H")], kv_read=[(2 * a.K * H, win.K, "2·K·H")],
        act_out=[(2 * N * H, "BT", "2·N·H")], split=Split.HEADS, kernel=a.kernel
    )  # fmt: skip
    _diff_combine(a)


def _diff_combine(a: Attn) -> None:
    """out₁ − λ·out₂ over the N/2 head pairs (2 FLOPs per element of N/2 · 2H = N·H), the parameter-free
    RMSNorm over 2·H and the (1 − λ_init) scale (1 FLOP each); λ's four vectors of width H per layer."""
    N, H = a.N, a.H
    per = 2 + NORM_FLOPS["rms_noparam"] + 1
    a.site.op(
        "diff_combine", "vector", "BTN(2H)->BT(N/2)(2H)",
        params=[("attention.lambda", 4 * H)], weight=[(4 * H, "1", "4·H")],
        vflops=[(per * N * H, "BT", f"{per}·N·H")],
        act_in=[(2 * N * H, "BT", "2·N·H")], act_out=[(N * H, "BT", "N·H")],
    )  # fmt: skip


DIFF_EXECUTIONS = {"eager": diff_eager, "flash": diff_flash}


def dynamic_mask(a: Attn) -> None:
    """Doge's dt projection and mask (formulas in the module docstring)."""
    s = a.site.spec
    if not s.dynamic_mask or a.cross:
        return
    K, H, N = a.K, a.H, a.N
    bias = K if s.o_bias else 0
    eager = a.site.b.attention == "eager"
    rows = a.win.K if eager else "BT"
    a.site.op(
        "dt_proj", "matmul", "BSKH,KHK->BSK", flops=[(2 * K * H * K, rows, "2·K·H·K")],
        vflops=[((4 + (1 if bias else 0)) * K, rows, "4·K" if not bias else "5·K")],
        params=[("attention.dt_proj", K * H * K + bias), ("attention.A", K)],
        weight=[(K * H * K + bias + K, "1", "K·H·K + K")],
        kv_read=[(K * H, rows, "K·H")] if eager else [], act_in=[] if eager else [(K * H, rows, "K·H")],
        act_out=[(K, rows, "K")],
    )  # fmt: skip
    if eager:
        a.site.vector("dynamic_mask", "BKGTS->BKGTS", 1, N, a.win.E, "N")


def last_layer_o_bias(b: Builder) -> None:
    """GPT-NeoX-Japanese: the bias added to the last layer's attention output (one layer, width D)."""
    s: ModelSpec = b.spec
    if not s.last_o_bias:
        return
    D = s.d_model
    site = Site(b, 1, "", "attn.last_layer", "attention", dict(D=D))
    site.vector("o_bias", "BTD->BTD", 1, D, "BT", "D", params=[("attention.o.bias", D)], weight=[(D, "1", "D")])


__all__ = ["alibi", "DIFF_EXECUTIONS", "dynamic_mask", "last_layer_o_bias"]
