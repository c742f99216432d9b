"""The fitted GEMM model against aiconfigurator-core's GEMM tables at decode sizes, by weight bytes (run by hand).

    pip install pandas pyarrow                  # in a separate venv; not llmath dependencies
    PYTHONPATH=src python scripts/gemm_fit_small_m.py eff-data/unpacked

For H100, H200 and B200 (TensorRT-LLM 1.3.0rc20 ``torch_flow`` GEMM rows, one per (m, n, k), the median of
repeats; m ≤ 64, n, k ≥ 1024), the median of predicted / measured − 1 per band of the kernel's bytes
(:func:`llmath.hardware.efficiency_fit.gemm_cost`), with the coefficients of ``data/efficiency_fit.json``.
fp8 rows twice: as fitted (the tables' kernels quantise their input dynamically), and as the serving model
applies the fit (per-kernel time :func:`llmath.hardware.efficiency_fit.fp8_static_gemm_overhead`) against the
measured time less the row's own quantiser (``quantize/trtllm`` tables, amax pass + scale-and-cast at the same
m, k). docs/efficiency.md, "The GEMM fit at decode sizes". Only per-kernel tables are read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from llmath import hardware
from llmath.hardware import efficiency_fit as ef

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200"}
VERSION = "1.3.0rc20"
EDGES = (0, 1.6e7, 6.4e7, 1.28e8, 2.56e8, 5.12e8, np.inf)


def quantiser_ms(root: Path, system: str) -> pd.Series:
    """(m, k) -> amax pass + scale-and-cast of an fp8 input, ms (medians of repeats)."""
    base = root / system / "quantize" / "trtllm" / VERSION
    parts = [pd.read_parquet(base / f"{n}_perf.parquet") for n in ("computescale", "scale_matrix")]
    return sum(p[p.quant_dtype == "fp8"].groupby(["m", "k"]).latency.median() for p in parts)


def signed_by_band(pred_s: np.ndarray, meas_s: np.ndarray, bytes_: np.ndarray) -> list[str]:
    err = pred_s / meas_s - 1
    band = np.digitize(bytes_, EDGES[1:-1])
    return [f"{np.median(err[band == b]):+.1%} ({(band == b).sum()})" for b in range(len(EDGES) - 1)]


def rows(root: Path, system: str, name: str):
    """Table lines of one system: bf16, fp8 as fitted, fp8 as the serving model applies it."""
    hw = hardware.get(name)
    df = pd.read_parquet(root / system / "gemm" / "trtllm" / VERSION / "gemm_perf.parquet")
    df = df[(df.kernel_source == "torch_flow") & (df.m <= 64) & (df.n >= 1024) & (df.k >= 1024)]
    for raw, fmt in (("bfloat16", "bf16"), ("fp8", "fp8")):
        d = df[df.gemm_dtype == raw].groupby(["m", "n", "k"], as_index=False).latency.median()
        coef = ef.data()["devices"][name]["gemm"][fmt]["coef"]
        x1, x2, xm, flops, bytes_ = ef.gemm_cost(d.m, d.n, d.k, fmt)
        args = (hw.peak(fmt), hw.memory_bandwidth_bytes_per_s, ef.tile_rows(hw.arch))
        pred = ef.model_time(coef, x1, x2, xm, flops, bytes_, *args)
        meas = d.latency.to_numpy() * 1e-3
        yield name, fmt, signed_by_band(pred, meas, bytes_)
        if fmt == "fp8":
            quant = d.set_index(["m", "k"]).index.map(quantiser_ms(root, system)).to_numpy() * 1e-3
            serving = pred - coef[8] + ef.fp8_static_gemm_overhead(name)[0]
            yield name, "fp8, static input", signed_by_band(serving, meas - quant, bytes_)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="the unzipped aiconfigurator-core wheel")
    root = ap.parse_args(argv).unpacked / "aiconfigurator_core" / "systems" / "data"
    labels = ["≤ 16 MB", "16–64 MB", "64–128 MB", "128–256 MB", "256–512 MB", "> 512 MB"]
    print("| device | format | " + " | ".join(labels) + " |")
    print("|---|---|" + "---:|" * len(labels))
    for system, name in SYSTEMS.items():
        for dev, fmt, cells in rows(root, system, name):
            print(f"| `{dev}` | {fmt} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
