"""The public serving entry point: a model served by an engine on N GPUs at a concurrency or request rate.

``serve(...)`` resolves the model, hardware, precision and engine preset, checks the memory first (a
configuration that does not fit raises before any number is computed), and returns a
:class:`~llmath.deploy.serving_report.ServingReport`. ``parallel`` (a :class:`~llmath.deploy.layout.ParallelConfig`)
picks a parallel layout (:func:`llmath.deploy.make_layout`: ``gpus`` alone is TP over all of them, MoE experts
spread EP ways); the requests are split evenly over its ``dp`` attention-DP replicas.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, cast

from llmath.deploy import engines
from llmath.deploy.arguments import checked
from llmath.deploy.closed_loop import in_step, lockstep_state, staggered_state
from llmath.deploy.context_limit import long_context_notes
from llmath.deploy.disagg import pool_memory
from llmath.deploy.drifting_loop import drifting_state
from llmath.deploy.engine_device import engine_device, engine_terms
from llmath.deploy.ep_balance import busiest_rank_note
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.overheads import breakdown
from llmath.deploy.prompt_queue import poisson_state
from llmath.deploy.rate_limit import largest_rate, poisson_refusal
from llmath.deploy.serving import (
    Decoding,
    Requests,
    active_overheads,
    rate_to_concurrency,
    refuse_uncached,
)
from llmath.deploy.serving_memory import check_fits
from llmath.deploy.serving_report import ServingReport, metrics_at, without_decode
from llmath.deploy.speculative import Speculation, draft_device, refuse_draft_only
from llmath.deploy.workload import Workload
from llmath.errors import RateError, WorkloadError
from llmath.hardware import Hardware
from llmath.hardware import get as get_hardware
from llmath.hardware.execution import checkpoint_precision
from llmath.model.checkpoint import Checkpoint
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.model.spec import ModelSpec


@checked
def serve(
    model: str | ModelSpec | Checkpoint,
    hardware: str | Hardware,
    *,
    workload: Workload | None = None,
    engine: str = "vllm",
    parallel: ParallelConfig | None = None,
    precision: Precision | None = None,
    attention: str = "flash",
    efficiency_mode: str = "expected",
    speculation: Speculation | None = None,
    allow_long_context: bool = False,
    **engine_overrides,
) -> ServingReport:
    """Continuous batching of ``workload`` (a :class:`~llmath.deploy.workload.Workload` with a concurrency or a
    rate) under its arrival protocol: ``closed`` (the default with ``concurrency``: C requests
    started together and replaced as they finish, as benchmark clients run them: they stay in step),
    ``staggered`` (C clients out of step), ``poisson`` (the default with ``rate``), ``offline`` (every request
    queued at once); see :mod:`.closed_loop` and :mod:`.serving` for the models and their limits. The layout:
    ``parallel`` (:class:`~llmath.deploy.layout.ParallelConfig`; None: one GPU). Requests longer than the
    model's context are refused as the engines refuse them, unless ``allow_long_context``
    (:mod:`.context_limit`)."""
    w = cast(Workload, workload)  # checked by @checked: a serving load
    prompt, gen, concurrency, rate, arrival = w.prompt, w.gen, w.concurrency, w.rate, cast(str, w.arrival)
    spec = resolve(model)
    refuse_uncached(spec)
    refuse_draft_only(spec)
    long_notes = long_context_notes(spec, w, allow_long_context, engine)
    layout = parallel.requested(spec) if parallel is not None else None
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    p = checkpoint_precision(model, precision)[0]  # the checkpoint's formats unless given; fallbacks, no errors
    eng = engines.preset(engine, hw, tp=layout.tp if layout else 1, offline=w.offline, **engine_overrides)
    hw, p, eff = engine_terms(hw, p, engine, efficiency_mode)  # the engine's kernels, formats and rates on hw
    req = Requests(prompt, gen, w.prefix_hit, w.gen_dist, spec.is_encoder_decoder)
    src = prompt if req.encoder_decoder else 0
    dev = engine_device(spec, hw, p, eff, eng, attention, layout, src)  # the engine's launch and host terms
    draft = draft_device(dev, speculation) if speculation else None
    mem = pool_memory(dev, eng, req, draft, speculation.method if speculation else "")  # the draft's weights, KV
    where = f"{spec.name} on {dev.gpus} × {hw.name}" + (f" ({_layout_text(layout)})" if layout else "")
    check_fits(mem, f"{where} with {eng.name}")
    notes = long_notes + ([f"layout {_layout_text(layout)}; {layout.chosen}"] if layout else [])
    decoding = Decoding(dev, speculation, draft) if speculation else Decoding(dev)
    per_replica_rate = rate / dev.dp if rate is not None else None
    with _deployment_rates(dev.dp):
        try:
            c = _per_replica_concurrency(dev, eng, req, concurrency, rate, mem.max_resident, notes)
            ss, m = _state(decoding, eng, req, c, mem.max_resident, arrival, w.prompts_per_client, per_replica_rate)
        except RateError as e:  # the largest rate every check answers, not the first refusing check's own limit
            refusal = poisson_refusal(dev, decoding, eng, req, mem.max_resident)
            raise largest_rate(refusal, e) from None
    notes += _state_notes(ss, mem, eng, req, arrival, dev.dp)
    c = float(ss.concurrency[0]) if rate is not None else c  # an open loop's: Little's law on its own state
    aligned = bool(dev.eff.moe_aligned_rows)  # as the step times the experts (Device._busiest_rank)
    notes += busiest_rank_note(spec, layout, hw.name, p.weight_format("experts"), float(ss.decode_batch[0]), aligned)
    return _report(spec, hw, eng, req, p, attention, dev, mem, m, c, rate, speculation, layout, notes, arrival)


def _report(spec, hw, eng, req, p, attention, dev, mem, m, c, rate, speculation, layout, notes, arrival):
    work: dict[str, Any] = {"prompt": req.prompt, "gen": req.gen, "prefix_hit": req.prefix_hit}
    work.update({"concurrency": c * dev.dp, "rate": rate, "arrival": arrival})
    if req.gen_dist:
        work.update({"gen_dist": [list(x) for x in req.gen_dist], "mean_gen": req.mean_gen})
    work.update({"weights": p.weights, "activations": p.activations, "kv_dtype": p.kv, "attention": attention})
    if speculation:
        work["speculation"] = {"method": speculation.method, "k": speculation.k, "acceptance": speculation.acceptance}
        notes.append(
            f"speculative decoding ({speculation.method}, k={speculation.k}): a stated acceptance length of"
            f" {speculation.acceptance} tokens per verify round of width {speculation.k + 1}"
        )
    eng_d = {k: v for k, v in eng.__dict__.items() if k not in ("sources", "overheads")} | {"sources": eng.sources}
    eng_d["overheads"] = eng.overheads.to_dict()
    rep = ServingReport(spec.name, hw.name, eng_d, work, dev.gpus, dev.dp, mem, m, notes)
    rep.layout = layout.to_dict() if layout else {"tp": 1, "pp": 1, "dp": 1, "ep": 1, "gpus": 1}
    return rep


def _per_replica_concurrency(dev, eng, req, concurrency, rate, max_resident: int, notes: list) -> float:
    """The closed-loop concurrency of one attention-DP replica: the given one split over the replicas, or
    the one that sustains the open-loop ``rate`` (Little's law)."""
    replicas = dev.dp
    if replicas > 1:
        notes.append(f"{replicas} attention-DP replicas; requests split evenly")
    if rate is not None:
        return rate_to_concurrency(dev, eng, req, rate / replicas, max_resident)
    if concurrency / replicas < 1:
        raise WorkloadError(
            f"concurrency={concurrency} is below one request per replica ({replicas} replicas); give --concurrency"
            f" {replicas} or more, or fewer --dp replicas"
        )
    return concurrency / replicas


def _state_notes(ss, mem, eng, req, arrival: str, replicas: int) -> list[str]:
    """What the state's numbers rest on: an open loop's concurrency, clients out of step after their first wave,
    a queue beyond B_max."""
    notes = []
    if arrival == "poisson":
        rate, c = float(ss.requests_s[0]) * replicas, float(ss.concurrency[0]) * replicas
        notes.append(f"open loop: {rate:g} requests/s sustained at {c:.1f} concurrent requests")
    if arrival == "closed" and not in_step(req):
        notes.append("output lengths vary: the clients' first wave runs in step, their follow-ups out of step")
    if ss.concurrency[0] > ss.resident[0]:
        notes.append(
            f"{ss.concurrency[0] - ss.resident[0]:.0f} requests per replica queue: at most {mem.max_resident}"
            f" run at once (max_num_seqs={eng.max_num_seqs}, KV pool for {mem.max_requests_by_kv})"
        )
    return notes


def _state(decoding, eng, req, c: float, max_resident: int, arrival: str, prompts_per_client: float,
           rate: float | None = None):  # fmt: skip
    """(the steady state, its metrics) at per-replica concurrency ``c`` (or ``rate``, Poisson) under the arrival
    protocol."""
    if arrival == "poisson":
        ss = poisson_state(decoding, eng, req, c, cast(float, rate), max_resident)
    elif arrival == "staggered":
        ss = staggered_state(decoding, eng, req, [c], max_resident)
    elif arrival == "closed" and not in_step(req):  # output lengths that vary: out of step after the first wave
        ss = drifting_state(decoding, eng, req, [c], max_resident, prompts_per_client)
    else:
        ss = lockstep_state(decoding, eng, req, [c], max_resident, prompts_per_client, arrival == "closed")
    if req.max_gen <= 1:
        ss = without_decode(ss)
    dev = decoding.dev
    m = metrics_at(ss, 0, dev.gpus, dev.dp)
    m["overheads_s"] = breakdown(active_overheads(dev, eng), **m["overheads_s"])
    return ss, m


@contextmanager
def _deployment_rates(replicas: int):
    """A rate one replica cannot sustain, refused with the whole deployment's rates (each of its ``replicas``
    attention-DP replicas takes 1/replicas of the requests)."""
    try:
        yield
    except RateError as e:
        if replicas <= 1:
            raise
        raise e.over_replicas(replicas) from None


def _layout_text(layout) -> str:
    return f"tp={layout.tp} pp={layout.pp} dp={layout.dp} ep={layout.ep}"
