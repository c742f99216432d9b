"""Measure: a per-expert slice term for TensorRT-LLM's block-scaled FP8 grouped MoE kernel on Hopper (not applied).

    PYTHONPATH=src:scripts eff-data/venv/bin/python scripts/fit_moe_slice.py eff-data/unpacked

The shipped ``moe`` ``fp8_block`` fit (``scripts/fit_efficiency.py``) was fitted to unsplit layers
(``moe_tp_size = moe_ep_size = 1``) and is applied to one rank's share of a split layer (docs/decode_step.md). On
TensorRT-LLM's own table of that kernel on Hopper (``moe_torch_flow_cutlass``, ``fp8_block``, balanced routing) the
split rows at decode sizes run slower than the share model, and the more so the smaller each expert's slice on the
rank: measured / model time at ≤ 64 tokens, ``moe_ep_size = 1``, by the bytes of one expert's gate, up and down on a
rank (3 · hidden · inter / moe-TP, one byte a weight), H200: 2.01 (≤ 2 MB), 1.64 (2-4), 1.38 (4-8), 1.18 (8-16), 1.07
(16-32), 1.01 (32-64), 0.91 (> 64 MB); H100 1.97 … 0.93. The grouped kernel tiles each expert hit on its own, so an
expert whose slice is a few MB streams it at a fraction of the bandwidth the layer's total bytes would allow. The
same tables' Triton kernels (SGLang 0.5.14 ``sglang_fused_moe_triton``, vLLM 0.24.0
``vllm_fp8moe_triton_tritonexperts``) stay within 0.95-1.14 of the model at every slice, and B200's DeepGEMM kernel
(TensorRT-LLM's ``fp8_block`` there) within 1.02-1.07: the term is this kernel's.

Form: both fractions (compute and memory) times sat(slice; hs, ps) = 1 / (1 + (hs / slice)^ps): at a few tokens per
expert the shipped compute term, whose rows saturation falls with them, is the binding one, and the term is the
kernel's per expert whichever binds; the other nine coefficients the
shipped ``fp8_block`` ones, the features and the experts hit as the shipped fits take them (uniform picks,
``efficiency_fit.moe_cost``). Rows: ``h100_sxm`` and ``h200_sxm`` ``moe/trtllm/1.3.0rc20/moe_perf.parquet``,
balanced, ``moe_ep_size = 1``, every moe-TP, at most ``MAX_TOKENS`` tokens (one row per shape, the median of
repeats); every 5th distinct (hidden, inter, experts, top-k, moe-TP) held out. Prints the two coefficients and
the held-out errors with and without the term (docs/efficiency.md, "Block-FP8 experts split by moe-TP"). Per-kernel
tables only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from fit_efficiency import median_rows, sha256, split, summary
from scipy.optimize import least_squares

from llmath import hardware
from llmath.hardware import efficiency_fit as ef

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200"}
TABLE = "moe/trtllm/1.3.0rc20/moe_perf.parquet"
KERNEL = "moe_torch_flow_cutlass"
MAX_TOKENS = 512
SHAPE = ["hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size"]


def features(d: pd.DataFrame) -> tuple[list[np.ndarray], np.ndarray]:
    """(x1, x2, xm, FLOPs, bytes) of one rank's share as ``fitted_ops`` applies the fit, and the slice bytes."""
    s = 1.0 / d.moe_tp_size.to_numpy(dtype=float)
    x1, _, xm, flops, by = ef.moe_cost(d.num_tokens, d.hidden_size, d.inter_size, d.topk, d.num_experts, "fp8")
    x2 = d.hidden_size.to_numpy(dtype=float) * d.inter_size.to_numpy(dtype=float) * s
    return [np.asarray(x1, dtype=float), x2, xm * s, flops * s, by * s], 3 * x2  # fp8: one byte a weight


def rank_time(coef, slice_coef, feats, slices, hw) -> np.ndarray:
    """Kernel seconds: the shipped form with both fractions times sat(slice) (``slice_coef`` None: without)."""
    x1, x2, xm, fl, by = feats
    ec, em, t0 = ef.fractions(coef, x1, x2, xm, ef.tile_rows(hw.arch))
    if slice_coef is not None:
        cut = ef.sat(slices, *slice_coef)
        ec, em = ec * cut, em * cut
    return t0 + np.maximum(fl / (hw.peak("fp8") * ec), by / (hw.memory_bandwidth_bytes_per_s * em))


def fit_device(root: Path, sysname: str, name: str, files: dict) -> dict:
    rel = f"{sysname}/{TABLE}"
    df = pd.read_parquet(root / rel)
    files[rel] = sha256(root / rel)
    df = df[(df.kernel_source == KERNEL) & (df.moe_dtype == "fp8_block") & (df.distribution == "balanced")]
    df = df[(df.moe_ep_size == 1) & (df.num_tokens <= MAX_TOKENS)]
    d = median_rows(df, ["num_tokens", *SHAPE, "moe_ep_size"]).reset_index(drop=True)
    hw, coef = hardware.get(name), ef.coefficients(name, "moe", "fp8_block")[0]
    feats, slices = features(d)
    t = d.latency.to_numpy() * 1e-3
    held = split(d, SHAPE).to_numpy()

    def resid(th):
        sc = (10 ** th[0], th[1])
        return np.log(rank_time(coef, sc, [f[~held] for f in feats], slices[~held], hw) / t[~held])

    r = least_squares(resid, [6.5, 1.0], bounds=([3, 0.2], [10, 4]), loss="soft_l1", f_scale=0.05)
    sc = [float(f"{10 ** r.x[0]:.5g}"), float(f"{r.x[1]:.5g}")]
    err = {k: rank_time(coef, c, feats, slices, hw) / t - 1 for k, c in (("without", None), ("with", sc))}
    small = held & (slices < 16e6)
    return {
        "coef": sc,
        "table": f"{rel} ({KERNEL}, fp8_block, balanced, moe_ep_size = 1, tokens <= {MAX_TOKENS})",
        "rows_fit": int((~held).sum()),
        "rows_held_out": int(held.sum()),
        "held_out": summary(err["with"][held]),
        "held_out_without": summary(err["without"][held]),
        "held_out_slices_below_16MB": summary(err["with"][small]),
        "held_out_slices_below_16MB_without": summary(err["without"][small]),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    a = ap.parse_args(argv)
    root = Path(a.root) / "aiconfigurator_core" / "systems" / "data"
    files: dict[str, str] = {}
    for s, name in SYSTEMS.items():
        e = fit_device(root, s, name, files)
        print(name, e["coef"], "held out", e["held_out"], "without", e["held_out_without"],
              "slices < 16 MB", e["held_out_slices_below_16MB"], "without", e["held_out_slices_below_16MB_without"],
              e["rows_fit"], "+", e["rows_held_out"])  # fmt: skip


if __name__ == "__main__":
    main()
