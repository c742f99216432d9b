"""Serving predictions against the published results that state a concurrency, a request rate or an offline
(all requests queued at once) setup: computed with :func:`llmath.deploy.service.serve` and compared.

* **offline** (``batch`` and ``concurrency`` unstated, a throughput metric whose notes say the requests were
  all queued at once, e.g. ``trtllm-bench`` throughput mode, vLLM's ``benchmark_throughput.py``): the closed
  loop at a concurrency far above what the engine admits (the queue never empties), the engine's own
  defaults (offline ones for vLLM), aggregate output tokens/s;
* **concurrency** stated: the closed loop at that concurrency; the metric as published (TTFT, TPOT/ITL,
  throughput);
* the framework picks the engine preset (TensorRT-LLM and NIM → ``trtllm``, vLLM → ``vllm``, SGLang →
  ``sglang``); precision as the static comparison assumes it (:func:`llmath.measure.validate._precision_for`).

Nothing is fitted to these rows: engine defaults come from the engines' sources (``data/engines.json``).
Rows on several GPUs run one tensor-parallel replica over them (TP = the GPUs, as the rows' notes state:
TP2, TP8). Rows this cannot compute are listed under ``skipped`` with the reason (a weight format llmath
lacks).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from llmath.errors import LLMathError

OFFLINE_CONCURRENCY = 1_000_000  # "all requests queued at once": the queue never empties


def engine_for(framework: str) -> str | None:
    f = framework.lower()
    if "tensorrt" in f or "nim" in f:
        return "trtllm"
    if "vllm" in f:
        return "vllm"
    if "sglang" in f:
        return "sglang"
    return None


def _setup(r: dict[str, Any]) -> str | None:
    if r.get("concurrency") is not None:
        return "concurrency"
    if r.get("request_rate") is not None:
        return "rate"
    notes = (r.get("notes") or "").lower()
    offline = "queued at once" in notes or "offline" in notes or "benchmark_throughput" in notes
    if r.get("batch") is None and r.get("metric") == "throughput_tok_s" and offline:
        return "offline"
    return None


def _compute(r: dict[str, Any], model: str, engine: str, setup: str) -> dict[str, Any]:
    """One published row, predicted: the serving report's metric against the measured value."""
    from llmath.deploy.layout import ParallelConfig
    from llmath.deploy.service import serve
    from llmath.deploy.workload import Workload
    from llmath.measure.published import _precision_for

    n_dev = int(r.get("n_devices") or 1)
    prec, assumed = _precision_for(r)
    load: dict[str, Any] = {"concurrency": OFFLINE_CONCURRENCY if setup == "offline" else r.get("concurrency")}
    if setup == "rate":
        load = {"rate": r["request_rate"]}
    if setup == "offline":
        load["arrival"] = "offline"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = serve(
            model,
            r["hardware"],
            workload=Workload(prompt=int(r["prompt"]), gen=int(r["gen"]), **load),
            engine=engine,
            precision=prec,
            parallel=ParallelConfig(tp=n_dev if n_dev > 1 else None),
        )
    pred, meas = float(rep.metrics[r["metric"]]), float(r["value"])
    if n_dev > 1:
        assumed = [*assumed, f"{n_dev} GPUs as one tensor-parallel replica (TP={n_dev})"]
    return {
        "id": r.get("id", "?"),
        "framework": r.get("framework"),
        "engine": engine,
        "setup": setup,
        "model": r.get("model"),
        "hardware": r["hardware"],
        "gpus": n_dev,
        "prompt": r["prompt"],
        "gen": r["gen"],
        "concurrency": r.get("concurrency"),
        "metric": r["metric"],
        "measured": meas,
        "predicted": pred,
        "error": (pred - meas) / meas,
        "running": rep.metrics["running_per_replica"],
        "assumptions": assumed,
        "source": r.get("source"),
    }


def validate_serving(path: str | Path | None = None) -> dict[str, Any]:
    """Predicted vs published for every serving-setup row (see the module docstring)."""
    from llmath import hardware as hwmod
    from llmath.measure.published import _published_rows
    from llmath.measure.published import err_summary as _err_summary
    from llmath.model import registry

    rows, skipped = [], []
    for r in _published_rows(path):
        setup = _setup(r)
        if setup is None:
            continue
        rid = r.get("id", "?")
        model = r.get("model")

        def skip(reason, r=r, rid=rid):
            skipped.append({"id": rid, "framework": r.get("framework"), "model": r.get("model"), "reason": reason})

        engine = engine_for(r.get("framework") or "")
        if engine is None:
            skip(f"framework {r.get('framework')!r} has no engine preset")
            continue
        if model not in registry.index() or r.get("hardware") not in hwmod.names():
            skip("model or hardware not in llmath's registries")
            continue
        try:
            rows.append(_compute(r, model, engine, setup))
        except LLMathError as e:
            skip(str(e))
    groups: dict[str, Any] = {}
    for key in ("engine", "hardware", "model", "metric"):
        for v in sorted({str(x[key]) for x in rows}):
            groups[f"{key}={v}"] = _err_summary([x for x in rows if str(x[key]) == v])
    return {
        "rows": rows,
        "skipped": skipped,
        "summary": {"overall": _err_summary(rows), "groups": groups},
        "notes": [
            "error = (predicted - measured) / measured; nothing is fitted to these rows",
            "offline rows: concurrency far above what the engine admits, engine defaults from data/engines.json",
        ],
    }
