"""An engine's memory on each GPU of a replica and the requests it admits (:func:`memory`): its share of the
device less the weights (a speculative draft's beside them), one budget's activations and the CUDA graphs is its
KV pool, which admits pool / (KV a request counts) requests, the busiest pipeline stage deciding; and the one-line
error of a configuration that does not fit (:func:`check_fits`). :mod:`llmath.deploy.serving` reads the admitted
requests as its ``B_max``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from llmath.deploy.admission_reserve import admitted_positions
from llmath.deploy.cost import rank_memory_parts
from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.serving import Requests
from llmath.deploy.step import (
    Device,
    chunk_activation_bytes,
    cross_bytes_per_source,
    fixed_state_per_sequence,
    kv_bytes_per_sequence,
)
from llmath.errors import WorkloadError
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops import table
from llmath.ops.core import Attention
from llmath.ops.params import weight_bytes, weight_bytes_of
from llmath.ops.table import Table


def request_state_bytes(spec: ModelSpec, positions, precision: Precision, attention: str = "flash",
                        tab: Table | None = None):  # fmt: skip
    """Bytes one request holds at ``positions`` positions: its KV cache (:func:`.step.kv_bytes_per_sequence`) and its
    recurrent mixers' fixed-size state (SSM, conv and linear-attention states: :func:`.step.fixed_state_per_sequence`),
    on the GPU whose decode table ``tab`` is, or in all GPUs (None). What a request counts in an engine's memory
    (:func:`memory`) and what a disaggregated prefill worker sends a decode worker (:func:`.disagg.kv_transfer_s`)."""
    t = table(spec, "decode", cast(Attention, attention)) if tab is None else tab
    return kv_bytes_per_sequence(spec, positions, precision, attention, t) + fixed_state_per_sequence(t, precision)


@dataclass(frozen=True)
class Memory:
    """Per replica, bytes: what the engine reserves and the KV pool left, and what that admits."""

    capacity_bytes: float
    budget_bytes: float
    weights_bytes: float
    activation_bytes: float
    cuda_graph_bytes: float
    kv_pool_bytes: float
    kv_bytes_per_request: float  # at the request's last position
    kv_bytes_admitted: float  # what admission counts per request (reserve: the last position; on demand: mean)
    max_requests_by_kv: int
    max_resident: int
    fits: bool


def memory(dev: Device, eng: EngineConfig, req: Requests, draft_bytes: float = 0.0) -> Memory:
    """The engine's memory on each GPU: ``gpu_memory_utilization`` × capacity − its weights − one budget's
    activations − CUDA graphs = its KV pool; requests a replica admits = pool / KV one request counts there
    (``kv_admission``), the busiest pipeline stage deciding (each stage holds its layers' KV of every
    request of its replica; TP ranks hold their heads' share). A request's count includes its fixed-size
    state (encoder-decoder: the cross-attention cache; hybrids: the mixers' SSM and conv states, which vLLM's
    hybrid KV-cache manager allocates per request beside the attention blocks). ``draft_bytes``: a speculative
    draft's weights on each GPU (:func:`draft_weight_bytes`), held beside the target's."""
    p = dev.precision
    cap = dev.hw.capacity(eng.memory_from_driver)
    tokens = eng.max_num_batched_tokens or req.new
    counted = admitted_positions(eng, req)
    out = []
    for part, w in zip(dev.parts, part_weight_bytes(dev), strict=True):
        w += draft_bytes
        act = chunk_activation_bytes(dev.spec, tokens, p, dev.attention, part.encoder or part.prefill)
        cross = dev.source * cross_bytes_per_source(part.prefill, p)  # encoder-decoder: fixed per request
        # the KV cache and the SSM / conv states (fixed per request)
        per_req = float(request_state_bytes(dev.spec, req.start + req.max_gen - 1, p, dev.attention, part.decode))
        per_req += cross
        admitted = float(request_state_bytes(dev.spec, counted, p, dev.attention, part.decode)) + cross
        budget = eng.gpu_memory_utilization * cap
        free = max(budget - w - act - eng.cuda_graph_bytes, 0.0)
        if eng.kv_fraction_of_free:
            budget, free = cap, eng.gpu_memory_utilization * max(cap - w - act - eng.cuda_graph_bytes, 0.0)
        pool = free
        if eng.kv_pool_tokens is not None:
            pool = min(float(kv_bytes_per_sequence(dev.spec, eng.kv_pool_tokens, p, dev.attention, part.decode)), free)
        by_kv = int(pool // admitted) if admitted > 0 else eng.max_num_seqs
        resident = min(by_kv, eng.max_num_seqs)
        fits = resident >= 1 and pool >= per_req  # one request must reach its last position
        out.append(Memory(cap, budget, w, act, eng.cuda_graph_bytes, pool, per_req, admitted, by_kv, resident, fits))
    return min(out, key=lambda m: (m.fits, m.max_resident))  # the busiest stage decides


def part_weight_bytes(dev: Device) -> list[float]:
    """Weight bytes on one GPU of each pipeline stage, as ``analyze`` counts them (each module in its own
    format, :func:`llmath.ops.params.weight_bytes_of`, over the operators the GPU holds)."""
    L = dev.layout
    if L is None or L.trivial:
        return [weight_bytes_of(dev.spec, dev.precision)]
    parts = rank_memory_parts(dev.spec, cast(Attention, dev.attention), L)
    # a wrapper's towers: on the first stage, split over its TP ranks (as analyze places them)
    return [weight_bytes_of(dev.spec, dev.precision, ops, 1 / L.tp if pl.index == 0 else 0.0) for pl, ops, *_ in parts]


def draft_weight_bytes(draft: Device | None, method: str) -> float:
    """Weights a speculative draft adds on each GPU: a draft model's own (under its layout); an EAGLE head or
    an MTP module, its decoder layer only: both reuse the target's embedding and LM head (EAGLE, Li et al.
    2024, arXiv:2401.15077 §3; DeepSeek-V3's MTP modules share them, arXiv:2412.19437 §2.2)."""
    if draft is None:
        return 0.0
    if method == "draft":
        return part_weight_bytes(draft)[0]
    shared = ("embedding", "lm_head")
    L = draft.layout
    if L is None or L.trivial:
        by_module = weight_bytes(draft.spec, draft.precision)
        return float(sum(b for m, b in by_module.items() if m not in shared))
    held = rank_memory_parts(draft.spec, cast(Attention, draft.attention), L)[0][1]
    ops = tuple(op for op in held if op.module not in shared)
    return weight_bytes_of(draft.spec, draft.precision, ops)


def check_fits(mem: Memory, where: str) -> None:
    """A configuration that does not fit says so first (a one-line error naming what to change)."""
    if mem.fits:
        return
    gb = 1e9
    raise WorkloadError(
        f"{where}: does not fit: weights {mem.weights_bytes / gb:.1f} GB + activations {mem.activation_bytes / gb:.1f}"
        f" GB + CUDA graphs {mem.cuda_graph_bytes / gb:.1f} GB leave a KV pool of {mem.kv_pool_bytes / gb:.2f} GB,"
        f" less than one request's KV ({mem.kv_bytes_per_request / gb:.2f} GB); use more GPUs (--gpus/--tp),"
        " a smaller --weights dtype, a shorter prompt, or raise --gpu-memory-utilization"
    )
