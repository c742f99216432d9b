"""llmath: exact parameters, FLOPs, bytes and roofline latency of transformer LLMs, offline.

    import llmath
    llmath.params("llama-3-8b").total            # 8,030,261,248
    from llmath import Workload
    llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=8, prompt=2048, gen=256)).generation["tpot_s"]
    llmath.serve("llama-3-8b", "h100-sxm", workload=Workload(concurrency=64, prompt=1024, gen=256)).metrics["ttft_s"]
    llmath.plan("llama-3-8b", "h100-sxm", gpus=8, workload=Workload(prompt=1024, gen=256), tpot_ms=30).best

The library returns data and never prints. Conventions are stated in :mod:`llmath.ops`.
Submodules load on first use (PEP 562), so ``import llmath`` stays cheap for scripts and the CLI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Analysis": "analysis",
    "analyze": "analysis",
    "kv_cache_bytes": "analysis",
    "stage_report": "pass_report",
    "scenario": "analysis",
    "Precision": "model.dtypes",
    "ConfigError": "errors",
    "HardwareError": "errors",
    "HubError": "errors",
    "LayoutError": "errors",
    "LLMathError": "errors",
    "SpecError": "errors",
    "UnknownNameError": "errors",
    "UsageError": "errors",
    "WorkloadError": "errors",
    "spec_from_config": "model.hf",
    "spec_from_file": "model.hf",
    "Scenario": "ops",
    "build_ops": "ops",
    "ParamReport": "ops.params",
    "param_report": "ops.params",
    "resolve": "model.registry",
    "EncoderSpec": "model.spec_encoder",
    "MLASpec": "model.spec_mla",
    "ModelSpec": "model.spec",
    "MoESpec": "model.spec_moe",
    "serve": "deploy.service",
    "plan": "deploy.plan",
    "Speculation": "deploy.speculative",
    "ParallelConfig": "deploy.layout",
    "Workload": "deploy.workload",
}

__all__ = [*_EXPORTS, "params"]

if TYPE_CHECKING:  # pragma: no cover
    from llmath.analysis import Analysis, analyze, kv_cache_bytes, scenario  # noqa: F401
    from llmath.model.dtypes import Precision  # noqa: F401
    from llmath.model.spec import ModelSpec
    from llmath.ops.params import ParamReport
    from llmath.pass_report import stage_report  # noqa: F401


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'llmath' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def params(model: str | ModelSpec) -> ParamReport:
    """Exact parameter counts of a registry name, config.json path or spec."""
    from llmath.model.registry import resolve
    from llmath.ops.params import param_report

    return param_report(resolve(model))
