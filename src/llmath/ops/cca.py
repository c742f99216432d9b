"""ZAYA's compressed convolutional attention (CCA) projections (Figliolia et al. 2025, arXiv:2510.04476;
transformers 5.23 modeling_zaya.py ``ZayaCCAProjection``, ``ZayaQKNorm``).

Per layer, with N query heads, K key/value heads of width H and the kernel widths (t0, t1) of
:attr:`ModelSpec.cca_kernels`:

* ``q_proj`` D -> N·H and ``k_proj`` D -> K·H as usual; q and k (C = (N+K)·H channels) then run through a
  depthwise causal conv of width t0 and a grouped causal conv of width t1 (N+K groups of H channels: each
  output channel mixes its head's H channels over t1 positions, C·H·t1 weights), both with biases; the
  convs' outputs are added to a residual mix of q and the repeated k (4·N·H + K·H FLOPs per token);
* the value heads are half current, half delayed: ``v_current`` D -> K·H/2 of this token and
  ``v_delayed`` D -> K·H/2 of the previous one (the first position's delayed half is the projection of a
  zero vector; the last position's goes to the state);
* an L2 norm of q and k scaled to sqrt(H), the keys times a learned scale per K/V head (K parameters).

Per-sequence state beside the K/V cache: the convs' input window, (t0 − 1 + t1 − 1)·C elements, and the
delayed value half, K·H/2 (transformers' cache holds exactly these: ``conv_states``, ``recurrent_states``).

Execution: the grouped conv computes the T new outputs; the depthwise conv feeds it t1 − 1 more positions
(T + t1 − 1 outputs: F.conv1d over the window plus the new tokens; a serving kernel needs the same from the
raw-input state). ``eager`` (transformers) also projects the zero vector through ``v_delayed`` once per
sequence that starts without a cache (monomial B − BP); ``flash`` (serving) does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmath.ops.core import NORM_FLOPS

if TYPE_CHECKING:  # pragma: no cover
    from llmath.ops.attention import Attn


def cca_kv(a: Attn) -> None:
    """k_proj and the two value halves, written into the cache, and the delayed half's state."""
    s, site, D, K, H = a.site.spec, a.site, a.D, a.K, a.H
    half = K * H // 2
    site.linear("k_proj", "BTD,DKH->BTKH", D, K * H, bias=s.k_bias, pkey=f"{a.pk}.k", sym_out="K·H", out="kv_write")
    for which in ("current", "delayed"):
        site.linear(f"v_{which}", "BTD,DKH->BTKH", D, half, bias=s.v_bias, pkey=f"{a.pk}.v_{which}",
                    sym_out="K·H/2", out="kv_write")  # fmt: skip
    decode = site.b.stage == "decode"
    flops = []
    if site.b.attention == "eager":  # transformers: v_delayed(0) when a sequence has no state yet
        flops = [(2 * D * half, "B", "2·D·K·H/2"), (-2 * D * half, "BP", "2·D·K·H/2")]
    site.op(
        "v_state", "memory" if not flops else "matmul", "BD,DKH->BKH", flops=flops,
        kv_read=[(half, "B" if decode else "BP", "K·H/2")], kv_write=[(half, "B", "K·H/2")],
    )  # fmt: skip


def cca_conv(a: Attn) -> None:
    """The depthwise (width t0) and grouped (width t1, groups of H channels) causal convs over q and k,
    their biases, the residual mix of q and k, and the convs' input window as state."""
    s, site, N, K, H = a.site.spec, a.site, a.N, a.K, a.H
    if s.cca_kernels is None or a.cross:
        return
    t0, t1 = s.cca_kernels
    C, decode = (N + K) * H, site.b.stage == "decode"
    state = (t0 - 1 + t1 - 1) * C
    extra = [(2 * C * t0 * (t1 - 1), "B", f"2·C·t0·{t1 - 1}")] if t1 > 1 else []
    site.op(
        "conv_depthwise", "matmul", "BTC,CW->BTC", sizes=dict(C=C, W=t0),
        params=[("attention.conv_depthwise.weight", C * t0), ("attention.conv_depthwise.bias", C)],
        flops=[(2 * C * t0, "BT", "2·C·t0")] + extra, vflops=[(C, "BT", "C")],
        weight=[(C * t0 + C, "1", "C·(t0+1)")], act_in=[(C, "BT", "C")], act_out=[(C, "BT", "C")],
        kv_read=[(state, "B" if decode else "BP", "(t0+t1−2)·C")], kv_write=[(state, "B", "(t0+t1−2)·C")],
    )  # fmt: skip
    site.op(
        "conv_grouped", "matmul", "BTGH,GHWJ->BTGJ", sizes=dict(C=C, H=H, W=t1),
        params=[("attention.conv_grouped.weight", C * H * t1), ("attention.conv_grouped.bias", C)],
        flops=[(2 * C * H * t1, "BT", "2·C·H·t1")], vflops=[(C, "BT", "C")],
        weight=[(C * H * t1 + C, "1", "C·(H·t1+1)")], act_in=[(C, "BT", "C")], act_out=[(C, "BT", "C")],
    )  # fmt: skip
    site.vector("qk_residual", "BTNH,BTKH->BTNH", 1, 4 * N * H + K * H, "BT", "(4·N+K)·H")


def l2_qk_norm(a: Attn) -> None:
    """ZAYA: q and k L2-normalised to sqrt(H) (no weights), the keys times a learned scale per K/V head."""
    N, K, H = a.N, a.K, a.H
    per = NORM_FLOPS["rms_noparam"]
    a.site.vector(
        "qk_norm", "BTNH->BTNH", per, (N + K) * H, "BT", "(N+K)·H", component="norm",
        params=[("attention.qk_norm", K)], weight=[(K, "1", "K")],
    )  # fmt: skip
