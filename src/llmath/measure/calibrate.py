"""Measure the machine at hand with torch and write a hardware profile that ``--hardware`` accepts.

What is measured (every figure is the median of timed repeats after warm-up; ``torch.cuda.synchronize``
brackets each timing on CUDA; torch keeps the threads it chose for the machine):

* **large GEMMs** (square M = N = K, per dtype): achievable matmul FLOP/s. The profile's
  ``peak_flops_per_s[dtype]`` is the median over the sizes, so ``matmul`` efficiency is 1.0.
* **skinny weight GEMMs**: ``F.linear(X, W)`` with M = 1 … 256 token rows against a weight W larger
  than the last-level cache, as decode (and short prefills) run them. Each is reported as FLOP/s and as
  weight bytes streamed per second; ``skinny_rows`` holds that bandwidth over the copy bandwidth.
* **streaming bandwidth**: a large ``copy_`` (bytes read + bytes written per second), the profile's
  ``memory_bandwidth_bytes_per_s`` (so ``memory`` efficiency is 1.0); and a matrix-vector product
  streaming a large weight (recorded in ``raw``). Where a read-only stream (GEMV, a skinny GEMM, decode
  attention) beats the copy, as single-threaded CPUs do, that faster figure is the profile's bandwidth
  and ``memory`` = copy / it, so that every fraction stays in (0, 1] and reproduces its measurement.
* **vector ops** on cache-resident tensors (add, softmax, RMSNorm, SiLU·mul) counted with llmath's
  per-element FLOP conventions: the best rate is ``vector_flops_per_s``; ``vector`` efficiency is the
  median over the best.
* **decode attention** (transformers' eager form: ``q·Kᵀ``, softmax, ``·V`` over a cache larger than
  the last-level cache): K/V bytes read per second over the copy bandwidth is ``attention_decode``.
* **per-kernel overhead**: the time of a tiny op issued back to back (eager launch/dispatch cost). The
  same figure is used for decode (transformers does not capture decode in CUDA graphs).

``quick=True`` uses small, cache-resident sizes and few repeats: seconds, for CI; its fractions are not
meant for predictions.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from llmath.errors import HardwareError, LLMathError, WorkloadError
from llmath.measure.gemm_fit import gemm_fit_entry

SKINNY_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TORCH_DTYPES = ("fp32", "bf16", "fp16")


def _sizes(gemm, skinny, copy_mb, vec, attn, rep, rep_small, warm) -> dict[str, Any]:
    """One size set: square GEMM sizes, skinny weight shapes (k, n), copy MB, vector elements, decode
    attention (heads, head_dim, context), repeats for the largest GEMM / everything else, warm-up runs."""
    return dict(gemm=gemm, skinny=skinny, copy_mb=copy_mb, vec=vec, attn=attn, tiny=16, rep=rep,
                rep_small=rep_small, warm=warm)  # fmt: skip


# (full, quick) sizes per device
# fmt: off
_SIZES = {
    "cpu": {
        False: _sizes(gemm=(1024, 2048, 4096), skinny=((4096, 8192), (8192, 4096), (4096, 4096)), copy_mb=512,
                      vec=1 << 18, attn=(32, 64, 4096), rep=5, rep_small=9, warm=2),
        True: _sizes(gemm=(256, 512), skinny=((512, 1024), (1024, 512)), copy_mb=16,
                     vec=1 << 14, attn=(4, 64, 128), rep=3, rep_small=5, warm=1),
    },
    "cuda": {
        False: _sizes(gemm=(4096, 8192, 16384), skinny=((8192, 28672), (28672, 8192), (8192, 8192)), copy_mb=2048,
                      vec=1 << 22, attn=(32, 128, 32768), rep=10, rep_small=30, warm=3),
        True: _sizes(gemm=(1024, 2048), skinny=((2048, 4096), (4096, 2048)), copy_mb=64,
                     vec=1 << 16, attn=(8, 128, 1024), rep=3, rep_small=5, warm=1),
    },
}
# fmt: on


def _torch():
    try:
        import torch
    except ImportError:
        raise LLMathError("measuring needs torch: pip install 'llmath[oracle]' (or torch), then run again") from None
    return torch


def torch_dtype(dtype: str):
    """The torch dtype of an llmath dtype name that torch can time (fp32, bf16, fp16)."""
    torch = _torch()
    d = dtype.lower() if isinstance(dtype, str) else dtype
    if d not in TORCH_DTYPES:
        raise WorkloadError(
            f"dtype={dtype!r} cannot be timed with plain torch ops; use one of {', '.join(TORCH_DTYPES)}"
        )
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[d]


def check_device(device: str) -> str:
    """'cpu' or 'cuda' (an index such as 'cuda:0' is kept); cuda must be present."""
    torch = _torch()
    if not isinstance(device, str) or device.split(":")[0] not in ("cpu", "cuda"):
        raise WorkloadError(f"device={device!r} must be 'cpu' or 'cuda'")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise HardwareError(f"device={device!r}: torch sees no CUDA device here; use --device cpu")
    return device


def sync(device: str) -> None:
    if device.startswith("cuda"):
        _torch().cuda.synchronize()


def time_call(fn: Callable[[], Any], device: str, repeats: int, warmup: int, inner: int = 1) -> list[float]:
    """Seconds per call of ``fn`` for each of ``repeats`` timings (each ``inner`` calls back to back)."""
    for _ in range(warmup):
        fn()
    sync(device)
    out = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        out.append((time.perf_counter() - t0) / inner)
    return out


class Progress:
    """Step lines on stderr when enabled; silent otherwise."""

    def __init__(self, enabled: bool, what: str, total: int):
        self.enabled, self.what, self.total, self.i = enabled, what, total, 0

    def step(self, msg: str) -> None:
        self.i += 1
        if self.enabled:
            print(f"{self.what} [{self.i}/{self.total}] {msg}", file=sys.stderr, flush=True)


def host_description(device: str) -> str:
    torch = _torch()
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine()
    return f"{platform.node()} ({model}, {os.cpu_count()} logical CPUs)"


def device_memory_bytes(device: str) -> float:
    torch = _torch()
    if device.startswith("cuda"):
        return float(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        raise HardwareError("cannot read this machine's physical memory size (os.sysconf)") from None


def available_memory_bytes(device: str) -> float:
    """Memory free for a model now: MemAvailable on Linux CPUs, free memory on CUDA."""
    torch = _torch()
    if device.startswith("cuda"):
        return float(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return device_memory_bytes(device) * 0.5


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def cpu_busy_fraction(seconds: float = 0.5) -> float | None:
    """Fraction of all CPUs' time spent busy over ``seconds`` (Linux /proc/stat), sampled while this process
    sleeps: other processes' load, which makes multi-threaded timings slow and noisy."""

    def read():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v), idle

    try:
        t0, i0 = read()
        time.sleep(seconds)
        t1, i1 = read()
    except (OSError, ValueError, IndexError):
        return None
    return round(1.0 - (i1 - i0) / max(t1 - t0, 1), 3)


def _med(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def _frac(x: float) -> float:
    """A measured fraction as the profile needs it: in (0, 1] (cache effects can push it above 1)."""
    if not math.isfinite(x) or x <= 0:
        return 1e-6
    return float(min(x, 1.0))


def set_threads(threads: int | None) -> int | None:
    """Set torch's intra-op threads (``None``: leave torch's choice for the machine); returns the old count."""
    torch = _torch()
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise WorkloadError(f"threads={threads!r} must be an integer >= 1 (or None for torch's default)")
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    return old


def calibrate(
    device: str = "cpu",
    dtypes: Sequence[str] = ("fp32",),
    quick: bool = False,
    progress: bool = True,
    threads: int | None = None,
) -> dict[str, Any]:
    """Measure ``device`` and return a hardware profile dict (see the module docstring).

    ``dtypes``: the matmul dtypes to measure (fp32, bf16, fp16); the first also drives the skinny-GEMM,
    attention and vector measurements. ``threads``: torch intra-op threads for the measurements (``None``:
    torch's default for the machine; on a machine shared with other work, the cores that are free). The
    result passes :func:`llmath.hardware.from_dict`.
    """
    old = set_threads(threads)
    try:
        return _calibrate(device, dtypes, quick, progress)
    finally:
        if old is not None:
            _torch().set_num_threads(old)


def _timing(ts: list[float]) -> dict[str, Any]:
    """The repeats, their times and their median, as every raw measurement records them."""
    return {"repeats": len(ts), "times_s": ts, "median_s": _med(ts)}


@dataclass
class _Bench:
    """What every measurement shares: torch, the device, the sizes, the dtypes, the seeded generator,
    the progress lines and the raw record the measurements fill in."""

    torch: Any
    device: str
    z: dict[str, Any]
    dts: list[str]
    progress: Progress
    raw: dict[str, Any]
    gen: Any = None

    @property
    def kind(self) -> str:
        return self.device.split(":")[0]

    @property
    def tdt(self) -> Any:
        return torch_dtype(self.dts[0])

    @property
    def esz(self) -> int:
        return self.torch.tensor([], dtype=self.tdt).element_size()

    def rnd(self, *shape: int, dtype: Any = None) -> Any:
        t = self.torch
        x = t.randn(*shape, generator=self.gen, device=t.device(self.device), dtype=t.float32)
        return x.to(self.tdt if dtype is None else dtype)

    def time(self, fn: Callable[[], Any], reps: int | None = None, inner: int = 1) -> list[float]:
        return time_call(fn, self.device, self.z["rep_small"] if reps is None else reps, self.z["warm"], inner)


def _bench(device: str, dtypes: Sequence[str] | str, quick: bool, progress: bool) -> _Bench:
    torch = _torch()
    device = check_device(device)
    if isinstance(dtypes, str):
        dtypes = [dtypes]
    dts = [d.strip().lower() for d in dtypes if d and d.strip()]
    if not dts:
        raise WorkloadError("dtypes is empty; give at least one of fp32, bf16, fp16")
    for d in dts:
        torch_dtype(d)
    z = _SIZES[device.split(":")[0]][bool(quick)]
    steps = len(dts) * len(z["gemm"]) + len(SKINNY_M) + 5
    raw: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "quick": bool(quick),
        "load_average_before": load_average(),
        "timer": "time.perf_counter",
        "other_processes_cpu_busy_before": cpu_busy_fraction(0.3),
    }
    bench = _Bench(torch, device, z, dts, Progress(progress, "calibrate", steps), raw)
    bench.gen = torch.Generator(device=torch.device(device)).manual_seed(0)
    return bench


def _measure_copy(m: _Bench) -> float:
    """Streaming bandwidth: one large copy (bytes read + written per second)."""
    n = m.z["copy_mb"] * (1 << 20) // 4
    src = m.torch.ones(n, device=m.torch.device(m.device), dtype=m.torch.float32)
    dst = m.torch.empty_like(src)
    ts = m.time(lambda: dst.copy_(src))
    copy_bytes = 2 * n * 4
    copy_bw = copy_bytes / _med(ts)
    m.raw["copy"] = {
        "elements": n,
        "dtype": "fp32",
        "bytes_moved": copy_bytes,
        "counting": "read + write",
        **_timing(ts),
        "bytes_per_s": copy_bw,
    }
    m.progress.step(f"copy {copy_bytes / 1e6:.0f} MB: {copy_bw / 1e9:.1f} GB/s")
    return copy_bw


def _measure_gemms(m: _Bench) -> dict[str, float]:
    """Large square GEMMs per dtype: the peak is the median FLOP/s over the sizes."""
    m.raw["gemm"] = []
    peaks: dict[str, float] = {}
    for d in m.dts:
        rates = []
        for s in m.z["gemm"]:
            a, b = m.rnd(s, s, dtype=torch_dtype(d)), m.rnd(s, s, dtype=torch_dtype(d))
            reps = m.z["rep"] if s == max(m.z["gemm"]) else m.z["rep_small"]
            ts = m.time(partial(m.torch.mm, a, b), reps)
            fl = 2 * s**3
            rate = fl / _med(ts)
            rates.append(rate)
            m.raw["gemm"].append({"dtype": d, "m": s, "n": s, "k": s, "flops": fl, **_timing(ts), "flops_per_s": rate})
            del a, b
            m.progress.step(f"GEMM {d} {s}³: {rate / 1e9:.1f} GFLOP/s")
        peaks[d] = _med(rates)
    return peaks


def _skinny_one(m: _Bench, rows: int, K_: int, N_: int) -> dict[str, Any]:
    """``F.linear`` of ``rows`` token rows against an N_ × K_ weight."""
    W_ = m.rnd(N_, K_)
    x = m.rnd(rows, K_)
    ts = m.time(lambda: m.torch.nn.functional.linear(x, W_))
    t = _med(ts)
    wb = N_ * K_ * m.esz
    return {
        "dtype": m.dts[0],
        "rows": rows,
        "k": K_,
        "n": N_,
        "op": "F.linear(X[rows,k], W[n,k])",
        "weight_bytes": wb,
        **_timing(ts),
        "flops_per_s": 2 * rows * K_ * N_ / t,
        "weight_bytes_per_s": wb / t,
    }


def _measure_skinny(m: _Bench, copy_bw: float) -> None:
    """Skinny weight GEMMs (decode-like), over a few weight shapes: the median per row count.
    (One shape alone misleads: BLAS efficiency at the same rows differs between shapes.)"""
    m.raw["skinny"] = []  # every (rows, shape) measurement
    m.raw["skinny_median"] = []  # per row count: the median over shapes, which the profile uses
    shapes = m.z["skinny"]
    for rows in SKINNY_M:
        per_shape = [_skinny_one(m, rows, K_, N_) for K_, N_ in shapes]
        m.raw["skinny"].extend(per_shape)
        bw = _med([r["weight_bytes_per_s"] for r in per_shape])
        f = bw / copy_bw
        m.raw["skinny_median"].append(
            {
                "dtype": m.dts[0],
                "rows": rows,
                "shapes": [[r["k"], r["n"]] for r in per_shape],
                "weight_bytes_per_s": bw,
                "fraction_of_copy_bandwidth": f,
                "flops_per_s": _med([r["flops_per_s"] for r in per_shape]),
            }
        )
        m.progress.step(
            f"skinny GEMMs rows={rows}: {bw / 1e9:.1f} GB/s of weights, median of {len(shapes)} shapes ({f:.2f} × copy)"
        )


def _measure_gemv(m: _Bench, copy_bw: float) -> None:
    """Weights streamed by a matrix-vector product (the first skinny shape)."""
    K, N = m.z["skinny"][0]
    W = m.rnd(N, K)
    wbytes = N * K * m.esz
    v = m.rnd(K)
    ts = m.time(lambda: m.torch.mv(W, v))
    m.raw["gemv"] = {
        "dtype": m.dts[0],
        "n": N,
        "k": K,
        "weight_bytes": wbytes,
        **_timing(ts),
        "weight_bytes_per_s": wbytes / _med(ts),
        "fraction_of_copy_bandwidth": wbytes / _med(ts) / copy_bw,
    }
    m.progress.step(f"GEMV: {wbytes / _med(ts) / 1e9:.1f} GB/s of weights")


def _measure_vector(m: _Bench) -> tuple[float, float]:
    """Vector ops on cache-resident data at llmath's per-element FLOPs: (best rate, median / best)."""
    torch = m.torch
    rows = max(m.z["vec"] // 1024, 1)
    a, b = m.rnd(rows, 1024), m.rnd(rows, 1024)
    w = m.rnd(1024)
    vec_ops = {
        "add": (1, lambda: torch.add(a, b)),
        "softmax": (5, lambda: torch.softmax(a, dim=-1)),
        "rmsnorm": (4, lambda: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * w),
        "silu_mul": (5, lambda: torch.nn.functional.silu(a) * b),
    }
    m.raw["vector"] = []
    vrates = []
    for name, (per, fn) in vec_ops.items():
        ts = m.time(fn, inner=10)
        rate = per * rows * 1024 / _med(ts)
        vrates.append(rate)
        m.raw["vector"].append(
            {"op": name, "elements": rows * 1024, "flops_per_element": per, "repeats": len(ts), "inner": 10,
             "times_s": ts, "median_s": _med(ts), "flops_per_s": rate}
        )  # fmt: skip
    vec_peak = max(vrates)
    vec_eff = _frac(_med(vrates) / vec_peak)
    m.progress.step(f"vector ops: best {vec_peak / 1e9:.1f} GFLOP/s, median {vec_eff:.2f} of it")
    return vec_peak, vec_eff


def _measure_attention(m: _Bench, copy_bw: float) -> float:
    """Decode attention in transformers' eager form over a cache larger than the last-level cache."""
    torch = m.torch
    heads, hd, S = m.z["attn"]
    q, k, vv = m.rnd(1, heads, 1, hd), m.rnd(1, heads, S, hd), m.rnd(1, heads, S, hd)
    scale = hd**-0.5

    def attn():
        s_ = torch.matmul(q, k.transpose(2, 3)) * scale
        p_ = torch.softmax(s_, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(p_, vv)

    ts = m.time(attn)
    kvb = 2 * heads * S * hd * m.esz
    attn_bw = kvb / _med(ts)
    m.raw["attention_decode"] = {
        "dtype": m.dts[0],
        "batch": 1,
        "heads": heads,
        "head_dim": hd,
        "context": S,
        "form": "matmul(q, K^T)*scale, softmax(fp32), matmul(p, V)",
        "kv_bytes": kvb,
        **_timing(ts),
        "kv_bytes_per_s": attn_bw,
        "fraction_of_copy_bandwidth": attn_bw / copy_bw,
    }
    m.progress.step(f"decode attention: {attn_bw / 1e9:.1f} GB/s of K/V")
    return attn_bw


def _measure_overhead(m: _Bench) -> float:
    """Per-kernel overhead: a tiny op issued back to back."""
    x = m.torch.ones(m.z["tiny"], device=m.torch.device(m.device), dtype=m.tdt)
    y = m.torch.empty_like(x)
    inner = 200
    ts = m.time(lambda: m.torch.add(x, x, out=y), inner=inner)
    overhead = _med(ts)
    m.raw["overhead"] = {
        "op": f"torch.add(out=) on {m.z['tiny']} elements",
        "inner": inner,
        **_timing(ts),
    }
    m.progress.step(f"per-kernel overhead: {overhead * 1e6:.2f} µs")
    return overhead


def _reference_bandwidth(raw: dict[str, Any], copy_bw: float, attn_bw: float) -> float:
    """The copy, unless reading weights (GEMV / skinny GEMMs, which only read) or the KV cache streams
    faster; every fraction is over it, so each stays in (0, 1] and bandwidth × fraction gives back
    exactly what was measured. Usually the copy (then memory = 1.0)."""
    reads = [s_["weight_bytes_per_s"] for s_ in raw["skinny_median"]] + [raw["gemv"]["weight_bytes_per_s"], attn_bw]
    ref_bw = max([copy_bw, *reads])
    raw["reference_bandwidth"] = {
        "bytes_per_s": ref_bw,
        "from": "copy" if ref_bw == copy_bw else "a read-only stream (faster than the copy)",
    }
    return ref_bw


def _efficiency(
    raw: dict[str, Any], ref_bw: float, copy_bw: float, attn_bw: float, peak: float, vec_eff: float, overhead: float
) -> dict[str, Any]:
    """The profile's measured efficiency fractions (each in (0, 1])."""
    skinny_rows = sorted(
        [[s_["rows"], round(_frac(s_["weight_bytes_per_s"] / ref_bw), 6)] for s_ in raw["skinny_median"]]
    )
    # weight GEMMs' achieved matmul rate by rows, relative to the large-GEMM peak of the same dtype
    matmul_rows = sorted([[s_["rows"], round(_frac(s_["flops_per_s"] / peak), 6)] for s_ in raw["skinny_median"]])
    return {
        "matmul": 1.0,
        "matmul_rows": matmul_rows,
        "memory": round(_frac(copy_bw / ref_bw), 6),
        "vector": round(vec_eff, 6),
        "skinny_rows": skinny_rows,
        # the single fraction used where rows are not listed: the 64-row figure (roofline's SKINNY_ROWS)
        "skinny": dict((m, f) for m, f in skinny_rows).get(64, skinny_rows[-1][1]),
        "attention_decode": round(_frac(attn_bw / ref_bw), 6),
        "overhead_s": overhead,
        "decode_overhead_s": overhead,
    }


def _method(m: _Bench, quick: bool) -> str:
    K, N = m.z["skinny"][0]
    return (
        "Medians of timed repeats after warm-up (time.perf_counter"
        + ("; torch.cuda.synchronize around each timing" if m.kind == "cuda" else "")
        + f"; torch {m.torch.__version__}, {m.torch.get_num_threads()} threads). "
        "peak_flops_per_s[dtype] = median FLOP/s of square torch.mm at the listed sizes. "
        "memory_bandwidth_bytes_per_s = the large copy_ (read + write bytes) or, if faster, the best read-only "
        "stream measured (raw.reference_bandwidth); memory = copy / that. skinny_rows = weight bytes/s of "
        f"F.linear with that many rows against a {N}x{K} weight, over it. attention_decode = "
        "K/V bytes/s of eager decode attention over it. vector_flops_per_s = best cache-resident "
        "elementwise rate (llmath FLOP conventions), vector = median/best. overhead_s = one tiny op."
        + (" quick=True: small cache-resident sizes, for tests only." if quick else "")
    )


def _calibrate(device, dtypes, quick, progress) -> dict[str, Any]:
    m = _bench(device, dtypes, quick, progress)
    with m.torch.inference_mode():
        copy_bw = _measure_copy(m)
        peaks = _measure_gemms(m)
        _measure_skinny(m, copy_bw)
        _measure_gemv(m, copy_bw)
        vec_peak, vec_eff = _measure_vector(m)
        attn_bw = _measure_attention(m, copy_bw)
        overhead = _measure_overhead(m)
    m.raw["load_average_after"] = load_average()
    ref_bw = _reference_bandwidth(m.raw, copy_bw, attn_bw)
    eff = _efficiency(m.raw, ref_bw, copy_bw, attn_bw, peaks[m.dts[0]], vec_eff, overhead)
    fit = gemm_fit_entry(m.raw, m.dts[0], peaks[m.dts[0]], ref_bw)  # the GPU tables' GEMM model form
    if fit is not None:
        eff["gemm_fit"] = fit
    host = host_description(m.device)
    stamp = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()
    return {
        "name": f"{m.kind}-profile",
        "display_name": f"{host} (calibrated)",
        "vendor": "nvidia" if m.kind == "cuda" and "nvidia" in host.lower() else "",
        "memory_bytes": device_memory_bytes(m.device),
        "memory_bandwidth_bytes_per_s": ref_bw,
        "peak_flops_per_s": peaks,
        "vector_flops_per_s": vec_peak,
        "source": f"llmath calibrate {stamp} on {host}",
        "notes": "measured by llmath calibrate" + (" --quick (not for predictions)" if quick else ""),
        "measured": {"efficiency": eff, "raw": m.raw, "method": _method(m, quick)},
    }
