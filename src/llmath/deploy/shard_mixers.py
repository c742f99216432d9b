"""Tensor-parallel rules of the non-attention mixers: what one of T = tp ranks holds and runs of each.

Each rule follows how vLLM shards that layer (file paths in vllm-project/vllm):

* **mamba** (``vllm/model_executor/layers/mamba/mamba_mixer.py``, ``MambaMixer``): in_proj, conv, dt_proj,
  A and D split over the I inner channels (I/T each); x_proj row-parallel (its R + 2·N outputs
  all-reduced); the scan reads B and C whole. Needs T | I.
* **mamba2** (``mamba_mixer2.py``, ``MambaMixer2``): split by heads (z, x, dt, A, D, dt_bias, the gated
  norm: H/T heads, I/T channels) and groups (B, C: G/T groups, or the one group replicated on every rank
  when G = 1, whose gated norm all-reduces each token's sum of squares); out_proj row-parallel. Needs
  T | H, and T | G or G = 1. Falcon-H1's parallel layers run it beside attention
  (``vllm/model_executor/models/falcon_h1.py``: the attention's o_proj and the mixer's out_proj are two
  ``RowParallelLinear`` each reducing its own output before the branches are summed).
* **gated_delta** (``vllm/model_executor/layers/mamba/gdn_linear_attn.py``, ``GatedDeltaNetAttention``,
  Qwen3-Next / Qwen3.5): in_proj_qkvz and in_proj_ba ``MergedColumnParallelLinear``, the conv over q, k, v
  split per part (``mamba_v2_sharded_weight_loader``), A_log and dt_bias H/T, the gated RMSNorm of width P
  whole on every rank (``RMSNormGated(head_v_dim)``), out_proj ``RowParallelLinear``. Needs T | G key
  heads and T | H value heads (the qkvz view is over G/T key heads). OLMo-Hybrid's layer
  (``vllm/model_executor/layers/mamba/gdn/olmo_gdn_linear_attn.py``) shards the same way.
* **kda** (``vllm/model_executor/layers/kda.py``, ``KimiDeltaAttention``): q, k, v, b and the gates'
  up projections f_b, g_b ``ColumnParallelLinear``, their down projections f_a, g_a (D -> R)
  ``ReplicatedLinear`` (whole on every rank), the q/k/v convs split, A_log H/T, dt_bias I/T, the output
  norm of width P whole, o_proj row-parallel. Needs T | H. The full-rank-gate variant (Ling hybrid,
  ``gate_rank`` 0) has f_proj and g_proj D -> I ``ColumnParallelLinear`` (I/T each), as vLLM's KDA layer with
  ``kda_use_full_proj`` builds them (``vllm/model_executor/models/solar_open2.py``).
* **lightning** (``vllm/model_executor/layers/mamba/linear_attn.py``, ``MiniMaxText01LinearAttention``):
  qkv_proj and output_gate ``ColumnParallelLinear``, H/T heads (and their decay slopes), the RMSNorm over
  I split I/T per rank with its variance all-reduced (``MiniMaxText01RMSNormTP``: one element per token),
  out_proj row-parallel. Needs T | H.
* **shortconv** (``vllm/model_executor/layers/mamba/short_conv.py``, ``ShortConv``, LFM2): in_proj
  ``MergedColumnParallelLinear`` [I, I, I], the conv ``ColumnParallelLinear`` over I, out_proj
  ``RowParallelLinear`` (bias whole on every rank). Needs T | I.

Every rule's state per sequence is the rank's share: the conv window over its channels and the recurrent
state over its heads. The collectives (:mod:`llmath.deploy.comm`): out_proj's all-reduce of D per token;
plus Mamba's x_proj all-reduce, Mamba-2's one-group and lightning's norm all-reduces.

No serving engine implements the next three (vLLM and SGLang ship no RecurrentGemma, RWKV-4 or xLSTM model), so
their rules are **llmath's choice**, the head / channel split an engine applies to its other recurrent mixers:

* **rglru** (RecurrentGemma): in_proj (both branches) column-parallel, the conv, the block-diagonal gates (H/T
  blocks), Λ and the recurrence over the rank's I/T channels (the per-channel split the Griffin authors
  describe for their recurrent block, De et al. 2024, arXiv:2402.19427, section 4.1), out_proj row-parallel
  (its bias whole). Needs T | H (so T | I).
* **rwkv** (RWKV-4): the time mix's key/value/receptance column-parallel (I/T channels each), WKV and its
  decay and bonus over I/T channels, output row-parallel; the channel mix's key column-parallel (F/T),
  value row-parallel (all-reduced), its receptance D -> D whole on every rank (it gates the reduced
  output); both token shifts (their mixing vectors and D-wide states) whole on every rank. Needs T | I
  and T | F.
* **mlstm** (xLSTM): q, k, v, o and the input/forget gates column-parallel by heads (H/T), the cell,
  its state and the per-head norm per rank, out_proj row-parallel. Needs T | H.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction as Fr

from llmath.errors import LayoutError
from llmath.model.spec import MixerSpec
from llmath.ops.core import Term
from llmath.ops.split import Split

ONE = Fr(1)
Factor = Fr | Callable[[int, Term], Fr]
Factors = tuple[Fr, dict[str, Factor], Fr, Fr]  # default, per-class overrides, weight and bias params
SHARDED = frozenset({"mamba", "mamba2", "gated_delta", "kda", "lightning", "shortconv", "rglru", "rwkv", "mlstm"})


def mixer_tp_problem(m: MixerSpec, tp: int) -> str | None:
    """Why vLLM would refuse ``tp``-way TP of the mixer ``m`` (the module doc's rules), or None."""
    if m.kind not in SHARDED:
        return f"tp={tp}: the {m.kind} mixer has no sourced tensor-parallel rule; analyse it on one GPU (--tp 1)"
    if m.kind == "rwkv" and (m.d_inner % tp or m.d_ff % tp):
        what = f"{m.d_inner} channels and {m.d_ff} channel-mix width"
        return f"tp={tp} must divide the RWKV mixer's {what} (llmath's rule)"
    if m.kind in ("mamba", "shortconv") and m.d_inner % tp:
        name = "Mamba" if m.kind == "mamba" else "short-conv"
        return f"tp={tp} must divide the {name} mixer's {m.d_inner} inner channels ({_engine(m)})"
    if m.kind not in ("mamba", "shortconv", "rwkv") and m.n_heads % tp:
        return f"tp={tp} must divide the {_label(m)} mixer's {m.n_heads} heads ({_engine(m)})"
    if m.kind == "mamba2" and m.n_groups % tp and m.n_groups != 1:
        return f"tp={tp} must divide the Mamba-2 mixer's {m.n_groups} groups, or groups must be 1 (vLLM MambaMixer2)"
    if m.kind == "gated_delta" and m.n_groups % tp:
        return f"tp={tp} must divide the Gated DeltaNet mixer's {m.n_groups} key heads (vLLM GatedDeltaNetAttention)"
    return None


def _label(m: MixerSpec) -> str:
    return {"mamba2": "Mamba-2", "gated_delta": "Gated DeltaNet", "kda": "KDA", "lightning": "lightning",
            "rglru": "RG-LRU", "mlstm": "mLSTM"}[m.kind]  # fmt: skip


def _engine(m: MixerSpec) -> str:
    return {
        "mamba": "vLLM MambaMixer",
        "mamba2": "vLLM MambaMixer2",
        "gated_delta": "vLLM GatedDeltaNetAttention",
        "kda": "vLLM KimiDeltaAttention",
        "lightning": "vLLM MiniMaxText01LinearAttention",
        "shortconv": "vLLM ShortConv",
        "rglru": "llmath's rule: the gates' blocks split",
        "mlstm": "llmath's rule: heads split",
    }[m.kind]


def mixer_groups_per_rank(m: MixerSpec, tp: int) -> int:
    """Mamba-2's B/C groups one rank holds: G/T, or the one group replicated on every rank when G = 1
    (vLLM ``extra_groups_for_head_shards`` pads the groups to T)."""
    return m.n_groups // tp if m.n_groups % tp == 0 else 1


def mixer_factors(split: str, m: MixerSpec, T: int) -> Factors:
    """The factors of a mixer operator of the named rule ``split`` (ops/split.py) on one of ``T`` ranks: Mamba's
    scan, Mamba-2's in-projection, conv and scan, and the gated norm of Gated DeltaNet and KDA (module doc)."""
    if mixer_tp_problem(m, T) is not None and T > 1:
        raise LayoutError(f"a {m.kind} mixer operator ({split}) has no sharding rule; analyse it on one GPU")
    if split == Split.GATED_NORM:  # per rank over I/T; weight (P) whole
        return Fr(1, T), {"weight": ONE}, ONE, ONE
    if split == Split.MAMBA_SCAN:
        return _mamba_scan(m, T)
    return _mamba2(split, m, T)


def _mamba_scan(m: MixerSpec, T: int) -> Factors:
    t = Fr(1, T)
    I, N = m.d_inner, m.d_state  # x, dt, z: I/T each; B and C (N each) whole on every rank
    xz = Fr(3 * I // T + 2 * N, 3 * I + 2 * N)
    return t, {"act_in": lambda i, _: xz if i == 0 else t}, t, t


def _mamba2(split: str, m: MixerSpec, T: int) -> Factors:
    t = Fr(1, T)
    I, H, N, G, g = m.d_inner, m.n_heads, m.d_state, m.n_groups, mixer_groups_per_rank(m, T)
    if split == Split.MAMBA2_IN_PROJ:  # z, x (I/T each), B, C (g·N each), dt (H/T)
        f = Fr(2 * I // T + 2 * g * N + H // T, 2 * I + 2 * G * N + H)
        return f, {"act_in": ONE}, f, f
    if split == Split.MAMBA2_CONV:  # channels x, B, C: I/T + 2·g·N
        f = Fr(I // T + 2 * g * N, I + 2 * G * N)
        return f, {}, f, f
    # the scan (Split.MAMBA2_SCAN): heads split; the flash C·Bᵀ term is over g groups and H/T heads
    cb = Fr(g * N + H * m.head_dim // T, G * N + H * m.head_dim)
    over: dict[str, Factor] = {"act_in": Fr(I // T + 2 * g * N + H // T, I + 2 * G * N + H)}
    over["flops"] = lambda _, term: cb if term.mono.startswith("X:") else t
    return t, over, t, t


__all__ = ["SHARDED", "mixer_factors", "mixer_groups_per_rank", "mixer_tp_problem"]
