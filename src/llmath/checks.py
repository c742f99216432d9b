"""Argument checks of the public API (:func:`llmath.analysis.analyze` and friends), in one place.

Each turns a bad argument into an :class:`~llmath.errors.LLMathError` subclass whose message names the
argument, the value and the rule (the rules themselves: :mod:`llmath.validation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llmath.deploy.arguments import hardware_arg, parallel_arg, precision_arg
from llmath.deploy.layout import ParallelConfig, refuse_layout_keywords
from llmath.deploy.workload import SERVING_ONLY, Workload, workload_arg
from llmath.errors import WorkloadError
from llmath.hardware import Hardware
from llmath.model.dtypes import Precision
from llmath.validation import MAX_BATCH, MAX_TOKENS, check_int_array

ANALYZE_ARGS = (  # analyze()'s own arguments, as its error for an unknown keyword lists them
    "model",
    "hardware",
    "workload=Workload(batch, prompt, gen, prefix, decoder_prompt, images)",
    "attention",
    "precision",
    "efficiency_mode",
    "reserve_bytes",
    "parallel=ParallelConfig(gpus, tp, pp, ep, dp, overlap)",
    "engine",
)


ANALYZE_HINTS = {
    "concurrency": "analyze() runs a static batch (Workload(batch=B)); serve() runs a concurrency or a rate",
    "rate": "analyze() runs a static batch (Workload(batch=B)); serve() runs a concurrency or a rate",
    "prefix_hit": "give the cached tokens before the prompt as Workload(prefix=N)",
}


def _check_len(name: str, v, minimum: int = 1) -> None:
    check_int_array(name, v, minimum, MAX_BATCH if name == "batch" else MAX_TOKENS)


@dataclass(frozen=True)
class Run:
    """The checked inputs of one :func:`analyze` run: the workload's sizes and how it runs."""

    batch: int = 1
    prompt: int = 512
    gen: int = 128
    prefix: int = 0  # cached prefix before the prompt (prefix caching)
    attention: str = "flash"
    precision: Precision = field(default_factory=Precision)
    decoder_prompt: int = 1  # encoder-decoder only: decoder tokens in its prefill (1 = the start token)
    images: int = 0  # images per request (Llama 3.2 Vision: its vision stage and cross-attention layers run)
    engine: str = "vllm"  # whose kernels run a declared quantised format (llmath.hardware.kernels)

    def __post_init__(self) -> None:
        for f in ("batch", "prompt", "decoder_prompt", "gen", "prefix", "images"):
            _check_len(f, getattr(self, f), 0 if f in ("prefix", "images") else 1)
        if not isinstance(self.attention, str) or self.attention not in ("eager", "flash"):
            raise WorkloadError(f"attention={self.attention!r} must be 'eager' or 'flash'; e.g. attention='flash'")


def _check_workload(workload, extra: dict) -> Workload:
    """The workload: None (the default) or a static-batch :class:`Workload`; the workload keywords spelled
    out among ``extra`` refused, and the serving fields refused."""
    w = workload_arg(workload, extra, "llmath.analyze")
    w.refuse("analyze()", SERVING_ONLY, ANALYZE_HINTS)
    return w


def _check_parallel(parallel, extra: dict) -> ParallelConfig | None:
    """The layout: None or a :class:`ParallelConfig`; the layout keywords spelled out among ``extra`` refused."""
    refuse_layout_keywords(extra)
    return parallel_arg(parallel)


def _check_precision(precision) -> Precision | None:
    """A :class:`Precision`, or a dtype name meaning that dtype for weights, activations and KV cache;
    ``None`` stays ``None`` (the checkpoint's formats apply)."""
    return precision_arg(precision)


def _check_hardware(hardware) -> Hardware | None:
    return hardware_arg(hardware)
