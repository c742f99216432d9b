"""Numeric inputs, checked in one place for every layer (library, CLI, web).

Rules, stated once:

* **integers** are Python ``int`` (or NumPy integers), never ``bool``; a float is accepted only when it is
  finite and integral (``4096.0``), never rounded (``127.9`` is refused). They stay exact Python ints.
* **sizes** have a range: batch 1 … ``MAX_BATCH``, token counts (prompt, gen, context, prefix) up to
  ``MAX_TOKENS``. The caps are far above any real workload and keep every intermediate count exact in
  int64 and float64 products; a larger value is refused, never wrapped.
* **real numbers** are finite (no NaN, no ±Infinity) and within the stated range.
* **ranges** ``lo:hi:xk`` (geometric) and ``lo:hi:+k`` (arithmetic) must make progress and hold at most
  ``MAX_POINTS`` points (a sweep's whole grid, too).

Each check raises :class:`~llmath.errors.WorkloadError` whose message names the value, the rule and what to
give instead (:func:`next_step`); the CLI shows the same message.
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any

from llmath.errors import WorkloadError

MAX_BATCH = 1 << 24  # 16,777,216 sequences
MAX_TOKENS = 1 << 32  # 4,294,967,296 tokens per sequence
MAX_POINTS = 10**6  # points in one range, and in one sweep grid


# What to give instead when a value breaks its range, by the name a check reports it under (a library keyword,
# or a CLI option's name without its dashes; a pool's ``prefill_``/``decode_`` prefix dropped). One clause each.
NEXT_STEPS = {
    "concurrency": "give the requests in flight, e.g. --concurrency 64",
    "rate": "give requests per second, e.g. --rate 4",
    "prompt": "give the prompt's tokens, e.g. --prompt 1024",
    "gen": "give the output tokens per request, e.g. --gen 256",
    "batch": "give the sequences in the batch, e.g. --batch 8",
    "prefix": "give the cached tokens before the prompt (0: none)",
    "decoder_prompt": "give the decoder's prefill tokens (1: its start token alone)",
    "images": "give the images per request (0: text only)",
    "context": "give the tokens already cached, e.g. --context 4096",
    "gpus": "give the GPUs to use, e.g. --gpus 8",
    "tp": "give the tensor-parallel degree (1: none), e.g. --tp 2",
    "pp": "give the pipeline stages (1: none), e.g. --pp 2",
    "ep": "give the expert-parallel degree (1: none), e.g. --ep 8",
    "dp": "give the data-parallel replicas (1: none), e.g. --dp 2",
    "workers": "give the pool's replicas, e.g. 1",
    "max_num_seqs": "give the requests a replica runs at once, or leave it out for the engine's default",
    "max_num_batched_tokens": "give the tokens one iteration schedules, or leave it out for the engine's default",
    "gpu_memory_utilization": "give the fraction of GPU memory the engine takes, e.g. 0.9, or leave it out",
    "prefix_hit": "give the cached fraction of each prompt, e.g. 0.5 (0: no cache)",
    "prompts_per_client": "give the requests each client sends, e.g. 10",
    "ttft_ms": "give a first-token target in milliseconds, e.g. 500, or leave it out for none",
    "tpot_ms": "give a per-token target in milliseconds, e.g. 30, or leave it out for none",
    "cost_per_gpu_hour": "give USD per GPU-hour, e.g. 2.5, or leave it out",
    "matmul_eff": "give a fraction of the peak, e.g. 0.7, or leave it out for the measured one",
    "memory_eff": "give a fraction of the bandwidth, e.g. 0.8, or leave it out for the measured one",
    "overhead_us": "give microseconds per kernel, e.g. 5, or leave it out for the measured one",
    "reserve_gb": "give the GB kept for the runtime, e.g. 2 (0: none)",
    "peak_tflops": "give the device's dense TFLOP/s from its datasheet, or pick a known accelerator with -H",
    "bandwidth_gbs": "give the device's memory bandwidth in GB/s, or pick a known accelerator with -H",
    "memory_gb": "give the device's memory in GB, or pick a known accelerator with -H",
    "top": "give how many rows to print, e.g. --top 10",
    "port": "give a free port, or 0 for any",
    "spec_tokens": "give the draft tokens per round, e.g. --spec-tokens 3",
    "speculative tokens k": "give the draft tokens per round, e.g. --spec-tokens 3",
    "gen_dist weight": "give each length a relative weight, e.g. --gen-dist 64:0.5,512:0.5",
    "gen_dist length": "give each output length in tokens, e.g. --gen-dist 64:0.5,512:0.5",
}


def next_step(name: str) -> str:
    """What to give instead of a value of ``name`` that breaks its range (:data:`NEXT_STEPS`)."""
    key = name.lstrip("-").replace("-", "_")
    pool = next((p for p in ("prefill_", "decode_") if key.startswith(p) and key[len(p) :] in NEXT_STEPS), "")
    key = key[len(pool) :]
    step = NEXT_STEPS.get(key, "give a value in that range")
    return step.replace(f"--{key}", f"--{pool}{key}".replace("_", "-")) if pool else step


def int_rule(value: Any, lo: int | None = None, hi: int | None = None) -> str | None:
    """Why ``value`` is not an integer in [lo, hi], or None when it is."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "must be an integer"
    if not isinstance(value, numbers.Integral):  # a float, numpy float or Fraction: only a whole one
        real = float(value)
        if not math.isfinite(real) or not real.is_integer() or real != value:
            return "must be an integer"
        value = int(real)
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if lo is not None and hi is not None:
            return f"must be an integer in [{lo:,}, {hi:,}]"
        return f"must be an integer >= {lo:,}" if lo is not None else f"must be an integer <= {hi:,}"
    return None


def check_int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an exact int in [lo, hi]; else a :class:`WorkloadError` naming ``name``."""
    if type(value) is int and (lo is None or value >= lo) and (hi is None or value <= hi):
        return value  # the common case, without the general rule's checks (the scalar path is timed)
    why = int_rule(value, lo, hi)
    if why:
        raise WorkloadError(f"{name}={value!r} {why}; {next_step(name)}")
    return int(value)


def float_rule(value: Any, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> str | None:
    """Why ``value`` is not a finite real number in the range, or None when it is."""
    rng = _range_text(lo, hi, lo_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"must be a finite number{rng}"
    try:
        v = float(value)
    except OverflowError:
        return f"must be a finite number{rng}"
    if not math.isfinite(v):
        return f"must be a finite number{rng}"
    if lo is not None and (v < lo or (lo_open and v == lo)):
        return f"must be a finite number{rng}"
    if hi is not None and v > hi:
        return f"must be a finite number{rng}"
    return None


def _num(x: float) -> str:
    """1, 0.5, 16,777,216 (integral values below 1e16 with thousands separators), 1e+20."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _range_text(lo, hi, lo_open) -> str:
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{_num(lo)}, {_num(hi)}]"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {_num(lo)}"
    if hi is not None:
        return f" <= {_num(hi)}"
    return ""


def check_float(
    name: str, value: Any, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False
) -> float:
    why = float_rule(value, lo, hi, lo_open=lo_open)
    if why:
        raise WorkloadError(f"{name}={value!r} {why}; {next_step(name)}")
    return float(value)


def check_int_array(name: str, value: Any, lo: int, hi: int) -> Any:
    """A scalar int (kept exact) or an integer array with every element in [lo, hi]."""
    if type(value) is int:
        return check_int(name, value, lo, hi)
    import numpy as np  # here: the CLI's start-up loads numpy only where arrays are used (docs/speed.md)

    if np.ndim(value) == 0:
        return check_int(name, value.item() if isinstance(value, np.generic) else value, lo, hi)
    arr = np.asarray(value)
    if arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise WorkloadError(f"{name}: an array of integers is needed (got dtype {arr.dtype}, size {arr.size})")
    if arr.size > MAX_POINTS:
        raise WorkloadError(f"{name}: {arr.size:,} values exceed the limit of {MAX_POINTS:,} points")
    if arr.min() < lo or arr.max() > hi:
        raise WorkloadError(f"{name}: values must be integers in [{lo}, {hi:,}] (got {arr.min()} … {arr.max()})")
    return arr


def parse_range(flag: str, text: str, lo: int = 1, hi: int = MAX_TOKENS) -> list[int]:
    """'1,2,4' | 'a:b:xk' (geometric) | 'a:b:+k' or 'a:b:k' (arithmetic), inclusive of b.

    Every value must be an integer in [lo, hi]; a range must make progress and hold at most
    ``MAX_POINTS`` points.
    """
    t = str(text).strip()
    bad = (
        f"{flag}={text!r} is not a list ('1,2,4') or a range ('1:256:x2', '128:4096:+128') of integers; "
        f"values must be in [{lo}, {hi:,}]"
    )
    parts = t.split(":") if ":" in t else None
    try:
        if parts is None:
            vals = [int(x) for x in t.split(",") if x.strip()]
            if len(vals) > MAX_POINTS:
                raise WorkloadError(f"{flag}: {len(vals):,} values exceed the limit of {MAX_POINTS:,} points")
        else:
            vals = _range(flag, text, parts, lo, hi)
    except WorkloadError:
        raise
    except ValueError:
        raise WorkloadError(bad) from None
    if not vals or min(vals) < lo or max(vals) > hi:
        raise WorkloadError(bad)
    return vals


def _range(flag: str, text: str, parts: list[str], lo: int, hi: int) -> list[int]:
    if len(parts) not in (2, 3):
        raise ValueError
    a, b = int(parts[0]), int(parts[1])
    step = parts[2] if len(parts) == 3 else "+1"
    if a < lo or b > hi or a > b:
        raise WorkloadError(f"{flag}={text!r}: a range 'a:b:step' needs {lo} <= a <= b <= {hi:,}; e.g. {lo}:256:x2")
    if step.startswith("x"):
        f = int(step[1:])
        if f < 2:
            raise WorkloadError(f"{flag}={text!r}: a geometric step 'xk' needs k >= 2 (x1 never progresses); e.g. x2")
        n = 1
        while a * f**n <= b:  # at most log2(MAX_TOKENS) + 1 iterations
            n += 1
        return [a * f**i for i in range(n)]
    s = int(step.lstrip("+"))
    if s <= 0:
        raise WorkloadError(f"{flag}={text!r}: an arithmetic step '+k' needs k >= 1; e.g. +128")
    n = (b - a) // s + 1
    if n > MAX_POINTS:
        raise WorkloadError(
            f"{flag}={text!r} has {n:,} points; the limit is {MAX_POINTS:,} points: use a larger step or 'xk'"
        )
    return list(range(a, b + 1, s))


def check_grid(sizes: dict[str, int]) -> None:
    """A grid (product of axis lengths) holds at most ``MAX_POINTS`` points."""
    n = math.prod(sizes.values())
    if n > MAX_POINTS:
        shape = " × ".join(f"{k} {v:,}" for k, v in sizes.items())
        raise WorkloadError(
            f"the grid has {n:,} points ({shape}); the limit is {MAX_POINTS:,} points: sweep fewer values"
        )


def finite_or_none(x: Any) -> Any:
    """Replace NaN/±Infinity floats by None, recursively (JSON has no non-finite numbers)."""
    if isinstance(x, float) or is_numpy(x, "floating"):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite_or_none(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite_or_none(v) for v in x]
    return x


def is_numpy(x: Any, kind: str) -> bool:
    """``x`` is an instance of ``numpy.<kind>``; without importing numpy (none of its values exist before)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, getattr(np, kind))
