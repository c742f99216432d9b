"""The planner: the deployment that maximises output tokens/s per GPU under latency targets, and its Pareto
front of tokens/s per GPU against tokens/s per user.

Search space (each axis vectorised or a short loop): weight formats (``weights``; without it the checkpoint's own
formats, as ``llmath analyze`` reads them: :mod:`.plan_formats`), parallel layouts of a
replica (``layouts``: TP/PP/EP; pins honoured), aggregated serving at every concurrency per replica from 1 to
what the KV pool and the sequence cap admit (a geometric grid, one :func:`~.closed_loop.lockstep_state` call per
layout), and with ``disagg=True`` disaggregated prefill/decode pools of every pair of layouts, rate-matched,
over a grid of decode batches (:mod:`.disagg`). A configuration is feasible when it fits in memory (else
it is listed under ``rejected`` with the reason) and meets ``ttft_s ≤ ttft_ms`` and ``tpot_s ≤ tpot_ms``.
The search prunes what cannot win before evaluating it (:mod:`.plan_search`: a memory bound, pipeline
dominance, a bound on disaggregated pools), so its cost follows the layouts that could win, not the GPUs;
``exhaustive=True`` evaluates everything and finds the same ``best`` and ``pareto``.

With ``speculation``, every aggregated layout is also evaluated decoding speculatively (the draft's weights
and KV cache on each GPU as :func:`.disagg.pool_memory` counts them, rounds as :mod:`.speculative` times them) and
both are rows (``speculation``: null or {method, k, acceptance}); so is every disaggregated pair, its decode pool
speculating and its prefill pool running the draft's prefill (:mod:`.disagg`), each pool holding the draft.

``best``: the feasible configuration with the most output tokens/s per GPU (without targets: the maximum
throughput, what MLPerf's Offline scenario measures; of equals, the fastest per user). ``pareto``: the
feasible configurations that no other beats on both tokens/s per GPU and tokens/s per user (1 / TPOT),
fastest user first. With ``cost_per_gpu_hour``, each row gets ``usd_per_million_tokens`` = cost / 3600 /
(tokens/s per GPU) × 10⁶.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, cast

from llmath.deploy import engines
from llmath.deploy.admission_reserve import disaggregated
from llmath.deploy.arguments import checked
from llmath.deploy.budget import poll
from llmath.deploy.closed_loop import lockstep_state
from llmath.deploy.context_limit import long_context_notes
from llmath.deploy.engine_device import engine_device, engine_terms, pool_device
from llmath.deploy.layout import Layout, ParallelConfig, make_layout
from llmath.deploy.plan_aggregated import Family, Sampled, agg_rows, grid, refine, sample_round
from llmath.deploy.plan_disagg import disagg_rows, pair, pair_cells
from llmath.deploy.plan_finalists import Timing, retimed, unsupported
from llmath.deploy.plan_formats import formats_report, searched_formats
from llmath.deploy.plan_rows import columns, dedupe, none_meets, pareto_mask, select
from llmath.deploy.plan_search import Frontier, families, meets, weights_leave_no_pool
from llmath.deploy.serving import Decoding, Requests, refuse_uncached
from llmath.deploy.shard import rank_plans
from llmath.deploy.speculative import Speculation, draft_device
from llmath.deploy.step import Device
from llmath.deploy.workload import Workload
from llmath.errors import LLMathError, WorkloadError
from llmath.hardware import Hardware
from llmath.hardware import get as get_hardware
from llmath.model.checkpoint import Checkpoint
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.model.spec import ModelSpec


@dataclass(frozen=True)
class Replica:
    """One engine instance: a layout of ``gpus`` GPUs (its ``dp`` attention-DP replicas share the MoE
    layers) and its iteration cost; ``instances`` copies of it run side by side on the GPUs searched.
    ``served``: the instance as :func:`~.service.serve` times it (:func:`.engine_device.engine_device`: the engine's
    launch and host terms), the aggregated rows' device; ``device`` and ``prefill``: a disaggregated decode and
    prefill pool's worker on the layout as :func:`~.disagg.serve_disaggregated` builds them
    (:func:`.engine_device.pool_device`), the grid's (None: the plan searches no disaggregated pools)."""

    tp: int
    pp: int
    ep: int
    dp: int
    gpus: int
    served: Device
    device: Device | None = None
    prefill: Device | None = None

    @property
    def held(self) -> Device:
        """The device whose memory the layout's GPUs hold, aggregated or as a pool: the engine's launch and host
        terms, which only ``served`` carries, hold none, so one device serves both (the planner computes each
        layout's memory once, :data:`.plan_aggregated.pool_memory`)."""
        return self.device if self.device is not None else self.served


def _layout_keys(spec: ModelSpec, gpus: int, pins: dict) -> list[tuple[int, int, int, int]]:
    """(tp, pp, dp, ep) of layouts of at most ``gpus`` GPUs: TP within a scale-up box (≤ 8), PP,
    attention-DP × EP for MoE models; pinned degrees fixed. Not yet checked (:func:`_valid_layout`)."""
    out: list[tuple[int, int, int, int]] = []
    divs = [d for d in range(1, gpus + 1) if gpus % d == 0]
    for tp in [d for d in divs if d <= 8] if pins["tp"] is None else [pins["tp"]]:
        for pp in divs if pins["pp"] is None else [pins["pp"]]:
            dps = [1] if spec.moe is None else [d for d in divs if tp * pp * d <= gpus]
            for dpa in dps if pins["dp"] is None or spec.moe is None else [pins["dp"]]:
                eps = [1] if spec.moe is None else sorted({1, tp * dpa})
                for ep in eps if pins["ep"] is None else [pins["ep"]]:
                    if tp * pp * dpa <= gpus:
                        out.append((tp, pp, dpa, ep))
    return out


_INVALID = "invalid"  # _valid_layout's answer when no rule covers a layout


def _valid_layout(spec: ModelSpec, key: tuple[int, int, int, int], ranks: bool = True) -> Layout | None | str:
    """The layout of ``key`` (``None``: one GPU without a layout), or ``_INVALID`` when no rule covers it;
    with ``ranks``, every operator must also have a sharding rule under it (:func:`_ranks_ok`)."""
    tp, pp, dpa, ep = key
    try:
        lay = make_layout(spec, ParallelConfig(None, tp, pp, ep, dpa))
    except LLMathError:
        return _INVALID
    out = None if lay.trivial else lay
    return out if not ranks or _ranks_ok(spec, out) else _INVALID


def _ranks_ok(spec: ModelSpec, lay: Layout | None) -> bool:
    """Whether every operator has a sharding rule under ``lay`` (one GPU: always)."""
    try:
        if lay is not None:
            rank_plans(spec, "decode", "flash", lay)
    except LLMathError:
        return False
    return True


def _candidate_layouts(spec: ModelSpec, gpus: int, pins: dict) -> list[Layout | None]:
    """Every layout :func:`_layout_keys` lists that has a rule for each operator (``None``: one GPU)."""
    out: list[Layout | None] = []
    seen = set()
    for key in _layout_keys(spec, gpus, pins):
        lay = _valid_layout(spec, key)
        if isinstance(lay, str):
            continue
        k = (lay.tp, lay.pp, lay.dp, lay.ep) if lay is not None else (1, 1, 1, 1)
        if k not in seen:
            seen.add(k)
            out.append(lay)
    return out


def replicas(spec: ModelSpec, gpus: int, pins: dict, build: Callable[[Layout | None], Replica]) -> list[Replica]:
    """The engine layouts to search (see :func:`_candidate_layouts`), each built by ``build``; a pin that no
    layout satisfies is an error naming the layouts that work."""
    lays = _candidate_layouts(spec, gpus, pins)
    if not lays:
        raise _no_layout(spec, gpus, pins)
    return [build(lay) for lay in lays]


def _replica(served: Device, *pools: Device | None) -> Replica:
    """The replica of ``served``'s layout; ``pools``: its disaggregated decode and prefill workers (or none)."""
    lay = served.layout
    if lay is None:
        return Replica(1, 1, 1, 1, 1, served, *pools)
    return Replica(lay.tp, lay.pp, lay.ep, lay.dp, lay.gpus, served, *pools)


def _no_layout(spec: ModelSpec, gpus: int, pins: dict) -> WorkloadError:
    pinned = " ".join(f"--{k} {v}" for k, v in pins.items() if v is not None)
    return WorkloadError(
        f"{spec.name} on {gpus} GPUs: no layout satisfies {pinned or 'the search'}; " + str(_why(spec, gpus, pins))
    )


def _why(spec: ModelSpec, gpus: int, pins: dict) -> str:
    try:
        make_layout(spec, ParallelConfig(None, pins["tp"], pins["pp"], pins["ep"], pins["dp"]))
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
    formats: dict[str, Any] = field(default_factory=dict)  # the formats searched (.plan_formats.formats_report)
    engine: str = ""  # the engine whose scheduler and kernels timed every row

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _decodings(rep: Replica, speculation: Speculation | None) -> list[tuple[Decoding, str]]:
    """How the replica may decode, each with its speculative method ("": none): one token per iteration, and
    with ``speculation`` its rounds (the draft as :func:`~.service.serve` places it)."""
    out = [(Decoding(rep.served), "")]
    if speculation is not None:
        draft = draft_device(rep.served, speculation)
        out.append((Decoding(rep.served, speculation, draft), speculation.method))
    return out


def _aggregated(rep: Replica, eng, req: Requests, gpus: int, fmt: str, cols: list, rejected: list, dec, draft) -> int:
    """The layout's rows over its whole concurrency grid, decoding as ``dec`` (``draft``: its method); how many."""
    g = grid(rep, eng, req, gpus, fmt, rejected, dec, draft)
    if g is None:
        return 0
    c, mem, dp, inst = g
    ss = lockstep_state(dec, eng, req, c, mem.max_resident)
    return agg_rows(rep, fmt, dp, inst, c, ss, cols, dec.spec is not None)


def _pins(parallel: ParallelConfig | None, gpus: int) -> dict[str, int | None]:
    """The degrees the search keeps fixed: ``parallel``'s (its ``gpus``, when given, equal to ``gpus``; no
    overlap)."""
    par = parallel or ParallelConfig()
    if (par.gpus is not None and par.gpus != gpus) or par.overlap != "none":
        raise WorkloadError(f"parallel={parallel!r}: plan searches on --gpus {gpus} without overlap; pin tp/pp/ep/dp")
    return par.pinned()


def _plannable_requests(
    spec: ModelSpec, w: Workload, disagg: bool, allow_long: bool, engine: str
) -> tuple[Requests, list[str]]:
    """The workload's requests and their notes, refused where the planner cannot rank them: one output token (no
    TPOT), an encoder-decoder model split into prefill and decode pools, or requests past the model's context
    unless ``allow_long`` (:mod:`.context_limit`: ``engine``'s own limit)."""
    req = Requests(w.prompt, w.gen, w.prefix_hit, w.gen_dist, spec.is_encoder_decoder)
    if req.max_gen <= 1:
        raise WorkloadError(
            f"--gen {w.gen}: plan ranks deployments by their decode speed (TPOT), which one output token does not "
            "have; use --gen 2 or more, or time a one-token workload with `llmath analyze`"
        )
    if disagg and spec.is_encoder_decoder:
        raise WorkloadError(f"--disagg: {spec.name} is an encoder-decoder model; plan it aggregated (drop --disagg)")
    return req, long_context_notes(spec, w, allow_long, engine)


@checked
def plan(
    model: str | ModelSpec | Checkpoint,
    hardware: str | Hardware,
    *,
    gpus: int,
    workload: Workload | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    weights: str | list[str] | None = None,
    disagg: bool = False,
    engine: str = "vllm",
    cost_per_gpu_hour: float | None = None,
    kv_dtype: str | None = None,
    attention: str = "flash",
    efficiency_mode: str = "expected",
    exhaustive: bool = False,
    parallel: ParallelConfig | None = None,
    speculation: Speculation | None = None,
    allow_long_context: bool = False,
    **engine_overrides,
) -> PlanResult:
    """Search deployments of ``model`` on up to ``gpus`` × ``hardware`` serving ``workload``'s requests (a
    :class:`~llmath.deploy.workload.Workload` of ``prompt``, ``gen``, ``prefix_hit``, ``gen_dist``: the load is
    what the search varies) (see the module docstring), degrees pinned
    by ``parallel`` (a :class:`~llmath.deploy.layout.ParallelConfig` of tp/pp/ep/dp). ``exhaustive``: every
    configuration, unpruned (:mod:`.plan_search`); same answer. ``speculation``: also every aggregated layout
    decoding speculatively, as :func:`~.service.serve` takes it. Requests longer than the model's context are
    refused, as :func:`~.service.serve` refuses them, unless ``allow_long_context`` (:mod:`.context_limit`).
    ``weights``: the formats to try (None: the checkpoint's own, :mod:`.plan_formats`; the result's ``formats``)."""
    pins = _pins(parallel, gpus)
    t0 = time.perf_counter()  # every argument is checked by @checked (llmath.deploy.arguments)
    spec = resolve(model)
    refuse_uncached(spec)
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    w = cast(Workload, workload)  # checked by @checked: the request shape only
    req, long_notes = _plannable_requests(spec, w, disagg, allow_long_context, engine)
    formats = searched_formats(model, weights, kv_dtype)  # without weights: the checkpoint's, as analyze reads them
    targets = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms}
    searches = []
    for fmt, declared in formats:  # each format's device, precision and efficiency as the engine runs them (as serve)
        run_hw, p, eff = engine_terms(hw, declared, engine, efficiency_mode)
        common = (attention, engine, engine_overrides, req, targets, fmt, speculation, disagg)
        searches.append(_Search(spec, run_hw, p, eff, *common))
    cols: list = []
    rejected: list[dict[str, Any]] = []
    timing = _Retiming(searches, hw, dict(formats), efficiency_mode, engine_overrides, attention) if disagg else None
    search = _exhaustive if exhaustive else _pruned
    n, fitting = search(searches, gpus, pins, timing, cols, rejected)
    rejected = dedupe(rejected)
    if not n and not fitting:
        raise _nothing_fits(spec, gpus, hw, rejected)
    arr = columns(cols)
    m = len(arr.get("mode", ()))
    best, front, notes = select(arr, m, ttft_ms, tpot_ms, cost_per_gpu_hour, speculation) if m else none_meets()
    notes = long_notes + (timing.notes if timing is not None else []) + notes
    if disagg and gpus < 2:
        notes.append(f"--disagg: a prefill pool and a decode pool need 2 GPUs at least, not {gpus}: only aggregated"
                     " rows; use --gpus 2 or more")  # fmt: skip
    took, searched = time.perf_counter() - t0, formats_report(formats, weights)
    return PlanResult(spec.name, hw.name, gpus, targets, best, front, n, took, rejected, notes, searched, engine)


def _nothing_fits(spec: ModelSpec, gpus: int, hw: Hardware, rejected: list[dict[str, Any]]) -> WorkloadError:
    reasons = "; ".join(sorted({f"{r['mode']} {r['weights']}: {r['reason']}" for r in rejected}))
    return WorkloadError(
        f"{spec.name} on {gpus} × {hw.name}: no configuration fits ({reasons}); add GPUs, use a smaller"
        " --weights format or a shorter prompt"
    )


class _Retiming:
    """The disaggregated rows re-timed by the closed loop (:mod:`.plan_finalists`), or, when it cannot time the
    plan's requests or engine, a note saying the rows keep the grid's numbers."""

    def __init__(self, searches: list[_Search], hw: Hardware, precisions: dict[str, Precision], efficiency_mode: str,
                 overrides: dict, attention: str):  # fmt: skip
        """``hw`` and the formats (``precisions``, by the rows' ``weights``) as given: the closed loop applies the
        engine's terms to them itself (:func:`.engine_device.engine_terms`)."""
        s = searches[0]
        why = unsupported(s.req, overrides, attention)
        self.notes = [f"disaggregated rows: the grid's rate-matched numbers (the closed loop does not take {why})"]
        self.timing = None
        if not why:
            self.timing = Timing(s.spec, hw, precisions, s.engine, efficiency_mode, s.speculation, s.req, s.targets)
            self.notes = []

    def retime(self, cols: list) -> None:
        """``cols``' batches as one, its disaggregated rows the finalists re-timed (in place)."""
        if self.timing is None or not cols:
            return
        arr, m = retimed(columns(cols), self.timing)
        cols[:] = [(m, arr)] if m else []


def _exhaustive(searches: list[_Search], gpus: int, pins: dict, timing, cols: list, rejected: list) -> tuple:
    """Every configuration, unpruned, the pairs' finalists then re-timed (``timing``, a :class:`_Retiming`; None: no
    pairs): (configurations evaluated, 0)."""
    n = sum(s.run(gpus, pins, timing is not None, cols, rejected) for s in searches)
    if timing is not None:
        timing.retime(cols)
    return n, 0


def _pruned(searches: list[_Search], gpus: int, pins: dict, timing, cols: list, rejected: list) -> tuple:
    """Every format's disaggregated pairs against the front of the pairs found (with ``timing``, a
    :class:`_Retiming`; None: no pairs), their finalists re-timed by the closed loop; then every aggregated layout
    at a sample of its concurrencies, then the stretches between samples that could still reach the front, against
    one front of the re-timed pairs and the aggregated rows found (:mod:`.plan_search`): (configurations
    evaluated, fitting ones skipped as unable to win)."""
    front = Frontier()
    n = fitting = 0
    if timing is not None:
        for s in searches:
            k, skipped = s.disagg_pruned(s.workers(gpus, pins, rejected), gpus, cols, rejected, front)
            n, fitting = n + k, fitting + skipped
        timing.retime(cols)  # the grid's rows prune the pairs; the rows the plan reports prune the layouts
        front = Frontier()
        for _, b in cols:
            ok = meets(b["ttft_s"], b["tpot_s"], **searches[0].targets)
            front.add(b["throughput_tok_s_per_gpu"][ok], b["tok_s_per_user"][ok])
    samples: list[Sampled] = []
    for s in searches:
        k, sampled = s.aggregated_pruned(gpus, pins, cols, rejected, front)
        n, samples = n + k, samples + sampled
    return n + refine(samples, front, cols, searches[0].targets), fitting


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
    targets: dict
    fmt: str
    speculation: Speculation | None = None
    disagg: bool = False  # disaggregated pools searched too: each one-stage layout's pool workers are built
    built: dict = field(default_factory=dict)  # layouts built by the pruned search, by (tp, pp, dp, ep)
    engines_by_tp: dict = field(default_factory=dict)  # the engine's settings, read once per TP degree (a pool's: -tp)

    def engine_at(self, tp: int = 1):
        """The engine's settings at tensor-parallel size ``tp`` (:func:`.engines.preset`, once per search)."""
        if tp not in self.engines_by_tp:
            self.engines_by_tp[tp] = engines.preset(self.engine, self.hw, tp=tp, **self.overrides)
        return self.engines_by_tp[tp]

    def pool_engine(self, tp: int = 1):
        """The engine's settings serving a disaggregated pool of TP degree ``tp`` (as
        :func:`~.disagg.serve_disaggregated`'s pools: admission without the new-token reserve), once per search."""
        if -tp not in self.engines_by_tp:
            self.engines_by_tp[-tp] = disaggregated(self.engine_at(tp))
        return self.engines_by_tp[-tp]

    def replica(self, lay: Layout | None) -> Replica:
        """The instance of layout ``lay`` (None: one GPU): its aggregated device as :func:`~.service.serve` builds
        it with the engine's settings at its TP degree, and, searching disaggregated pools, its one-stage layouts'
        pool workers as :func:`~.disagg.serve_disaggregated` builds them (:class:`Replica`)."""
        poll()  # building a layout is the search's unit of work: stop here when the caller has gone
        src = self.req.prompt if self.req.encoder_decoder else 0
        eng = self.engine_at(lay.tp if lay is not None else 1)
        served = engine_device(self.spec, self.hw, self.p, self.eff, eng, self.attention, lay, src)
        if not self.disagg or (lay is not None and lay.pp > 1):
            return _replica(served)
        run = (self.spec, self.hw, self.p, self.eff, eng, lay)
        worker = pool_device(*run, attention=self.attention)
        prefill = pool_device(*run, eager=True, attention=self.attention) if eng.eager_prefill else worker
        return _replica(served, worker, prefill)

    def _share(self, rep_dp: int, rep_gpus: int, gpus: int, pins: dict) -> int:
        """GPUs a layout's instances use: all of them, or the pinned total of replicas (dp / replicas per
        instance instances); 0 when the pin cannot be met."""
        if pins["dp"] is None:
            return gpus
        if pins["dp"] % rep_dp or (pins["dp"] // rep_dp) * rep_gpus > gpus:
            return 0
        return (pins["dp"] // rep_dp) * rep_gpus

    def run(self, gpus: int, pins: dict, disagg: bool, cols: list, rejected: list) -> int:
        reps = replicas(self.spec, gpus, pins, self.replica)
        n = 0
        for rep in reps:
            poll()
            use = self._share(rep.dp, rep.gpus, gpus, pins)
            if use:
                eng_r = self.engine_at(rep.tp)
                for dec, draft in _decodings(rep, self.speculation):
                    n += _aggregated(rep, eng_r, self.req, use, self.fmt, cols, rejected, dec, draft)
        if disagg:
            workers = [r for r in reps if r.pp == 1]
            for sd in self._speculations():
                for a in [r for r in workers if r.dp == 1]:  # prefill workers: tensor parallel only
                    for b in workers:
                        poll()
                        n += pair(self, a, b, gpus, cols, rejected, sd)
        return n

    def _build(self, key: tuple[int, int, int, int], rejected: list) -> Replica | str | None:
        """The replica of layout ``key`` (built once), ``_INVALID`` when no rule covers it, or None when
        its memory bound rejects it (listed under ``rejected``)."""
        if key in self.built:
            return self.built[key]
        poll()
        tp, pp, dpa, ep = key
        eng = self.engine_at(tp)  # its memory share at the layout's TP degree, as serve's
        lay = _valid_layout(self.spec, key, ranks=False)
        out: Replica | str | None = _INVALID
        if isinstance(lay, str):
            pass
        elif weights_leave_no_pool(self.spec, self.p, eng, self.hw.capacity(eng.memory_from_driver), tp * pp * dpa):
            where = {"mode": "aggregated", "weights": self.fmt, "tp": tp, "pp": pp, "ep": ep, "dp": dpa}
            rejected.append({**where, "reason": "does not fit"})
            out = None
        elif _ranks_ok(self.spec, lay):
            out = self.replica(lay)
        self.built[key] = out
        return out

    def workers(self, gpus: int, pins: dict, rejected: list) -> list[tuple[tuple[int, int, int, int], Replica | None]]:
        """The one-stage layouts, disaggregation's workers (None: rejected by the memory bound)."""
        keys = [k for k in _layout_keys(self.spec, gpus, pins) if k[1] == 1]
        return [(k, r) for k in keys if not isinstance(r := self._build(k, rejected), str)]

    def decodings(self, rep: Replica) -> list[tuple[Decoding, str]]:
        """How the replica may decode, each with its speculative method (:func:`_decodings`)."""
        return _decodings(rep, self.speculation)

    def _next(self, fam: Family, gpus: int, pins: dict) -> tuple[Family, Replica, int] | None:
        """The family's next layout that builds and has GPUs to run on (its rejections noted), or None."""
        while fam.at < len(fam.keys):
            rep = self._build(fam.keys[fam.at], fam.rejected)
            fam.at += 1
            fam.valid = fam.valid or not isinstance(rep, str)
            if isinstance(rep, Replica) and (use := self._share(rep.dp, rep.gpus, gpus, pins)):
                return fam, rep, use
        return None

    def aggregated_pruned(self, gpus: int, pins: dict, cols: list, rejected: list, front: Frontier) -> tuple:
        """The aggregated layouts that could win, each sampled, each family's pipelines deepened only while
        memory bounds it (:mod:`.plan_search`), the families side by side (:func:`.plan_aggregated.sample_round`);
        (configurations evaluated, the samples)."""
        fams = [Family(keys) for keys in families(_layout_keys(self.spec, gpus, pins))]
        live = fams
        while live:
            live = sample_round([p for f in live if (p := self._next(f, gpus, pins)) is not None], self, front)
        if not any(f.valid for f in fams):
            raise _no_layout(self.spec, gpus, pins)
        for f in fams:
            rejected.extend(f.rejected)
            cols.extend(f.cols)
        return sum(f.n for f in fams), [s for f in fams for s in f.samples]

    def _speculations(self) -> list[Speculation | None]:
        """How pools decode: one token per step, and with ``speculation`` speculatively too."""
        return [None] if self.speculation is None else [None, self.speculation]

    def disagg_pruned(self, workers: list, gpus: int, cols: list, rejected: list, front: Frontier) -> tuple:
        """The disaggregated pairs (prefill workers: TP only), each way of decoding, whose bound could reach the
        front, evaluated exactly; (configurations evaluated, fitting pairs skipped)."""
        cells = [c for sd in self._speculations() for c in pair_cells(self, workers, gpus, rejected, sd)]
        n = skipped = 0
        for cell, sd in sorted(cells, key=lambda c: -c[0].top):  # the most promising first: the front prunes the rest
            poll()
            g = cell.grid(front)
            if g is None:
                skipped += 1
                continue
            n += disagg_rows(g, cell.pre, cell.dec, self.req, gpus, self.fmt, cols, sd is not None)
            b = cols[-1][1]
            ok = meets(b["ttft_s"], b["tpot_s"], **self.targets)
            front.add(b["throughput_tok_s_per_gpu"][ok], b["tok_s_per_user"][ok])
        return n, skipped


__all__ = ["PlanResult", "Replica", "pareto_mask", "plan", "replicas"]
