"""The report of one pass (a stage): exact per-operator FLOPs and bytes, their totals and roofline times.

:func:`stage_report` evaluates the operator list of :mod:`llmath.ops` for one scenario (Python ints for one
scenario, arrays for a sweep) and, with a hardware, times each operator on the roofline; under a parallel
layout it reports one GPU of each pipeline stage and the collectives they run (:mod:`llmath.deploy.cost`).
Byte totals are sums of the rows'. Nothing here prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, cast

from llmath.deploy.cost import PassCost, StageCost, comm_costs, fitted_device, gpu_parts
from llmath.deploy.layout import Layout
from llmath.hardware import Hardware
from llmath.hardware.roofline import Efficiency, efficiency, op_times
from llmath.hardware.topology import topology
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops import CLASSES, Attention, Scenario, Stage, Value, evaluate, table
from llmath.ops.params import weight_bytes_per_element
from llmath.ops.ssm_state import class_bytes

BYTE_CLASSES = ("weight", "act_in", "act_out", "kv_read", "kv_write")


@dataclass
class OpRow:
    name: str
    component: str
    kind: str
    signature: str
    count: int
    flops: Value
    vflops: Value
    bytes: dict[str, Value]
    intensity: float | None  # FLOPs / bytes; None when the op moves no bytes (0/0)
    time_s: float | None = None
    compute_s: float | None = None
    memory_s: float | None = None
    bound: str | None = None
    layer_kind: str = ""


@dataclass
class StageReport:
    stage: str
    flops: dict[str, Value]  # matmul, vector, total (Python ints for one scenario; arrays for a sweep)
    bytes: dict[str, float]  # weights, act_in, act_out, kv_read, kv_write, total
    intensity: float
    ops: list[OpRow]
    time_s: float | None = None
    bound: str | None = None
    compute_s: float | None = None
    memory_s: float | None = None
    comm_s: float | None = None  # layouts only: all collectives' time (exposed: time_s − Σ op times)
    comm: dict[str, dict[str, Any]] | None = None  # layouts only: bytes, bus bytes and time by collective

    def to_dict(self, with_ops: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not with_ops:
            d.pop("ops")
        if self.comm is None:
            d.pop("comm")
            d.pop("comm_s")
        return d


def _num(v):
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        return int(v)
    return v


def _op_row(prefix: str, c, bpe: dict[str, float]) -> OpRow:
    b = {k: _num(c.values.get(k, 0) * bpe[k]) for k in BYTE_CLASSES}
    fl = c.values.get("flops", 0) + c.values.get("vflops", 0)
    bt = sum(b.values())
    return OpRow(
        prefix + c.op.name,
        c.op.component,
        c.op.kind,
        c.op.signature,
        c.op.count,
        c.values.get("flops", 0),
        c.values.get("vflops", 0),
        b,
        fl / bt if bt else None,  # no bytes (e.g. an empty cache append): undefined, JSON null
        layer_kind=c.op.layer_kind,
    )


def _collective_rows(prefix: str, colls, scenario: Scenario, spec: ModelSpec, p: Precision) -> list[OpRow]:
    """Collectives as rows (kind ``collective``): their message bytes over all runs under ``comm``."""
    rows = []
    monos = scenario.monomials({t.mono for c in colls for t in c.message}, spec)
    for c in colls:
        nbytes = _num(sum(t.coef * monos[t.mono] for t in c.message) * c.count * p.act_bytes)
        sig = f"{c.kind}(n={c.n}) " + " + ".join(t.sym for t in c.message)
        rows.append(OpRow(prefix + c.name, "communication", "collective", sig, c.count, 0, 0, {"comm": nbytes}, 0.0))
    return rows


def stage_report(
    spec: ModelSpec,
    stage: str,
    scenario: Scenario,
    attention: str,
    precision: Precision,
    hw: Hardware | None = None,
    eff: Efficiency | None = None,
    layout: Layout | None = None,
) -> StageReport:
    """Exact per-operator FLOPs and bytes of one pass (Python ints), plus roofline times if ``hw``.

    With a ``layout``: the operators of one GPU of each pipeline stage (``scenario`` = one DP replica's),
    and the collectives they run; the stage time adds the exposed communication (:mod:`llmath.deploy.cost`).
    """
    bpe = precision.per_class
    wbpe = weight_bytes_per_element(spec, precision)  # weights' bytes per element by the op's module
    rows: list[OpRow] = []
    tot: dict[str, Value] = dict.fromkeys(CLASSES, 0)
    parts = gpu_parts(spec, cast(Stage, stage), cast(Attention, attention), layout)
    for prefix, ops, _, mt, colls, _ in parts:
        costs = evaluate(ops, scenario, spec, mt)
        for c in costs:
            for k in CLASSES:
                tot[k] = tot[k] + c.values.get(k, 0)
            per = class_bytes(c.op, spec, precision, bpe)
            rows.append(_op_row(prefix, c, per | {"weight": wbpe.get(c.op.module, bpe["weight"])}))
        rows += _collective_rows(prefix, colls, scenario, spec, precision)
    byts = {("weights" if k == "weight" else k): _num(sum(r.bytes.get(k, 0) for r in rows)) for k in BYTE_CLASSES}
    byts["total"] = _num(sum(byts.values()))
    flops: dict[str, Value] = {"matmul": tot["flops"], "vector": tot["vflops"], "total": tot["flops"] + tot["vflops"]}
    # the useful FLOPs: causal (and window) pairs only, as a fused kernel counts them
    flash = parts if attention == "flash" else gpu_parts(spec, cast(Stage, stage), "flash", layout)
    flops["useful_matmul"] = sum(
        c.values.get("flops", 0) for _, ops, _, mt, _, _ in flash for c in evaluate(ops, scenario, spec, mt)
    )
    rep = StageReport(stage, flops, byts, flops["total"] / byts["total"], rows)
    if hw is not None:
        eff = eff if eff is not None else efficiency("expected", hw)
        _time_rows(rep, parts, spec, stage, attention, scenario, precision, hw, eff, layout)
    return rep


def _time_rows(rep, parts, spec, stage, attention, scenario, precision, hw, eff, layout) -> None:
    """Roofline times per row; with a layout, each stage's collectives on the topology as well."""
    stages, i = [], 0
    for idx, (_, _, tab, _, colls, layers) in enumerate(parts):
        t = tab if tab is not None else table(spec, stage, attention)
        vals = t.values(scenario)
        tokens = scenario.B * scenario.T
        dec = stage == "decode"
        ctx = scenario.S0 if dec else None  # a decode step's attention: fitted fractions at its context
        times, comp, mem, _ = op_times(vals, t, hw, precision, eff, scenario.B, tokens, dec, ctx)
        for ti, ci, mi in zip(times, comp, mem, strict=True):
            r = rep.ops[i]
            r.time_s, r.compute_s, r.memory_s = float(ti), float(ci), float(mi)
            r.bound = "compute" if ci >= mi else "memory"
            i += 1
        dev = fitted_device(hw, eff)
        comm = comm_costs(colls, scenario, spec, precision, topology(hw), dev) if layout is not None else []
        for cc in comm:
            r = rep.ops[i]
            r.time_s, r.compute_s, r.memory_s, r.bound = cc.time_s, 0.0, 0.0, "communication"
            i += 1
        stages.append(StageCost(idx, layers, times, float(comp.sum()), float(mem.sum()), float(times.sum()), comm))
    cost = PassCost(stages)
    rep.time_s = cost.time_s if layout is not None else float(stages[0].op_time_s.sum())
    rep.compute_s, rep.memory_s = cost.total("compute_s"), cost.total("memory_s")
    rep.bound = "compute" if rep.compute_s >= rep.memory_s else "memory"
    if layout is not None:
        rep.comm_s = cost.total("comm_s")
        rep.comm = cost.comm_by_collective()
