"""The planner: the deployment that maximises output tokens/s per GPU under latency targets, and its Pareto
front of tokens/s per GPU against tokens/s per user.

Search space (each axis vectorised or a short loop): weight formats (``weights``), parallel layouts of a
replica (``layouts``: TP/PP/EP; pins honoured), aggregated serving at every concurrency per replica from 1 to
what the KV pool and the sequence cap admit (a geometric grid, one :func:`~.serving.steady_state` call per
layout), and with ``disagg=True`` disaggregated prefill/decode pools of every pair of layouts, rate-matched,
over a grid of decode batches (:mod:`.disagg`). A configuration is feasible when it fits in memory (else
it is listed under ``rejected`` with the reason) and meets ``ttft_s ≤ ttft_ms`` and ``tpot_s ≤ tpot_ms``.

``best``: the feasible configuration with the most output tokens/s per GPU (without targets: the maximum
throughput, what MLPerf's Offline scenario measures). ``pareto``: the feasible configurations that no other
beats on both tokens/s per GPU and tokens/s per user (1 / TPOT), fastest user first. With
``cost_per_gpu_hour``, each row gets ``usd_per_million_tokens`` = cost / 3600 / (tokens/s per GPU) × 10⁶.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmath.deploy import engines
from llmath.deploy.disagg import disagg_grid, link_bytes_per_s, prefill_worker
from llmath.deploy.layout import Layout, ParallelConfig, layout_args, make_layout
from llmath.deploy.serving import Requests, memory, refuse_uncached, steady_state
from llmath.deploy.shard import rank_plans
from llmath.deploy.step import Device
from llmath.errors import LLMathError, WorkloadError
from llmath.hardware import Hardware
from llmath.hardware import get as get_hardware
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.model.spec import ModelSpec

GRID = 1024  # concurrency points per replica layout (vectorised: more points cost little)
COLUMNS = (
    "tp",
    "pp",
    "ep",
    "dp",
    "concurrency",
    "ttft_s",
    "tpot_s",
    "throughput_tok_s",
    "throughput_tok_s_per_gpu",
    "tok_s_per_user",
    "gpus_used",
)


@dataclass(frozen=True)
class Replica:
    """One engine instance: a layout of ``gpus`` GPUs (its ``dp`` attention-DP replicas share the MoE
    layers) and its iteration cost; ``instances`` copies of it run side by side on the GPUs searched."""

    tp: int
    pp: int
    ep: int
    dp: int
    gpus: int
    device: Device


def _candidate_layouts(spec: ModelSpec, gpus: int, pins: dict) -> list[Layout | None]:
    """Layouts of at most ``gpus`` GPUs: TP within a scale-up box (≤ 8), PP, attention-DP × EP for MoE
    models; pinned degrees fixed. ``None`` is one GPU without a layout."""
    out: list[Layout | None] = []
    seen = set()
    divs = [d for d in range(1, gpus + 1) if gpus % d == 0]
    for tp in [d for d in divs if d <= 8] if pins["tp"] is None else [pins["tp"]]:
        for pp in divs if pins["pp"] is None else [pins["pp"]]:
            dps = [1] if spec.moe is None else [d for d in divs if tp * pp * d <= gpus]
            for dpa in dps if pins["dp"] is None or spec.moe is None else [pins["dp"]]:
                eps = [1] if spec.moe is None else sorted({1, tp * dpa})
                for ep in eps if pins["ep"] is None else [pins["ep"]]:
                    if tp * pp * dpa > gpus:
                        continue
                    try:
                        lay = make_layout(spec, None, tp, pp, ep, dpa)
                        if not lay.trivial:  # every operator must have a rule under this layout
                            rank_plans(spec, "decode", "flash", lay)
                    except LLMathError:
                        continue
                    key = (lay.tp, lay.pp, lay.dp, lay.ep)
                    if key not in seen:
                        seen.add(key)
                        out.append(None if lay.trivial else lay)
    return out


def replicas(
    spec: ModelSpec, hw: Hardware, p: Precision, eff, attention, cuda_graphs, gpus, pins, source: int = 0
) -> list[Replica]:
    """The engine layouts to search (see :func:`_candidate_layouts`); a pin that no layout satisfies is an
    error naming the layouts that work. ``source``: an encoder-decoder model's source tokens per request."""
    lays = _candidate_layouts(spec, gpus, pins)
    if not lays:
        pinned = " ".join(f"--{k} {v}" for k, v in pins.items() if v is not None)
        raise WorkloadError(
            f"{spec.name} on {gpus} GPUs: no layout satisfies {pinned or 'the search'}; " + str(_why(spec, gpus, pins))
        )
    out = []
    for lay in lays:
        dev = Device(spec, hw, p, eff, attention, cuda_graphs, lay, source)
        if lay is None:
            out.append(Replica(1, 1, 1, 1, 1, dev))
        else:
            out.append(Replica(lay.tp, lay.pp, lay.ep, lay.dp, lay.gpus, dev))
    return out


def _why(spec: ModelSpec, gpus: int, pins: dict) -> str:
    try:
        make_layout(spec, None, pins["tp"], pins["pp"], pins["ep"], pins["dp"])
    except LLMathError as e:
        return str(e)
    return f"the pinned layout needs more than {gpus} GPUs"


@dataclass
class PlanResult:
    model: str
    hardware: str
    gpus: int
    targets: dict[str, float | None]
    best: dict[str, Any] | None
    pareto: list[dict[str, Any]]
    evaluated: int
    seconds: float
    rejected: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "hardware": self.hardware,
            "gpus": self.gpus,
            "targets": self.targets,
            "best": self.best,
            "pareto": self.pareto,
            "evaluated": self.evaluated,
            "seconds": self.seconds,
            "rejected": self.rejected,
            "notes": self.notes,
        }


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Points not dominated in (x, y), both maximised: no other point has x' ≥ x and y' ≥ y with one >."""
    order = np.lexsort((-x, -y))  # by y descending, ties by x descending
    xs = x[order]
    best_before = np.maximum.accumulate(np.concatenate([[-np.inf], xs[:-1]]))
    keep_sorted = xs > best_before
    keep = np.zeros(len(x), dtype=bool)
    keep[order[keep_sorted]] = True
    return keep


def _aggregated(rep: Replica, eng, req: Requests, gpus: int, fmt: str, cols: list, rejected: list) -> int:
    mem = memory(rep.device, eng, req)
    inst = gpus // rep.gpus  # engine instances side by side
    dp = inst * rep.dp  # attention replicas in all, each serving its share of the requests
    where = {"mode": "aggregated", "weights": fmt, "tp": rep.tp, "pp": rep.pp, "ep": rep.ep, "dp": rep.dp}
    if not mem.fits or inst < 1:
        rejected.append({**where, "reason": "does not fit" if not mem.fits else f"needs {rep.gpus} GPUs"})
        return 0
    c = np.unique(np.round(np.geomspace(1, mem.max_resident, GRID)))
    ss = steady_state(rep.device, eng, req, c, mem.max_resident)
    n = len(c)
    thr = ss.throughput_tok_s * dp
    _add(
        cols,
        n,
        mode="aggregated",
        weights=fmt,
        tp=rep.tp,
        pp=rep.pp,
        ep=rep.ep,
        dp=dp,
        concurrency=c * dp,
        ttft_s=ss.ttft_s,
        tpot_s=ss.tpot_s,
        throughput_tok_s=thr,
        throughput_tok_s_per_gpu=thr / (inst * rep.gpus),
        tok_s_per_user=1 / ss.tpot_s,
        gpus_used=inst * rep.gpus,
    )
    return n


def _disaggregated(pre: Replica, dec: Replica, eng, req: Requests, gpus: int, fmt: str, cols, rejected) -> int:
    mem_p = memory(pre.device, eng, req)
    mem_d = memory(dec.device, eng, req)
    if not (mem_p.fits and mem_d.fits) or pre.gpus + dec.gpus > gpus:
        rejected.append(
            {
                "mode": "disaggregated",
                "weights": fmt,
                "prefill_tp": pre.tp,
                "decode_tp": dec.tp,
                "reason": "does not fit",
            }
        )
        return 0
    pw = prefill_worker(pre.device, eng, req)
    link = link_bytes_per_s(pre.device.hw, pre.gpus, pre.gpus + dec.gpus)
    g = disagg_grid(pw, dec.device, req, mem_d.max_resident, gpus, pre.gpus, dec.gpus, link)
    ok = g.gpus_used <= gpus
    n = int(ok.sum())
    thr = g.throughput_tok_s[ok]
    used = g.gpus_used[ok]
    _add(
        cols,
        n,
        mode="disaggregated",
        weights=fmt,
        tp=dec.tp,
        pp=dec.pp,
        ep=dec.ep,
        dp=g.decode_workers[ok],
        concurrency=thr / req.mean_gen * (g.ttft_s[ok] + req.decode_steps * g.tpot_s[ok]),  # Little's law
        ttft_s=g.ttft_s[ok],
        tpot_s=g.tpot_s[ok],
        throughput_tok_s=thr,
        throughput_tok_s_per_gpu=thr / used,
        tok_s_per_user=1 / g.tpot_s[ok],
        gpus_used=used,
        prefill_workers=g.prefill_workers[ok],
        prefill_tp=pre.tp,
        decode_batch=g.decode_batch[ok],
    )
    return n


def _dedupe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out, seen = [], set()
    for r in rows:
        key = tuple(sorted(r.items()))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _add(cols: list, n: int, **kw) -> None:
    cols.append((n, {k: np.broadcast_to(np.asarray(v), (n,)) for k, v in kw.items()}))


def _columns(batches: list) -> dict[str, np.ndarray]:
    """One array per column over every batch (columns a batch lacks, e.g. the disaggregated ones: NaN)."""
    keys = dict.fromkeys(k for _, b in batches for k in b)
    return {k: np.concatenate([b[k] if k in b else np.full(n, np.nan) for n, b in batches]) for k in keys}


def _rows(cols: dict[str, np.ndarray], idx: np.ndarray, cost: float | None) -> list[dict[str, Any]]:
    """The configurations ``idx`` as plain dicts (one ``tolist`` per column, not per cell)."""
    sel = {k: v[idx].tolist() for k, v in cols.items()}
    ints = ("tp", "pp", "ep", "dp", "gpus_used")
    out = []
    for j in range(len(idx)):
        r: dict[str, Any] = {"mode": sel["mode"][j], "weights": sel["weights"][j]}
        r.update({k: (int(sel[k][j]) if k in ints else sel[k][j]) for k in COLUMNS})
        if r["mode"] == "disaggregated":
            r["prefill_workers"] = int(sel["prefill_workers"][j])
            r["prefill_tp"] = int(sel["prefill_tp"][j])
            r["decode_workers"] = r["dp"]
            r["decode_batch"] = sel["decode_batch"][j]
        if cost is not None:
            r["usd_per_million_tokens"] = cost / 3600 / r["throughput_tok_s_per_gpu"] * 1e6
        out.append(r)
    return out


def _pins(parallel: ParallelConfig | None, gpus: int, tp, pp, ep, dp) -> dict[str, int | None]:
    """The degrees the search keeps fixed: ``parallel``'s (whose ``gpus``, when given, must be ``gpus``, and which
    asks no overlap) or the keywords."""
    given, tp, pp, ep, dp, overlap = layout_args(parallel, None, tp, pp, ep, dp)
    if (given is not None and given != gpus) or overlap != "none":
        raise WorkloadError(f"parallel={parallel!r}: plan searches on --gpus {gpus} without overlap; pin tp/pp/ep/dp")
    return {"tp": tp, "pp": pp, "ep": ep, "dp": dp}


def plan(
    model: str | ModelSpec,
    hardware: str | Hardware,
    *,
    gpus: int,
    prompt: int,
    gen: int,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    weights: str | list[str] | None = None,
    disagg: bool = False,
    engine: str = "vllm",
    cost_per_gpu_hour: float | None = None,
    prefix_hit: float = 0.0,
    gen_dist: tuple[tuple[int, float], ...] = (),
    kv_dtype: str | None = None,
    attention: str = "flash",
    efficiency_mode: str = "expected",
    tp: int | None = None,
    pp: int | None = None,
    ep: int | None = None,
    dp: int | None = None,
    parallel: ParallelConfig | None = None,
    **engine_overrides,
) -> PlanResult:
    """Search deployments of ``model`` on up to ``gpus`` × ``hardware`` (see the module docstring); the degrees of
    ``parallel`` (or the tp/pp/ep/dp keywords) pin the search (:func:`_pins`)."""
    pins = _pins(parallel, gpus, tp, pp, ep, dp)
    t0 = time.perf_counter()
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise WorkloadError(f"--gpus {gpus!r} must be an integer >= 1")
    for name, v in (("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms), ("--cost-per-gpu-hour", cost_per_gpu_hour)):
        if v is not None and not v > 0:
            raise WorkloadError(f"{name} {v!r} must be > 0")
    spec = resolve(model)
    refuse_uncached(spec)
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    req = Requests(prompt, gen, prefix_hit, tuple(gen_dist), spec.is_encoder_decoder)
    if disagg and spec.is_encoder_decoder:
        raise WorkloadError(f"--disagg: {spec.name} is an encoder-decoder model; plan it aggregated (drop --disagg)")
    formats = [weights] if isinstance(weights, str) else list(weights or ["bf16"])
    cols: list = []
    rejected: list[dict[str, Any]] = []
    n = 0
    for fmt in formats:
        act = fmt if fmt in ("bf16", "fp16", "fp8", "fp32") else "bf16"
        p = Precision(fmt, act, kv_dtype or (act if act != "fp32" else "bf16"))
        search = _Search(spec, hw, p, efficiency(efficiency_mode, hw), attention, engine, engine_overrides, req)
        n += search.run(fmt, gpus, pins, disagg, cols, rejected)
    rejected = _dedupe(rejected)
    if not n:
        reasons = "; ".join(sorted({f"{r['mode']} {r['weights']}: {r['reason']}" for r in rejected}))
        raise WorkloadError(
            f"{spec.name} on {gpus} × {hw.name}: no configuration fits ({reasons}); add GPUs, use a smaller"
            " --weights format or a shorter prompt"
        )
    targets = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms}
    best, front, notes = _select(_columns(cols), n, ttft_ms, tpot_ms, cost_per_gpu_hour)
    return PlanResult(spec.name, hw.name, gpus, targets, best, front, n, time.perf_counter() - t0, rejected, notes)


@dataclass(frozen=True)
class _Search:
    """One weight format's search: every layout aggregated, and the disaggregated pairs."""

    spec: ModelSpec
    hw: Hardware
    p: Precision
    eff: Any
    attention: str
    engine: str
    overrides: dict
    req: Requests

    def run(self, fmt: str, gpus: int, pins: dict, disagg: bool, cols: list, rejected: list) -> int:
        eng = engines.preset(self.engine, self.hw, **self.overrides)
        src = self.req.prompt if self.req.encoder_decoder else 0
        reps = replicas(self.spec, self.hw, self.p, self.eff, self.attention, eng.cuda_graphs, gpus, pins, src)
        n = 0
        for rep in reps:
            use = gpus
            if pins["dp"] is not None:  # the pinned total of replicas: dp / (replicas per instance) instances
                if pins["dp"] % rep.dp or (pins["dp"] // rep.dp) * rep.gpus > gpus:
                    continue
                use = (pins["dp"] // rep.dp) * rep.gpus
            eng_r = engines.preset(self.engine, self.hw, tp=rep.tp, **self.overrides)
            n += _aggregated(rep, eng_r, self.req, use, fmt, cols, rejected)
        if disagg:
            workers = [r for r in reps if r.pp == 1]
            for a in [r for r in workers if r.dp == 1]:  # prefill workers: tensor parallel only
                for b in workers:
                    n += _disaggregated(a, b, eng, self.req, gpus, fmt, cols, rejected)
        return n


def _select(arr: dict[str, np.ndarray], n: int, ttft_ms, tpot_ms, cost) -> tuple:
    """(best, Pareto front, notes) among the configurations meeting the targets."""
    ok = np.ones(n, dtype=bool)
    if ttft_ms is not None:
        ok &= arr["ttft_s"] <= ttft_ms / 1e3
    if tpot_ms is not None:
        ok &= arr["tpot_s"] <= tpot_ms / 1e3
    if not ok.any():
        return None, [], ["no configuration meets the targets: best and pareto are empty; relax --ttft-ms/--tpot-ms"]
    idx = np.flatnonzero(ok)
    best = int(idx[np.argmax(arr["throughput_tok_s_per_gpu"][idx])])
    front = idx[pareto_mask(arr["throughput_tok_s_per_gpu"][idx], arr["tok_s_per_user"][idx])]
    front = front[np.argsort(-arr["tok_s_per_user"][front])]
    return _rows(arr, np.array([best]), cost)[0], _rows(arr, front, cost), []
