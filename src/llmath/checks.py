"""Argument checks of the public API (:func:`llmath.analysis.analyze` and friends), in one place.

Each turns a bad argument into an :class:`~llmath.errors.LLMathError` subclass whose message names the
argument, the value and the rule (the rules themselves: :mod:`llmath.validation`).
"""

from __future__ import annotations

from llmath.errors import HardwareError, WorkloadError
from llmath.hardware import Hardware
from llmath.hardware import get as get_hardware
from llmath.model.dtypes import BITS, Precision
from llmath.validation import MAX_BATCH, MAX_TOKENS, check_int, check_int_array

MAX_DEGREE = 1 << 16  # GPUs / parallel degree: 65,536, beyond any deployment (keeps layout search bounded)
ANALYZE_ARGS = (
    "model",
    "hardware",
    "batch",
    "prompt",
    "gen",
    "prefix",
    "attention",
    "precision",
    "efficiency_mode",
    "reserve_bytes",
    "gpus",
    "tp",
    "pp",
    "ep",
    "dp",
    "overlap",
    "parallel",
)


def _check_len(name: str, v, minimum: int = 1) -> None:
    check_int_array(name, v, minimum, MAX_BATCH if name == "batch" else MAX_TOKENS)


def _check_sizes(batch, prompt, gen, prefix) -> tuple[int, int, int, int]:
    """Exact ints in range (``llmath.validation``): batch, prompt, gen >= 1, prefix >= 0."""
    return (
        check_int("batch", batch, 1, MAX_BATCH),
        check_int("prompt", prompt, 1, MAX_TOKENS),
        check_int("gen", gen, 1, MAX_TOKENS),
        check_int("prefix", prefix, 0, MAX_TOKENS),
    )


def _check_degrees(*degrees):
    """gpus, tp, pp, ep, dp: None or an int in [1, ``MAX_DEGREE``]."""
    names = ("gpus", "tp", "pp", "ep", "dp")
    return tuple(None if v is None else check_int(k, v, 1, MAX_DEGREE) for k, v in zip(names, degrees, strict=True))


def _check_precision(precision) -> Precision | None:
    """A :class:`Precision`, or a dtype name meaning that dtype for weights, activations and KV cache;
    ``None`` stays ``None`` (the checkpoint's formats apply)."""
    if precision is None:
        return None
    if isinstance(precision, str):
        return Precision.uniform(precision)
    if not isinstance(precision, Precision):
        raise WorkloadError(f"precision={precision!r} must be a llmath.Precision or a dtype name ({', '.join(BITS)})")
    return precision


def _check_hardware(hardware) -> Hardware | None:
    if hardware is None or isinstance(hardware, Hardware):
        return hardware
    if isinstance(hardware, str):
        return get_hardware(hardware)
    raise HardwareError(
        f"hardware={hardware!r} must be a registry name (see 'llmath hardware'), a JSON/TOML file path, "
        "a llmath Hardware, or None"
    )
