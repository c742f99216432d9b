"""Per-GPU step costs of a layout: each pipeline stage's rank timed by the roofline, plus its collectives.

:func:`per_gpu_stage` is the entry point for other modules (serving schedules build on it): for a stage
(prefill or decode step) of a replica scenario it returns each pipeline stage's compute/memory time (the
roofline of its sharded operator table, nothing recomputed) and its communication, and the pass time:

    stage time = Σ operator times + exposed communication
    exposed    = Σ non-overlapped collectives + max(0, Σ overlapped collectives − Σ operator times)
    pass time  = Σ over pipeline stages (one batch flows through the stages in turn)

Only the MoE all-to-all can overlap, and only with ``overlap="tbo"`` (two-batch overlap: one half-batch's
dispatch/combine runs under the other's compute, as SGLang/DeepSeek serve); TP all-reduces never do.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from llmath.deploy.collectives import Collective, bus_factor, collective_time, crossing_time
from llmath.deploy.ep_balance import at_busiest_rank
from llmath.deploy.layout import Layout
from llmath.deploy.shard import rank_plans
from llmath.hardware import Hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.roofline import Efficiency, stage_times
from llmath.hardware.topology import Topology, topology
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops import Scenario, Table, build_ops, compile_table
from llmath.ops.core import Attention, Stage


@lru_cache(maxsize=8192)
def rank_table(spec: ModelSpec, stage: Stage, attention: Attention, layout: Layout, index: int) -> Table:
    """The coefficient table of one rank of pipeline stage ``index`` (cached like :func:`llmath.ops.table`)."""
    plan = rank_plans(spec, stage, attention, layout)[index]
    key = (id(spec), id(plan.ops), plan.moe_tokens)
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is plan.ops and hit[1] is spec:
        return hit[2]
    out = compile_table(spec, plan.ops, plan.moe_tokens)
    if len(_TABLES) >= 8192:
        _TABLES.clear()
    _TABLES[key] = (plan.ops, spec, out)  # keeps the operators and spec: their ids are not reused while cached
    return out


# a table depends only on the spec, the operators and the MoE tokens: layouts whose stage has the same operator
# tuple (deploy/shard.py gives such stages one) share one table, and with it every cache keyed by the table
_TABLES: dict[tuple, tuple[tuple, ModelSpec, Table]] = {}


def gpu_parts(spec: ModelSpec, stage: Stage, attention: Attention, layout: Layout | None) -> list[tuple]:
    """(row prefix, operators, table, moe_tokens, collectives, layers) of one GPU of each pipeline stage;
    without a layout, the single device's operators (table None: the cached :func:`llmath.ops.table`)."""
    if layout is None:
        return [("", build_ops(spec, stage, attention), None, 1, (), None)]
    pre = layout.pp > 1
    return [
        (f"pp{p.index}/" if pre else "", p.ops, rank_table(spec, stage, attention, layout, p.index), p.moe_tokens,
         p.collectives, (p.layers.start, p.layers.stop))
        for p in rank_plans(spec, stage, attention, layout)
    ]  # fmt: skip


def rank_memory_parts(spec: ModelSpec, attention: Attention, layout: Layout) -> list[tuple]:
    """(prefill plan, operators whose weights the GPU holds, prefill table, encoder table or None) of one GPU
    of each pipeline stage: an encoder-decoder GPU holds its share of both stacks (the encoder pass's
    operators and the decoder's); its cross-attention cache is what its prefill operators write."""
    pre = rank_plans(spec, "prefill", attention, layout)
    enc = rank_plans(spec, "encoder", attention, layout) if spec.is_encoder_decoder else None
    out: list[tuple] = []
    for i, plan in enumerate(pre):
        tab = rank_table(spec, "prefill", attention, layout, i)
        if enc is None:
            out.append((plan, plan.ops, tab, None))
        else:
            out.append((plan, enc[i].ops + plan.ops, tab, rank_table(spec, "encoder", attention, layout, i)))
    return out


@dataclass
class CommCost:
    """One collective of a rank's pass: ``count`` runs of ``message_bytes`` each, on ``link``."""

    name: str
    kind: str
    group: str
    n: int
    count: int
    link: str
    message_bytes: Any  # float; arrays over a sweep
    bus_bytes: Any  # per run: bus factor × message
    time_s: Any  # all runs
    overlapped: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class StageCost:
    """One pipeline stage's GPU for one pass: roofline of its operators plus its communication."""

    index: int
    layers: tuple[int, int]  # first layer, one past the last
    op_time_s: np.ndarray  # per operator of its table
    compute_s: float
    memory_s: float
    ops_s: float  # Σ operator times (each max(compute, memory) + overhead); arrays over a sweep
    comm: list[CommCost] = field(default_factory=list)

    @property
    def comm_s(self) -> float:
        return sum(c.time_s for c in self.comm)

    @property
    def exposed_comm_s(self) -> float:
        plain = sum(c.time_s for c in self.comm if not c.overlapped)
        hidden = sum(c.time_s for c in self.comm if c.overlapped)
        return plain + np.maximum(0.0, hidden - self.ops_s)

    @property
    def time_s(self) -> float:
        return self.ops_s + self.exposed_comm_s


@dataclass
class PassCost:
    stages: list[StageCost]

    @property
    def time_s(self) -> float:
        return sum(s.time_s for s in self.stages)

    def total(self, attr: str) -> float:
        return sum(getattr(s, attr) for s in self.stages)

    def comm_by_collective(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for s in self.stages:
            for c in s.comm:
                d = out.setdefault(c.name, {"kind": c.kind, "bytes": 0.0, "bus_bytes": 0.0, "time_s": 0.0})
                d["bytes"] += c.message_bytes * c.count
                d["bus_bytes"] += c.bus_bytes * c.count
                d["time_s"] += c.time_s
        return out


def fitted_device(hw: Hardware, eff: Efficiency) -> str | None:
    """The device whose fitted collectives apply: ``hw`` when its ``expected`` efficiency comes from fitted
    kernels (measured or inherited, :func:`llmath.hardware.efficiency_fit.resolve`); else ``None``."""
    return hw.name if eff.gemm_fit and eff.rule.startswith("fitted kernels") else None


def _fitted_all_reduce(device: str, n: int) -> tuple[tuple[float, float], ...]:
    """(α, β) of each fitted all-reduce kernel over ``n`` GPUs of one scale-up domain (aiconfigurator-core's NCCL
    and TensorRT-LLM custom all-reduce tables, docs/efficiency.md): one all-reduce of S bytes takes the faster
    α + S/β of them, as the engines pick (TensorRT-LLM's AUTO all-reduce strategy and vLLM's custom all-reduce
    use the custom kernel where it is faster, NCCL otherwise); empty without a fit for ``n``."""
    fits = (ef.collective_coef(device, op, n) for op in ("all_reduce", "custom_all_reduce"))
    return tuple(f for f in fits if f is not None)


@dataclass(frozen=True)
class _CommRule:
    """What :func:`comm_costs` reads of one collective on one topology, once: its message terms, link, bus
    factor and which time rule applies (fitted all-reduce first, analytic within a domain, else crossing);
    ``key``: what its time depends on besides the scenario (collectives with equal keys take equal times)."""

    coll: Collective
    terms: tuple[tuple[int | float, str], ...]
    link: Any
    within: bool
    fit: tuple[tuple[float, float], ...]
    bus: float
    key: tuple


_RULES: dict[tuple[int, int, str | None], tuple[tuple, Topology, tuple[str, ...], tuple[_CommRule, ...]]] = {}


def _comm_rules(colls: tuple[Collective, ...], topo: Topology, device: str | None):
    """(monomials, rules) of ``colls`` on ``topo``: built once per (collectives, topology, device) object;
    the entry keeps both objects, so an id is never reused while it is cached."""
    key = (id(colls), id(topo), device)
    hit = _RULES.get(key)
    if hit is not None and hit[0] is colls and hit[1] is topo:
        return hit[2], hit[3]
    rules = []
    for c in colls:
        within = c.within(topo.domain)
        link = topo.scale_up if within else topo.scale_out
        fitted = device is not None and c.kind == "all_reduce" and within
        fit = _fitted_all_reduce(device, c.n) if fitted and device is not None else ()
        terms = tuple((t.coef, t.mono) for t in c.message)
        how = (c.kind, c.n, within, fit, link.kind, c.per_domain(topo.domain))
        rules.append(_CommRule(c, terms, link, within, fit, float(bus_factor(c.kind, c.n)), (terms, *how)))
    monos = tuple({t.mono for c in colls for t in c.message})
    if len(_RULES) >= 4096:
        _RULES.clear()
    _RULES[key] = (colls, topo, monos, tuple(rules))
    return monos, tuple(rules)


def _one_time(r: _CommRule, nbytes, topo: Topology):
    """Seconds of one run of the collective (:func:`comm_costs`' rule)."""
    c = r.coll
    if r.fit:
        ts = [alpha + nbytes / beta for alpha, beta in r.fit]
        return np.minimum(ts[0], ts[1]) if len(ts) == 2 else ts[0]
    if r.within:
        return collective_time(c.kind, c.n, nbytes, r.link.bytes_per_s, r.link.latency_s)
    return crossing_time(c.kind, c.n, c.per_domain(topo.domain), nbytes, topo.scale_up, topo.scale_out)


def _rule_times(colls: tuple[Collective, ...], scenario: Scenario, spec: ModelSpec, p: Precision, topo, device):
    """(rule, message bytes, seconds of one run) of each collective, each distinct message and time computed once."""
    monos_used, rules = _comm_rules(colls, topo, device)
    monos = scenario.monomials(monos_used, spec)
    sizes: dict[tuple, Any] = {}
    times: dict[tuple, Any] = {}
    out = []
    act = p.act_bytes  # a property that reads the format's registry: once per pass
    for r in rules:
        if r.terms not in sizes:
            sizes[r.terms] = sum(coef * monos[m] for coef, m in r.terms) * act  # float, or an array
        if r.key not in times:
            times[r.key] = _one_time(r, sizes[r.terms], topo)
        out.append((r, sizes[r.terms], times[r.key]))
    return out


def comm_costs(
    colls: tuple[Collective, ...],
    scenario: Scenario,
    spec: ModelSpec,
    p: Precision,
    topo: Topology,
    device: str | None = None,
) -> list[CommCost]:
    """Each collective's bytes and time for ``scenario`` (messages in the activations' dtype).

    Rule: an all-reduce within one scale-up domain over 2, 4 or 8 GPUs of a ``device`` with fitted kernels
    (:func:`fitted_device`) takes the fitted time (:func:`_fitted_all_reduce`); every other collective, and
    every collective without ``device``, the analytic latency + bus bytes / link bandwidth; one spanning
    several scale-up domains, :func:`llmath.deploy.collectives.crossing_time` (NCCL's rings over every NIC)."""
    out = []
    for r, nbytes, one in _rule_times(colls, scenario, spec, p, topo, device):
        c = r.coll
        bus = r.bus * nbytes
        if np.ndim(nbytes) == 0:
            nbytes, bus, one = float(nbytes), float(bus), float(one)
        out.append(CommCost(c.name, c.kind, c.group, c.n, c.count, r.link.kind, nbytes, bus, one * c.count, c.overlap))
    return out


def comm_seconds(colls: tuple[Collective, ...], scenario: Scenario, spec: ModelSpec, p: Precision, topo, device):
    """(Σ plain, Σ overlapped) seconds of :func:`comm_costs`' collectives, the same sums without the records."""
    plain = hidden = 0
    for r, _, one in _rule_times(colls, scenario, spec, p, topo, device):
        if r.coll.overlap:
            hidden = hidden + one * r.coll.count
        else:
            plain = plain + one * r.coll.count
    return plain, hidden


def per_gpu_stage(
    spec: ModelSpec,
    layout: Layout,
    stage: Stage,
    scenario: Scenario,
    hw: Hardware,
    precision: Precision,
    eff: Efficiency,
    attention: Attention = "flash",
) -> PassCost:
    """Per-GPU costs of one pass (``stage`` = prefill or a decode step) of a replica ``scenario``
    (B = the replica's sequences, ⌈batch/dp⌉): one :class:`StageCost` per pipeline stage."""
    topo = topology(hw)
    out = []
    for plan in rank_plans(spec, stage, attention, layout):
        t = rank_table(spec, stage, attention, layout, plan.index)
        ti, c, m = stage_times(t, scenario, hw, precision, eff, stage == "decode")
        tokens = np.asarray(scenario.B, dtype=float) * np.asarray(scenario.T, dtype=float)
        fmt, aligned = precision.weight_format("experts"), bool(eff.moe_aligned_rows)
        ti = at_busiest_rank(ti, t, layout, hw.name, fmt, tokens, aligned)
        comm = comm_costs(plan.collectives, scenario, spec, precision, topo, fitted_device(hw, eff))
        span = (plan.layers.start, plan.layers.stop)
        cs, ms, ts = c.sum(-1), m.sum(-1), ti.sum(-1)
        if np.ndim(ts) == 0:
            cs, ms, ts = float(cs), float(ms), float(ts)
        out.append(StageCost(plan.index, span, ti, cs, ms, ts, comm))
    return PassCost(out)


def _at_busiest_rank(d, t: Table, layout: Layout, device: str, fmt: str, batch, n, aligned: bool = False):
    """A generation's decode summary ``d`` with the routed experts at the busiest EP rank's pace
    (:func:`llmath.deploy.ep_balance.at_busiest_rank`, ``aligned`` as there): their time does not grow with the
    context, so each step gets 1/n of the extra."""
    per_op = at_busiest_rank(d.per_op_total_s, t, layout, device, fmt, batch, aligned)
    extra = (per_op - d.per_op_total_s).sum(-1)
    if not np.any(extra):
        return d
    step = np.divide(extra, n, out=np.zeros(np.shape(n * extra)), where=n > 0)
    first, last = d.first_s + step, d.last_s + step
    return replace(d, first_s=first, last_s=last, total_s=d.total_s + extra, per_op_total_s=per_op)


def decode_totals(
    spec: ModelSpec,
    layout: Layout,
    hw: Hardware,
    precision: Precision,
    eff: Efficiency,
    attention: Attention,
    batch,
    context,
    gen,
    src=0,
) -> dict[str, Any]:
    """A generation's N − 1 decode steps on the layout: per stage, the closed-form roofline sum of its
    operators plus N − 1 × its per-step communication (messages do not grow with the context).
    ``batch`` (one replica's), ``context`` and ``gen`` may be arrays that broadcast (a sweep); ``src``: the
    source positions an encoder-decoder model's steps cross-attend."""
    from llmath.hardware.decode import decode_generation  # the closed form: not the planner's stepwise loops

    topo = topology(hw)
    total = first = last = comm_total = 0.0
    step = Scenario(batch, 1, context, src=src)
    n = np.maximum(np.asarray(gen, dtype=float) - 1, 0.0)
    for plan in rank_plans(spec, "decode", attention, layout):
        t = rank_table(spec, "decode", attention, layout, plan.index)
        d = decode_generation(t, hw, precision, eff, batch, context, gen, src)
        fmt = precision.weight_format("experts")
        d = _at_busiest_rank(d, t, layout, hw.name, fmt, batch, n, bool(eff.moe_aligned_rows))
        comm = comm_costs(plan.collectives, step, spec, precision, topo, fitted_device(hw, eff))
        plain = sum(c.time_s for c in comm if not c.overlapped)
        hidden = sum(c.time_s for c in comm if c.overlapped)
        mean_ops = np.divide(d.total_s, n, out=np.zeros(np.shape(n * d.total_s)), where=n > 0)
        exposed = plain + np.maximum(0.0, hidden - mean_ops)
        total = total + d.total_s + n * exposed
        first = first + d.first_s + exposed
        last = last + d.last_s + exposed
        comm_total = comm_total + n * (plain + hidden)
    out = {"total_s": total, "first_s": first, "last_s": last, "steps": n, "comm_s": comm_total}
    return {k: float(v) if np.ndim(v) == 0 else v for k, v in out.items()}
