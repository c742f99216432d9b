"""Disaggregated prefill/decode: prefill workers and decode workers with their own layouts, the KV cache sent
from one to the other over the interconnect, and the two pools rate-matched.

* a **prefill worker** runs prefill-only iterations: ⌊K / P'⌋ whole prompts per iteration (K its token budget),
  or one prompt in ⌈P' / K⌉ chunks; it finishes r_p = prompts / (time of their iterations) requests/s and its
  TTFT share is the time of the iterations one prompt spends (it yields the first token);
* the **KV transfer** moves the KV cache of the P prompt positions once per request, each prefill GPU its
  shard over its own link (scale-up when both workers fit one scale-up domain, else scale-out; per
  direction); its time adds to TTFT (not overlapped with the prefill, an upper bound: engines stream layer
  by layer);
* a **decode worker** holds B sequences decoding (at most what its KV pool admits and ``max_num_seqs``), one
  token each per step of time τ_d(B), so it finishes r_d = B / ((G − 1)·τ_d) requests/s, TPOT = τ_d;
* **rate matching**: x prefill workers need y = ⌈x·r_p / r_d⌉ decode workers; the pair sustains x·r_p
  requests/s on x·g_p + y·g_d GPUs (the decode pool slightly over-provisioned, so its TPOT is an upper bound).

Queueing in front of a fully loaded prefill pool is not modelled (TTFT is the service time). Everything is a
numpy grid over (decode batch, x): one evaluation per layout pair, as the planner needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmath.deploy.serving import FIXED_POINT_PASSES, EngineConfig, Requests
from llmath.deploy.step import Device, kv_bytes_per_sequence
from llmath.hardware import Hardware
from llmath.hardware.topology import topology


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


def prefill_worker(dev: Device, eng: EngineConfig, req: Requests) -> PrefillWorker:
    """A worker that only prefills: whole prompts packed into the budget, or a long prompt in chunks."""
    K = eng.max_num_batched_tokens or req.new
    Pn = req.new
    if Pn <= K:
        n = max(1, K // Pn)
        t = float(dev.iteration(0, 0, n, Pn, req.cached).time_s)
        return PrefillWorker(t, n / t, float(n))
    chunks = -(-Pn // K)
    rest = Pn - (chunks - 1) * K
    full = dev.iteration(0, 0, 1, K, req.cached + (chunks - 2) * K / 2).time_s * (chunks - 1)
    last = dev.iteration(0, 0, 1, rest, req.cached + (chunks - 1) * K).time_s
    t = float(full + last)
    return PrefillWorker(t, 1.0 / t, 1.0 / chunks)


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
    dec: Device,
    req: Requests,
    max_decode_batch: int,
    gpus: int,
    g_prefill: int,
    g_decode: int,
    kv_link_bytes_per_s: float,
    batches: np.ndarray | None = None,
) -> DisaggGrid:
    """Every (decode batch B, x prefill workers) pair with y = ⌈x·r_p / r_d(B)⌉ decode workers on ≤ ``gpus``."""
    if batches is None:
        batches = np.unique(np.geomspace(1, max(max_decode_batch, 1), 128).round())
    B = np.asarray(batches, dtype=float)[:, None]
    ctx = req.decode_context
    tau = dec.iteration(B, ctx).time_s
    steps = max(req.decode_steps, 1.0)
    r_d = B / (steps * tau)
    x = np.arange(1, max(gpus // g_prefill, 1) + 1, dtype=float)[None, :]
    y = np.ceil(x * pre.requests_s / r_d)
    used = x * g_prefill + y * g_decode
    kv = float(kv_bytes_per_sequence(dec.spec, req.prompt, dec.precision, dec.attention))  # whole model's KV
    t_kv = kv / kv_link_bytes_per_s if kv_link_bytes_per_s > 0 else float("inf")
    rate = x * pre.requests_s
    shape = np.broadcast_shapes(B.shape, x.shape)
    return DisaggGrid(
        np.broadcast_to(B, shape),
        np.broadcast_to(x, shape),
        np.broadcast_to(y, shape),
        np.broadcast_to(used, shape),
        np.full(shape, pre.ttft_s + t_kv),
        np.broadcast_to(tau, shape),
        np.broadcast_to(rate * req.mean_gen, shape),
        t_kv,
        pre.ttft_s,
    )


def _pool(spec, hw, p, engine: str, pool: dict, efficiency_mode: str, req: Requests, name: str):
    """(Device, engine preset, Memory) of one pool's replica layout ``pool`` (tp, pp, dp, ep, workers)."""
    from llmath.deploy import engines
    from llmath.deploy.layout import make_layout
    from llmath.deploy.serving import check_fits, memory
    from llmath.hardware.roofline import efficiency

    lay = make_layout(spec, None, pool.get("tp"), pool.get("pp"), pool.get("ep"), pool.get("dp"))
    eng = engines.preset(engine, hw, tp=lay.tp)
    dev = Device(spec, hw, p, efficiency(efficiency_mode, hw), "flash", eng.cuda_graphs, lay)
    mem = memory(dev, eng, req)
    check_fits(mem, f"{spec.name} {name} pool on {dev.gpus} × {hw.name}")
    return dev, eng, mem


def serve_disaggregated(
    model,
    hardware,
    *,
    prompt: int,
    gen: int,
    concurrency: float,
    prefill: dict,
    decode: dict,
    engine: str = "trtllm",
    precision=None,
    efficiency_mode: str = "expected",
    prompts_per_client: float = 10,
) -> dict:
    """A closed loop of ``concurrency`` requests on ``prefill["workers"]`` prefill replicas and
    ``decode["workers"]`` decode replicas (each a layout: ``tp``, ``pp``, ``dp``, ``ep``), as the module
    describes: the requests split evenly over the decode pool's attention-DP ranks (TPOT = the decode step at
    that batch plus the engine's per-iteration overhead); a request's TTFT = its prefill pass, batched with
    the prompts arriving with it (as many as the budget and the requests per prefill rank allow), plus the
    KV transfer. Returns ``ttft_s``, ``tpot_s``, ``throughput_tok_s`` and the pools' sizes."""
    from llmath.deploy.serving import active_overheads
    from llmath.errors import WorkloadError
    from llmath.hardware import get as get_hardware
    from llmath.hardware.execution import checkpoint_precision
    from llmath.model.registry import resolve

    if not concurrency >= 1:
        raise WorkloadError(f"concurrency={concurrency!r} must be >= 1")
    spec = resolve(model)
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    p = checkpoint_precision(model, precision)[0]
    req = Requests(prompt, gen)
    pdev, peng, _ = _pool(spec, hw, p, engine, prefill, efficiency_mode, req, "prefill")
    ddev, deng, dmem = _pool(spec, hw, p, engine, decode, efficiency_mode, req, "decode")
    x, y = int(prefill.get("workers") or 1), int(decode.get("workers") or 1)
    pre = _prefill_pass(pdev, peng, req, concurrency / (x * pdev.dp))
    kv = float(kv_bytes_per_sequence(spec, prompt, p, "flash"))
    t_kv = kv / link_bytes_per_s(hw, pdev.gpus, pdev.gpus + ddev.gpus)
    ov_d = active_overheads(ddev, deng)
    cap, share = dmem.max_resident, 1.0
    for _ in range(FIXED_POINT_PASSES):  # the requests decoding: those not waiting for or in their prefill
        B = max(min(share * concurrency / (y * ddev.dp), cap), 1.0)
        tpot = float(ddev.iteration(B, req.decode_context).time_s)
        tpot += ov_d.iteration_s(deng.cuda_graphs) + B * ov_d.per_token_s
        ttft = _closed_prefill_wait(pre, req.decode_steps * tpot, prompts_per_client, peng.replacement_lag) + t_kv
        share = req.decode_steps * tpot / (ttft + req.decode_steps * tpot)
    e2e = ttft + req.decode_steps * tpot
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "throughput_tok_s": concurrency * req.mean_gen / e2e,
            "kv_transfer_s": t_kv, "prefill_pass_s": pre[0], "prefill_passes": pre[1], "decode_batch": B,
            "gpus": x * pdev.gpus + y * ddev.gpus}  # fmt: skip


def _prefill_pass(dev: Device, eng: EngineConfig, req: Requests, per_rank: float) -> tuple[float, float, float]:
    """(time of one prefill pass, passes a wave of ``per_rank`` prompts takes, passes one prompt spans): the
    prompts that arrive together packed into the budget K, each pass K tokens (or the wave's, if fewer)."""
    from llmath.deploy.serving import active_overheads

    K = float(eng.max_num_batched_tokens or req.new)
    tokens = min(K, per_rank * req.new)
    n = max(tokens / req.new, 1.0)
    ov = active_overheads(dev, eng)
    t = float(dev.iteration(0, 0, n, tokens / n, req.cached + (req.new - tokens / n) / 2).time_s)
    t += ov.per_iteration_eager_s + ov.request_s(req.prompt) / n
    return t, per_rank * req.new / tokens, max(1.0, req.new / K)


def _closed_prefill_wait(pre: tuple[float, float, float], decode_s: float, m: float, lag: int) -> float:
    """Mean TTFT on a prefill rank under the benchmark clients' closed loop (:mod:`.closed_loop`): the first
    wave waits for the (n + 1)/2 passes ahead of it; later waves come back spread over the passes, each
    prefilled as it arrives (after the ``lag`` passes already scheduled), unless a cycle's n passes outlast
    the decode: then a request waits n·τ − decode time for the pool."""
    t, n, own = pre
    later = max(n * t - decode_s, own * t + (lag * t if n > 1 else 0.0))
    return (1 - 1 / m) * later + (1 / m) * (n + 1) / 2 * t
