"""Published serving measurements (``data/published.json``) against llmath's ``expected`` predictions.

Nothing in llmath is fitted to these points. Each usable row is predicted with
:func:`llmath.analysis.analyze` (flash attention; multi-GPU rows on the layout they state); every other row
is listed under ``skipped`` with the reason.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from llmath.errors import ConfigError, LLMathError, WorkloadError


def err_summary(rows: Sequence[Mapping[str, Any]], key: str = "error") -> dict[str, Any]:
    """Count, median |error| and worst signed error of the rows' ``key`` (missing and non-finite skipped)."""
    errs = [r[key] for r in rows if r.get(key) is not None and math.isfinite(r[key])]
    if not errs:
        return {"n": 0, "median_abs_error": None, "worst_error": None}
    worst = max(errs, key=abs)
    return {
        "n": len(errs),
        "median_abs_error": float(statistics.median(abs(e) for e in errs)),
        "worst_error": float(worst),
        "worst_abs_error": abs(float(worst)),
    }


_METRIC_KEY = {
    "ttft_s": "ttft_s",
    "tpot_s": "tpot_s",
    "throughput_tok_s": "throughput_tok_s",
    "e2e_s": "e2e_s",
    "prefill_tok_s": "prefill_tok_s",
}


def _published_rows(path: str | Path | None) -> list[dict[str, Any]]:
    if path is None:
        text = (resources.files("llmath") / "data" / "published.json").read_text()
        where = "data/published.json"
    else:
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"{p}: no such published-results file")
        text, where = p.read_text(), str(p)
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: cannot parse ({e}); fix the file") from None
    rows = d.get("results") if isinstance(d, dict) else None
    if not isinstance(rows, list):
        raise ConfigError(f"{where}: expected an object with a 'results' list (schema 1)")
    return rows


def _precision_for(r: Mapping[str, Any]):
    """(Precision, assumptions) for a published row; a weights dtype llmath lacks raises WorkloadError."""
    from llmath.model.dtypes import BITS, Precision

    w = str(r.get("weights_dtype") or "").lower()
    assumed = []
    kv = r.get("kv_dtype")
    if w == "fp4":  # NVIDIA's FP4 rows run ModelOpt NVFP4 checkpoints: weights and GEMM inputs in NVFP4
        kv = kv or "fp16"
        assumed.append("fp4 = NVFP4 W4A4 (ModelOpt checkpoint, as the row's source states)")
        if r.get("kv_dtype") is None:
            assumed.append(f"KV dtype not stated: {kv}")
        return Precision(weights="nvfp4", activations="bf16", kv=kv, act_quant="nvfp4"), assumed
    if w not in BITS:
        raise WorkloadError(f"weights dtype {r.get('weights_dtype')!r} is not one llmath models")
    if w in ("int8", "int4"):
        act = kv if kv in ("bf16", "fp16") else "bf16"
        assumed.append(f"{w} weight-only: matmuls in {act}")
    else:
        act = w
    if kv is None:
        kv = w if w in ("fp32", "bf16", "fp16") else "fp16"
        assumed.append(f"KV dtype not stated: {kv}")
    return Precision(weights=w, activations=act, kv=kv), assumed


def _skip_reason(r: Mapping[str, Any]) -> str | None:
    """Why llmath cannot predict a published row, or ``None`` when it can."""
    from llmath import hardware as hwmod
    from llmath.model import registry

    checks = (
        (r.get("metric") not in _METRIC_KEY, f"metric {r.get('metric')!r} is not one llmath predicts"),
        (r.get("value") is None, "no value in the source"),
        (r.get("model") not in registry.index(), f"model {r.get('model')!r} is not in llmath's registry"),
        (r.get("hardware") not in hwmod.names(), f"hardware {r.get('hardware')!r} is not in llmath's registry"),
        (r.get("batch") is None, "batch not stated (the runtime chose it, or in-flight batching)"),
        (r.get("prompt") is None or r.get("gen") is None, "prompt or output length not stated"),
    )
    return next((reason for failed, reason in checks if failed), None)


class _Layout(TypedDict, total=False):
    """The degrees of the :class:`~llmath.deploy.layout.ParallelConfig` a published row states."""

    gpus: int
    tp: int
    ep: int


def _layout_for(r: Mapping[str, Any]) -> _Layout:
    """The layout a multi-GPU row states ("TP=4", "tensor parallel 8" in its notes), else TP = n_devices;
    experts TP-sharded (ep = 1) as the engines of these rows ran them. One device: no layout."""
    n = int(r.get("n_devices") or 1)
    if n == 1:
        return {}
    m = re.search(r"\b(?:TP\s*=?\s*|tensor[- ]parallel(?:ism)?\s*(?:=\s*)?)(\d+)", str(r.get("notes") or ""))
    return {"gpus": n, "tp": int(m.group(1)) if m else n, "ep": 1}


def _predict(r: Mapping[str, Any]) -> dict[str, Any]:
    """The compared row for a usable published row (raises LLMathError when llmath cannot predict it)."""
    import warnings

    from llmath.analysis import analyze
    from llmath.deploy.layout import ParallelConfig
    from llmath.deploy.workload import Workload
    from llmath.hardware.kernels import DEFAULT_ENGINE
    from llmath.measure.serving_validation import engine_for

    prec, assumed = _precision_for(r)
    engine = engine_for(str(r.get("framework") or ""))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = analyze(
            r["model"],
            r["hardware"],
            workload=Workload(batch=int(r["batch"]), prompt=int(r["prompt"]), gen=int(r["gen"])),
            attention="flash",
            precision=prec,
            parallel=ParallelConfig(**_layout_for(r)),
            engine=engine or DEFAULT_ENGINE,  # the row's engine's kernels
        )
    gen_m, engine = _with_overheads(r, a.generation)
    key = _METRIC_KEY[r["metric"]]
    if key == "throughput_tok_s" and r.get("per_device") and a.parallel:
        key = "throughput_tok_s_per_gpu"
    pred = float(gen_m[key])
    meas = float(r["value"])
    return {
        "id": r.get("id", "?"),
        "framework": r.get("framework"),
        "model": r["model"],
        "hardware": r["hardware"],
        "batch": r["batch"],
        "prompt": r["prompt"],
        "gen": r["gen"],
        "layout": {k: a.parallel[k] for k in ("tp", "pp", "dp", "ep")} if a.parallel else None,
        "weights": prec.weights,
        "activations": prec.activations,
        "kv_dtype": prec.kv,
        "metric": r["metric"],
        "measured": meas,
        "predicted": pred,
        "ratio": pred / meas,
        "error": (pred - meas) / meas,
        "assumptions": assumed,
        "source": r.get("source"),
        "engine": engine,
        "overheads_s": gen_m.get("overheads_s"),
    }


def _with_overheads(r: Mapping[str, Any], generation: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The generation metrics with the overheads of the row's engine preset added (the framework names it:
    :func:`llmath.measure.serving_validation.engine_for`); unchanged for a framework without a preset."""
    from llmath.deploy import engines
    from llmath.deploy.overheads import apply
    from llmath.measure.serving_validation import engine_for

    engine = engine_for(str(r.get("framework") or ""))
    if engine is None:
        return generation, None
    graphs = bool(engines.info(engine)["settings"].get("cuda_graphs", {}).get("value", True))
    ov = engines.overheads(engine)
    return apply(generation, ov, int(r["batch"]), int(r["gen"]), graphs, prompt=int(r["prompt"])), engine


def validate_published(path: str | Path | None = None) -> dict[str, Any]:
    """llmath's ``expected`` prediction for every usable row of the published measurements.

    Usable: model and hardware in llmath's registries (multi-GPU rows on the layout they state), a stated
    batch, prompt and output length, and a dtype llmath models. Every other row is listed under ``skipped``
    with its reason. Attention is ``flash`` (the serving engines' fused kernels).
    """
    rows, skipped = [], []
    for r in _published_rows(path):
        reason = _skip_reason(r)
        if reason is None:
            try:
                rows.append(_predict(r))
            except LLMathError as e:
                reason = str(e)
        if reason is not None:
            skipped.append(
                {
                    "id": r.get("id", "?"),
                    "model": r.get("model"),
                    "hardware": r.get("hardware"),
                    "metric": r.get("metric"),
                    "reason": reason,
                }
            )
    by_metric = {m: err_summary([r for r in rows if r["metric"] == m]) for m in sorted({r["metric"] for r in rows})}
    return {
        "efficiency": "expected",
        "attention": "flash",
        "rows": rows,
        "skipped": skipped,
        "summary": {"overall": err_summary(rows), "by_metric": by_metric},
        "notes": [
            "error = (predicted - measured) / measured; ratio = predicted / measured",
            "nothing in llmath is fitted to these points",
        ],
    }
