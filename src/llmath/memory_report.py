"""The memory of one device (or one GPU of a layout): weights, KV cache, peak activations and reserve, and
the largest batch and context that fit.

Weights are the operands of the operators the device holds (:mod:`llmath.ops.params`), the KV cache and
per-sequence state what its K/V operators write (:mod:`llmath.ops.state`), activations the peak of the
prefill (:mod:`llmath.ops.stages`). Nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmath.checks import Run
from llmath.hardware import Hardware
from llmath.model.spec import ModelSpec
from llmath.ops import Op, Table
from llmath.ops import stages as ostages
from llmath.ops.params import ParamReport, weight_bytes_of
from llmath.ops.stages import activation_peak_bytes
from llmath.ops.state import kv_cache_bytes, longest_context


@dataclass
class MemoryReport:
    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    reserve_bytes: float
    total_bytes: float
    capacity_bytes: float | None
    fits: bool | None
    over_by_bytes: float | None
    max_batch: int | None
    max_context: int | None
    per_gpu_bytes: float | None = None  # = total_bytes: everything above is per GPU (the busiest, under a layout)
    max_context_bounded: bool | None = None  # False: memory bounds no context up to ops.state.MAX_CONTEXT_SEARCH


def memory_report(
    spec: ModelSpec,
    params: ParamReport,
    w: Run,
    hw: Hardware | None,
    reserve_bytes: float,
    rank: tuple[tuple[Op, ...], Table, Table | None] | None = None,
    batch: int | None = None,
    tower_share: float = 0.0,
) -> MemoryReport:
    """Weights, KV cache, peak activations and reserve on the device; with ``rank`` = (operators held,
    prefill table, encoder table or None) of one GPU under a layout, ``batch`` = its replica's sequences and
    ``tower_share`` = the fraction of a wrapper's towers it holds, on that GPU (``max_batch`` per replica)."""
    p = w.precision
    ops, tab, enc_tab = rank if rank is not None else (None, None, None)
    B = w.batch if batch is None else batch
    weights = weight_bytes_of(spec, p, ops, tower_share)  # per module (one GPU's shard under a layout)
    ctx0, src = ostages.decode_start(spec, w.prompt, w.prefix, w.decoder_prompt, w.images)
    end = ctx0 + w.gen - 1
    kv = kv_cache_bytes(spec, B, end, p, ops=ops, src=src)
    act = float(activation_peak_bytes(spec, B, w.prompt, w.attention, p, w.prefix, tab, w.decoder_prompt, enc_tab))
    total = weights + kv + act + reserve_bytes
    if hw is None:
        return MemoryReport(weights, kv, act, reserve_bytes, total, None, None, None, None, None, total)
    cap = hw.memory_bytes
    free = cap - weights - reserve_bytes
    per_seq = kv_cache_bytes(spec, 1, end, p, ops=ops, src=src) + float(
        activation_peak_bytes(spec, 1, w.prompt, w.attention, p, w.prefix, tab, w.decoder_prompt, enc_tab)
    )
    max_batch = max(int(free // per_seq), 0) if per_seq > 0 else None

    def need(ctx: int) -> float:  # encoder-decoder: ctx = the decoder's context, the source fixed at P
        rows = ctx if spec.traits.reruns_context else min(ctx, w.prompt)  # reruns every position each step (BLT)
        return kv_cache_bytes(spec, B, ctx, p, ops=ops, src=src) + (
            act if src else float(activation_peak_bytes(spec, B, rows, w.attention, p, tab=tab))
        )

    max_ctx, bounded = longest_context(need, free)  # prompt + generated, for this batch
    return MemoryReport(
        weights, kv, act, reserve_bytes, total, cap, total <= cap, max(total - cap, 0.0), max_batch, max_ctx, total,
        bounded,
    )  # fmt: skip
