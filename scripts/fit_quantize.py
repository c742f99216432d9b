"""Add the FP8 activation-quantisation kernel floors of aiconfigurator-core to ``data/efficiency_fit.json``.

    PYTHONPATH=src eff-data/venv/bin/python scripts/fit_quantize.py eff-data/unpacked

Why: the package's FP8 GEMM table (``gemm_dtype = fp8``) times TensorRT-LLM's ``Linear`` with
``QuantAlgo.FP8`` and **no static input scale loaded** (aiconfigurator ``collector/trtllm/collect_gemm.py``),
so each measured kernel includes TensorRT-LLM's *dynamic* per-tensor activation quantisation
(``quantize_e4m3_per_tensor``: an amax pass, then the scale-and-cast), and the fitted ``t0`` of the fp8 GEMM
model carries it. The package measures both pieces (``collector/trtllm/collect_computescale.py``):
``scale_matrix`` = the static scale-and-cast, ``compute_scale`` = dynamic − static (the amax pass).
``llmath.hardware.efficiency_fit.fp8_static_gemm_overhead`` takes both off the fp8 ``t0`` (engines fuse the
quantiser upstream). Per device this writes the median kernel time of each over the small-activation rows
(m ≤ 64 token rows, every k: the latency floor, where both kernels are launch- and tail-bound), with the
tables' sha256. Per-kernel tables only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from fit_efficiency import PACKAGE, SYSTEMS, VERSION, sha256

SMALL_ROWS = 64
OUT = Path(__file__).resolve().parent.parent / "src" / "llmath" / "data" / "efficiency_fit.json"


def floors(root: Path, sysname: str) -> dict | None:
    """{compute_scale_s, static_quantize_s, rows, files_sha256} of one system, or None without tables."""
    base = root / "aiconfigurator_core" / "systems" / "data" / sysname / "quantize" / "trtllm"
    ver = SYSTEMS[sysname][1]
    d = base / ver
    files = {"compute_scale": d / "computescale_perf.parquet", "static_quantize": d / "scale_matrix_perf.parquet"}
    if not all(f.exists() for f in files.values()):
        return None
    out: dict = {"table_version": ver, "files_sha256": {}}
    for key, f in files.items():
        df = pd.read_parquet(f)
        small = df[(df.quant_dtype == "fp8") & (df.m <= SMALL_ROWS)]
        out[f"{key}_s"] = float(small.latency.median()) * 1e-3  # latency in ms
        out[f"{key}_rows"] = int(len(small))
        out["files_sha256"][str(f.relative_to(root))] = sha256(f)
    return out


def main(argv=None) -> None:
    root = Path((argv or sys.argv[1:])[0])
    data = json.loads(OUT.read_text())
    entry = {name: q for s, (name, _) in SYSTEMS.items() if (q := floors(root, s)) is not None}
    data["fp8_quantize"] = {
        "package": f"{PACKAGE} {VERSION}",
        "rule": f"median kernel time over rows with m <= {SMALL_ROWS} (all k), TensorRT-LLM torch ops",
        "devices": entry,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    for name, q in entry.items():
        amax, static = q["compute_scale_s"] * 1e6, q["static_quantize_s"] * 1e6
        print(f"{name}: amax {amax:.2f} us, static quantise {static:.2f} us")


if __name__ == "__main__":
    main()
