"""``llmath validate`` with every fitted all-reduce timed by its kernel table's measured points (measured, not applied).

    pip install pandas pyarrow                  # in a separate venv; not llmath dependencies
    PYTHONPATH=src python scripts/allreduce_points.py AIC_DATA [--only custom_all_reduce] [--runs FILE]

AIC_DATA is the unpacked aiconfigurator-core wheel's ``systems/data``. llmath times an all-reduce of S bytes within
one scale-up domain as the faster of two fitted lines α + S/β (NCCL's ``all_reduce`` and TensorRT-LLM's
``custom_all_reduce`` tables, ``data/efficiency_fit.json``, ``llmath.deploy.cost``). Here each line is replaced,
inside its table's measured sizes, by the log-log interpolation of the table's own points (``message_size`` is
elements of bf16 / half, as ``scripts/fit_efficiency.py`` reads it); outside them the fitted line stays. It
prints, as JSON, the aggregated and disaggregated summaries of ``validate --runs FILE`` (default reading) and the
held-out ``validate --published`` and ``--published --serving`` overall errors. docs/serving-runs.md, "The
collection's TensorRT-LLM Qwen3-32B H100 rows", reports what it gives.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import llmath.deploy.cost as cost
from llmath.hardware import efficiency_fit as ef

OPS = ("all_reduce", "custom_all_reduce")


def _latest(path: Path, name: str) -> Path | None:
    vs = [p for p in path.iterdir() if (p / name).exists()] if path.exists() else []
    return max(vs, key=lambda p: [int(x) if x.isdigit() else x for x in p.name.split(".")]) if vs else None


def table_points(root: Path, system: str) -> dict[str, dict[int, tuple[tuple[float, ...], ...]]]:
    """{op: {GPUs: (log bytes, log seconds)}} of one aiconfigurator system's two all-reduce tables (tuples: the
    rule that carries them is a cache key)."""
    out: dict[str, dict[int, tuple[tuple[float, ...], ...]]] = {}
    nccl = _latest(root / system / "comm" / "nccl", "nccl_perf.parquet")
    if nccl is not None:
        d = pd.read_parquet(nccl / "nccl_perf.parquet")
        out["all_reduce"] = _points(d[(d.op_name == "all_reduce") & (d.nccl_dtype == "half")])
    trt = _latest(root / system / "comm" / "trtllm", "custom_allreduce_perf.parquet")
    if trt is not None:
        d = pd.read_parquet(trt / "custom_allreduce_perf.parquet")
        out["custom_all_reduce"] = _points(d[d.allreduce_dtype == "bfloat16"])
    return out


def _points(d) -> dict[int, tuple[tuple[float, ...], ...]]:
    return {
        int(n): (
            tuple(np.log(x.message_size.to_numpy(float) * 2).tolist()),
            tuple(np.log(x.latency.to_numpy(float) * 1e-3).tolist()),
        )
        for n, x in ((n, g.sort_values("message_size")) for n, g in d.groupby("num_gpus"))
    }


def install(root: Path, only: tuple[str, ...]) -> None:
    """Replace llmath's fitted all-reduce rule by the tables' points (this process only)."""
    systems = {dev: e["aiconfigurator_system"] for dev, e in ef.data()["devices"].items()}
    cache: dict[str, dict] = {}

    def fitted(device: str, n: int):
        dev = ef.resolve(device).measured_on
        pts = cache.setdefault(dev, table_points(root, systems[dev])) if dev in systems else {}
        rules = []
        for op in only:
            coef = ef.collective_coef(device, op, n)
            if coef is not None:
                rules.append((*coef, pts.get(op, {}).get(int(n))))
        return tuple(rules)

    def one(rule, nbytes):
        alpha, beta, pts = rule
        line = alpha + np.asarray(nbytes, float) / beta
        if pts is None:
            return line
        x, y = pts
        s = np.log(np.maximum(np.asarray(nbytes, float), 1.0))
        return np.where((s >= x[0]) & (s <= x[-1]), np.exp(np.interp(s, x, y)), line)

    plain = cost._one_time

    def one_time(r, nbytes, topo):
        if not r.fit:
            return plain(r, nbytes, topo)
        return np.minimum.reduce([one(f, nbytes) for f in r.fit])

    cost._fitted_all_reduce = fitted
    cost._one_time = one_time


def main(argv: list[str]) -> None:
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: allreduce_points.py AIC_DATA [--only OP] [--runs FILE]")
    only = (argv[argv.index("--only") + 1],) if "--only" in argv else OPS
    install(Path(argv[0]), only)
    from llmath.measure.published import validate_published
    from llmath.measure.serving_runs import validate_runs
    from llmath.measure.serving_validation import validate_serving

    out = {"published": validate_published()["summary"]["overall"], "serving": validate_serving()["summary"]["overall"]}
    if "--runs" in argv:
        runs = validate_runs(argv[argv.index("--runs") + 1])["summary"]
        out["runs"] = {mode: runs[mode]["overall"] for mode in ("agg", "disagg") if mode in runs}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
