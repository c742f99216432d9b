"""llmath: exact parameters, FLOPs, bytes and roofline latency of transformer LLMs, offline.

    import llmath
    llmath.params("llama-3-8b").total            # 8,030,261,248
    llmath.analyze("llama-3-8b", "h100-sxm", batch=8, prompt=2048, gen=256).generation["tpot_s"]

The library returns data and never prints. Conventions are stated in :mod:`llmath.ops`.
"""

from __future__ import annotations

from .analysis import Analysis, analyze, kv_cache_bytes, stage_report
from .dtypes import Precision
from .errors import ConfigError, HardwareError, LLMathError, SpecError, UnknownNameError, WorkloadError
from .hf import spec_from_config, spec_from_file
from .ops import Scenario, build_ops
from .params import ParamReport, param_report
from .registry import resolve
from .spec import EncoderSpec, MLASpec, ModelSpec, MoESpec

__version__ = "0.1.0"


def params(model: str | ModelSpec) -> ParamReport:
    """Exact parameter counts of a registry name, config.json path or spec."""
    return param_report(resolve(model))


__all__ = [
    "Analysis",
    "analyze",
    "kv_cache_bytes",
    "stage_report",
    "Precision",
    "ConfigError",
    "HardwareError",
    "LLMathError",
    "SpecError",
    "UnknownNameError",
    "WorkloadError",
    "spec_from_config",
    "spec_from_file",
    "Scenario",
    "build_ops",
    "ParamReport",
    "param_report",
    "params",
    "resolve",
    "EncoderSpec",
    "MLASpec",
    "ModelSpec",
    "MoESpec",
]
