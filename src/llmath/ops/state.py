"""Per-sequence state, read off the operator list: the KV cache the K/V (or MLA latent) writers fill, per
attention window, and how it grows with the context (windowed layers stop growing once full), plus the
fixed-size state of state-space / recurrent mixers (SSM state, conv state), written per sequence whatever
the context. Bytes per sequence at context S = KV(S) + fixed; :func:`kv_cache_bytes` returns both, so
memory fit, sweeps and the roofline use one number."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops.assemble import build_ops
from llmath.ops.pair_counts import compressed_monomial, held_positions
from llmath.ops.ssm_state import holds_ssm_state, ssm_state_bytes
from llmath.ops.stages import cross_kv_elements_per_source


def _num(v):
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        return int(v)
    return v


COMPRESSED = ("/csa", "/hca")  # layer_kind suffixes of DeepSeek-V4's compressed layers (ops/assemble.py)


def kv_elements_per_position(spec: ModelSpec, layout: str = "serving", ops=None) -> dict[int | None, int | float]:
    """KV-cache elements one sequence position adds, per attention window, read off the K/V writers.

    ``layout="transformers"``: what transformers' cache holds (Falcon's new architecture caches K/V
    broadcast to all N query heads). ``ops``: another operator list of ``spec`` (one GPU's under a layout).
    """
    out: dict[int | None, int | float] = {}
    for op in build_ops(spec, "decode", "flash") if ops is None else ops:
        per = sum(t.coef for t in op.terms("kv_write") if t.mono == "BT") * op.count
        if per:
            if layout == "transformers" and spec.hf_cache_kv_heads:
                per = per * spec.hf_cache_kv_heads // spec.n_kv_heads
            if layout == "transformers" and spec.compressed is not None and not op.layer_kind.endswith(COMPRESSED):
                per *= 2  # DeepSeek-V4's sliding_attention layers: the generic sliding cache stores K=V twice
            out[op.window] = out.get(op.window, 0) + per
    return out


def fixed_state_elements(spec: ModelSpec, layout: str = "serving", ops=None) -> int:
    """Elements of fixed-size state one sequence holds (mixers' SSM and conv states), read off the state
    writers (``kv_write`` per sequence). ``layout="transformers"``: what transformers' cache holds."""
    n: int | float = 0
    for op in build_ops(spec, "decode", "flash") if ops is None else ops:
        n += sum(t.coef for t in op.terms("kv_write") if t.mono == "B") * op.count
    return int(n) + (_transformers_extra(spec) if layout == "transformers" else 0)


def _transformers_extra(spec: ModelSpec) -> int:
    """Elements per sequence transformers' cache holds beyond the serving state (mixers' and Inkling's
    conv windows keep C inputs per channel, not C − 1)."""
    from llmath.ops.inkling import transformers_extra_state as inkling_extra_state
    from llmath.ops.mixers import transformers_extra_state

    return transformers_extra_state(spec) + inkling_extra_state(spec)


def compressed_state_elements(spec: ModelSpec, positions, ops=None):
    """Elements one sequence of ``positions`` positions holds in compressed caches (DeepSeek-V4's CSA / HCA,
    ops/compressed.py): the compressors' state writers' ``z`` terms (entries ⌊S/m⌋, the buffered S mod m
    positions, the overlap once a window closed) evaluated at S = ``positions``."""
    n: Any = 0
    for op in build_ops(spec, "decode", "flash") if ops is None else ops:
        for t in op.terms("kv_write"):
            if t.mono.startswith("z"):
                kind, m, *cap = t.mono.split(":")
                n = n + t.coef * op.count * compressed_monomial(kind, int(m), None, 1, positions, 0)
    return n


def compressed_growth(spec: ModelSpec, ops=None) -> float:
    """Elements per position the compressed caches add in the long run: each entry (``zN``) per m positions."""
    n = 0.0
    for op in build_ops(spec, "decode", "flash") if ops is None else ops:
        n += (
            sum(t.coef / int(t.mono.split(":")[1]) for t in op.terms("kv_write") if t.mono.startswith("zN:")) * op.count
        )
    return n


def fixed_state_bytes(spec: ModelSpec, precision: Precision, layout: str = "serving", ops=None) -> float:
    """Bytes of fixed-size state one sequence holds: the SSM state in its own format
    (:mod:`llmath.ops.ssm_state`), conv windows and the other mixers' states in the KV cache's."""
    kb = precision.kv_bytes
    sb = kb if layout == "transformers" else ssm_state_bytes(spec, precision)  # transformers: one cache dtype
    n: float = 0
    for op in build_ops(spec, "decode", "flash") if ops is None else ops:
        per = sum(t.coef for t in op.terms("kv_write") if t.mono == "B") * op.count
        n += per * (sb if holds_ssm_state(op, spec) else kb)
    return n + (_transformers_extra(spec) * kb if layout == "transformers" else 0)


MAX_CONTEXT_SEARCH = (1 << 24) - 1  # the longest context :func:`longest_context` looks for (16,777,215 tokens)


def longest_context(need: Callable[[int], float], free: float) -> tuple[int, bool]:
    """(the longest context ``ctx`` with ``need(ctx) <= free``, whether memory bounds it): bisection, ``need``
    nondecreasing; 0 when one token does not fit; MAX_CONTEXT_SEARCH, unbounded, when every context up to it
    fits (a fixed-size state)."""
    if need(1) > free:
        return 0, True
    lo, hi = 1, MAX_CONTEXT_SEARCH + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if need(mid) <= free else (lo, mid)
    return lo, lo < MAX_CONTEXT_SEARCH


def kv_cache_bytes(spec: ModelSpec, batch, positions, precision: Precision, layout: str = "serving", ops=None, src=0):
    """Bytes of per-sequence state for ``batch`` sequences of ``positions`` positions: the KV cache plus the
    mixers' fixed-size state (0 for attention-only models).

    Windowed layers hold min(positions, W) (``layout="transformers"``: W − 1, as its sliding cache keeps).
    A model that prepends positions to every sequence (CPM-Ant) holds them too. Encoder-decoder: ``positions``
    are the decoder's; plus the cross-attention cache of ``src`` source
    positions, fixed once the encoder has run (:mod:`llmath.ops.stages`).
    """
    total = 0
    positions = positions + spec.prefix_positions  # CPM-Ant's prompt positions are cached with the prompt
    if spec.compressed is not None:
        total = total + batch * compressed_state_elements(spec, positions, ops)
    if spec.is_encoder_decoder or spec.vision is not None:  # the source's (an image request's) cross cache
        total = total + batch * src * cross_kv_elements_per_source(spec, ops)
    for w, per in kv_elements_per_position(spec, layout, ops).items():
        if w is not None and layout == "transformers":
            held = np.minimum(positions, w - 1) if not isinstance(positions, int) else min(positions, w - 1)
        else:
            held = held_positions(positions, 0, w)
        total = total + batch * held * per
    fixed = batch * fixed_state_bytes(spec, precision, layout, ops)
    return _num(total * precision.kv_bytes + fixed) if isinstance(total, int) else total * precision.kv_bytes + fixed


def kv_growth(spec: ModelSpec, precision: Precision) -> dict[str, Any]:
    """How the per-sequence KV cache grows with context.

    ``bytes_per_token``: the first positions (every layer, windowed ones included, adds one position);
    ``growth_bytes_per_token``: each position once every window has filled (full-attention layers only;
    0 for a model whose every layer slides; compressed caches add each entry's width per ``rate`` positions, their
    buffers of fewer than ``rate`` positions are not growth); ``window_bytes``: what the windowed layers hold when full;
    ``windows_full_at``: the context from which the growth rate applies (the largest window, or 0).
    Bytes per sequence at context S = growth · S + Σ_windowed per-position · min(S, W).
    """
    per = kv_elements_per_position(spec)
    kb = precision.kv_bytes
    windows = [w for w in per if w is not None]
    comp = compressed_growth(spec) if spec.compressed is not None else 0
    return {
        "bytes_per_token": _num((sum(per.values()) + comp) * kb),
        "growth_bytes_per_token": _num((per.get(None, 0) + comp) * kb),
        "window_bytes": _num(sum(n * w for w, n in per.items() if w is not None) * kb),
        "windows_full_at": max(windows, default=0),
        "fixed_bytes_per_sequence": _num(fixed_state_bytes(spec, precision)),
    }


def state_summary(kv: dict[str, Any]) -> dict[str, Any]:
    """Per-sequence state as one concept: fixed bytes (SSM / conv states) + KV bytes that grow with context."""
    return {
        "fixed_bytes_per_sequence": kv["fixed_bytes_per_sequence"],
        "kv_bytes_per_token": kv["bytes_per_token"],
        "kv_growth_bytes_per_token": kv["growth_bytes_per_token"],
        "bytes": kv["bytes"],
        "peak_bytes": kv["peak_bytes"],
    }
