"""One decode step of a measured serving run, per operator: llmath's time beside the engine's kernel tables (by hand).

    pip install pandas pyarrow                  # in a separate venv; not llmath dependencies
    PYTHONPATH=src python scripts/decode_components.py RUN_ID [eff-data/unpacked] [--runs serving_runs.csv]

RUN_ID is an aggregated row of ``serving_runs.csv``. The step is that row's replica layout decoding its
per-replica concurrency at the mean context (prompt + gen / 2), one rank of each pipeline stage, as
:class:`llmath.deploy.step.Device` times it (operators, then collectives). With the unpacked aiconfigurator-core
wheel, each weight GEMM (m = tokens, n × k = the rank's weights, k its input width), the routed-expert layer
(tokens, hidden, inter, top-k, E, moe-TP, EP), GQA decode attention (batch, context, the rank's heads) and the TP
all-reduce (GPUs, message bytes) are looked up in the row's engine's own per-kernel tables (the nearest measured
shape; the newest version for GEMM, attention and all-reduce, balanced routing and the fastest kernel for MoE).
Only kernel-level measurements are read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from llmath.deploy import engines
from llmath.deploy.cost import comm_costs, fitted_device
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.step import Device, _mono
from llmath.hardware import get as get_hardware
from llmath.hardware.execution import checkpoint_precision
from llmath.hardware.kernels import engine_fp4_gemm, engine_hardware, engine_precision
from llmath.hardware.roofline import efficiency, monomial_times
from llmath.measure.serving_runs import precision, read_runs, to_run
from llmath.model.registry import resolve
from llmath.ops import Scenario

RUNS = "serving_runs.csv"
SYSTEMS = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm"}
DTYPES = {"bf16": "bfloat16", "fp8": "fp8", "fp4": "nvfp4"}


def device(run) -> Device:
    """The replica :func:`llmath.deploy.service.serve` builds for the run."""
    spec, L = resolve(run.model), run.layout
    layout = ParallelConfig(None, L.tp, L.pp, L.ep, L.dp).requested(spec)
    hw = get_hardware(run.system)
    p = engine_precision(checkpoint_precision(run.model, precision(run))[0], hw, run.engine)
    eng = engines.preset(run.engine, hw, tp=layout.tp if layout else 1)
    hw = engine_hardware(hw, run.engine) or hw
    eff = engine_fp4_gemm(efficiency("expected", hw), hw, run.engine)  # the engine's NVFP4 GEMMs, as serve does
    return Device(spec, hw, p, eff, "flash", eng.cuda_graphs, layout)


def llmath_step(dev: Device, B: int, S: int) -> list[tuple]:
    """(name, op or None, seconds, kernels) of every operator and collective of one decode step."""
    out = []
    for part in dev.parts:
        t = part.decode
        scen = Scenario(np.asarray(float(B)), np.asarray(1.0), np.asarray(float(S)))
        mv = dev._fix(t, _mono(t, scen), B)
        tm = monomial_times(t, mv, dev.hw, dev.precision, dev.decode_eff, B, B, True, S)[0]
        out += [(op.name, op, float(tm[i]), int(t.kernels[i])) for i, op in enumerate(t.ops)]
        topo, fit = dev.topology, fitted_device(dev.hw, dev.eff)
        for c in comm_costs(part.decode_collectives, scen, dev.spec, dev.precision, topo, fit):
            out.append((f"comm {c.name}", c, float(c.time_s), c.count))
    return out


def _nearest(df, col: str, v: float):
    vals = np.array(sorted(df[col].unique()), dtype=float)
    return df[df[col] == vals[np.argmin(np.abs(np.log(vals / max(v, 1e-9))))]]


def _table(root: Path, system: str, kind: str, engine: str, name: str):
    import pandas as pd

    d = root / SYSTEMS[system] / kind / engine
    vers = sorted(p for p in d.iterdir() if (p / name).exists()) if d.is_dir() else []
    return pd.read_parquet(vers[-1] / name) if vers else None


def table_time(root: Path, run, dev: Device, op, B: int, S: int) -> float | None:
    """The engine's measured kernel seconds for ``op``'s shape, or None where its tables have none."""
    spec, L = dev.spec, dev.layout
    if hasattr(op, "kind") and not hasattr(op, "signature"):  # a collective
        df = _table(root, run.system, "comm", run.engine, "custom_allreduce_perf.parquet")
        if df is None or op.kind != "all_reduce" or op.n not in set(df.num_gpus):
            return None
        d = _nearest(
            df[(df.num_gpus == op.n) & (df.backend.str.contains("graph") if "backend" in df else df.num_gpus > 0)],
            "message_size",
            op.message_bytes / 2,  # the tables' message_size is in bf16 elements
        )
        return float(d.latency.median()) * 1e-3 * op.count
    if op.name.startswith("moe.experts.") and op.name != "moe.experts.act" and spec.moe is not None:
        if op.name != "moe.experts.gate":
            return 0.0  # the grouped kernel is timed once, on the gate row
        df = _table(root, run.system, "moe", run.engine, "moe_perf.parquet")
        if df is None:
            return None
        m = spec.moe
        want = DTYPES.get(dev.precision.compute, "bfloat16")
        d = df[(df.distribution == "balanced") & df.moe_dtype.str.startswith(want)]
        d = d[(d.moe_tp_size == max(L.tp * L.dp // L.ep, 1)) & (d.moe_ep_size == L.ep)]  # moe-TP × EP = TP × DP
        for col, v in (("hidden_size", spec.d_model), ("inter_size", m.d_ff_expert), ("num_experts", m.n_experts),
                       ("topk", m.top_k), ("num_tokens", B * L.dp)):  # fmt: skip
            if d.empty:
                return None
            d = _nearest(d, col, v)
        return float(d.groupby("kernel_source").latency.median().min()) * 1e-3 * op.count
    if op.name == "attn.flash" and spec.mla is None:
        df = _table(root, run.system, "attention", run.engine, "generation_attention_perf.parquet")
        if df is None:
            return None
        kv = "fp8" if dev.precision.kv == "fp8" else "bfloat16"
        d = df[(df.window_size == 0) & (df.kv_cache_dtype == kv) & (df.head_dim == spec.head_dim)]
        for col, v in (("num_heads", spec.n_heads / L.tp), ("num_key_value_heads", max(spec.n_kv_heads / L.tp, 1)),
                       ("batch_size", B), ("step", S)):  # fmt: skip
            if d.empty:
                return None
            d = _nearest(d, col, v)
        return float(d.latency.median()) * 1e-3 * op.count
    w = [t.coef for t in op.terms("weight") if t.mono == "1"]
    k = [t.coef for t in op.terms("act_in") if t.mono == "BT"]
    if not w or not k or op.kind != "matmul":
        return None
    df = _table(root, run.system, "gemm", run.engine, "gemm_perf.parquet")
    if df is None:
        return None
    d = df[df.gemm_dtype == DTYPES.get(dev.precision.compute, "bfloat16")]
    for col, v in (("k", k[0]), ("n", w[0] / k[0]), ("m", B)):
        if d.empty:
            return None
        d = _nearest(d, col, v)
    return float(d.groupby("kernel_source").latency.median().min()) * 1e-3 * op.count


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    runs = argv[argv.index("--runs") + 1] if "--runs" in argv else RUNS
    rows = {r["id"]: r for r in read_runs(runs)}
    if not args or args[0] not in rows:
        print("usage: decode_components.py RUN_ID [UNPACKED] [--runs CSV] (an aggregated row id)", file=sys.stderr)
        return 2
    run = to_run(rows[args[0]])
    if run.layout is None:
        print(f"{run.id}: a disaggregated row; give an aggregated one", file=sys.stderr)
        return 2
    root = Path(args[1]) / "aiconfigurator_core" / "systems" / "data" if len(args) > 1 else None
    dev = device(run)
    B, S = max(run.concurrency // run.layout.dp, 1), run.prompt + run.gen // 2
    print(f"{run.id}: {run.engine} on {dev.gpus} × {run.system}, batch {B} per replica at context {S};"
          f" measured TPOT {run.tpot_s * 1e3:.2f} ms\n")  # fmt: skip
    print("| operator | kernels | llmath µs | tables µs |\n|---|---|---|---|")
    tot = [0.0, 0.0]
    for name, op, t, n in llmath_step(dev, B, S):
        m = table_time(root, run, dev, op, B, S) if root is not None else None
        tot[0] += t
        tot[1] += m if m is not None else t
        print(f"| {name} | {n} | {t * 1e6:.0f} | {'' if m is None else f'{m * 1e6:.0f}'} |")
    print(f"| step | | {tot[0] * 1e6:.0f} | {tot[1] * 1e6:.0f} (llmath's where the tables have no shape) |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
