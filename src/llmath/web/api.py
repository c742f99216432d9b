"""The page's API as pure functions: request parameters (strings) -> JSON-ready dicts. Nothing here prints.

Every handler takes ``params`` (the query string, or the ``params`` object of a POSTed JSON body) and an
optional ``config`` (a config.json object POSTed by the page, used instead of a registry name). The
server (:mod:`.server`) routes ``/api/<name>`` to ``HANDLERS[name]``. The numbers all come from
:func:`llmath.analysis.analyze` and the operator list; the handlers only reshape them for the page:

* ``meta``: bundled models (``encoder_decoder``: those with an encoder stack), accelerators (with memory
  and peaks), precisions, engines when available;
* ``analyze``: ``llmath analyze --json``'s object plus ``roofline`` (the device's roofs for the compute
  dtype) and ``split`` (each stage's time as compute-, memory- and communication-bound parts; an
  encoder-decoder model's ``encoder`` pass too);
* ``sweep``: key metrics over one axis (``batch``, ``concurrency``, ``prompt`` or ``gen``);
* ``compare``: key metrics for every model × accelerator pair;
* ``explain``: each cost class of one operator as the formula with the numbers substituted;
* ``plan``: the deployment planner's best configuration and Pareto front, when the planner is installed.

The serving handlers (``analyze`` with ``concurrency``, ``plan``) refuse requests whose prompt + gen pass the
model's context, as :func:`llmath.serve` does, unless ``allow_long_context=1`` (:mod:`llmath.deploy.context_limit`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from llmath.errors import LLMathError, UnknownNameError, WorkloadError

Params = dict[str, str]

_INTS = ("batch", "prompt", "gen", "prefix", "gpus", "tp", "pp", "ep", "dp", "decoder_prompt")
_STRS = ("attention",)
_WORKLOAD = ("batch", "prompt", "gen", "prefix", "decoder_prompt")  # the fields of the page's Workload
_SERVING = ("concurrency", "engine")  # continuous batching (llmath.deploy.service.serve)
_MAX_POINTS = 32
_MAX_PAIRS = 12
KEY_METRICS = (
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "throughput_tok_s",
    "throughput_tok_s_per_gpu",
    "tok_s_per_user",
    "per_sequence_tok_s",
)


def _int(params: Params, name: str, lo: int = 0, hi: int = 1 << 40) -> int | None:
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        v = int(str(raw), 10)
    except ValueError:
        raise WorkloadError(f"{name}={raw!r} must be a whole number; e.g. {name}={max(lo, 1)}") from None
    if not lo <= v <= hi:
        raise WorkloadError(f"{name}={v} must be between {lo} and {hi}; give a whole number in that range")
    return v


def _registry_only(kind: str, value: str, known: list[str]) -> str:
    """A registry name (the web API never reads a server-side path), else an error with the closest names."""
    if value in known:
        return value
    from llmath.model.registry import closest

    close = closest(value, known)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise UnknownNameError(
        f"unknown {kind} {value[:100]!r}{hint}. The web API takes registry names only "
        f"(/api/meta lists them) or hub ids (org/name); POST a config.json to analyse another model"
    )


def _model_name(params: Params) -> str:
    """The model the request names: a bundled model (registry name or its hub id, any case) or another hub
    id (``org/name``, fetched with huggingface_hub like the CLI does); never a path on this machine."""
    from llmath.model import hub, registry

    name = str(params.get("model") or "llama-3-8b")
    found = registry.lookup(name)
    if found is not None:
        return found
    if hub.looks_like_repo_id(name) and not name.lower().endswith((".json", ".gguf")):
        return name
    return _registry_only("model", name, registry.names())


def _uploaded(params: Params, config: dict):
    """A POSTed config.json read as a checkpoint: its spec and the formats its ``quantization_config`` states,
    by the function that reads a config.json file's (:func:`llmath.model.checkpoint.config_checkpoint`)."""
    from llmath.model.checkpoint import config_checkpoint

    name = str(params.get("model") or "uploaded config")[:200]
    return config_checkpoint(config, name, source="uploaded config.json", where="uploaded config.json")


def _checkpoint(params: Params, config: dict | None):
    """The model with its formats: the uploaded config read as a checkpoint, else the model's name."""
    return _uploaded(params, config) if config is not None else _model_name(params)


def _model(params: Params, config: dict | None):
    from llmath.model.registry import resolve

    return resolve(_checkpoint(params, config))


def _precision(params: Params, config: dict | None):
    """The checkpoint's formats (a bundled, hub or uploaded model's quantization_config; bf16 when it states
    none), with the page's dtype / weights / activations / KV choices overriding them (empty = the checkpoint's)."""
    from llmath.model.checkpoint import precision_for

    model = _checkpoint(params, config)
    pick = {k: str(params[k]) if params.get(k) else None for k in ("dtype", "weights", "activations", "kv_dtype")}
    return precision_for(
        model, dtype=pick["dtype"], weights=pick["weights"], activations=pick["activations"], kv=pick["kv_dtype"]
    )


def _analyze_kwargs(params: Params, config: dict | None = None) -> dict[str, Any]:
    """Keyword arguments for :func:`llmath.analysis.analyze` from the request; unknown ones are refused."""
    from llmath.analysis import analyze
    from llmath.deploy.workload import Workload

    accepted = inspect.signature(analyze).parameters
    kw: dict[str, Any] = {"precision": _precision(params, config)}
    for name in _INTS:
        v = _int(params, name, lo=0 if name == "prefix" else 1)
        if v is not None:
            kw[name] = v
    for name in _STRS:
        if params.get(name):
            kw[name] = str(params[name])
    if params.get("efficiency"):
        kw["efficiency_mode"] = str(params["efficiency"])
    degrees = {k: kw.pop(k) for k in ("gpus", "tp", "pp", "ep", "dp") if k in kw}
    if degrees:  # the layout, as the one parallel config the library takes
        from llmath.deploy.layout import ParallelConfig

        kw["parallel"] = ParallelConfig(**degrees)
    enc = _model(params, config).encoder
    if enc is not None and enc.source_positions:  # Whisper: the source is its fixed window, whatever the slider
        kw["prompt"] = enc.source_positions  # says (the page's encoder note prints the length used)
    kw["workload"] = Workload(**{k: kw.pop(k) for k in _WORKLOAD if k in kw})  # the static batch the page asks for
    missing = sorted(k for k in kw if k not in accepted)
    if missing:
        raise WorkloadError(f"this llmath has no {', '.join(missing)} option for analyze; leave it empty")
    return kw


def _allow_long_context(params: Params) -> bool:
    """``allow_long_context``: "1" times requests past the model's context (serve, plan), "" or "0" refuses them."""
    raw = str(params.get("allow_long_context") or "0")
    if raw not in ("0", "1"):
        raise WorkloadError(f"allow_long_context={raw!r} must be 0 or 1; give 1 to time requests past the context")
    return raw == "1"


def _hardware(params: Params) -> str | None:
    from llmath import hardware

    hw = str(params.get("hardware") or "h100-sxm")
    return None if hw == "none" else _registry_only("hardware", hw, hardware.names() + sorted(hardware.aliases()))


def _run(params: Params, config: dict | None, **override) -> dict[str, Any]:
    from llmath.analysis import analyze

    if "concurrency" in override:  # a serving sweep point
        return analyze_view(params | {k: str(v) for k, v in override.items()}, config)
    kw = _analyze_kwargs(params, config)
    kw["workload"] = replace(kw["workload"], **override)  # a sweep point: batch, prompt or gen
    return analyze(_model(params, config), _hardware(params), **kw).to_dict()


def meta(params: Params, config: dict | None = None) -> dict[str, Any]:
    from llmath import hardware
    from llmath.model import formats, registry

    models = registry.names()
    devices = []
    for n in hardware.names():
        h = hardware.get(n)
        devices.append(
            {
                "name": n,
                "display_name": h.display_name or n,
                "memory_bytes": h.memory_bytes,
                "bandwidth_bytes_per_s": h.memory_bandwidth_bytes_per_s,
                "peak_flops_per_s": h.peak_flops_per_s,
            }
        )
    return {
        "models": models,
        "encoder_decoder": [n for n in models if registry.spec(n).is_encoder_decoder],
        "hardware": devices,
        "dtypes": formats.names("activations"),
        "formats": {role: formats.names(role) for role in formats.ROLES},
        "engines": _engines(),
    }


def _engines() -> list[str]:
    from llmath.deploy import engines

    return engines.names()


def _roofline(d: dict[str, Any]) -> dict[str, Any] | None:
    from llmath import hardware

    if not d.get("hardware"):
        return None
    h = hardware.get(d["hardware"])
    compute = d["workload"].get("activations", "bf16")
    peak = h.peak_flops_per_s.get(compute) or max(h.peak_flops_per_s.values())
    bw = h.memory_bandwidth_bytes_per_s
    return {
        "peak_flops_per_s": peak,
        "vector_flops_per_s": h.vector_peak,
        "bandwidth_bytes_per_s": bw,
        "ridge_flop_per_byte": peak / bw,
        "dtype": compute,
    }


def _split(stage: dict[str, Any]) -> dict[str, float]:
    """A stage's time by what bounds each operator (communication when the layout adds collectives)."""
    out = {"compute": 0.0, "memory": 0.0, "communication": 0.0}
    for op in stage.get("ops", []):
        t = op.get("time_s") or 0.0
        key = "communication" if op.get("kind") == "collective" else op.get("bound") or "memory"
        out[key if key in out else "memory"] += t
    return out


def _serve(params: Params, config: dict | None) -> dict[str, Any] | None:
    """Continuous batching at ``concurrency`` requests by ``engine`` (vLLM's defaults when none is named)."""
    c = _int(params, "concurrency", lo=1)
    if c is None:
        return None
    from llmath.deploy.service import serve
    from llmath.deploy.workload import Workload

    kw = _analyze_kwargs(params, config)
    work = Workload(prompt=kw["workload"].prompt, gen=kw["workload"].gen, concurrency=c)
    return serve(
        _model(params, config), _hardware(params) or "h100-sxm", workload=work,
        engine=str(params.get("engine") or "vllm"), precision=kw["precision"],
        attention=kw.get("attention", "flash"), efficiency_mode=kw.get("efficiency_mode", "expected"),
        parallel=kw.get("parallel"), allow_long_context=_allow_long_context(params),
    ).to_dict()  # fmt: skip


def analyze_view(params: Params, config: dict | None = None) -> dict[str, Any]:
    """The static analysis (operators, roofline, memory); with ``concurrency``, the serving figures replace
    the static latency and throughput keys and the whole serving report is under ``serving``."""
    d = _run(params, config)
    serving = _serve(params, config)
    if serving is not None:
        d["serving"] = serving
        d.update({k: serving.get(k) for k in KEY_METRICS})
        d["memory"] = dict(d["memory"], fits=serving["memory"]["fits"])
    d["roofline"] = _roofline(d)
    d["split"] = {s: _split(d[s]) for s in ("encoder", "prefill", "decode") if isinstance(d.get(s), dict)}
    return d


def _values(params: Params) -> list[int]:
    raw = str(params.get("values") or "1,2,4,8,16,32,64,128")
    try:
        vals = [int(v, 10) for v in raw.split(",") if v.strip()]
    except ValueError:
        raise WorkloadError(f"values={raw!r} must be comma-separated whole numbers, e.g. 1,2,4,8") from None
    if not vals or len(vals) > _MAX_POINTS or min(vals) < 1:
        raise WorkloadError(f"values={raw!r}: give 1 to {_MAX_POINTS} whole numbers >= 1")
    return vals


def _metrics(d: dict[str, Any]) -> dict[str, Any]:
    m = {k: d.get(k) for k in KEY_METRICS}
    m["memory_bytes"] = d["memory"].get("per_gpu_bytes", d["memory"]["total_bytes"])
    m["fits"] = d["memory"]["fits"]
    return m


def sweep(params: Params, config: dict | None = None) -> dict[str, Any]:
    axis = str(params.get("axis") or "batch")
    if axis not in ("batch", "concurrency", "prompt", "gen"):
        raise WorkloadError(f"axis={axis!r} must be batch, concurrency, prompt or gen; e.g. axis=batch")
    rows = []
    for v in _values(params):
        try:
            rows.append({axis: v, **_metrics(_run(params, config, **{axis: v}))})
        except LLMathError as e:
            rows.append({axis: v, "error": str(e)})
    return {"axis": axis, "rows": rows}


def compare(params: Params, config: dict | None = None) -> dict[str, Any]:
    models = [m for m in str(params.get("models") or params.get("model") or "").split(",") if m]
    devices = [h for h in str(params.get("hardwares") or params.get("hardware") or "").split(",") if h]
    if not models or not devices or len(models) * len(devices) > _MAX_PAIRS:
        raise WorkloadError(f"compare needs 1 to {_MAX_PAIRS} model × hardware pairs (models=a,b hardwares=x,y)")
    rows = []
    for m in models:
        for h in devices:
            p = dict(params, model=m, hardware=h)
            try:
                d = _run(p, None)
                rows.append({"model": m, "hardware": h, "params": d["params"]["total"], **_metrics(d)})
            except LLMathError as e:
                rows.append({"model": m, "hardware": h, "error": str(e)})
    return {"rows": rows}


def explain(params: Params, config: dict | None = None) -> dict[str, Any]:
    from llmath.ops import CLASSES, build_ops
    from llmath.ops import explain as explain_op
    from llmath.ops.stages import stage_scenarios

    spec = _model(params, config)
    stage = str(params.get("stage") or "prefill")
    kw = _analyze_kwargs(params, config)
    w = kw["workload"]
    scens = stage_scenarios(spec, w.batch, w.prompt, w.prefix, w.decoder_prompt)
    if stage not in scens:
        raise WorkloadError(f"stage={stage!r} must be one of {', '.join(scens)} for {spec.name}; pick one of them")
    scen = scens[stage]
    name = str(params.get("op") or "")
    ops = [o for o in build_ops(spec, stage, kw.get("attention", "flash")) if o.name == name]
    if not ops:
        raise WorkloadError(f"op={name!r} is not an operator of {spec.name} at {stage}; pick one from the table")
    out = []
    for op in ops:
        formulas = {c: explain_op(op, scen, spec, c) for c in CLASSES}
        out.append(
            {
                "name": op.name,
                "layer_kind": op.layer_kind,
                "signature": op.signature,
                "sizes": dict(op.sizes),
                "formulas": {c: f for c, f in formulas.items() if f},
            }
        )
    return {"stage": stage, "ops": out}


def _float(params: Params, name: str) -> float | None:
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        v = float(str(raw))
    except ValueError:
        raise WorkloadError(f"{name}={raw!r} must be a number; e.g. {name}=100, or leave it empty") from None
    if not (v > 0 and v < float("inf")):
        raise WorkloadError(f"{name}={raw!r} must be a positive finite number; e.g. {name}=100, or leave it empty")
    return v


def plan(params: Params, config: dict | None = None) -> dict[str, Any]:
    """The planner (``llmath plan``): best configuration and Pareto front under the TTFT/TPOT targets."""
    from llmath.deploy.plan import plan as search
    from llmath.deploy.workload import Workload

    kw = _analyze_kwargs(params, config)
    par, p = kw.get("parallel"), kw["precision"]
    gpus = par.gpus if par is not None and par.gpus is not None else 8
    work = Workload(prompt=kw["workload"].prompt, gen=kw["workload"].gen)
    model = _checkpoint(params, config)  # a name or an uploaded config: its checkpoint's formats
    chosen = params.get("weights") or params.get("dtype")  # else the checkpoint's formats, as analyze
    return search(
        model, _hardware(params) or "h100-sxm", gpus=gpus, workload=work,
        ttft_ms=_float(params, "ttft_ms"), tpot_ms=_float(params, "tpot_ms"),
        weights=p.weights if chosen else None, kv_dtype=str(params["kv_dtype"]) if params.get("kv_dtype") else None,
        engine=str(params.get("engine") or "vllm"),
        disagg=params.get("disagg") == "1",
        attention=kw.get("attention", "flash"), cost_per_gpu_hour=_float(params, "cost_per_gpu_hour"), parallel=par,
        allow_long_context=_allow_long_context(params),
    ).to_dict()  # fmt: skip


def models(params: Params, config: dict | None = None) -> list[str]:
    return meta(params)["models"]


def hardware_names(params: Params, config: dict | None = None) -> list[str]:
    return [h["name"] for h in meta(params)["hardware"]]


PAGE_OVERRIDE = "tick \u201callow requests past the context\u201d (allow_long_context=1)"


def _page_override(handler: Callable[[Params, dict | None], Any]) -> Callable[[Params, dict | None], Any]:
    """``handler`` whose refusal of requests past the context names the page's control for the override."""

    def run(params: Params, config: dict | None = None) -> Any:
        try:
            return handler(params, config)
        except WorkloadError as e:
            from llmath.deploy.context_limit import ContextLengthError

            if isinstance(e, ContextLengthError):
                raise e.naming(PAGE_OVERRIDE) from None
            raise

    run.__doc__, run.__name__ = handler.__doc__, handler.__name__
    return run


HANDLERS: dict[str, Callable[[Params, dict | None], Any]] = {
    "models": models,
    "hardware": hardware_names,
    "meta": meta,
    "analyze": _page_override(analyze_view),
    "sweep": _page_override(sweep),
    "compare": compare,
    "explain": explain,
    "plan": _page_override(plan),
}
