"""The operator columns of a table that the fitted attention and MoE kernel models apply to, with the sizes that
are their features, read from each operator's own declaration and terms (:mod:`llmath.hardware.fitted_ops`
applies the fits to them; docs/efficiency.md, "In the roofline").

* dense attention: the operators that declare the dense attention kernel (ops/kernel.py) of a decoder-only,
  non-MLA model, their windows and their (query, KV) heads from their own terms;
* MLA's prefill attention: the operators that declare ``Kernel.MLA_CONTEXT``, their heads and per-head widths;
* MLA's absorbed decode attention: the operators that declare ``Kernel.MLA_DECODE`` and their heads;
* routed experts: the weight GEMMs whose weights are the MoE experts, and the share of the layer one rank of a
  parallel layout computes (:func:`_expert_shares`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from llmath.hardware import efficiency_fit as ef
from llmath.hardware.moe_ep_token import routed_flops_per_token
from llmath.ops import Table
from llmath.ops.kernel import Kernel
from llmath.ops.mla import absorbed_flops_per_head
from llmath.ops.table import op_weights


def fit_format(dtype: str) -> str | None:
    """The fits' key of a format (``None``: no fit is keyed by it)."""
    return ef.FORMAT_ALIASES.get(dtype)


@dataclass(frozen=True)
class Columns:
    """Operator columns the fits apply to, and the sizes that are their features."""

    attn: np.ndarray  # attention columns (the dense attention kernel's, decoder-only, non-MLA)
    windows: np.ndarray  # their windows (inf: full attention)
    heads: np.ndarray  # their query and KV heads (a rank's share on a parallel layout)
    kv_heads: np.ndarray
    head_dim: int
    routed: np.ndarray  # routed expert GEMM columns
    moe: tuple[int, int, int, int]  # (hidden, expert inter, top-k, experts); zeros without MoE
    share: float = 1.0  # the share of every expert's weights the table's rank holds (1 / (moe-TP × EP))
    inter_share: float = 1.0  # the share of each expert's intermediate width it computes (1 / moe-TP)
    mla: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # MLA prefill attention (MLA_CONTEXT)
    mla_heads: np.ndarray = field(default_factory=lambda: np.zeros(0))  # their heads (a rank's share)
    mla_dims: tuple[int, int] = (0, 0)  # (qk_nope + qk_rope, v_head_dim) per head
    routed_flops: float = 0.0  # the rank's routed-expert FLOPs per routed token of one MoE layer (its own terms)
    grouped_routing: bool = False  # the router picks top-k within groups of experts (MoESpec.grouped_routing)
    mla_decode: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # MLA's absorbed decode kernel
    mla_decode_heads: np.ndarray = field(default_factory=lambda: np.zeros(0))  # their heads (a rank's share)


def _heads(op, d: int) -> tuple[float, float]:
    """(query heads, KV heads) of an attention op from its own terms: 4·H·d FLOPs per visible pair (QK and
    PV), 2·K·d elements of K/V read per position; on a layout, the rank's share."""
    fl = sum(t.coef for t in op.terms("flops") if t.mono.startswith("P:"))
    kv = sum(t.coef for t in op.terms("kv_read") if t.mono.startswith("K:"))
    return fl / (4 * d), kv / (2 * d)


@lru_cache(maxsize=512)
def columns(table: Table) -> Columns:
    spec = table.spec
    d = spec.head_dim
    # the fits are the dense attention kernel's (features: pairs, positions read): the operators that declare
    # it (ops/kernel.py) of a decoder-only, non-MLA model
    plain = spec.mla is None and spec.encoder is None
    attn = [i for i, op in enumerate(table.ops) if plain and op.kernel == Kernel.DENSE_ATTENTION]
    win = np.array([np.inf if table.ops[i].window is None else table.ops[i].window for i in attn], dtype=float)
    hk = np.array([_heads(table.ops[i], d) for i in attn], dtype=float).reshape(-1, 2)
    routed: list[int] = []
    m = spec.moe
    if m is not None:
        routed = np.flatnonzero(table.is_weight_mm & op_weights(table)[1]).tolist()
    moe = (spec.d_model, m.d_ff_expert, m.top_k, m.n_experts) if m is not None else (0, 0, 0, 0)
    share, inter = _expert_shares(table, routed) if routed else (1.0, 1.0)
    r = np.array(routed, dtype=int)
    mla, mh, dims = _mla_columns(table)
    per_layer = routed_flops_per_token(table, routed)
    grouped = m is not None and m.grouped_routing
    dec, dh = _mla_decode_columns(table)
    return Columns(np.array(attn, dtype=int), win, hk[:, 0], hk[:, 1], d, r, moe, share, inter, mla, mh, dims,
                   per_layer, grouped, dec, dh)  # fmt: skip


@lru_cache(maxsize=256)
def attention_columns(table: Table) -> np.ndarray:
    """The ops whose attention has a fitted kernel model (dense attention and MLA's prefill attention): the
    columns a pass mixing decoders and prefill chunks times in two parts."""
    cols = columns(table)
    out = np.concatenate([cols.attn, cols.mla])
    out.setflags(write=False)
    return out


def _mla_columns(table: Table) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """MLA's prefill attention columns (decoder-only), their heads from their own terms (2·(qk + v) FLOPs per
    head per visible pair; on a layout, the rank's share) and the per-head widths."""
    m = table.spec.mla
    if m is None or table.spec.encoder is not None:
        return np.zeros(0, dtype=int), np.zeros(0), (0, 0)
    q, v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
    cols = [i for i, op in enumerate(table.ops) if op.kernel == Kernel.MLA_CONTEXT]
    fl = [sum(t.coef for t in table.ops[i].terms("flops") if t.mono.startswith("P:")) for i in cols]
    return np.array(cols, dtype=int), np.array(fl, dtype=float) / (2 * (q + v)), (q, v)


def _mla_decode_columns(table: Table) -> tuple[np.ndarray, np.ndarray]:
    """MLA's absorbed decode attention columns (decoder-only) and their heads from their own terms: 2·(2·latent +
    rope) FLOPs per head per visible position; on a layout, the rank's share."""
    m = table.spec.mla
    if m is None or table.spec.encoder is not None:
        return np.zeros(0, dtype=int), np.zeros(0)
    per_head = absorbed_flops_per_head(m.kv_lora_rank, m.qk_rope_head_dim)
    cols = [i for i, op in enumerate(table.ops) if op.kernel == Kernel.MLA_DECODE]
    fl = [sum(t.coef for t in table.ops[i].terms("flops") if t.mono.startswith("P:")) for i in cols]
    return np.array(cols, dtype=int), np.array(fl, dtype=float) / per_head


def _expert_shares(table: Table, routed: list[int]) -> tuple[float, float]:
    """(share of every expert's weights, share of each expert's intermediate width) one rank computes, from its
    routed GEMMs' own terms: each reads hidden · inter weights per expert hit times the first share; the
    gate/up GEMMs read top-k · hidden inputs per routed token (× the attention-DP replicas whose tokens the layer
    routes) over the experts' share the rank holds, so their ratio is the expert-parallel share and what is
    left is the moe-TP split of the intermediate width (the down GEMM's input, top-k · inter / moe-TP, is never
    larger: an expert's inter is below hidden)."""
    spec, m = table.spec, table.spec.moe
    assert m is not None
    per_hit = max(t.coef for i in routed for t in table.ops[i].terms("weight") if t.mono == "U:moe")
    share = min(per_hit / (spec.d_model * m.d_ff_expert), 1.0)
    rows_in = max(t.coef for i in routed for t in table.ops[i].terms("act_in") if t.mono == "BT")
    ep_share = min(rows_in / (m.top_k * spec.d_model * table.moe_tokens), 1.0)
    return share, min(share / ep_share, 1.0)
