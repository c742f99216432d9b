"""Sequence mixers other than attention (state-space and recurrent layers): eager and flash executions.

A mixer block is the operators of its kind's row in :data:`KINDS`, each step a small function declaring
its operators through the block's :class:`~llmath.ops.core.Site`, like :mod:`llmath.ops.attention`.

Per-sequence state: a mixer holds a fixed-size state per sequence (whatever the context), written by the
pass that updates it and read by the next step. Its operators carry it as ``kv_write`` / ``kv_read``
terms on the per-sequence monomial ``B`` (the KV cache's terms are per position), so the roofline counts
the state read and written per decode step and :mod:`llmath.ops.state` reads its size off the same
terms. A prefill from scratch starts from an empty state; one after a cached prefix (S0 > 0) reads the
prefix's state once per sequence (monomial ``BP`` = B when S0 > 0, else 0).

Executions:

* ``eager`` is what transformers' torch fallback runs when the fused kernels (``causal_conv1d``,
  ``mamba_ssm``) are not installed (``transformers/models/mamba/modeling_mamba.py``, 5.23):
  the causal conv is ``F.conv1d`` with padding C − 1 over the T new positions (T + C − 1 outputs; a
  decode step convolves the C cached positions and the new one: 2 outputs), the selective scan
  materialises ``exp(A·dt)`` and ``dt·B·x`` (B·I·T·N each, written and read) and contracts each step's
  state with C as a batched matmul (2·I·N FLOPs per token).
* ``flash`` is what the fused serving kernels run (``causal_conv1d_fn`` / ``selective_scan_fn`` of
  state-spaces/mamba, vLLM's mamba mixer): the conv computes the T outputs only, the scan keeps the
  I × N state on chip and reads its inputs (x, dt, B, C, z) once, writes y once (Gu & Dao 2023,
  arXiv:2312.00752, section 3.3.2: the hardware-aware scan is O(B·L·D·N) FLOPs with only the inputs and
  outputs in HBM). Its conv state holds the last C − 1 inputs (transformers' holds C).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from llmath.ops import linear_attn, recurrent
from llmath.ops.core import ACT_FLOPS, Builder, Site
from llmath.ops.mixer_splits import mixer_split
from llmath.ops.recurrent import mixer_of as _m

# Vector FLOPs of the selective scan per (token, channel, state) element: exp(A·dt) (2), dt·B (1),
# ·x (1), state·dA + dBx (2); per (token, channel): softplus(dt) 3, D skip 2, gate silu·y 5.
SCAN_STATE_FLOPS = 6
SCAN_CHANNEL_FLOPS = 3 + 2 + ACT_FLOPS + 1


def in_proj(site: Site) -> None:
    m = _m(site)
    site.linear("in_proj", "BTD,DI->BTI", site.spec.d_model, 2 * m.d_inner, bias=m.proj_bias,
                pkey="mixer.in_proj", sym_out="2·I")  # fmt: skip


def conv(site: Site) -> None:
    """Depthwise causal conv of width C over its channels (I; mamba2: I + 2·G·N), then silu; its state is
    the last C − 1 inputs."""
    m, eager, decode = _m(site), site.b.attention == "eager", site.b.stage == "decode"
    I, C = m.conv_channels, m.d_conv
    flops = [(2 * I * C, "BT", "2·I·C")]
    if eager:  # F.conv1d computes C − 1 extra outputs in a prefill (padding), one extra in a decode step
        flops.append((2 * I * C * (1 if decode else C - 1), "B", "2·I·C" if decode else "2·I·C·(C−1)"))
    state = (C - 1) * I
    nw = I * C + (I if m.conv_bias else 0)
    site.op(
        "conv", "matmul", "BTI,IC->BTI",
        params=[("mixer.conv.weight", I * C), ("mixer.conv.bias", I if m.conv_bias else 0)],
        flops=flops, vflops=[((1 if m.conv_bias else 0) * I + ACT_FLOPS * I, "BT", "I + 4·I")],
        weight=[(nw, "1", "I·C")], act_in=[(I, "BT", "I")], act_out=[(I, "BT", "I")],
        kv_write=[(state, "B", "(C−1)·I")], kv_read=[(state, "B" if decode else "BP", "(C−1)·I")],
    )  # fmt: skip


def x_proj(site: Site) -> None:
    m = _m(site)
    site.linear("x_proj", "BTI,IR->BTR", m.d_inner, m.dt_rank + 2 * m.d_state, bias=False, pkey="mixer.x_proj",
                sym_in="I", sym_out="(R+2·N)")  # fmt: skip


def inner_norms(site: Site) -> None:
    """Jamba: RMSNorms over the time step's rank-R input and over B and C (N each), with weights."""
    m = _m(site)
    if m.inner_norms:
        w = m.dt_rank + 2 * m.d_state
        site.vector("inner_norms", "BTR->BTR", 4, w, "BT", "(R+2·N)", component="norm",
                    params=[("norm.mixer", w)], weight=[(w, "1", "R + 2·N")])  # fmt: skip


def dt_proj(site: Site) -> None:
    m = _m(site)
    site.linear("dt_proj", "BTR,RI->BTI", m.dt_rank, m.d_inner, bias=True, pkey="mixer.dt_proj", sym_in="R",
                sym_out="I")  # fmt: skip


def scan(site: Site) -> None:
    """The selective scan: state h = exp(A·dt)·h + dt·B·x per token, y = h·C + D·x, gated by silu(z)."""
    m, eager, decode = _m(site), site.b.attention == "eager", site.b.stage == "decode"
    I, N = m.d_inner, m.d_state
    ins = [(3 * I + 2 * N, "BT", "3·I + 2·N")]  # x, dt, z and B, C
    outs = [(I, "BT", "I")]
    if eager and not decode:  # exp(A·dt) and dt·B·x materialised, written then read by the loop
        ins.append((2 * I * N, "BT", "2·I·N"))
        outs.append((2 * I * N, "BT", "2·I·N"))
    site.op(
        "scan", "matmul", "BTI,BTN,BIN->BTI",
        params=[("mixer.A_log", I * N), ("mixer.D", I)],
        flops=[(2 * I * N, "BT", "2·I·N")],
        vflops=[(SCAN_STATE_FLOPS * I * N + SCAN_CHANNEL_FLOPS * I, "BT", f"{SCAN_STATE_FLOPS}·I·N + 10·I")],
        weight=[(I * N + I, "1", "I·N + I")], act_in=ins, act_out=outs,
        kv_write=[(I * N, "B", "I·N")], kv_read=[(I * N, "B" if decode else "BP", "I·N")],
    )  # fmt: skip


def out_proj(site: Site) -> None:
    m = _m(site)
    bias = m.proj_bias if m.out_bias is None else m.out_bias
    site.linear("out_proj", "BTI,ID->BTD", m.d_inner, site.spec.d_model, bias=bias, pkey="mixer.out_proj",
                sym_in="I", sym_out="D")  # fmt: skip


def in_proj2(site: Site) -> None:
    """Mamba-2's single input projection: z (I), x (I), B and C (G·N each), dt (H)."""
    m = _m(site)
    n = 2 * m.d_inner + 2 * m.n_groups * m.d_state + m.n_heads
    site.linear("in_proj", "BTD,DI->BTI", site.spec.d_model, n, bias=m.proj_bias, pkey="mixer.in_proj",
                sym_out="(2·I+2·G·N+H)")  # fmt: skip
    # Falcon-H1: its µP vector scales each projected channel, a buffer, not a parameter (transformers'
    # modeling_falcon_h1.py, ``projected_states * self.mup_vector``); counted in both executions
    if m.multipliers:
        site.vector("in_scale", "BTI->BTI", 1, n, "BT", "(2·I+2·G·N+H)")


def ssd(site: Site) -> None:
    """The SSD scan (Dao & Gu 2024, arXiv:2405.21060, section 6) over H heads of width P, state H·P·N.

    eager (transformers' ``mamba2_chunk_scan``, 5.23): pads T to whole chunks of Q and runs, per chunk,
    C·Bᵀ over the full Q × Q block (2·Q·H·N per padded token), that block times x (2·Q·H·P), the chunk's
    end state B·x (2·H·P·N), the inter-chunk recurrence as a (chunks + 1)² matmul (2·H·P·N each) and
    C times the chunk's start state (2·H·P·N per padded token). A decode step is the recurrent update
    (2·H·P·N per token, the C contraction). flash (``mamba_chunk_scan_combined`` of state-spaces/mamba,
    as vLLM runs it): the same steps without padding, C·Bᵀ once per group (G, not H) and both
    intra-chunk products over the causal pairs of each chunk only; the state passing between chunks is
    elementwise (H·P·N multiply-adds per chunk).
    """
    m, eager, decode = _m(site), site.b.attention == "eager", site.b.stage == "decode"
    H, P, N, G, Q = m.n_heads, m.head_dim, m.d_state, m.n_groups, m.chunk_size
    hpn = H * P * N
    if decode:
        flops = [(2 * hpn, "BT", "2·H·P·N")]
        vflops = [(SCAN_STATE_FLOPS * hpn, "BT", f"{SCAN_STATE_FLOPS}·H·P·N")]
    elif eager:
        c, q = f"C:{Q}", f"Q:{Q}"
        flops = [(2 * Q * Q * H * (N + P) + 4 * Q * hpn + 4 * hpn, c, "2·Q²·H·(N+P) + 4·Q·H·P·N + 4·H·P·N"),
                 (2 * hpn, q, "2·H·P·N"), (2 * hpn, "B", "2·H·P·N")]  # fmt: skip
        vflops = [(SCAN_STATE_FLOPS * hpn, "BT", f"{SCAN_STATE_FLOPS}·H·P·N")]
    else:
        x = f"X:{Q}"
        flops = [(2 * (G * N + H * P), x, "2·(G·N + H·P)"), (4 * hpn, "BT", "4·H·P·N")]
        vflops = [(SCAN_STATE_FLOPS * hpn, "BT", f"{SCAN_STATE_FLOPS}·H·P·N"), (2 * hpn, f"C:{Q}", "2·H·P·N")]
    I, GN = m.d_inner, m.n_groups * m.d_state
    site.op(
        "scan", "matmul", "BTHP,BTGN,BHPN->BTHP",
        params=[("mixer.A_log", H), ("mixer.D", H), ("mixer.dt_bias", H)],
        flops=flops, vflops=vflops + [(3 * H + 2 * I, "BT", "3·H + 2·I")],
        weight=[(3 * H, "1", "3·H")], act_in=[(I + 2 * GN + H, "BT", "I + 2·G·N + H")], act_out=[(I, "BT", "I")],
        kv_write=[(hpn, "B", "H·P·N")], kv_read=[(hpn, "B" if decode else "BP", "H·P·N")],
    )  # fmt: skip


def gated_norm(site: Site) -> None:
    """RMSNorm of y · silu(z) over I (per group of I / G channels), with its weight; without the norm
    (Falcon-H1's ``mamba_rms_norm=false``) the gate y · silu(z) only."""
    I = _m(site).d_inner
    if not _m(site).gated_norm:
        site.vector("gate", "BTI->BTI", ACT_FLOPS + 1, I, "BT", "I")
        return
    site.vector("norm", "BTI->BTI", 4 + ACT_FLOPS + 1, I, "BT", "I", component="norm",
                params=[("norm.mixer", I)], weight=[(I, "1", "I")])  # fmt: skip


Step = Callable[[Site], None]
KINDS: dict[str, tuple[Step, ...]] = {
    "mamba": (in_proj, conv, x_proj, inner_norms, dt_proj, scan, out_proj),
    "mamba2": (in_proj2, conv, ssd, gated_norm, out_proj),
    **recurrent.KINDS,  # short-conv and recurrent kinds (ops/recurrent.py)
}
KINDS.update(linear_attn.KINDS)  # gated_delta, kda, lightning (ops/linear_attn.py)


def mixer_block(b: Builder, count: int, lk: str) -> None:
    """One mixer block per layer of a group, of the spec's mixer kind."""
    m = b.spec.mixer
    if m is None:  # pragma: no cover - assemble sends mixer layers only for specs with a mixer
        raise AssertionError(b.spec.name)
    sizes = dict(D=b.spec.d_model, I=m.d_inner, N=m.d_state, C=m.d_conv)
    if m.kind in recurrent.KINDS:
        sizes = recurrent.sizes(m, b.spec.d_model)
    else:
        sizes.update(
            dict(R=m.dt_rank) if m.kind == "mamba" else dict(H=m.n_heads, P=m.head_dim, G=m.n_groups, Q=m.chunk_size)
        )
    site = Site(b, count, lk, "mixer", "mixer", sizes)
    before = len(b.ops)
    for step in KINDS[m.kind]:
        step(site)
    for i in range(before, len(b.ops)):  # each operator's tensor-parallel split (ops/mixer_splits.py)
        b.ops[i] = replace(b.ops[i], split=mixer_split(m.kind, b.ops[i].name, b.ops[i].split))


def transformers_extra_state(spec) -> int:
    """Elements per sequence transformers' cache holds beyond the serving kernels' state: its Mamba conv
    state keeps C positions per channel (``conv_kernel`` wide) where ``causal_conv1d`` keeps C − 1."""
    m = spec.mixer
    if m is not None and m.kind in recurrent.KINDS:
        return recurrent.transformers_extra_state(m, sum(k == m.kind for k in spec.layer_mixers))
    if m is None or m.kind not in ("mamba", "mamba2", "gated_delta", "kda"):
        return 0
    return m.conv_channels * sum(k.split("+")[-1] == m.kind for k in spec.layer_mixers)
