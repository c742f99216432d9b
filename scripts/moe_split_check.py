"""How well the fitted MoE kernel model (``data/efficiency_fit.json``, fitted on unsplit expert layers) times one
rank's share of a split layer, as :func:`llmath.hardware.fitted_ops.apply` applies it (run by hand).

    pip install pandas pyarrow                  # in a separate venv; not llmath dependencies
    PYTHONPATH=src python scripts/moe_split_check.py eff-data/unpacked

For each device and format with a ``moe`` fit, the same table and kernel the fit came from
(aiconfigurator-core 0.12.0, TensorRT-LLM ``moe_torch_flow_cutlass``, balanced routing), rows with
``moe_tp_size`` × ``moe_ep_size`` > 1 (none of which the fit saw): the rank's share s = 1 / (moe-TP × EP) of the
layer, features x1 = tokens · top-k / E, x2 = hidden · inter / moe-TP, xm = the layer's bytes · s; FLOPs and
bytes times s. Prints the median and p90 |error| of the kernel time per device, format, split kind and token
band (at most 512 tokens: decode steps; above: prefill passes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from llmath import hardware
from llmath.hardware import efficiency_fit as ef

DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}


def rank_time(coef, d: pd.DataFrame, fmt: str, hw) -> np.ndarray:
    s = 1.0 / (d.moe_tp_size.to_numpy() * d.moe_ep_size.to_numpy())
    _, _, xm, flops, bytes_ = ef.moe_cost(d.num_tokens, d.hidden_size, d.inter_size, d.topk, d.num_experts, fmt)
    x1 = d.num_tokens.to_numpy() * d.topk.to_numpy() / d.num_experts.to_numpy()
    x2 = d.hidden_size.to_numpy() * d.inter_size.to_numpy() / d.moe_tp_size.to_numpy()
    peak, bw = hw.peak(fmt), hw.memory_bandwidth_bytes_per_s
    return ef.model_time(coef, x1, x2, xm * s, flops * s, bytes_ * s, peak, bw, ef.tile_rows(hw.arch))


def main(argv: list[str]) -> int:
    root = Path(argv[1]) / "aiconfigurator_core" / "systems" / "data"
    fits = json.loads((Path(ef.__file__).parent.parent / "data" / "efficiency_fit.json").read_text())["devices"]
    print("| device | format | split | tokens | rows | median abs err | p90 abs err |")
    print("|---|---|---|---|---|---|---|")
    for device, entry in fits.items():
        for fmt, fit in entry.get("moe", {}).items():
            table, kernel = fit["table"].split(" ")[0], fit["table"].split("(")[1].split(",")[0]
            df = pd.read_parquet(root / table)
            df = df[(df.kernel_source == kernel) & (df.distribution == "balanced") & (df.moe_dtype == DTYPES[fmt])]
            df = df.groupby(["num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                             "moe_ep_size"], as_index=False).latency.median()  # fmt: skip
            hw = hardware.get(device)
            for split, d in (("moe-TP > 1", df[df.moe_tp_size > 1]), ("EP > 1", df[df.moe_ep_size > 1])):
                for band, rows in (("≤ 512", d[d.num_tokens <= 512]), ("> 512", d[d.num_tokens > 512])):
                    if rows.empty:
                        continue
                    t = rows.latency.to_numpy() * 1e-3
                    err = np.abs(rank_time(fit["coef"], rows, fmt, hw) / t - 1)
                    print(f"| {device} | {fmt} | {split} | {band} | {len(rows)} | {np.median(err):.1%}"
                          f" | {np.quantile(err, 0.9):.1%} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
