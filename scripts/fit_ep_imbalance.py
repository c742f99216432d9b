"""Fit: how much longer the busiest expert-parallel rank takes than a balanced one (run by hand).

    PYTHONPATH=src /path/to/venv-with-pandas-pyarrow/bin/python scripts/fit_ep_imbalance.py eff-data/unpacked [--write]

Under expert parallelism (``ep`` > 1) every rank holds E/ep experts and the MoE layer ends, for every rank, when the
busiest one has finished: the reduce-scatter or all-to-all that returns the experts' outputs waits for it. With
balanced routing every rank computes N·k/ep token-expert pairs; with real routing some experts are hot (TensorRT-LLM
tech blog 4, "Scaling Expert Parallelism in TensorRT-LLM (Part 1)": DeepSeek-R1's per-rank routed tokens, hot
ranks that stay hot for hundreds of iterations; the DeepSeek-V3 report's EPLB exists for it).

aiconfigurator-core times TensorRT-LLM's MoE kernels at both: ``balanced`` (every expert the same tokens) and
``power_law_1.01`` (expert loads drawn from a power law of exponent 1.01, the distribution its DeepSeek model
assumes by default: ``sdk/models/deepseek.py`` ``_power_law_alpha = 1.01``, ``sdk/config.py``
``workload_distribution = "power_law"``), where its collector moves the most loaded EP rank's experts onto rank 0
and times rank 0 (``collector/helper.py`` ``_generate_power_law_distribution``): the busiest rank. The ratio of
the two, at equal kernel, shape, tokens and EP size, is that rank's slowdown.

Rows: ``moe_perf.parquet`` of each system's TensorRT-LLM version that llmath's MoE fits read (scripts/fit_efficiency.py
``SYSTEMS``), moe-TP 1, EP > 1, the kernel llmath's ``moe`` fit of that format reads (CUTLASS, the plain torch flow,
DeepGEMM for block-scaled FP8; NVFP4 on CUTLASS), every expert shape of at least 64 experts; the median of repeats
per row. The few-expert shapes (8 and 16 experts: one or two per rank at EP 8) are left out: with so few experts
per rank the hottest expert alone sets the busiest rank and their ratio climbs to 3–4 at thousands of pairs per
expert, a different regime from the fine-grained MoEs (64–512 experts) whose ratio levels off at about 1.4–1.7.
Only rows with at least 8 token-expert pairs per expert on average (t = N·k/E >= 8), where both routings hit every
expert of a rank: below it the balanced rows hit more distinct experts than the power-law ones, which is the number
of experts read, not the busiest rank (llmath counts the experts hit apart). Form, per (device, expert format, EP):
a lookup of the median ratio over the rows in each octave of t (log2(t/8) rounded: t = 8, 16, 32, …), no lower
than 1, interpolated linearly in log2 t between octaves, held at the last octave's value beyond the measured range,
1 below t = 8. The ratio levels off with t (the power law fixes the busiest rank's share of the pairs), so no form
that grows with t fits the large-t rows. Every 5th distinct token count is held out of the medians and the median
|error| of the slowdown on the held-out rows written beside it. Per-kernel tables only, never end-to-end results.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

PACKAGE, VERSION = "aiconfigurator-core", "0.12.0"
SYSTEMS = {"h100_sxm": ("h100-sxm", "1.3.0rc20"), "h200_sxm": ("h200", "1.3.0rc20"), "b200_sxm": ("b200", "1.3.0rc20")}
# table dtype -> llmath expert format (the key llmath's precision names the experts' weights by)
FORMATS = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8-block", "nvfp4": "nvfp4"}
KERNELS = ("moe_torch_flow_cutlass", "moe_torch_flow", "deepgemm")
ROUTINGS = ("balanced", "power_law_1.01")
MIN_PER_EXPERT = 8.0
MIN_EXPERTS = 64  # shapes with fewer experts are left out (the docstring says why)
HOLD_EVERY = 5
OUT = Path(__file__).resolve().parents[1] / "src" / "llmath" / "data" / "ep_imbalance.json"


def ratios(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (format, EP, shape, tokens): power-law over balanced median latency, t = N·k/E."""
    keys = ["moe_dtype", "moe_ep_size", "hidden_size", "inter_size", "topk", "num_experts", "num_tokens"]
    d = df[(df.moe_tp_size == 1) & (df.moe_ep_size > 1) & df.distribution.isin(ROUTINGS)]
    d = d[d.moe_dtype.isin(FORMATS) & (d.num_experts >= MIN_EXPERTS)]
    out = []
    for _, g in d.groupby("moe_dtype"):
        src = next((s for s in KERNELS if (g.kernel_source == s).any()), None)
        if src is None:
            continue
        m = g[g.kernel_source == src].groupby([*keys, "distribution"]).latency.median().unstack("distribution")
        m = m.dropna(subset=list(ROUTINGS)).reset_index()
        m["ratio"] = m[ROUTINGS[1]] / m[ROUTINGS[0]]
        m["t"] = m.num_tokens * m.topk / m.num_experts
        m["kernel"] = src
        out.append(m[m.t >= MIN_PER_EXPERT])
    return pd.concat(out) if out else pd.DataFrame()


def octave_medians(g: pd.DataFrame) -> tuple[list[float], list[float]]:
    """The lookup's knots: (t, median ratio) per octave of t, t = 8·2^round(log2(t/8))."""
    octave = np.round(np.log2(g.t.to_numpy() / MIN_PER_EXPERT))
    med = g.ratio.groupby(octave).median()
    # below 1 the power-law rows read fewer distinct experts than the balanced ones, which llmath counts apart
    return [MIN_PER_EXPERT * 2.0**o for o in med.index], [round(max(float(r), 1.0), 4) for r in med]


def lookup(t: np.ndarray, knots_t: list[float], knots_ratio: list[float]) -> np.ndarray:
    """The slowdown at t: interpolated in log2 t, held beyond the knots (the same as ``deploy/ep_balance.py``)."""
    return np.interp(np.log2(t), np.log2(knots_t), knots_ratio)


def fit_group(g: pd.DataFrame) -> dict:
    tokens = sorted(g.num_tokens.unique())
    held = g.num_tokens.isin(tokens[HOLD_EVERY - 1 :: HOLD_EVERY]).to_numpy()
    fit = ~held if (~held).sum() >= 2 else np.ones_like(held)
    kt, kr = octave_medians(g[fit])
    err = np.abs(lookup(g.t.to_numpy(), kt, kr) / g.ratio.to_numpy() - 1)
    return {
        "t": kt,
        "ratio": kr,
        "rows_fit": int(fit.sum()),
        "rows_held_out": int(held.sum()),
        "fit": {"median_abs_err": round(float(np.median(err[fit])), 4)},
        "held_out": {"median_abs_err": round(float(np.median(err[held])), 4) if held.any() else None},
        "ratio_range": [round(float(g.ratio.min()), 3), round(float(g.ratio.max()), 3)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="the directory the aiconfigurator-core wheel was unpacked into")
    ap.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    a = ap.parse_args()
    data = a.unpacked / "aiconfigurator_core" / "systems" / "data"
    devices: dict = {}
    files = {}
    for sysname, (device, ver) in SYSTEMS.items():
        rel = f"{sysname}/moe/trtllm/{ver}/moe_perf.parquet"
        path = data / rel
        if not path.exists():
            continue
        files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        r = ratios(pd.read_parquet(path))
        for (raw, ep), g in r.groupby(["moe_dtype", "moe_ep_size"]):
            entry = fit_group(g) | {"table": f"{rel} ({g.kernel.iloc[0]})"}
            devices.setdefault(device, {}).setdefault(FORMATS[raw], {})[str(int(ep))] = entry
            print(device, FORMATS[raw], int(ep), entry["ratio"], entry["fit"], entry["held_out"])
    doc = {
        "provenance": {
            "package": PACKAGE, "version": VERSION, "license": "Apache-2.0",
            "source": f"https://pypi.org/project/{PACKAGE}/{VERSION}/",
            "tables": "systems/data/<system>/moe/trtllm/<version>/moe_perf.parquet (latency in ms)",
            "files_sha256": files, "script": "scripts/fit_ep_imbalance.py",
            "form": "slowdown of the busiest EP rank: the median ratio per octave of t = N·k/E token-expert pairs "
                    "per expert (knots t, ratio), interpolated in log2 t, held beyond the last knot, 1 below t = 8; "
                    "per device, expert format and EP size, from shapes of >= 64 experts",
            "rows": "power_law_1.01 / balanced median latency at equal kernel, shape, tokens and EP size, moe-TP 1",
        },
        "devices": devices,
    }  # fmt: skip
    if a.write:
        OUT.write_text(json.dumps(doc, indent=1) + "\n")
        print("wrote", OUT)


if __name__ == "__main__":
    main()
