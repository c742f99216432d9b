"""The busiest expert-parallel rank: how much longer its routed experts take than a balanced rank's.

Under expert parallelism (``ep`` > 1) each rank holds E/ep experts, and every rank's MoE layer ends when the busiest
rank's experts have run: the collective that returns the experts' outputs (TensorRT-LLM's reduce-scatter after
its all-gather of every attention-DP rank's tokens, ``fused_moe_cutlass.py``; an all-to-all's combine elsewhere)
waits for it, and with attention-DP every rank steps in lockstep. The experts' kernel times llmath fits are
those of *balanced* routing (``data/efficiency_fit.json``: ``balanced`` rows); real routing is not balanced
(TensorRT-LLM tech blog 4, "Scaling Expert Parallelism in TensorRT-LLM (Part 1)": DeepSeek-R1's hot experts and
hot EP ranks, stable over hundreds of iterations, the reason for its EP load balancer, which the InferenceX
recipes leave off, ``eplb0``).

:func:`busiest_rank_factor` is the busiest rank's slowdown at t = N·k/E token-expert pairs per expert: a lookup of
the tables' median ratio per octave of t (knots ``t``, ``ratio``), interpolated in log2 t and held at the last knot
beyond the measured range, since the ratio levels off with t (1 below 8 pairs, where both routings read every expert
and llmath counts the experts read apart), per device, expert format and EP size, from aiconfigurator-core's
TensorRT-LLM MoE tables (shapes of at least 64 experts), which time the same kernels under power-law routing of
exponent 1.01 (the distribution its DeepSeek model assumes) with the most loaded rank's experts on the timed rank,
against balanced routing (``scripts/fit_ep_imbalance.py``; ``data/ep_imbalance.json`` holds each fit's rows and
held-out error). Where a device, format or EP size has no fit the factor is 1 (nothing assumed); a device whose
kernel fits are inherited (:func:`llmath.hardware.efficiency_fit.resolve`) reads the device it inherits from.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from llmath.hardware import efficiency_fit as ef
from llmath.ops.split import EXPERT_SPLITS

MIN_PER_EXPERT = 8.0  # token-expert pairs per expert from which the fit applies (scripts/fit_ep_imbalance.py)


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    return json.loads((resources.files("llmath") / "data" / "ep_imbalance.json").read_text())


@lru_cache(maxsize=256)
def knots(device: str, fmt: str, ep: int) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The lookup's (t, ratio) knots for ``device`` (its measured device), experts in ``fmt``, ``ep`` ranks; None
    where there is no fit."""
    if ep <= 1:
        return None
    measured = ef.resolve(device).measured_on
    entry = _data()["devices"].get(measured or "", {}).get(fmt, {}).get(str(int(ep)))
    return None if entry is None else (tuple(entry["t"]), tuple(entry["ratio"]))


def busiest_rank_factor(device: str, fmt: str, ep: int, pairs_per_expert) -> np.ndarray:
    """The busiest EP rank's routed-experts time over a balanced rank's at ``pairs_per_expert`` = N·k/E (arrays
    broadcast): the fit's ratio interpolated in log2 t, held beyond its knots; 1 below 8 pairs and where there is
    no fit."""
    t = np.asarray(pairs_per_expert, dtype=float)
    k = knots(device, fmt, ep)
    if k is None:
        return np.ones_like(t)
    f = np.interp(np.log2(np.maximum(t, MIN_PER_EXPERT)), np.log2(k[0]), k[1])
    return np.where(t < MIN_PER_EXPERT, 1.0, f)


@lru_cache(maxsize=512)
def expert_columns(t) -> np.ndarray:
    """Indices of table ``t``'s routed-expert operators: those whose split trait expert parallelism applies to
    (:data:`llmath.ops.split.EXPERT_SPLITS`)."""
    return np.array([i for i, o in enumerate(t.ops) if o.split in EXPERT_SPLITS], dtype=int)


def at_busiest_rank(tm: np.ndarray, t, layout, device: str, fmt: str, tokens, aligned: bool = False) -> np.ndarray:
    """Per-op times ``tm`` (…, ops) of a pass over table ``t`` with ``tokens`` tokens per replica, the routed
    experts' at the busiest EP rank's pace under ``layout`` (unchanged without expert parallelism or a fit).
    ``aligned``: the grouped kernel computes a buffer sized for the worst case whatever the routing
    (``Efficiency.moe_aligned_rows``, :mod:`llmath.hardware.aligned_moe`: vLLM 0.12.0's DeepGEMM MoE sizes it from
    every token's k picks, ``compute_aligned_M``), so every rank computes the same rows and none is busier."""
    moe = t.spec.parts.ffn.moe
    j = expert_columns(t)
    if aligned or layout is None or layout.ep <= 1 or moe is None or not j.size:
        return tm
    pairs = np.asarray(tokens, dtype=float) * t.moe_tokens * moe.top_k / moe.n_experts
    f = busiest_rank_factor(device, fmt, layout.ep, pairs)
    if not np.any(f > 1.0):
        return tm
    out = np.array(tm, dtype=float, copy=True)
    out[..., j] = out[..., j] * f[..., None]
    return out


def busiest_rank_note(spec, layout, device: str, fmt: str, decode_batch: float, aligned: bool = False) -> list[str]:
    """A report's note on the busiest EP rank at a decode batch of ``decode_batch`` sequences per replica (one
    token each, every attention-DP replica's tokens routed together); none without expert parallelism.
    ``aligned``: the grouped kernel pads every rank to the same worst-case rows, so no rank is busier, as
    :func:`at_busiest_rank` times it."""
    moe = spec.parts.ffn.moe
    if layout is None or layout.ep <= 1 or moe is None:
        return []
    if aligned:
        return [
            f"expert parallelism over {layout.ep} ranks: the grouped expert kernel computes the same worst-case rows"
            " on every rank whatever the routing (Efficiency.moe_aligned_rows), so no rank is busier"
        ]
    pairs = decode_batch * layout.dp * moe.top_k / moe.n_experts
    f = float(busiest_rank_factor(device, fmt, layout.ep, pairs))
    return [
        f"expert parallelism over {layout.ep} ranks: the routed experts run at the busiest rank's pace, "
        f"x{f:.2f} of balanced routing at {pairs:.1f} token-expert pairs per expert in a decode step "
        "(power-law routing, data/ep_imbalance.json)"
    ]
