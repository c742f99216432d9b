"""Fit: the per-token time TensorRT-LLM's weight-only MXFP4 MoE spends on a rank under expert parallelism.

    PYTHONPATH=src:scripts python scripts/fit_moe_ep_token.py eff-data/unpacked/aiconfigurator_core [--write]

TensorRT-LLM serves gpt-oss-120b's MXFP4 experts on Hopper with ``moe_config.backend: TRITON`` (InferenceX
``benchmarks/gptoss_fp4_h200_trt_slurm.sh`` at e06929c7, with ``--ep_size=$TP``): MXFP4 weights dequantised into a
bf16 MMA, the kernel aiconfigurator-core times as ``moe_torch_flow`` / ``w4a16_mxfp4`` ("native data format for gpt
oss", its ``sdk/common.py``). Its TensorRT-LLM 1.3.0rc20 H200 table times that kernel at gpt-oss's shape (hidden and
inter 2880, 128 experts, top-4) at EP 1 to 128 on one rank. A rank holding E/EP experts computes 1/EP of the EP-1
layer's routed rows at the same rows per expert, so a kernel whose time divided with them would take the EP-1 time
over EP; the table's rank takes that plus a time proportional to the tokens the rank does not compute,
T·(1 − 1/EP): a cost per token of the whole layer that expert parallelism does not divide.

The script fits that one coefficient c (seconds per token per layer) by least squares through the origin,
``t(T, EP) − t(T, 1)/EP = c · T · (1 − 1/EP)``, on the ``balanced`` rows of 128 experts at ``moe_tp_size`` 1, EP 2, 4
and 8 (the expert-parallel sizes the InferenceX gpt-oss TensorRT-LLM launchers run: EP = TP ≤ 8), prefill token
counts T ≥ 1,024, every 3rd token count held out; it prints the relative error of ``t(T, 1)/EP + c·T·(1 − 1/EP)``
against each row. With ``--write`` it stores c per device in ``src/llmath/data/efficiency_fit.json`` under
``moe_ep_token``, which llmath adds to the routed experts' compute time where TensorRT-LLM runs that kernel
(docs/efficiency.md, "The weight-only MXFP4 MoE under expert parallelism"). Per-kernel tables only.

The same form is fitted to SGLang's NVFP4 MoE on B200 (FlashInfer's ``trtllm_fp4_block_scale_moe``, which SGLang runs
for DeepSeek-V3 and Qwen3 MoE checkpoints in ``modelopt_fp4`` on sm100): SGLang 0.5.14's B200 table times it
(``sglang_flashinfer_trtllm_moe``, ``nvfp4``) at DeepSeek-R1's shape (hidden 7168, inter 2048, 256 experts, top-8) at
EP 1 to 256, and its rank at EP 2 to 64 takes the EP-1 time over EP plus about 0.1 µs per token of the layer (8,192
tokens: 1.68, 1.68, 1.26, 1.05 ms at EP 1, 2, 4, 8); stored under ``nvfp4`` for B200 and added where SGLang runs that
kernel (``MOE_EP_TOKEN_ENGINES`` of ``llmath.hardware.efficiency_fit``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "src" / "llmath" / "data" / "efficiency_fit.json"
# (system, llmath device, table under systems/data/<system>/, kernel_source, format key, shape): TensorRT-LLM's
# weight-only MXFP4 MoE at gpt-oss's shape; SGLang's FlashInfer NVFP4 MoE at DeepSeek-R1's
GPT_OSS = {"hidden_size": 2880, "inter_size": 2880, "topk": 4, "num_experts": 128, "moe_tp_size": 1}
DEEPSEEK = {"hidden_size": 7168, "inter_size": 2048, "topk": 8, "num_experts": 256, "moe_tp_size": 1}
TRT = "moe/trtllm/1.3.0rc20/moe_perf.parquet"
SOURCES = (
    ("h200_sxm", "h200", TRT, "moe_torch_flow", "w4a16_mxfp4", GPT_OSS),
    ("h100_sxm", "h100-sxm", TRT, "moe_torch_flow", "w4a16_mxfp4", GPT_OSS),
    ("b200_sxm", "b200", "moe/sglang/0.5.14/moe_perf.parquet", "sglang_flashinfer_trtllm_moe", "nvfp4", DEEPSEEK),
)
EP_SIZES = (2, 4, 8)
MIN_TOKENS = 1024
HOLD_EVERY = 3


def kernel_rows(path: Path, kernel: str, key: str, shape: dict) -> pd.DataFrame | None:
    """The table's balanced rows of ``kernel`` over ``key`` experts at ``shape``, pivoted to tokens × EP (median of
    repeats); ``None`` where EP 1 or any of :data:`EP_SIZES` is missing."""
    d = pd.read_parquet(path)
    sel = (d.kernel_source == kernel) & (d.moe_dtype == key) & (d.distribution == "balanced")
    for k, v in shape.items():
        sel &= d[k] == v
    p = d[sel].pivot_table(index="num_tokens", columns="moe_ep_size", values="latency", aggfunc="median")
    return p if {1, *EP_SIZES} <= set(p.columns) else None


def fit_device(p: pd.DataFrame) -> dict:
    """c (s per token per layer) from the fit rows, and the relative errors of the model on fit and held-out rows."""
    tokens = [int(t) for t in p.index if t >= MIN_TOKENS]
    held = set(tokens[HOLD_EVERY - 1 :: HOLD_EVERY])
    rows = [(t, ep, float(p.loc[t, ep]) * 1e-3, float(p.loc[t, 1]) * 1e-3 / ep) for t in tokens for ep in EP_SIZES]
    fit = [r for r in rows if r[0] not in held]
    x = np.array([t * (1 - 1 / ep) for t, ep, _, _ in fit])
    y = np.array([m - base for _, _, m, base in fit])
    c = float(x @ y / (x @ x))

    def errors(rs):
        return np.array([abs(base + c * t * (1 - 1 / ep) - m) / m for t, ep, m, base in rs])

    def summary(e):
        return {"median_abs_err": round(float(np.median(e)), 4), "p90_abs_err": round(float(np.quantile(e, 0.9)), 4)}

    ho = [r for r in rows if r[0] in held]
    without = np.array([abs(base - m) / m for _, _, m, base in rows])
    return {
        "s_per_token": float(f"{c:.5g}"),
        "rows_fit": len(fit),
        "rows_held_out": len(ho),
        "fit": summary(errors(fit)),
        "held_out": summary(errors(ho)),
        "without_term": summary(without),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="the unzipped aiconfigurator-core package (holding systems/)")
    ap.add_argument("--write", action="store_true", help=f"store the fits in {OUT}")
    a = ap.parse_args(argv)
    devices = {}
    for system, name, table, kernel, key, shape in SOURCES:
        path = a.unpacked / "systems" / "data" / system / table
        p = kernel_rows(path, kernel, key, shape) if path.exists() else None
        if p is None:
            print(f"{system}: no EP 1 and EP {EP_SIZES} rows of {kernel} ({key})")
            continue
        fit = fit_device(p)
        experts = shape["num_experts"]
        fit["table"] = f"{system}/{table} ({kernel}, {key}, balanced, {experts} experts, EP 1-8)"
        fit["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        devices.setdefault(name, {})[key] = fit
        print(name, key, json.dumps(fit))
    if a.write:
        doc = json.loads(OUT.read_text())
        doc["moe_ep_token"] = {
            "package": "aiconfigurator-core 0.12.0",
            "form": "t(T, EP) = t(T, 1)/EP + s_per_token * T * (1 - 1/EP), per MoE layer on one rank",
            "rule": f"balanced rows, moe-TP 1, EP {EP_SIZES}, T >= {MIN_TOKENS}, every {HOLD_EVERY}rd token count "
            "held out (scripts/fit_moe_ep_token.py)",
            "devices": devices,
        }
        OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
