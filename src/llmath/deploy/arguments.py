"""Arguments of the public entry points (:func:`llmath.serve`, :func:`llmath.plan`, and through
:mod:`llmath.checks` :func:`llmath.analyze`), checked in one place before any work.

Every check raises :class:`~llmath.errors.UsageError` (or its :class:`~llmath.errors.WorkloadError`) whose
one-line message names the argument, the value, the rule and what to do instead; the CLI shows the same line
and exits with code 2. Rules beyond :mod:`llmath.validation`'s integers and finite reals:

* ``model`` is a non-empty name or path, or a :class:`~llmath.model.spec.ModelSpec`; ``hardware`` a registry
  name or file, or a :class:`~llmath.hardware.Hardware` (the serving and planning entry points need one);
* the workload is one :class:`~llmath.deploy.workload.Workload` (``workload=``, its fields validated where it is
  made); the fields an entry point does not use are refused, and the workload keywords spelled out
  (``prompt=64``) are refused, naming the Workload to pass;
* latency targets in (0, ``MAX_TARGET_MS``] ms and costs in (0, ``MAX_COST``] USD per GPU-hour, finite;
* engine overrides are typed like the engine's own settings (token and sequence caps integers, the memory
  fraction in (0, 1]);
* names with a fixed set of values (attention, efficiency mode) are one of them;
* the layout is one :class:`~llmath.deploy.layout.ParallelConfig` (``parallel=``, its degrees validated where
  it is made) or None; the layout keywords spelled out (``tp=8``) are refused, naming the config to pass.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any, TypeVar

from llmath.deploy.budget import check_plan
from llmath.deploy.layout import MAX_DEGREE, ParallelConfig, refuse_layout_keywords
from llmath.deploy.workload import STATIC_ONLY, Workload, workload_arg
from llmath.errors import LayoutError, UsageError, WorkloadError
from llmath.hardware import Hardware
from llmath.hardware import get as get_hardware
from llmath.model.checkpoint import Checkpoint
from llmath.model.dtypes import BITS, Precision
from llmath.model.registry import resolve
from llmath.model.spec import ModelSpec
from llmath.ops.stages import decode_start
from llmath.validation import MAX_BATCH, MAX_TOKENS, check_float, check_int

MAX_TARGET_MS = 1e9  # a latency target of about 11.6 days: anything larger is no target
MAX_COST = 1e6  # USD per GPU-hour
MAX_SPEC_TOKENS = 64  # draft tokens per verify round: 8x the widest published EAGLE/MTP settings (k <= 8)
ATTENTION = ("eager", "flash")
EFFICIENCY = ("ideal", "expected")
ENGINE_SETTINGS: dict[str, tuple[str, Any, Any]] = {  # name -> (kind, lo, hi)
    "max_num_batched_tokens": ("int", 1, MAX_TOKENS),
    "max_num_seqs": ("int", 1, MAX_BATCH),
    "kv_pool_tokens": ("int", 1, MAX_TOKENS),
    "gpu_memory_utilization": ("fraction", 0.0, 1.0),
    "cuda_graph_bytes": ("float", 0.0, 1e15),
    "cuda_graphs": ("bool", None, None),
    "chunked_prefill": ("bool", None, None),
    "kv_fraction_of_free": ("bool", None, None),
    "eager_prefill": ("bool", None, None),
    "cuda_graph_max_tokens": ("int", 0, MAX_TOKENS),
    "cuda_graph_tokens_per_seq": ("int", 0, MAX_TOKENS),
    "decode_graph_max_batch": ("int", 0, MAX_BATCH),
}


def model_arg(model: Any) -> str | os.PathLike | ModelSpec | Checkpoint:
    """A non-empty registry name, hub id or path, a ModelSpec, or a Checkpoint (a config read with its formats)."""
    if isinstance(model, ModelSpec | Checkpoint | os.PathLike) or (isinstance(model, str) and model.strip()):
        return model
    raise UsageError(
        f"model={model!r} must be a registry name or hub id (see 'llmath models'), a config.json or .gguf path, "
        "or a llmath.ModelSpec"
    )


def hardware_arg(hardware: Any, required: bool = False) -> Hardware | None:
    """A Hardware from a registry name, a JSON/TOML file or a Hardware; None only where not ``required``."""
    if isinstance(hardware, Hardware):
        return hardware
    if isinstance(hardware, str) and hardware.strip():
        return get_hardware(hardware)
    if hardware is None and not required:
        return None
    need = "" if required else ", or None"
    raise UsageError(
        f"hardware={hardware!r} must be a registry name (see 'llmath hardware'), a JSON/TOML file path or a "
        f"llmath Hardware{need}"
    )


def precision_arg(precision: Any) -> Precision | None:
    """A Precision, or a dtype name meaning that dtype for weights, activations and KV cache; None stays None
    (the checkpoint's formats apply)."""
    if precision is None or isinstance(precision, Precision):
        return precision
    if isinstance(precision, str) and precision.strip():
        return Precision.uniform(precision)
    raise UsageError(f"precision={precision!r} must be a llmath.Precision or a dtype name ({', '.join(BITS)})")


def parallel_arg(parallel: Any) -> ParallelConfig | None:
    """None (one GPU) or a :class:`~llmath.deploy.layout.ParallelConfig` (its degrees validated when it was made)."""
    if parallel is None or isinstance(parallel, ParallelConfig):
        return parallel
    raise LayoutError(f"parallel={parallel!r} must be a ParallelConfig(gpus=, tp=, pp=, ep=, dp=, overlap=) or None")


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if isinstance(value, str) and value in allowed:
        return value
    raise UsageError(f"{name}={value!r} must be one of {', '.join(allowed)}; pass one of them, e.g. {allowed[-1]!r}")


def workload_for(entry: str, workload: Any, extra: dict[str, Any]) -> Workload:
    """``entry``'s workload: a :class:`Workload` (never keywords), with only the fields ``entry`` uses; a
    serving entry point's has a concurrency or a rate."""
    w = workload_arg(workload, extra, f"llmath.{entry}", required=True)
    w.refuse(f"{entry}()", *ENTRY_UNUSED[entry])
    if entry != "plan" and w.static:
        raise WorkloadError("give exactly one of concurrency (closed loop) or rate (requests/s, open loop)")
    return w


def engine_settings(overrides: dict[str, Any]) -> dict[str, Any]:
    """Engine overrides typed like the engine's settings (None leaves the preset's value)."""
    out = {}
    for k, v in overrides.items():
        kind, lo, hi = ENGINE_SETTINGS.get(k, ("any", None, None))
        if v is None or kind == "any":
            out[k] = v
        elif kind == "int":
            out[k] = check_int(k, v, lo, hi)
        elif kind == "bool":
            if not isinstance(v, bool):
                raise WorkloadError(f"{k}={v!r} must be True or False")
            out[k] = v
        else:
            out[k] = check_float(k, v, lo, hi, lo_open=kind == "fraction")
    return out


def targets(**values: Any) -> dict[str, float | None]:
    """Latency targets (``*_ms``) and costs: None or finite and > 0 within their limit."""
    limit = {k: MAX_COST if k.startswith("cost") else MAX_TARGET_MS for k in values}
    return {k: None if v is None else check_float(k, v, 0, limit[k], lo_open=True) for k, v in values.items()}


def speculation_arg(speculation: Any) -> Any:
    """None or a :class:`~llmath.deploy.speculative.Speculation` with k <= ``MAX_SPEC_TOKENS``."""
    from llmath.deploy.speculative import Speculation

    if speculation is None:
        return None
    if not isinstance(speculation, Speculation):
        raise UsageError(f"speculation={speculation!r} must be a llmath.Speculation or None")
    check_int("speculative tokens k", speculation.k, 1, MAX_SPEC_TOKENS)
    if speculation.method != "draft" and speculation.draft_model is not None:
        raise UsageError(
            f"draft_model={speculation.draft_model!r} applies to method 'draft' (not {speculation.method!r}); "
            "drop --draft-model or use --spec-method draft"
        )
    return speculation


def formats_arg(weights: Any) -> list[str] | None:
    """None (bf16) or one or more weight format names (a string or a list of strings)."""
    from llmath.model.formats import canonical

    if weights is None:
        return None
    names = [weights] if isinstance(weights, str) else weights
    if not isinstance(names, list | tuple) or not names or not all(isinstance(w, str) and w for w in names):
        raise UsageError(f"weights={weights!r} must name one or more weight formats, e.g. 'bf16' or ['bf16', 'fp8']")
    for w in names:
        canonical(w, "weights")
    return list(names)


def flag(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise UsageError(f"{name}={value!r} must be True or False")
        return value

    return check


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{name}={value!r} must be a string")
    return value


def optional_text(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> str | None:
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise UsageError(f"{name}={value!r} must be a non-empty string or None")
        return value

    return check


def _is_efficiency(value: Any) -> bool:
    """An :class:`~llmath.hardware.efficiency.Efficiency` given in place of a mode (a calibrated one)."""
    from llmath.hardware.efficiency import Efficiency

    return isinstance(value, Efficiency)


RULES: dict[str, Callable[[Any], Any]] = {
    "model": model_arg,
    "precision": precision_arg,
    "attention": lambda v: choice("attention", v, ATTENTION),
    "efficiency_mode": lambda v: v if _is_efficiency(v) else choice("efficiency_mode", v, EFFICIENCY),
    "parallel": parallel_arg,
    "engine": lambda v: text("engine", v),
    "speculation": speculation_arg,
    "weights": formats_arg,
    "kv_dtype": optional_text("kv_dtype"),
    "disagg": flag("disagg"),
    "exhaustive": flag("exhaustive"),
    "allow_long_context": flag("allow_long_context"),
}


def conflicts(a: dict[str, Any]) -> None:
    """Arguments that contradict the model: a source length other than an encoder's fixed window (Whisper)."""
    decode_start(resolve(a["model"]), a["workload"].prompt)  # refuses a source that is not the encoder's window


SERVING_HINTS = {
    "batch": "the serving load is concurrency= or rate=",
    "prefix": "give prefix_hit, the cached fraction of each prompt",
}
PLAN_HINTS = {k: "plan searches every concurrency; drop it" for k in ("batch", "concurrency", "rate", "arrival")}
ENTRY_UNUSED: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {  # entry point -> (fields refused, hints)
    "serve": (STATIC_ONLY, SERVING_HINTS),
    "plan": ((*STATIC_ONLY, "concurrency", "rate", "arrival", "prompts_per_client"), PLAN_HINTS | SERVING_HINTS),
}


F = TypeVar("F", bound=Callable[..., Any])


def checked(fn: F) -> F:
    """Check every argument of an entry point by its name (``RULES``, :func:`workload_for`,
    :func:`targets`, :func:`engine_settings`) before the call; the function receives the checked values."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise UsageError(f"{fn.__name__}(): {e}; see help(llmath.{fn.__name__})") from None
        bound.apply_defaults()
        a = bound.arguments
        for k, rule in RULES.items():
            if k in a:
                a[k] = rule(a[k])
        a["hardware"] = hardware_arg(a["hardware"], required=True)
        extra = next((k for k, p in sig.parameters.items() if p.kind is p.VAR_KEYWORD), None)
        a["workload"] = workload_for(fn.__name__, a["workload"], a[extra] if extra else {})
        a.update(targets(**{k: a[k] for k in ("ttft_ms", "tpot_ms", "cost_per_gpu_hour") if k in a}))
        if extra:
            refuse_layout_keywords(a[extra])
            a[extra] = engine_settings(a[extra])
        conflicts(a)
        if "disagg" in a:  # the planner: the size of its search, bounded before any work
            a["gpus"] = check_int("gpus", a["gpus"], 1, MAX_DEGREE)
            pins = (a["parallel"] or ParallelConfig()).pinned()
            variants = len(a["weights"] or ["bf16"]) * (2 if a.get("speculation") else 1)  # each with and without
            check_plan(resolve(a["model"]), a["gpus"], pins, variants, a["disagg"])
        return fn(*bound.args, **bound.kwargs)

    return call  # type: ignore[return-value]
