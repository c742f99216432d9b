"""Fit the FP8 weight-GEMM model of decode steps to aiconfigurator-core's GEMM tables, quantiser taken off.

    PYTHONPATH=src:scripts eff-data/venv/bin/python scripts/fit_decode_gemm.py eff-data/unpacked

Why: the package's fp8 GEMM rows (``gemm_dtype = fp8``, TensorRT-LLM ``torch_flow``) time ``Linear`` loaded
without an input scale, so each includes a dynamic per-tensor quantisation of its input (an amax pass and a
scale-and-cast; aiconfigurator ``collector/trtllm/collect_gemm.py``). The general GEMM fit keeps them in, and
the serving model takes the quantiser off its ``t0`` only (``fp8_static_gemm_overhead``); at a few rows part of
it sits in the fitted memory curve, so that fit is 4–12% slow against the same rows less their quantiser
(``scripts/gemm_fit_small_m.py``). The package times both quantiser pieces at every (m, k) of the GEMM table
(``quantize/trtllm``: ``computescale`` = the amax pass, ``scale_matrix`` = the scale-and-cast); each GEMM row's
pair is subtracted, and the GEMM form of ``llmath.hardware.efficiency_fit`` (the same nine coefficients, bounds and
tile floor as ``scripts/fit_efficiency.py``) is fitted to the rows of at most ``DECODE_ROWS`` tokens, one
tensor-core tile on Hopper and datacenter Blackwell, where the tables' kernels stream their weights
(docs/efficiency.md, "GEMV and split-K at a few rows"): the kernel an engine runs in a decode step on an input
quantised upstream. Devices with 16-row tiles are not fitted. One row per (m, n, k) (median of repeats), every
5th distinct (n, k) held out. Writes ``fp8_decode_gemm`` into ``data/efficiency_fit.json`` with the held-out
errors and the tables' sha256. Per-kernel tables only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from fit_efficiency import PACKAGE, SYSTEMS, VERSION, errors, fit_class, median_rows, sha256, split, summary

from llmath import hardware
from llmath.hardware.efficiency_fit import COST, tile_rows

OUT = Path(__file__).resolve().parent.parent / "src" / "llmath" / "data" / "efficiency_fit.json"
DECODE_ROWS = 64
QUANTISER = ("computescale", "scale_matrix")


def static_rows(root: Path, sysname: str, ver: str, files: dict) -> pd.DataFrame | None:
    """The fp8 GEMM rows of at most DECODE_ROWS tokens, one per shape, with their quantiser subtracted."""
    rel = f"{sysname}/gemm/trtllm/{ver}/gemm_perf.parquet"
    qrel = [f"{sysname}/quantize/trtllm/{ver}/{q}_perf.parquet" for q in QUANTISER]
    if not all((root / r).exists() for r in (rel, *qrel)):
        return None
    df = pd.read_parquet(root / rel)
    df = df[(df.gemm_dtype == "fp8") & (df.kernel_source == "torch_flow") & (df.m <= DECODE_ROWS)]
    if df.empty:
        return None
    for r in (rel, *qrel):
        files[r] = sha256(root / r)
    quant = sum(
        (q := pd.read_parquet(root / r))[q.quant_dtype == "fp8"].groupby(["m", "k"]).latency.median() for r in qrel
    )
    d = median_rows(df, ["m", "n", "k"]).merge(quant.rename("quantiser").reset_index(), on=["m", "k"], how="left")
    if d.quantiser.isna().any():
        raise SystemExit(f"{sysname}: fp8 GEMM rows without a quantiser row at their (m, k)")
    d["latency"] = d.latency - d.quantiser
    return d[d.latency > 0].reset_index(drop=True)


def fit_device(root: Path, sysname: str, name: str, ver: str, files: dict) -> dict | None:
    """The fit of one system, or ``None`` without fp8 and quantiser tables or where DECODE_ROWS rows span more
    than one tensor-core tile (Ada, consumer Blackwell: 16-row tiles, where those rows are not all streaming)."""
    hw = hardware.get(name)
    if tile_rows(hw.arch) != DECODE_ROWS:
        return None
    d = static_rows(root, sysname, ver, files)
    if d is None:
        return None
    peak, bw, tile = hw.peak("fp8"), hw.memory_bandwidth_bytes_per_s, tile_rows(hw.arch)
    held = split(d, ["n", "k"]).to_numpy()
    t = d.latency.to_numpy() * 1e-3
    feats = [np.asarray(f, dtype=float) for f in COST["gemm"](d.m, d.n, d.k, "fp8")]
    coef = fit_class("gemm", [f[~held] for f in feats], t[~held], peak, bw, tile)
    return {
        "coef": [float(f"{v:.5g}") for v in coef],
        "table": f"{sysname}/gemm/trtllm/{ver}/gemm_perf.parquet (torch_flow, fp8, m <= {DECODE_ROWS})",
        "quantiser": f"{sysname}/quantize/trtllm/{ver}/{{{','.join(QUANTISER)}}}_perf.parquet (fp8, same m, k)",
        "rows_fit": int((~held).sum()),
        "rows_held_out": int(held.sum()),
        "fit": summary(errors(coef, [f[~held] for f in feats], t[~held], peak, bw, tile)),
        "held_out": summary(errors(coef, [f[held] for f in feats], t[held], peak, bw, tile)),
    }


def main(argv=None) -> None:
    root = Path((argv or sys.argv[1:])[0]) / "aiconfigurator_core" / "systems" / "data"
    data = json.loads(OUT.read_text())
    files: dict[str, str] = {}
    devices = {name: e for s, (name, ver) in SYSTEMS.items() if (e := fit_device(root, s, name, ver, files))}
    data["fp8_decode_gemm"] = {
        "package": f"{PACKAGE} {VERSION}",
        "form": "the GEMM form (efficiency_fit.model_time, tile floor), fitted to fp8 rows less their quantiser",
        "rule": f"m <= {DECODE_ROWS}; every 5th distinct (n, k) held out; applied to FP8 weight GEMMs in decode",
        "files_sha256": dict(sorted(files.items())),
        "devices": devices,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    for name, e in devices.items():
        print(f"{name}: held-out median {e['held_out']['median_abs_err']:.1%}, p90 {e['held_out']['p90_abs_err']:.1%}")


if __name__ == "__main__":
    main()
