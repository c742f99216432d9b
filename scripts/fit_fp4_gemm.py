"""Fit the NVFP4 weight-GEMM kernel model of each engine to aiconfigurator-core's per-kernel GEMM tables.

    PYTHONPATH=src eff-data/venv/bin/python scripts/fit_fp4_gemm.py eff-data/unpacked

Why: at decode sizes an NVFP4 GEMM (``gemm_dtype = nvfp4``) is neither a 16-bit GEMM with a quarter of the bytes
nor bound by its weights alone. Over the rows with m <= 64 tokens its time is a fixed per-kernel time (launch and
the activation's FP4 quantisation) plus the longer of two bounds: streaming the weights (and scales) at a
fraction of the bandwidth, or walking the whole reduction dimension k through one output tile (the kernel does
not split k at these sizes: at n = 128 the time still grows with k). So, per device and engine:

    t = t0 + max(k / kloop_per_s, bytes / (bandwidth · mem)),   bytes = 9/16 · (m·k + n·k) + 2 · m·n

(9/16 bytes per NVFP4 element: 4-bit values and one e4m3 scale per 16, ``data/formats.json``). Fitted by
``scipy.optimize.least_squares`` on log(predicted / measured), soft-L1 (scale 0.05), on one row per distinct
(m, n, k) (the median of repeats), every 5th distinct (n, k) held out. Each engine's own table: TensorRT-LLM
1.3.0rc20 (``torch_flow``; recorded, not applied: see ``NOT_APPLIED``), vLLM's and SGLang's newest (FlashInfer CuTe-DSL
NVFP4 kernels). Writes ``fp4_gemm``
into ``data/efficiency_fit.json`` with the held-out errors and the tables' sha256. Per-kernel tables only.

Prefill-sized rows (m > 64) are compute-bound, and the NVFP4 kernels reach a smaller share of the dense FP4 peak
than the 16-bit GEMM fit's large-GEMM fraction ``c`` (B200: 0.664) gives them. ``compute`` is that share for the
engine's kernel: ``c`` divided by the median, over the fitted rows with m > 64 that the 16-bit fit calls large
(ηc ≥ 0.9 c), of measured / (t0 + 2·m·n·k / (peak_fp4 · ηc(m, n·k))); held out on the same (n, k) as above.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from fit_efficiency import PACKAGE, VERSION, latest, sha256
from scipy.optimize import least_squares

from llmath.hardware import efficiency_fit as ef
from llmath.hardware import get as get_hardware
from llmath.hardware.efficiency import efficiency

OUT = Path(__file__).resolve().parent.parent / "src" / "llmath" / "data" / "efficiency_fit.json"
SYSTEMS = {"b200_sxm": "b200", "gb200": "gb200"}
ENGINES = {"trtllm": "1.3.0rc20", "vllm": None, "sglang": None}  # None: the newest version with a GEMM table
DECODE_ROWS = 64
# TensorRT-LLM picks its NVFP4 GEMM's tactic with its autotuner (``AutoTuner.choose_one`` in ``nvfp4_gemm``,
# tensorrt_llm/_torch/custom_ops/torch_custom_ops.py), which the engine runs at warm-up; the package's collector
# calls ``Linear.forward`` outside any ``autotune()`` context (aiconfigurator collector/trtllm/collect_gemm.py),
# so its nvfp4 rows time the fallback tactic, not what the engine serves with: fitted and recorded, not applied
NOT_APPLIED = {
    "trtllm": "the collector times TensorRT-LLM's NVFP4 GEMM outside its autotuner (the fallback tactic); the "
    "engine serves with autotuned tactics"
}
NVFP4_BYTES = 9 / 16


def table(root: Path, sysname: str, engine: str) -> Path | None:
    base = root / "aiconfigurator_core" / "systems" / "data" / sysname / "gemm" / engine
    ver = ENGINES[engine]
    d = base / ver if ver else latest(base)
    f = d / "gemm_perf.parquet" if d is not None else None
    return f if f is not None and f.exists() else None


def predict(x, m, n, k, bw):
    t0, mem, kloop = x[0] * 1e-6, x[1], x[2] * 1e9
    bytes_ = NVFP4_BYTES * (m * k + n * k) + 2 * m * n
    return t0 + np.maximum(k / kloop, bytes_ / (bw * mem))


def compute_share(d: pd.DataFrame, t0: float, name: str) -> dict:
    """The NVFP4 kernel's large-GEMM share of the dense FP4 peak over the rows with m > 64 (module docstring)."""
    hw = get_hardware(name)
    eff = efficiency("expected", hw)
    coef, peak = eff.gemm_coef("bf16"), hw.peak_flops_per_s["fp4"]
    m, n, k = (d[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    t = d.latency.to_numpy() * 1e-3
    ec = ef.fractions(coef, m, n * k, 0, eff.tile_rows)[0]
    ratio = t / (t0 + 2 * m * n * k / (peak * ec))
    shapes = d[["n", "k"]].drop_duplicates().reset_index(drop=True)
    held = set(map(tuple, shapes.iloc[::5].to_numpy()))
    ho = np.array([(a, b) in held for a, b in zip(d.n, d.k, strict=True)])
    large = (m > DECODE_ROWS) & (ec >= 0.9 * coef[0])
    scale = float(np.median(ratio[large & ~ho]))
    err = np.abs(ratio[large & ho] / scale - 1)
    return {
        "compute": float(coef[0]) / scale,
        "compute_rows_fitted": int((large & ~ho).sum()),
        "compute_rows_held_out": int((large & ho).sum()),
        "compute_held_out_median": float(np.median(err)),
    }


def fit_table(path: Path, bw: float, name: str) -> dict | None:
    """The fitted (t0, mem, kloop) of one engine's NVFP4 rows, with held-out errors; None without rows."""
    df = pd.read_parquet(path)
    every = df[df.gemm_dtype == "nvfp4"].groupby(["m", "n", "k"]).latency.median().reset_index()
    d = every[every.m <= DECODE_ROWS].reset_index(drop=True)
    if d.empty:
        return None
    m, n, k = (d[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    t = d.latency.to_numpy() * 1e-3  # the tables' latency is in ms (docs/efficiency.md)
    shapes = d[["n", "k"]].drop_duplicates().reset_index(drop=True)
    held = set(map(tuple, shapes.iloc[::5].to_numpy()))
    ho = np.array([(a, b) in held for a, b in zip(d.n, d.k, strict=True)])

    def res(x, mask):
        return np.log(predict(x, m[mask], n[mask], k[mask], bw) / t[mask])

    r = least_squares(lambda x: res(x, ~ho), [5.0, 0.5, 1.0], bounds=([0, 0.01, 0.01], [200, 1, 1e4]),
                      loss="soft_l1", f_scale=0.05)  # fmt: skip
    err = np.abs(np.exp(res(r.x, ho)) - 1)
    return {
        "t0_s": float(r.x[0]) * 1e-6,
        "mem": float(r.x[1]),
        "kloop_per_s": float(r.x[2]) * 1e9,
        "kernel_source": sorted(df[df.gemm_dtype == "nvfp4"].kernel_source.unique().tolist()),
        "rows_fitted": int((~ho).sum()),
        "rows_held_out": int(ho.sum()),
        "held_out_median": float(np.median(err)),
        "held_out_p90": float(np.percentile(err, 90)),
    } | compute_share(every, float(r.x[0]) * 1e-6, name)


def main(argv=None) -> None:
    root = Path((argv or sys.argv[1:])[0])
    data = json.loads(OUT.read_text())
    devices: dict = {}
    for sysname, name in SYSTEMS.items():
        bw = get_hardware(name).memory_bandwidth_bytes_per_s
        for engine in ENGINES:
            path = table(root, sysname, engine)
            got = fit_table(path, bw, name) if path is not None else None
            if got is None:
                continue
            rel = str(path.relative_to(root))
            applied = {"applied": engine not in NOT_APPLIED} | (
                {"why": NOT_APPLIED[engine]} if engine in NOT_APPLIED else {}
            )
            devices.setdefault(name, {})[engine] = got | applied | {"table": rel, "sha256": sha256(path)}
            held = f"held-out {got['held_out_median']:.1%} / {got['held_out_p90']:.1%}"
            print(f"{name} {engine}: t0 {got['t0_s'] * 1e6:.2f} us, mem {got['mem']:.3f}, k-loop "
                  f"{got['kloop_per_s']:.3g}/s, compute {got['compute']:.3f} "
                  f"({got['compute_held_out_median']:.1%} held out); {held}")  # fmt: skip
    data["fp4_gemm"] = {
        "package": f"{PACKAGE} {VERSION}",
        "form": "t = t0 + max(k / kloop_per_s, bytes / (bandwidth * mem)); bytes = 9/16 (m k + n k) + 2 m n; "
        "above 64 rows at most compute x (peak_fp4 / c) x the 16-bit GEMM fit's compute rate",
        "rule": f"gemm_dtype nvfp4, rows with m <= {DECODE_ROWS}, median of repeats per (m, n, k); every 5th (n, k) "
        "held out",
        "devices": devices,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
