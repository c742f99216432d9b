"""Achieved memory bandwidth of weight GEMMs at few token rows in aiconfigurator-core's per-kernel tables.

    PYTHONPATH=src python scripts/small_m_bandwidth.py eff-data/unpacked

For every system with TensorRT-LLM GEMM tables (``torch_flow`` kernels), the median over weights with n, k ≥ 4096
of bytes / latency / datasheet bandwidth, per band of rows m. Bytes: A and B in the format, C in 16 bit
(:func:`llmath.hardware.efficiency_fit.gemm_cost`). The evidence for the GEMM form's tile floor
(docs/efficiency.md, "GEMV and split-K at a few rows").
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from llmath import hardware
from llmath.hardware.efficiency_fit import gemm_cost

# aiconfigurator system -> llmath device (the measured systems of scripts/fit_efficiency.py and the RTX PRO 6000)
SYSTEMS = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "gb200": "gb200",
    "a100_sxm": "a100-sxm-80gb",
    "l40s": "l40s",
    "rtx_pro_6000_server": "rtx-pro-6000",
}
BANDS = ((1, 1), (2, 8), (9, 16), (17, 64))
DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}


def table(root: Path, system: str) -> pd.DataFrame | None:
    versions = sorted((root / system / "gemm" / "trtllm").glob("*/gemm_perf.parquet"))
    return pd.read_parquet(versions[0]) if versions else None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="the unzipped aiconfigurator-core wheel")
    root = ap.parse_args(argv).unpacked / "aiconfigurator_core" / "systems" / "data"
    print("| device | format | " + " | ".join(f"m {a}–{b}" if a != b else f"m {a}" for a, b in BANDS) + " |")
    print("|---|---|" + "---:|" * len(BANDS))
    for system, name in SYSTEMS.items():
        df = table(root, system)
        if df is None:
            continue
        bw = hardware.get(name).memory_bandwidth_bytes_per_s
        for raw, fmt in DTYPES.items():
            d = df[(df.gemm_dtype == raw) & (df.kernel_source == "torch_flow") & (df.n >= 4096) & (df.k >= 4096)]
            if d.empty:
                continue
            frac = gemm_cost(d.m, d.n, d.k, fmt)[4] / (d.latency.to_numpy() * 1e-3) / bw
            cells = [np.median(frac[(d.m >= a) & (d.m <= b)]) for a, b in BANDS]
            print(f"| `{name}` | {fmt} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
