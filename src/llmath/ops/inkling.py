"""Inkling and Inkling-2 decoder layers (Thinking Machines; transformers 5.23 ``modeling_inkling.py`` and
``modeling_inkling2.py``), built instead of the generic layer when :attr:`ModelSpec.inkling` is set.

A layer (sizes of the layer's kind: N query heads, K K/V heads of width H; sliding layers use the
``window_*`` widths of :class:`~llmath.model.spec.InklingSpec`):

* attention: ``q_proj``, ``k_proj`` and ``v_proj`` (the K/V written to the cache), each of K and V through
  a short causal conv of width C (x + depthwise conv(x); Inkling-2 divides by √(C + 1)), ``r_proj``
  D -> N·r relative states mixed by the r × R profile bank into one bias per backward distance
  (``rel_logits``: a matmul, 2·N·r·R per token; R = the window on sliding layers, ``rel_extent`` on full
  ones), the score/softmax/value core of :mod:`llmath.ops.attention` (eager or flash), ``o_proj``;
  Inkling-2 adds a sigmoid output gate (D -> N·H) and a per-head sink logit (D -> N), and on its full
  layers the K/V convs are dynamic: per-token taps ``weight_proj`` D -> K·C added to static C × K·H taps,
  applied elementwise (vector FLOPs: transformers multiplies and sums, no conv kernel);
* a short conv over D channels after the attention and after the FFN (or MoE);
* Inkling-2's block attention residuals: the attention input (3 queries on full layers: q, k and v
  inputs), the FFN input and the final norm's input are a softmax-weighted sum over the block states (one
  per ``block_size`` layers) and the running state, by ``F.scaled_dot_product_attention`` with learned
  queries: 2·2·q·m·D matmul FLOPs per token over m sources (:func:`block_sources`).

Per-sequence state: the K/V cache (windowed on sliding layers) and four conv windows per layer (K and V:
K·H channels each; after attention and after the FFN: D each). Serving kernels (``causal_conv1d``) keep
C − 1 inputs per channel; transformers' cache keeps C (:func:`transformers_extra_state`).

Eager conv FLOPs are ``F.conv1d``'s as transformers runs it (the torch fallback of ``causal_conv1d_fn``):
padding C − 1, so a prefill computes T + C − 1 outputs per channel; a decode step convolves the C cached
inputs and the new one (2 outputs). Flash: the T outputs only.
"""

from __future__ import annotations

from collections.abc import Callable

from llmath.model.spec import InklingSpec, ModelSpec
from llmath.ops.attention import Attn, execution, kv_proj, o_proj, q_proj
from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, SOFTCAP_FLOPS, SOFTMAX_FLOPS, Builder, Site, Window
from llmath.ops.ffn import ffn_block, residual
from llmath.ops.moe import routed_experts, router
from llmath.ops.split import Split

Label = Callable[[ModelSpec, int | None, bool], str]


def _ink(spec: ModelSpec) -> InklingSpec:
    if spec.inkling is None:  # pragma: no cover - the assembly calls this module for Inkling specs only
        raise AssertionError(spec.name)
    return spec.inkling


def _state(b: Builder, elements: int, sym: str) -> dict:
    """A conv window per sequence: written by every pass, read by a decode step and by a prefill after a
    cached prefix (monomial ``BP``)."""
    return dict(kv_write=[(elements, "B", sym)], kv_read=[(elements, "B" if b.stage == "decode" else "BP", sym)])


def short_conv(site: Site, name: str, channels: int, sym: str, pkey: str) -> None:
    """x + depthwise causal conv of width C over ``channels`` (static taps, no bias)."""
    b, C = site.b, _ink(site.spec).conv
    flops = [(2 * channels * C, "BT", f"2·{sym}·C")]
    if b.attention == "eager":  # F.conv1d's extra outputs: C − 1 in a prefill (padding), 1 in a decode step
        decode = b.stage == "decode"
        flops.append((2 * channels * C * (1 if decode else C - 1), "B", f"2·{sym}·C" + ("" if decode else "·(C−1)")))
    site.op(
        name, "matmul", f"BT{sym},{sym}C->BT{sym}", params=[(pkey, channels * C)], flops=flops,
        vflops=[(2 * channels, "BT", f"2·{sym}")], weight=[(channels * C, "1", f"{sym}·C")],
        act_in=[(channels, "BT", sym)], act_out=[(channels, "BT", sym)],
        **_state(b, (C - 1) * channels, f"(C−1)·{sym}"),
    )  # fmt: skip


def dynamic_conv(site: Site, which: str, K: int, H: int) -> None:
    """Inkling-2's full-layer K/V conv: taps = static (C × K·H) + ``weight_proj`` (D -> K·C, one tap set per
    K/V head and token); the window × taps product is elementwise (2·C per output element, vector)."""
    C, D = _ink(site.spec).conv, site.spec.d_model
    site.linear(f"{which}_conv.weight_proj", "BTD,DKC->BTKC", D, K * C, bias=False,
                pkey=f"attention.{which}_conv.weight_proj", sym_out="K·C")  # fmt: skip
    n = K * H
    site.op(
        f"{which}_conv", "vector", "BTKH,BTKC->BTKH", params=[(f"attention.{which}_conv.static", C * n)],
        vflops=[((2 * C + 2) * n, "BT", "(2·C+2)·K·H")], weight=[(C * n, "1", "C·K·H")],
        act_in=[(n + K * C, "BT", "K·H + K·C")], act_out=[(n, "BT", "K·H")],
        **_state(site.b, (C - 1) * n, "(C−1)·K·H"),
    )  # fmt: skip


def _qk(a: Attn, ink: InklingSpec) -> None:
    """Inkling: RMSNorms (with weights, per head) over q and k. Inkling-2: L2 clips of q (after a learned
    N × H scale), k, and the relative states (after an N × r scale); an unweighted RMSNorm over v."""
    N, K, H, r = a.N, a.K, a.H, ink.d_rel
    if not ink.gated:
        a.site.vector("qk_norm", "BTNH->BTNH", NORM_FLOPS["rms"], (N + K) * H, "BT", "(N+K)·H", component="norm",
                      params=[("attention.qk_norm", 2 * H)], weight=[(2 * H, "1", "2·H")])  # fmt: skip
        return
    scales = N * H + N * r
    a.site.vector("l2_clip", "BTNH->BTNH", 5, (N + K) * H + N * r, "BT", "(N+K)·H + N·r",
                  params=[("attention.clip_scale", scales)], weight=[(scales, "1", "N·H + N·r")])  # fmt: skip
    a.site.vector("v_norm", "BTKH->BTKH", NORM_FLOPS["rms_noparam"], K * H, "BT", "K·H", component="norm")


def _relative(a: Attn, R: int) -> None:
    """``r_proj`` and the profile bank: (B, T, N, r) @ (r, R), then each score gathers its distance's bias."""
    r, N = _ink(a.site.spec).d_rel, a.N
    a.site.linear("r_proj", "BTD,DNr->BTNr", a.D, N * r, bias=False, pkey="attention.r", sym_out="N·r")
    a.site.op(
        "rel_logits", "matmul", "BTNr,rR->BTNR", params=[("attention.rel_profiles", r * R)],
        flops=[(2 * N * r * R, "BT", "2·N·r·R")], weight=[(r * R, "1", "r·R")],
        act_in=[(N * r, "BT", "N·r")], act_out=[(N * R, "BT", "N·R")],
    )  # fmt: skip
    scores = a.win.E if a.site.b.attention == "eager" else a.win.P
    a.site.op("rel_bias", "vector", "BTNR->BNTS", vflops=[(N, scores, "N")], act_in=[(N, scores, "N")])


def _gate_and_sinks(a: Attn) -> None:
    """Inkling-2: ``gate_proj`` D -> N·H and ``sink_proj`` D -> N (one extra softmax logit per head)."""
    a.site.linear("gate_proj", "BTD,DNH->BTNH", a.D, a.N * a.H, bias=False, pkey="attention.gate", sym_out="N·H")
    a.site.linear("sink_proj", "BTD,DN->BTN", a.D, a.N, bias=False, pkey="attention.sink", sym_out="N")


def widths(spec: ModelSpec, w: int | None) -> tuple[int, int, int]:
    """(query heads N, K/V heads K, head width H) of the sliding (``w`` set) or full-attention layers."""
    ink = _ink(spec)
    if w is not None:
        return ink.window_heads, ink.window_kv_heads, ink.window_head_dim
    return spec.n_heads, spec.n_kv_heads, spec.head_dim


def attention(b: Builder, w: int | None, count: int, lk: str) -> None:
    s, ink = b.spec, _ink(b.spec)
    N, K, H = widths(s, w)
    R, D, C = w or ink.rel_extent, s.d_model, ink.conv
    site = Site(b, count, lk, "attn", "attention", dict(D=D, N=N, K=K, G=N // K, H=H, r=ink.d_rel, R=R, C=C))
    a = Attn(site, Window.of(w), False, "attention", D, N, K, N // K, H)
    q_proj(a)
    kv_proj(a)
    for which in ("k", "v"):
        if ink.dynamic_conv and w is None:
            dynamic_conv(site, which, K, H)
        else:
            short_conv(site, f"{which}_conv", K * H, "KH", f"attention.{which}_conv")
    _relative(a, R)
    if ink.gated:
        _gate_and_sinks(a)
    _qk(a, ink)
    execution(a)
    if ink.gated:
        n = N * H
        site.op("out_gate", "vector", "BTNH,BTNH->BTNH", vflops=[((ACT_FLOPS + 1) * n, "BT", "5·N·H")],
                act_in=[(2 * n, "BT", "2·N·H")], act_out=[(n, "BT", "N·H")])  # fmt: skip
    o_proj(a)


def moe(b: Builder, count: int, lk: str) -> None:
    """Inkling: the router scores E routed + S shared experts (the shared ones as softmax sinks; a learned
    scalar scales the weights), the S shared experts of width F run on every token (one FFN of S·F, the
    same FLOPs as transformers' bmm over S). Inkling-2: E routed experts only, SwiGLU with soft-capped gate
    factor and up (2 soft-caps per hidden element)."""
    s, ink = b.spec, _ink(b.spec)
    m = s.moe
    if m is None:  # pragma: no cover - the readers give every Inkling spec its MoE
        raise AssertionError(s.name)
    D, E, k = s.d_model, m.n_experts, m.top_k
    site = Site(b, count, lk, "moe", "moe", dict(D=D, E=E))
    if ink.shared_sink:
        S = m.d_ff_shared // m.d_ff_expert
        site.linear(
            "router", "BTD,DE->BTE", D, E + S, bias=False, pkey="moe.router", sym_out="(E+S)", split=Split.REPLICATED
        )
        site.op("router_scale", "vector", "BTk->BTk", params=[("moe.router.scale", 1)], weight=[(1, "1", "1")],
                vflops=[(5 * (E + S), "BT", "5·(E+S)")], split=Split.REPLICATED)  # fmt: skip
        routed_experts(site)
        ffn_block(b, m.d_ff_shared, count, lk, "moe.shared", "moe.shared", "moe")
        return
    router(site)
    routed_experts(site)
    f = k * m.d_ff_expert
    site.vector("softcaps", "BTkF->BTkF", 2 * SOFTCAP_FLOPS, f, "BT", "k·F")


def ffn(b: Builder, moe_layer: bool, count: int, lk: str) -> None:
    if moe_layer:
        moe(b, count, lk)
        return
    ffn_block(b, b.spec.d_ff, count, lk, "ffn", "ffn", "ffn")  # InklingMLP: SwiGLU, then a learned scalar
    Site(b, count, lk, "ffn", "ffn", dict(D=b.spec.d_model)).vector(
        "scale", "BTD->BTD", 1, b.spec.d_model, "BT", "D", params=[("ffn.scale", 1)], weight=[(1, "1", "1")]
    )


def _layer(b: Builder, w: int | None, moe_layer: bool, count: int, lk: str) -> None:
    s, D = b.spec, b.spec.d_model
    split = _ink(s).dynamic_conv and w is None  # Inkling-2's full layers: q, k and v inputs normed apart
    for name in ("q_in", "k_in", "v_in") if split else ("attn_in",):
        b.norm(f"norm.{name}", D, count=count, pkey="norm.layers", layer_kind=lk)
    attention(b, w, count, lk)
    short_conv(Site(b, count, lk, "attn", "attention", dict(D=D, C=_ink(s).conv)), "out_conv", D, "D",
               "attention.out_conv")  # fmt: skip
    residual(b, "residual.attn", count, lk)
    b.norm("norm.ffn_in", D, count=count, pkey="norm.layers", layer_kind=lk)
    ffn(b, moe_layer, count, lk)
    short_conv(Site(b, count, lk, "ffn", "ffn", dict(D=D, C=_ink(s).conv)), "out_conv", D, "D", "ffn.out_conv")
    residual(b, "residual.ffn", count, lk)


def block_sources(spec: ModelSpec) -> dict[tuple[str, int, int], int]:
    """(input, queries q, sources m) -> layers, for Inkling-2's block attention residuals.

    Layer i (0-based) closes a block when i ≡ 0 mod n (n = ``block_size``); the model appends the layer's
    input to the block states after it. Layer i > 0's attention input attends the ⌈i / n⌉ blocks closed by
    earlier layers and the running state (m = ⌈i / n⌉ + 1); its FFN input also sees its own block when it
    closes one (m = ⌈(i + 1) / n⌉ + 1); the final norm's input attends all ⌈L / n⌉ blocks and the state.
    """
    n = _ink(spec).block_size
    out: dict[tuple[str, int, int], int] = {}
    for i, w in enumerate(spec.layer_windows):
        if i:
            key = ("attn", 1 if w else 3, -(-i // n) + 1)
            out[key] = out.get(key, 0) + 1
        key = ("ffn", 1, -(-(i + 1) // n) + 1)
        out[key] = out.get(key, 0) + 1
    out[("final", 1, -(-spec.n_layers // n) + 1)] = 1
    return out


def block_residuals(b: Builder) -> None:
    """Each (input, q, m) group: learned queries (q·D parameters per layer), an unweighted RMSNorm over the m
    stacked states, scores and the weighted sum (SDPA: 2·q·m·D FLOPs per token each), softmax over m."""
    D = b.spec.d_model
    b.window = None
    for (where, q, m), count in block_sources(b.spec).items():
        pkey = "attention.block_query" if where == "attn" else "ffn.block_query"
        site = Site(b, count, "", f"block_res.{where}", "attention" if where == "attn" else "ffn", dict(D=D, q=q, m=m))
        site.op(
            f"m{m}", "matmul", "BTqD,BTmD->BTqD", params=[(pkey, q * D)],
            flops=[(4 * q * m * D, "BT", "2·2·q·m·D")],
            vflops=[(NORM_FLOPS["rms_noparam"] * m * D + SOFTMAX_FLOPS * q * m, "BT", "3·m·D + 5·q·m")],
            weight=[(q * D, "1", "q·D")], act_in=[(m * D, "BT", "m·D")], act_out=[(q * D, "BT", "q·D")],
        )  # fmt: skip


def inkling_layers(b: Builder, label: Label) -> None:
    """The decoder layers grouped by (window, MoE), then Inkling-2's block residuals and Inkling's µP
    division of the final hidden states (by ``logits_mup_width_multiplier``, on the logit rows)."""
    s = b.spec
    groups: dict[tuple[int | None, bool], int] = {}
    for w, m in zip(s.layer_windows, s.layer_moe, strict=True):
        groups[(w, m)] = groups.get((w, m), 0) + 1
    for (w, m), count in groups.items():
        b.window = w
        _layer(b, w, m, count, label(s, w, m))
    b.window = None
    if _ink(s).block_size:
        block_residuals(b)
    if _ink(s).shared_sink:
        Site(b, 1, "", "lm_head", "lm_head", dict(D=s.d_model)).vector("mup_scale", "BLD->BLD", 1, s.d_model, "BL", "D")


def transformers_extra_state(spec: ModelSpec) -> int:
    """Elements per sequence transformers' cache holds beyond the serving state: each of the four conv
    windows of a layer keeps C inputs per channel (``update_conv_state`` with ``conv_kernel_size``) where
    ``causal_conv1d`` keeps C − 1, so one more input per channel: 2·K·H + 2·D per layer."""
    if spec.inkling is None:
        return 0
    return sum(2 * widths(spec, w)[1] * widths(spec, w)[2] + 2 * spec.d_model for w in spec.layer_windows)
