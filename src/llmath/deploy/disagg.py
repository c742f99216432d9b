"""Disaggregated prefill/decode: prefill workers and decode workers with their own layouts, the KV cache sent
from one to the other over the interconnect, and the two pools rate-matched.

* a **prefill worker** runs prefill-only iterations: ⌊K / P'⌋ whole prompts per iteration (K its token budget),
  or one prompt in ⌈P' / K⌉ chunks; it finishes r_p = prompts / (time of their iterations) requests/s and its
  TTFT share is the time of the iterations one prompt spends (it yields the first token);
* the **KV transfer** moves the KV cache of the P prompt positions (and a hybrid or recurrent model's fixed-size
  mixer state, as a request counts both in memory) once per request over the GPUs' own links
  (scale-up when both workers fit one scale-up domain, else scale-out; per direction): each decode rank
  receives what its cache holds (the whole latent cache of a multi-head latent attention on every
  tensor-parallel rank) from the prefill ranks that hold the prompt (one with attention-DP),
  :func:`kv_transfer_s`, the one transfer time of both the planner's grid and :func:`serve_disaggregated`; it
  adds to TTFT (not overlapped with the prefill, an upper bound: engines stream layer by layer), and so do the
  decode server's steps until it answers the request (:func:`first_token_decode_s`: its executor's loop,
  TensorRT-LLM 2.5 steps, SGLang 1.5; ``data/engines.json``);
* a **decode worker** holds B sequences decoding on each of its D attention-DP ranks (at most what a rank's KV
  pool admits and ``max_num_seqs``), one token each per step of time τ_d(B) (the step and the engine's
  overheads, :func:`decode_tpot_s`), so it finishes r_d = D·B / ((G − 1)·τ_d) requests/s, TPOT = τ_d;
* **rate matching**: x prefill workers need y = ⌈x·r_p / r_d⌉ decode workers; the pair sustains x·r_p
  requests/s on x·g_p + y·g_d GPUs (the decode pool slightly over-provisioned, so its TPOT is an upper bound).

**Speculative decoding** (``speculation``, :mod:`.speculative`) runs in both pools, as the engines deploy it:
TensorRT-LLM's disaggregated benchmark configuration gives the context (prefill) and the generation (decode)
workers the same ``speculative_config`` (``decoding_type: MTP``; examples/disaggregated/slurm/benchmark/config.yaml
at 03dd8e4d), and its context phase runs each MTP module over the prompt's positions and writes their KV
cache (``MTPWorker.forward``, tensorrt_llm/_torch/speculative/mtp.py; one pass is counted: DeepSeek-R1 has one
module). SGLang's prefill server drafts too and hands the draft state over with the KV cache (a target-only
prefill in front of an EAGLE decode server is refused unless the decode server replays the prompt through
the draft; python/sglang/srt/disaggregation/draft_bootstrap.py at fc6f5169). So, with a draft:

* the **prefill worker** also runs the draft's prefill over the same prompt tokens (an EAGLE head or MTP module:
  one decoder layer of the target's shape; a draft model: its own prefill; a draft that reads the target's
  cache, none), and holds the draft's weights and KV beside the target's;
* the **KV transfer** carries the draft's KV of the prompt with the target's;
* a **decode worker** runs speculative rounds (k draft steps and a verify pass of width k + 1,
  :func:`.speculative.round_time`) of τ_r(B) each that yield the stated acceptance length a tokens per
  sequence: TPOT = τ_r(B) / a, r_d = D·B·a / ((G − 1)·τ_r); its memory holds the draft's weights
  (:func:`.serving_memory.draft_weight_bytes`) and the draft's KV cache per request (:func:`pool_memory`).

Without a draft every number is the one-token-per-step model above. The planner's grid (:func:`disagg_grid`) is
rate-matched, so nothing queues there (TTFT is the service time); everything in it is a numpy grid over (decode
batch, x): one evaluation per layout pair. :func:`serve_disaggregated` serves given pools under the benchmark
clients' closed loop: the wait on the prefill ranks, and, when the clients outnumber the decode pool's slots
(the engine's ``max_batch_size`` per rank, or what its KV pool admits), the wait for a slot
(:func:`decode_slot_wait`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from llmath.deploy.admission_reserve import disaggregated
from llmath.deploy.context_limit import long_context_notes
from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.serving import FIXED_POINT_PASSES, Decoding, Requests, active_overheads
from llmath.deploy.serving_memory import Memory, draft_weight_bytes, memory, request_state_bytes
from llmath.deploy.speculative import Speculation, draft_device
from llmath.deploy.step import Device, kv_bytes_per_sequence
from llmath.deploy.workload import STATIC_ONLY, Workload, workload_arg
from llmath.errors import LayoutError, WorkloadError
from llmath.hardware import Hardware
from llmath.hardware.topology import topology
from llmath.model.traits import traits


def link_bytes_per_s(hw: Hardware, senders: int = 1, span: int = 2) -> float:
    """Per-direction bytes/s a prefill worker of ``senders`` GPUs sends KV with: each GPU its own shard over
    its own link, the scale-up link when the ``span`` GPUs of the two workers fit one scale-up domain, else
    the scale-out network (:func:`llmath.hardware.topology.topology`: bidirectional datasheet figures
    halved)."""
    topo = topology(hw)
    link = topo.scale_up if span <= topo.domain else topo.scale_out
    return link.bytes_per_s * senders


@dataclass(frozen=True)
class PrefillWorker:
    ttft_s: float  # the iterations one prompt spends (its first token)
    requests_s: float  # prompts finished per second when busy
    prompts_per_iteration: float


def prefill_worker(dev: Device, eng: EngineConfig, req: Requests, draft: Device | None = None) -> PrefillWorker:
    """A worker that only prefills: whole prompts packed into the budget, or a long prompt in chunks (with a
    ``draft``, each pass also runs the draft's prefill over the same tokens, :func:`prefill_pass_s`); each pass
    pays the engine's per-pass overheads as :func:`serve_disaggregated` counts them (:func:`prefill_overhead_s`)."""
    K = eng.max_num_batched_tokens or req.new
    Pn = req.new
    if Pn <= K:
        n = max(1, K // Pn)
        t = float(prefill_pass_s(dev, draft, n, Pn, req.cached)) + prefill_overhead_s(dev, eng, req, n)
        return PrefillWorker(t, n / t, float(n))
    chunks = -(-Pn // K)
    rest = Pn - (chunks - 1) * K
    full = prefill_pass_s(dev, draft, 1, K, req.cached + (chunks - 2) * K / 2) * (chunks - 1)
    last = prefill_pass_s(dev, draft, 1, rest, req.cached + (chunks - 1) * K)
    t = float(full + last) + chunks * prefill_overhead_s(dev, eng, req, 1.0)
    return PrefillWorker(t, 1.0 / t, 1.0 / chunks)


def prefill_overhead_s(dev: Device, eng: EngineConfig, req: Requests, prompts: float) -> float:
    """The engine's host time of one prefill-only pass of ``prompts`` prompts (a pass of chunks of one prompt: 1):
    its per-iteration eager term, and each prompt's per-request term shared over the pass's prompts
    (:class:`~.overheads.Overheads`; :func:`serve_disaggregated`'s passes and the planner's prefill workers)."""
    ov = active_overheads(dev, eng)
    return ov.per_iteration_eager_s + ov.request_s(req.prompt) / prompts


def prefill_pass_s(dev: Device, draft: Device | None, n, chunk, prefix):
    """Seconds of a prefill-only pass of ``n`` prompts' ``chunk`` tokens after ``prefix`` cached positions, plus
    the draft's prefill of the same tokens where the draft keeps a cache of its own (module docstring)."""
    t = dev.iteration(0, 0, n, chunk, prefix).time_s
    if draft is not None and not traits(draft.spec).reads_target_cache:
        t = t + draft.iteration(0, 0, n, chunk, prefix).time_s
    return t


def draft_kv_bytes(draft: Device | None, positions, per_gpu: bool = True) -> float:
    """KV bytes a draft holds for one sequence of ``positions`` positions: on one GPU (its first rank's decode
    operators, as :func:`.serving_memory.memory` counts the target's), or in all (``per_gpu=False``, what a KV transfer
    moves). An EAGLE head or MTP module: its one layer's; a draft model: its own; a draft that reads the
    target's cache (a Gemma 4 assistant): none."""
    if draft is None or traits(draft.spec).reads_target_cache:
        return 0.0
    tab = draft.parts[0].decode if per_gpu else None
    return float(kv_bytes_per_sequence(draft.spec, positions, draft.precision, draft.attention, tab))


def pool_memory(dev: Device, eng: EngineConfig, req: Requests, draft: Device | None = None, method: str = "") -> Memory:
    """A pool's memory on each GPU (:func:`.serving_memory.memory`) with a draft beside the target: its weights
    (:func:`.serving_memory.draft_weight_bytes`) and its KV cache per request added to what each request counts, so
    the same KV pool admits fewer requests. Without a draft, :func:`.serving_memory.memory` unchanged."""
    mem = memory(dev, eng, req, draft_weight_bytes(draft, method))
    if draft is None:
        return mem
    last = mem.kv_bytes_per_request + draft_kv_bytes(draft, req.start + req.max_gen - 1)
    admitted = mem.kv_bytes_admitted + draft_kv_bytes(draft, req.kv_positions(eng.kv_admission == "reserve"))
    by_kv = int(mem.kv_pool_bytes // admitted) if admitted > 0 else eng.max_num_seqs
    resident = min(by_kv, eng.max_num_seqs)
    fits = resident >= 1 and mem.kv_pool_bytes >= last
    return replace(
        mem, kv_bytes_per_request=last, kv_bytes_admitted=admitted, max_requests_by_kv=by_kv,
        max_resident=resident, fits=fits,
    )  # fmt: skip


def pool_decoding(dev: Device, speculation: Speculation | None) -> Decoding:
    """How a pool's replica decodes: one token per step, or speculative rounds with the draft placed on it
    (:func:`.speculative.draft_device`)."""
    if speculation is None:
        return Decoding(dev)
    return Decoding(dev, speculation, draft_device(dev, speculation))


@dataclass(frozen=True)
class DisaggGrid:
    """Arrays over (decode batch × prefill workers x): the rate-matched deployments that fit ``gpus``."""

    decode_batch: np.ndarray
    prefill_workers: np.ndarray
    decode_workers: np.ndarray
    gpus_used: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    throughput_tok_s: np.ndarray
    kv_transfer_s: float
    prefill_ttft_s: float


def disagg_grid(
    pre: PrefillWorker,
    dec: Device | Decoding,
    req: Requests,
    max_decode_batch: int,
    gpus: int,
    g_prefill: int,
    g_decode: int,
    kv_s: float,
    batches: np.ndarray | None = None,
    eng: EngineConfig | None = None,
) -> DisaggGrid:
    """Every (decode batch B, x prefill workers) pair with y = ⌈x·r_p / r_d(B)⌉ decode workers on ≤ ``gpus``;
    ``dec`` decodes one token per step (a Device) or as a :class:`~.serving.Decoding` (speculative rounds).
    ``kv_s``: the seconds of one request's KV transfer (:func:`kv_transfer_s`). With the decode pool's engine
    ``eng``, TPOT is :func:`decode_tpot_s` (the step and the engine's overheads) and TTFT adds the decode server's
    steps until it answers (:func:`first_token_decode_s`), as :func:`serve_disaggregated` counts both; without,
    the bare step and no answer steps."""
    if batches is None:
        batches = np.unique(np.geomspace(1, max(max_decode_batch, 1), 128).round())
    B = np.asarray(batches, dtype=float)[:, None]
    d = Decoding(dec) if isinstance(dec, Device) else dec  # a Device decodes one token per step
    tau = decode_tpot_s(d, eng, B, req.decode_context)  # seconds per output token
    answer = first_token_decode_s(first_token_decode_steps(eng.name) if eng else 0.0, tau, d.tokens)
    r_d = d.dev.dp * B / (max(req.decode_steps, 1.0) * tau)  # B on each of the worker's attention-DP ranks
    x = np.arange(1, max(gpus // g_prefill, 1) + 1, dtype=float)[None, :]
    y = np.ceil(x * pre.requests_s / r_d)
    used = x * g_prefill + y * g_decode
    rate = x * pre.requests_s
    shape = np.broadcast_shapes(B.shape, x.shape)
    return DisaggGrid(
        np.broadcast_to(B, shape),
        np.broadcast_to(x, shape),
        np.broadcast_to(y, shape),
        np.broadcast_to(used, shape),
        np.broadcast_to(pre.ttft_s + kv_s + answer, shape),
        np.broadcast_to(tau, shape),
        np.broadcast_to(rate * req.mean_gen, shape),
        kv_s,
        pre.ttft_s,
    )


def _pool(spec, hw, p, engine: str, pool: dict, efficiency_mode: str, req: Requests, name: str, speculation=None,
          eager: bool = False, moe_kernel: str = ""):  # fmt: skip
    """(Decoding, engine preset, Memory) of one pool's replica layout ``pool`` (tp, pp, dp, ep, workers), with
    ``speculation``'s draft placed on it and held in its memory (:func:`pool_memory`); ``eager``: its passes are
    launched without a CUDA graph, each at least its kernels × the engine's ``eager_host_per_kernel_s``
    (:func:`llmath.hardware.roofline.eager_host_s`); ``moe_kernel``: the grouped-expert kernel its servers were
    configured with, timing its prefill and decode passes (:func:`llmath.hardware.kernels.launcher_moe_kernel`;
    "": the engine's default)."""
    from llmath.deploy import engines
    from llmath.deploy.engine_device import engine_terms, pool_device
    from llmath.deploy.layout import ParallelConfig, make_layout
    from llmath.deploy.serving_memory import check_fits

    lay = make_layout(spec, ParallelConfig(None, pool.get("tp"), pool.get("pp"), pool.get("ep"), pool.get("dp")))
    eng = disaggregated(engines.preset(engine, hw, tp=lay.tp))  # admission without the new-token reserve
    run_hw, run_p, eff = engine_terms(hw, p, engine, efficiency_mode)  # as serve runs the engine on hw
    dec = pool_decoding(pool_device(spec, run_hw, run_p, eff, eng, lay, eager, moe_kernel), speculation)
    mem = pool_memory(dec.dev, eng, req, dec.draft, speculation.method if speculation else "")
    with_draft = f" with its {speculation.method} draft" if speculation else ""
    check_fits(mem, f"{spec.name} {name} pool on {dec.dev.gpus} × {hw.name}{with_draft}")
    return dec, eng, mem


POOL_KEYS = ("workers", "tp", "pp", "ep", "dp")


def checked_pool(name: str, pool: object) -> dict:
    """``pool`` (a disaggregated pool's layout: some of :data:`POOL_KEYS`, each an int ≥ 1 or None) as given, or
    a :class:`LayoutError` naming the key and the rule."""
    if not isinstance(pool, dict):
        raise LayoutError(f"{name}={pool!r} must be a dict of {', '.join(POOL_KEYS)}")
    for key, value in pool.items():
        if key not in POOL_KEYS:
            raise LayoutError(f"{name}[{key!r}]: not a pool key; give {', '.join(POOL_KEYS)}")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1):
            raise LayoutError(f"{name}[{key!r}]={value!r} must be an integer >= 1 (or None for the default)")
    return pool


def serve_disaggregated(model, hardware, *, workload: Workload | None = None, prefill: dict, decode: dict,
                        engine: str = "trtllm", precision=None, efficiency_mode: str = "expected",
                        speculation: Speculation | None = None, decode_max_batch: int | None = None,
                        eager_prefill: bool | None = None, moe_kernels: dict | None = None,
                        allow_long_context: bool = False, **keywords) -> dict:  # fmt: skip
    """A closed loop of ``concurrency`` requests (``workload``: a :class:`~llmath.deploy.workload.Workload` of
    ``prompt``, ``gen``, ``concurrency``, ``prompts_per_client``) on ``prefill["workers"]`` prefill replicas
    and ``decode["workers"]`` decode replicas (each a layout: ``tp``, ``pp``, ``dp``, ``ep``), as the module
    describes: the requests split evenly over the decode pool's attention-DP ranks (TPOT = the decode step at
    that batch plus the engine's per-iteration overhead, with ``speculation`` a round and its overhead over
    the acceptance length); a request's TTFT = its prefill pass (and the draft's), batched with the prompts
    arriving with it (as many as the budget and the requests per prefill rank allow), plus the KV transfer
    (and the draft's KV). Returns ``ttft_s``, ``tpot_s``, ``throughput_tok_s`` (and per GPU), the pools' GPUs
    (``prefill_gpus`` + ``decode_gpus`` = ``gpus``) and requests (``decode_requests`` decoding, the other
    ``prefill_requests`` of the ``concurrency`` waiting for or in their prefill, KV transfer or a decode slot).

    A client's next request joins the prefill server's pass after those already scheduled
    (:func:`context_replacement_lag`: one for TensorRT-LLM's context servers, which run without the overlap
    scheduler).

    ``decode_max_batch``: the requests one decode rank admits (the engine's ``max_batch_size``; default: what its
    KV pool and ``max_num_seqs`` admit). When the concurrency exceeds the decode pool's slots, the others wait
    for one: :func:`decode_slot_wait`.

    ``eager_prefill``: whether the prefill servers launch their passes without a CUDA graph (each pass then takes
    at least its kernels × the engine's host time per kernel, :func:`prefill_eager`); None: the engine preset's
    ``eager_prefill``. The decode servers replay their graphs.

    ``moe_kernels``: each pool's grouped-expert kernel (``{"prefill": K, "decode": K}``, K one of
    :data:`llmath.hardware.efficiency_fit.LAUNCHER_MOE_KERNELS`; TensorRT-LLM's ``moe_config.backend``).
    ``allow_long_context``: requests past the model's context, else refused (:func:`_resolved`), in ``notes``."""

    w = _closed_loop(workload, keywords)
    if speculation is not None and not isinstance(speculation, Speculation):
        raise WorkloadError(f"speculation={speculation!r} must be a llmath.Speculation or None")
    prefill, decode = checked_pool("prefill", prefill), checked_pool("decode", decode)
    spec, hw, p, notes = _resolved(model, hardware, precision, w, allow_long_context, engine)
    req = Requests(w.prompt, w.gen)
    run = (spec, hw, p, engine, efficiency_mode, req, speculation, eager_prefill, moe_kernels)
    pools = (built_pool(*run, "prefill", prefill), built_pool(*run, "decode", decode))
    workers = (int(prefill.get("workers") or 1), int(decode.get("workers") or 1))
    out = pools_closed_loop(pools, workers, hw, engine, req, cast(float, w.concurrency), w.prompts_per_client,
                            decode_max_batch)  # fmt: skip
    return out | {"notes": notes}


@dataclass(frozen=True)
class Pool:
    """One pool of :func:`serve_disaggregated`'s: its replica's decoding, its engine's settings and its memory
    (:func:`_pool`), the same for any number of workers and any concurrency (built once, timed at many)."""

    dec: Decoding
    eng: EngineConfig
    mem: Memory


def built_pool(spec, hw, p, engine: str, efficiency_mode: str, req: Requests, speculation, eager_prefill,
               moe_kernels, name: str, pool: dict) -> Pool:  # fmt: skip
    """The ``name`` pool (``prefill`` or ``decode``) of layout ``pool`` as :func:`serve_disaggregated` builds it:
    the prefill pool eager as :func:`prefill_eager` says, each pool with its ``moe_kernels`` entry."""
    eager = prefill_eager(engine, hw, eager_prefill) if name == "prefill" else False
    kernels = checked_moe_kernels(moe_kernels)
    return Pool(*_pool(spec, hw, p, engine, pool, efficiency_mode, req, name, speculation, eager,
                       kernels.get(name, "")))  # fmt: skip


def pools_closed_loop(
    pools: tuple[Pool, Pool],
    workers: tuple[int, int],
    hw: Hardware,
    engine: str,
    req: Requests,
    concurrency: float,
    prompts_per_client: float,
    decode_max_batch: int | None = None,
) -> dict:
    """:func:`serve_disaggregated`'s closed loop of ``concurrency`` clients on ``workers`` (prefill, decode)
    replicas of ``pools`` (prefill, decode), ``hw`` as given (the KV transfer's link); its result."""
    (pdec, peng), (ddec, deng, dmem) = (pools[0].dec, pools[0].eng), (pools[1].dec, pools[1].eng, pools[1].mem)
    prompt = req.prompt
    pdev, ddev = pdec.dev, ddec.dev
    x, y = workers
    pre = _prefill_pass(pdec, peng, req, concurrency / (x * pdev.dp))
    t_kv = kv_transfer_s(pdec, prompt, hw, ddev)
    cap, handoff = _decode_cap(dmem.max_resident, decode_max_batch), (t_kv, first_token_decode_steps(engine))
    ranks, lag = y * ddev.dp, context_replacement_lag(engine, peng.replacement_lag)
    ttft, tpot, B = _closed_loop_times(pre, ddec, deng, req, concurrency, ranks, cap, handoff, prompts_per_client, lag)
    e2e = ttft + req.decode_steps * tpot
    gpus, decoding = x * pdev.gpus + y * ddev.gpus, min(B * y * ddev.dp, concurrency)
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "throughput_tok_s": concurrency * req.mean_gen / e2e,
            "throughput_tok_s_per_gpu": concurrency * req.mean_gen / e2e / gpus,
            "kv_transfer_s": t_kv, "first_token_decode_s": first_token_decode_s(handoff[1], tpot, ddec.tokens),
            "prefill_pass_s": pre[0], "prefill_passes": pre[1], "decode_batch": B,
            "gpus": gpus, "prefill_gpus": x * pdev.gpus, "decode_gpus": y * ddev.gpus,
            "prefill_requests": concurrency - decoding, "decode_requests": decoding,
            "tokens_per_step": ddec.tokens}  # fmt: skip


def _resolved(model, hardware, precision, workload: Workload, allow_long_context: bool, engine: str):
    """(ModelSpec, Hardware, Precision, notes) of :func:`serve_disaggregated`'s arguments: the checkpoint's formats
    unless ``precision`` is given (a :class:`~llmath.model.dtypes.Precision` or a dtype name, as
    :func:`llmath.serve` takes it); requests longer than the model's context refused as the engines refuse them,
    unless ``allow_long_context`` (:mod:`.context_limit`: the notes then say the figures extrapolate)."""
    from llmath.deploy.arguments import precision_arg
    from llmath.hardware import get as get_hardware
    from llmath.hardware.execution import checkpoint_precision
    from llmath.model.registry import resolve

    hw, spec = get_hardware(hardware) if isinstance(hardware, str) else hardware, resolve(model)
    notes = long_context_notes(spec, workload, allow_long_context, engine)
    return spec, hw, checkpoint_precision(model, precision_arg(precision))[0], notes


def checked_moe_kernels(moe_kernels: object) -> dict:
    """``moe_kernels`` (:func:`serve_disaggregated`) as given (None: {}), or a :class:`LayoutError` naming the key
    or kernel and the rule."""
    from llmath.hardware.efficiency_fit import LAUNCHER_MOE_KERNELS

    if moe_kernels is None:
        return {}
    if not isinstance(moe_kernels, dict):
        raise LayoutError(f"moe_kernels={moe_kernels!r} must be a dict of 'prefill' and/or 'decode' to a kernel name")
    for pool, kernel in moe_kernels.items():
        if pool not in ("prefill", "decode"):
            raise LayoutError(f"moe_kernels[{pool!r}]: not a pool; give 'prefill' and/or 'decode'")
        if kernel and kernel not in LAUNCHER_MOE_KERNELS:
            raise LayoutError(f"moe_kernels[{pool!r}]={kernel!r}: not a known MoE kernel; use {LAUNCHER_MOE_KERNELS}")
    return moe_kernels


def prefill_eager(engine: str, hw: Hardware, eager_prefill: bool | None) -> bool:
    """Whether a disaggregated prefill server runs its passes eagerly: as given, else the engine preset's
    ``eager_prefill`` (``data/engines.json``: SGLang's prefill forward runs without a graph unless its piecewise
    graph is enabled; the TensorRT-LLM preset describes the engine backend, whose runs state it,
    :func:`llmath.measure.serving_runs.pytorch_backend_settings`)."""
    from llmath.deploy import engines

    if eager_prefill is not None:
        if not isinstance(eager_prefill, bool):
            raise LayoutError(f"eager_prefill={eager_prefill!r} must be True, False or None (the engine's preset)")
        return eager_prefill
    return bool(engines.preset(engine, hw).eager_prefill)


def context_replacement_lag(engine: str, preset_lag: int) -> int:
    """Passes already scheduled on a prefill server when a client's next request reaches it (the closed loop's
    ``lag``, :func:`_closed_prefill_wait`): the engine's ``disaggregation.context_replacement_lag`` where its
    published recipes run the context servers otherwise than its preset (``data/engines.json``: TensorRT-LLM's
    context servers disable the overlap scheduler, so a request arriving during a pass joins the next one), else
    ``preset_lag`` (the preset's ``replacement_lag``)."""
    from llmath.deploy.engines import disaggregation

    stated = disaggregation(engine, "context_replacement_lag")
    return preset_lag if stated is None else int(stated)


def kv_transfer_s(pdec: Decoding, prompt: int, hw: Hardware, ddev: Device) -> float:
    """Seconds to send one prompt's KV cache (the target's, and its draft's) and its recurrent mixers' state from a
    prefill replica of ``pdec`` to a decode replica ``ddev``, each GPU over its own link (:func:`link_bytes_per_s`):
    every attention rank of the decode replica that serves the request receives what it holds of it
    (:func:`kv_receivers`; a draft's KV in the same share), from the prefill replica's attention ranks that hold it
    (one with attention-DP), so the transfer takes the longer of the senders' share of all the bytes and one
    receiver's bytes, each over one link. A request's bytes are what it counts in memory
    (:func:`.serving_memory.request_state_bytes`): the prompt's KV cache plus the fixed-size SSM / conv /
    linear-attention state of a hybrid or recurrent model, which the engines send with the KV cache (SGLang's
    ``KVArgs.state_type`` "mamba", ``BaseKVSender.send(kv_indices, state_indices)``: the KV cache and the state at
    the request's state slot; python/sglang/srt/disaggregation/base/conn.py at 5af4e125)."""
    dev = pdec.dev
    receivers, per_receiver = kv_receivers(ddev, prompt)
    whole = float(request_state_bytes(dev.spec, prompt, dev.precision, dev.attention))
    draft = draft_kv_bytes(pdec.draft, prompt, per_gpu=False)  # the draft's in the same share; a target without
    per_receiver = per_receiver * (1.0 + draft / whole) if whole else draft / receivers  # a KV cache: split evenly
    senders = dev.replica_gpus  # one attention-DP replica holds a request's prompt
    link = link_bytes_per_s(hw, 1, dev.gpus + ddev.gpus)
    return max(receivers * per_receiver / senders, per_receiver) / link


def kv_receivers(ddev: Device, prompt: int) -> tuple[int, float]:
    """(decode ranks that hold one request's KV cache, the bytes each holds of a ``prompt``-token prompt): the
    attention ranks of one attention-DP replica (with attention-DP one rank holds the request), each its own
    rank's share (:func:`.serving_memory.request_state_bytes` on its decode table: a head shard, or the whole latent
    cache of a multi-head latent attention, which every tensor-parallel rank holds; its mixers' state shard)."""
    ranks = ddev.replica_gpus
    held = sum(
        float(request_state_bytes(ddev.spec, prompt, ddev.precision, ddev.attention, part.decode))
        for part in ddev.parts
    )
    stages = len(ddev.parts)
    return ranks, held / stages


def _closed_loop_times(pre, ddec, deng, req: Requests, c: float, ranks: int, cap: int, handoff, m: float, lag):
    """(TTFT, TPOT, decode batch per rank) of ``c`` clients on ``ranks`` decode ranks of ``cap`` slots each: the
    requests decoding are those not waiting for or in their prefill (a fixed point), and a request's TTFT is its
    wait on the prefill rank and its KV transfer, or its wait for a decode slot where that is longer, and then
    the decode server's steps until it answers (``handoff``: the KV transfer's seconds and those steps,
    :func:`first_token_decode_s`)."""
    t_kv, first = handoff
    share = 1.0
    for _ in range(FIXED_POINT_PASSES):
        B = max(min(share * c / ranks, cap), 1.0)
        tpot = _decode_tpot(ddec, deng, B, req.decode_context)
        answer = first_token_decode_s(first, tpot, ddec.tokens)
        ttft = _closed_prefill_wait(pre, req.decode_steps * tpot, m, lag) + t_kv + answer
        share = req.decode_steps * tpot / (ttft + req.decode_steps * tpot)
    slot = decode_slot_wait(c, cap * ranks, req.decode_steps * tpot) + answer
    return max(ttft, slot), tpot, B


def first_token_decode_steps(engine: str) -> float:
    """Decode steps between a request's KV cache reaching the decode server and the server answering it
    (``data/engines.json``, ``disaggregation.first_token_decode_steps``: TensorRT-LLM 2.5, SGLang 1.5, from
    their executor loops); 0 for an engine that states none."""
    from llmath.deploy.engines import disaggregation

    return float(disaggregation(engine, "first_token_decode_steps") or 0.0)


def first_token_decode_s(steps: float, tpot_s: float, tokens_per_step: float) -> float:
    """Seconds of ``steps`` decode steps (a speculative round yields ``tokens_per_step`` tokens, so a step is
    TPOT × tokens per step): the decode server's part of a disaggregated TTFT."""
    return steps * tpot_s * tokens_per_step


def _decode_cap(resident: int, max_batch: int | None) -> int:
    """Requests one decode rank holds: what its memory admits, at most the engine's ``max_batch``."""
    if max_batch is None:
        return resident
    if isinstance(max_batch, bool) or not isinstance(max_batch, int | np.integer) or max_batch < 1:
        raise LayoutError(f"decode_max_batch={max_batch!r} must be an integer >= 1 (or None for what memory admits)")
    return min(resident, int(max_batch))


def decode_slot_wait(concurrency: float, slots: float, decode_s: float) -> float:
    """Mean time a closed loop's request waits for a decode slot when its ``concurrency`` exceeds the pool's
    ``slots`` (each held for the ``decode_s`` of one request's decode): the pool then finishes slots / decode_s
    requests per second, each client's cycle is concurrency / that rate (Little's law), and what of it is not
    decoding is spent before the first token: (C / slots − 1) · decode_s; 0 when every request has a slot."""
    return max(concurrency / max(slots, 1.0) - 1.0, 0.0) * decode_s


def _closed_loop(workload, keywords: dict) -> Workload:
    """:func:`serve_disaggregated`'s workload: a closed loop (a concurrency) of fixed-length requests."""
    w = workload_arg(workload, keywords, "llmath.serve_disaggregated", required=True)
    if keywords:
        raise WorkloadError(f"serve_disaggregated(): no argument {next(iter(keywords))!r}")
    w.refuse("serve_disaggregated()", (*STATIC_ONLY, "prefix_hit", "gen_dist", "rate", "arrival"))
    if w.concurrency is None:
        raise WorkloadError("serve_disaggregated() runs a closed loop: give Workload(concurrency=C)")
    return w


def _decode_tpot(dec: Decoding, eng: EngineConfig, batch: float, context: float) -> float:
    """:func:`decode_tpot_s` at one batch."""
    return float(decode_tpot_s(dec, eng, batch, context))


def decode_tpot_s(dec: Decoding, eng: EngineConfig | None, batch, context):
    """Seconds per output token of a decode replica at ``batch`` sequences per attention rank (an array or a
    number): its step (a speculative round) plus the engine's per-iteration overhead and per-token term, over the
    tokens a step yields (as the aggregated steady state counts); ``eng`` None: the step alone. The one decode
    time of :func:`serve_disaggregated` and the planner's grid (:func:`disagg_grid`)."""
    step = dec.step(batch, context)
    if eng is not None:
        ov = active_overheads(dec.dev, eng)
        step = step + ov.iteration_s(eng.cuda_graphs) + np.asarray(batch, dtype=float) * ov.per_token_s
    return step / dec.tokens


def _prefill_pass(dec: Decoding, eng: EngineConfig, req: Requests, per_rank: float) -> tuple[float, float, float]:
    """(time of one prefill pass, passes a wave of ``per_rank`` prompts takes, passes one prompt spans): the
    prompts that arrive together packed into the budget K, each pass K tokens (or the wave's, if fewer), the
    draft's prefill of them included (:func:`prefill_pass_s`)."""
    K = float(eng.max_num_batched_tokens or req.new)
    tokens = min(K, per_rank * req.new)
    n = max(tokens / req.new, 1.0)
    t = float(prefill_pass_s(dec.dev, dec.draft, n, tokens / n, req.cached + (req.new - tokens / n) / 2))
    t += prefill_overhead_s(dec.dev, eng, req, n)
    return t, per_rank * req.new / tokens, max(1.0, req.new / K)


def _closed_prefill_wait(pre: tuple[float, float, float], decode_s: float, m: float, lag: int) -> float:
    """Mean TTFT on a prefill rank under the benchmark clients' closed loop (:mod:`.closed_loop`): the first
    wave waits for the (n + 1)/2 passes ahead of it; later waves come back spread over the passes, each
    prefilled as it arrives (after the ``lag`` passes already scheduled), unless a cycle's n passes outlast
    the decode: then a request waits n·τ − decode time for the pool."""
    t, n, own = pre
    later = max(n * t - decode_s, own * t + (lag * t if n > 1 else 0.0))
    return (1 - 1 / m) * later + (1 / m) * (n + 1) / 2 * t
