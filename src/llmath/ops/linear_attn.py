"""Linear attention mixers: Gated DeltaNet, Kimi Delta Attention and lightning attention (eager and flash).

Each kind is a row of :data:`KINDS` (registered in :data:`llmath.ops.mixers.KINDS`), its steps small
functions declaring operators through the block's :class:`~llmath.ops.core.Site`. Letters: D model width,
H value heads of width P (I = H·P), G key heads of width N, C conv width, Q chunk (block) size, R the
low-rank gate width (kda). The per-sequence state is H × N × P (plus the conv window), carried as
``kv_write`` / ``kv_read`` terms on the per-sequence monomial ``B`` like the state-space mixers.

Parameters are reported under ``attention.linear.*`` (transformers names these layers ``linear_attn`` /
``self_attn``), the gated norm's weight under ``norm.mixer``.

Executions:

* ``eager`` is transformers' torch fallback (5.23): ``torch_chunk_gated_delta_rule`` (Qwen3-Next,
  Qwen3.5, OLMo-Hybrid) and ``chunk_kimi_delta_attention`` (Kimi-Linear, Ling hybrid) pad the prompt to
  whole chunks of Q = 64 and run their products per chunk (the matmuls below; the UT transform's
  triangular solve is ``torch.linalg.solve_triangular`` / a row loop, which FlopCounterMode does not count,
  so it is a vector cost here); a decode step is ``torch_recurrent_gated_delta_rule`` /
  ``recurrent_kimi_delta_attention``, elementwise products and sums over the H·N·P state (no matmul).
  MiniMax's lightning attention runs blocks of 256 (the last one short, unpadded) with the full b × b
  score block, and a decode step as two matmuls with the P × P state.
* ``flash`` is what the fused kernels run: flash-linear-attention's ``chunk_gated_delta_rule`` /
  ``chunk_kda`` (fla-org/flash-linear-attention, ``fla/ops/gated_delta_rule/chunk.py``, ``fla/ops/kda``;
  vLLM's ``qwen3_next`` and ``kimi_linear`` models call them): per chunk of Q (the last chunk computed
  as a whole block) k·kᵀ (2·Q²·N), the inverse of the unit lower-triangular Q × Q system (``solve_tril``,
  Q(Q−1)(Q−2)/3), w and u (2·Q²·(N+P)), the state pass (v_new = u − w·S, S += kᵀ·v_new: 4·Q·N·P) and
  the output (q·S 2·Q·N·P, (q·kᵀ)·v_new 2·Q²·(N+P)); a decode step is ``fused_recurrent_*``, elementwise
  in registers. Lightning attention (Qin et al. 2024, Lightning Attention-2, arXiv:2401.04658,
  Algorithm 1; vLLM ``lightning_attn.py``) computes the intra-block products over the causal pairs only
  and the inter-block part through the P × P state. Their conv states hold C − 1 positions
  (``causal_conv1d``; transformers' hold C: :func:`llmath.ops.mixers.transformers_extra_state`).
"""

from __future__ import annotations

from collections.abc import Callable

from llmath.model.spec import MixerSpec
from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, Site
from llmath.ops.recurrent import mixer_of as _m

PK = "attention.linear"
# Elementwise FLOPs of one recurrent delta-rule step per state element (H·N·P): decay, the k-contraction
# (multiply, add), the rank-1 update (multiply, add) and the q-contraction (multiply, add).
RECURRENT_FLOPS = 7


def in_proj(site: Site) -> None:
    """Gated DeltaNet's input projections as one D -> 2·G·N + 2·I + 2·H (q, k, v, the output gate z,
    β and the decay's α per value head); Qwen3-Next fuses them in two, Qwen3.5 in four, OLMo-Hybrid six."""
    m = _m(site)
    out = 2 * m.n_groups * m.d_state + 2 * m.d_inner + 2 * m.n_heads
    site.linear("in_proj", "BTD,DJ->BTJ", site.spec.d_model, out, bias=False, pkey=f"{PK}.in_proj",
                sizes=dict(site.sizes, J=out), sym_out="(2·G·N+2·I+2·H)")  # fmt: skip


def qkv_proj(site: Site) -> None:
    """q, k and v (kda, lightning): D -> 2·G·N + I; lightning applies silu to all three."""
    m = _m(site)
    out = 2 * m.n_groups * m.d_state + m.d_inner
    site.linear("qkv_proj", "BTD,DJ->BTJ", site.spec.d_model, out, bias=False, pkey=f"{PK}.qkv_proj",
                sizes=dict(site.sizes, J=out), sym_out="(2·G·N+I)")  # fmt: skip
    if m.kind == "lightning":
        site.vector("qkv_act", "BTJ->BTJ", ACT_FLOPS, out, "BT", "3·I")


def conv(site: Site) -> None:
    """Depthwise causal conv (no bias) of width C over q, k, v (I + 2·G·N channels), then silu.

    eager: ``F.conv1d`` with padding C − 1 computes C − 1 extra outputs per channel in a prefill and one
    extra in a decode step (C cached + 1 new inputs); flash (``causal_conv1d``) the T outputs only."""
    m, eager, decode = _m(site), site.b.attention == "eager", site.b.stage == "decode"
    if not m.d_conv:
        return
    ch, C = m.conv_channels, m.d_conv
    flops = [(2 * ch * C, "BT", "2·J·C")]
    if eager:
        flops.append((2 * ch * C * (1 if decode else C - 1), "B", "2·J·C" if decode else "2·J·C·(C−1)"))
    state = (C - 1) * ch
    site.op(
        "conv", "matmul", "BTJ,JC->BTJ", sizes=dict(site.sizes, J=ch),
        params=[(f"{PK}.conv.weight", ch * C)],
        flops=flops, vflops=[(ACT_FLOPS * ch, "BT", "4·J")],
        weight=[(ch * C, "1", "J·C")], act_in=[(ch, "BT", "J")], act_out=[(ch, "BT", "J")],
        kv_write=[(state, "B", "(C−1)·J")], kv_read=[(state, "B", "(C−1)·J")] if decode else [],
    )  # fmt: skip


def kda_gates(site: Site) -> None:
    """Kimi Delta Attention's per-channel forget gate, β (D -> H) and output gate: with ``gate_rank`` R the
    forget and output gates are D -> R -> I pairs (Kimi-Linear), else one D -> I each (Ling hybrid)."""
    m, D = _m(site), site.spec.d_model
    I, R = m.d_inner, m.gate_rank
    site.linear("b_proj", "BTD,DH->BTH", D, m.n_heads, bias=False, pkey=f"{PK}.b_proj", sym_out="H")
    for g in ("f", "g"):
        if R:
            site.linear(f"{g}_a_proj", "BTD,DR->BTR", D, R, bias=False, pkey=f"{PK}.{g}_a",
                        sizes=dict(site.sizes, R=R), sym_out="R")  # fmt: skip
            site.linear(f"{g}_b_proj", "BTR,RI->BTI", R, I, bias=False, pkey=f"{PK}.{g}_b",
                        sizes=dict(site.sizes, R=R), sym_in="R", sym_out="I")  # fmt: skip
        else:
            site.linear(f"{g}_proj", "BTD,DI->BTI", D, I, bias=False, pkey=f"{PK}.{g}", sym_out="I")


def _chunk_flops(m: MixerSpec, eager: bool) -> tuple[int, str]:
    """Matmul FLOPs per chunk of Q (all heads) of the chunked delta rule, and the formula."""
    H, N, P, Q = m.n_heads, m.d_state, m.head_dim, m.chunk_size
    if not eager:  # FLA: kkᵀ, solve_tril, w/u, state pass, output
        per = 6 * Q * Q * N + 4 * Q * Q * P + 6 * Q * N * P + Q * (Q - 1) * (Q - 2) // 3
        return H * per, "H·(6·Q²·N + 4·Q²·P + 6·Q·N·P + Q(Q−1)(Q−2)/3)"
    if m.kind == "gated_delta":  # kβ·kᵀ, q·kᵀ; per chunk w·S, q·S, attn·v_new, kᵀ·v_new
        return H * (4 * Q * Q * N + 2 * Q * Q * P + 6 * Q * N * P), "H·(4·Q²·N + 2·Q²·P + 6·Q·N·P)"
    # kda: its kβ·kᵀ and q·kᵀ are elementwise (per-channel decay); A·vβ, A·kβ, then as above
    return H * (2 * Q * Q * N + 4 * Q * Q * P + 6 * Q * N * P), "H·(2·Q²·N + 4·Q²·P + 6·Q·N·P)"


def _eager_vector(m: MixerSpec) -> tuple[int, str]:
    """Vector FLOPs per chunk of transformers' fallback that FlopCounterMode does not count: the UT
    transform's triangular solves (gated_delta: Q²·(N+P)) or kda's elementwise k·kᵀ, q·kᵀ with the
    per-channel decay (6·Q²·N) and its row-loop inverse (Q(Q−1)(Q−2)/3)."""
    H, N, P, Q = m.n_heads, m.d_state, m.head_dim, m.chunk_size
    if m.kind == "gated_delta":
        return H * Q * Q * (N + P), "H·Q²·(N+P)"
    return H * (6 * Q * Q * N + Q * (Q - 1) * (Q - 2) // 3), "H·(6·Q²·N + Q(Q−1)(Q−2)/3)"


def delta_rule(site: Site) -> None:
    """The gated delta rule, S ← γ·S·(I − β·k·kᵀ) + β·v·kᵀ, o = S·q (γ per head: gated_delta; per key
    channel: kda), chunked in a prefill (chunks of Q, monomial ``C:Q``), recurrent in a decode step."""
    m, eager, decode = _m(site), site.b.attention == "eager", site.b.stage == "decode"
    H, N, P, Q, I = m.n_heads, m.d_state, m.head_dim, m.chunk_size, m.d_inner
    hnp, c = H * N * P, f"C:{Q}"
    rec = [(RECURRENT_FLOPS * hnp, "BT", f"{RECURRENT_FLOPS}·H·N·P")]
    if decode:
        flops, vflops, inter = [], rec, []
    else:
        per, sym = _chunk_flops(m, eager)
        flops, vflops = [(per, c, sym)], [(2 * hnp, c, "2·H·N·P")]
        if eager:
            ev, esym = _eager_vector(m)
            vflops.append((ev, c, esym))
        inter = [(3 * H * Q * Q, c, "3·H·Q²")] if eager else []  # decay, UT and intra-chunk Q × Q blocks
    decay = H if m.kind == "gated_delta" else I
    ins = 2 * m.n_groups * N + I + H + decay
    site.op(
        "decay", "vector", "BTJ->BTJ", sizes=dict(site.sizes, J=H + decay),
        params=[(f"{PK}.A_log", H), (f"{PK}.dt_bias", decay)],
        vflops=[(4 * (H + decay), "BT", "4·(H + decay)")], weight=[(H + decay, "1", "H + decay")],
        act_in=[(H + decay, "BT", "H + decay")], act_out=[(H + decay, "BT", "H + decay")],
    )  # fmt: skip  # β = sigmoid(b), g = −exp(A_log)·softplus(a + dt_bias), per head (kda: per channel)
    site.op(
        "delta_rule", "matmul", "BTGN,BTHP,BHNP->BTHP", flops=flops, vflops=vflops,
        act_in=[(ins, "BT", "2·G·N + I + H + decay")] + inter,
        act_out=[(I, "BT", "I")] + inter, kv_write=[(hnp, "B", "H·N·P")],
        kv_read=[(hnp, "B", "H·N·P")] if decode else [],
    )  # fmt: skip


def lightning(site: Site) -> None:
    """Lightning attention: per head o = q·S with S ← λ·S + kᵀ·v (λ a fixed per-head decay), in blocks of Q.

    eager (transformers' ``MiniMaxLightningAttention``): per block of b positions q·kᵀ and its product
    with v over the full b × b block (4·P·b² per head; Σb² = 2·X − T with X the causal pairs inside
    blocks, monomial ``X:Q``) plus q·S and kᵀ·v (4·P² per token); a decode step 4·P² per head.
    flash: the intra-block products over the causal pairs only (4·P per pair)."""
    m, eager, decode = _m(site), site.b.attention == "eager", site.b.stage == "decode"
    H, P, Q = m.n_heads, m.head_dim, m.chunk_size
    state = H * m.d_state * P
    flops = [(4 * H * P * P, "BT", "4·H·P²")]
    if not decode:
        x = f"X:{Q}"
        flops += [(8 * H * P, x, "8·H·P"), (-4 * H * P, "BT", "4·H·P")] if eager else [(4 * H * P, x, "4·H·P")]
    site.op(
        "lightning", "matmul", "BTHP,BTHP,BHPP->BTHP",
        flops=flops, vflops=[(2 * state, "BT", "2·H·P²")],
        act_in=[(3 * m.d_inner, "BT", "3·I")], act_out=[(m.d_inner, "BT", "I")],
        kv_write=[(state, "B", "H·P²")], kv_read=[(state, "B", "H·P²")] if decode else [],
    )  # fmt: skip


def head_norm(site: Site) -> None:
    """RMSNorm over each head's P channels (one weight of width P shared by the heads), times silu of the
    output gate (gated_delta, kda)."""
    m = _m(site)
    site.vector("norm", "BTHP->BTHP", NORM_FLOPS["rms"] + ACT_FLOPS + 1, m.d_inner, "BT", "I", component="norm",
                params=[("norm.mixer", m.head_dim)], weight=[(m.head_dim, "1", "P")])  # fmt: skip


def lightning_out(site: Site) -> None:
    """MiniMax: RMSNorm over all I channels (weight I), then sigmoid(output_gate(x)) with output_gate D -> I."""
    m = _m(site)
    site.vector("norm", "BTI->BTI", NORM_FLOPS["rms"], m.d_inner, "BT", "I", component="norm",
                params=[("norm.mixer", m.d_inner)], weight=[(m.d_inner, "1", "I")])  # fmt: skip
    site.linear("output_gate", "BTD,DI->BTI", site.spec.d_model, m.d_inner, bias=False, pkey=f"{PK}.output_gate",
                sym_out="I")  # fmt: skip
    site.vector("gate", "BTI->BTI", ACT_FLOPS + 1, m.d_inner, "BT", "I")


def out_proj(site: Site) -> None:
    m = _m(site)
    site.linear("out_proj", "BTI,ID->BTD", m.d_inner, site.spec.d_model, bias=False, pkey=f"{PK}.out_proj",
                sym_in="I", sym_out="D")  # fmt: skip


Step = Callable[[Site], None]
KINDS: dict[str, tuple[Step, ...]] = {
    "gated_delta": (in_proj, conv, delta_rule, head_norm, out_proj),
    "kda": (qkv_proj, conv, kda_gates, delta_rule, head_norm, out_proj),
    "lightning": (qkv_proj, lightning, lightning_out, out_proj),
}
