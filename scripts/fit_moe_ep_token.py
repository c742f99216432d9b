"""Fit: the per-token time an engine's MoE kernel spends on a rank under expert parallelism, per engine's own table.

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
tokens: 1.68, 1.68, 1.26, 1.05 ms at EP 1, 2, 4, 8); stored under ``sglang``, ``nvfp4`` for B200 and added where
SGLang runs that kernel (``MOE_EP_TOKEN_ENGINES`` of ``llmath.hardware.efficiency_fit``).

vLLM runs the same FlashInfer kernel for NVFP4 experts on B200 (the monolithic ``TrtLlmNvFp4ExpertsMonolithic`` under
TP + EP, the modular ``TrtLlmNvFp4ExpertsModular`` under attention-DP + EP: vllm-project/vllm 01f6dc6a0f2a,
``vllm/model_executor/layers/fused_moe/experts/trtllm_nvfp4_moe.py``); its fit is vLLM 0.24.0's B200 table of the
monolithic kernel at MiniMax-M2.5's shape (hidden 3072, inter 1536, 256 experts, top-8), the only NVFP4 MoE model
vLLM serves under EP in the validation rows, stored under ``vllm``, ``nvfp4``. Each fit also reports the error with
each EP size held out in turn (s refitted on the other two), and the SGLang and vLLM fits the error of their s on
rows they never saw (``checks``): vLLM 0.19.0's table, the modular kernel.

The router decides which of two values a layer takes. FlashInfer's kernel routes every token of the layer on every
rank (``trtllm_fp4_block_scale_moe`` takes the routing logits, ``n_group``, ``topk_group`` and ``routing_method_type``:
flashinfer-ai/flashinfer ``csrc/trtllm_fused_moe_kernel_launcher.cu``), and aiconfigurator's collectors time each
shape with its model's router: grouped top-k (DeepSeek-V3 routing, ``n_group`` 8, ``topk_group`` 4) only at
DeepSeek-V3/R1's shape; every other shape plain top-k (``Renormalize``, or DeepSeek-V3 routing over one group:
Kimi-K2, GLM-5, Nemotron-3) (ai-dynamo/aiconfigurator ``collector/cases/models/*_cases.yaml`` at e23be5a79, the SGLang
0.5.14 collection; ``collector/vllm/collect_moe.py`` at d5bad971c, vLLM 0.24.0's, grouped top-k from the config's
``n_group`` / ``topk_group``). Only the grouped shape carries the large time: SGLang's 10 plain-routed shapes give
8.5-17 ns, its grouped one 137 ns; at the same hidden, inter and top-k over 384 experts routed plain (Kimi-K2's) 10 ns;
and vLLM 0.19.0's collector, which times every shape with ``Renormalize`` (``n_group`` 0: ``collect_moe_v1.py`` at
84ba89962), gives 4.5 ns at DeepSeek-R1's shape where vLLM 0.24.0's grouped collection gives 147 ns. So each engine
stores ``s_per_token`` fitted to its plain-routed rows (SGLang: all 10 shapes pooled, with each shape held out in
turn; vLLM: MiniMax-M2.5's) and ``s_per_token_grouped`` fitted to its grouped-routed rows (DeepSeek-R1's shape), which
llmath picks by the model's router (``MoESpec.grouped_routing``: ``n_group`` > 1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "src" / "llmath" / "data" / "efficiency_fit.json"
# expert shapes (hidden, inter, experts, top-k): gpt-oss's, DeepSeek-R1's, MiniMax-M2.5's (their config.json files)
GPT_OSS = {"hidden_size": 2880, "inter_size": 2880, "topk": 4, "num_experts": 128}
DEEPSEEK = {"hidden_size": 7168, "inter_size": 2048, "topk": 8, "num_experts": 256}
MINIMAX = {"hidden_size": 3072, "inter_size": 1536, "topk": 8, "num_experts": 256}
TRT = "moe/trtllm/1.3.0rc20/moe_perf.parquet"
SGLANG = "moe/sglang/0.5.14/moe_perf.parquet"
VLLM = "moe/vllm/0.24.0/moe_perf.parquet"
VLLM_MONOLITHIC = "vllm_compressedtensorsw4a4nvfp4moe_flashinfer_trtllm_trtllmnvfp4expertsmonolithic"
VLLM_MODULAR = "vllm_compressedtensorsw4a4nvfp4moe_flashinfer_trtllm_trtllmnvfp4expertsmodular"
# (system, llmath device, engine, table under systems/data/<system>/, kernel_source, format key, the plain-routed fit's
# shapes (None: every shape of the kernel the collector routed plain), the grouped-routed fit's shape (None: none),
# checks): TensorRT-LLM's weight-only MXFP4 MoE at gpt-oss's shape; SGLang's FlashInfer NVFP4 MoE at its plain shapes
# and DeepSeek-R1's; vLLM's (the same FlashInfer kernel) at MiniMax-M2.5's and DeepSeek-R1's. A check is (label,
# table, kernel_source, shape or None for every shape of the kernel, whether those rows were routed grouped): the
# fitted s of that routing against rows it never saw
SOURCES = (
    ("h200_sxm", "h200", "trtllm", TRT, "moe_torch_flow", "w4a16_mxfp4", (GPT_OSS,), None, ()),
    ("h100_sxm", "h100-sxm", "trtllm", TRT, "moe_torch_flow", "w4a16_mxfp4", (GPT_OSS,), None, ()),
    ("b200_sxm", "b200", "sglang", SGLANG, "sglang_flashinfer_trtllm_moe", "nvfp4", None, DEEPSEEK, ()),
    (
        "b200_sxm",
        "b200",
        "vllm",
        VLLM,
        VLLM_MONOLITHIC,
        "nvfp4",
        (MINIMAX,),
        DEEPSEEK,
        (
            (
                "the same kernel, vLLM 0.19.0, MiniMax-M2.5",
                "moe/vllm/0.19.0/moe_perf.parquet",
                "vllm_flashinfer_trtllm_moe_fp4",
                MINIMAX,
                False,
            ),  # fmt: skip
            ("the modular kernel (DP + EP), vLLM 0.24.0, its shapes", VLLM, VLLM_MODULAR, None, False),
            (
                "the same kernel, vLLM 0.19.0, DeepSeek-R1's shape routed plain (Renormalize)",
                "moe/vllm/0.19.0/moe_perf.parquet",
                "vllm_flashinfer_trtllm_moe_fp4",
                DEEPSEEK,
                False,
            ),  # fmt: skip
        ),
    ),
)
# the shapes the collectors routed grouped top-k (n_group > 1): DeepSeek-V3/R1's (module docstring)
GROUPED = ((7168, 2048, 256, 8),)
EP_SIZES = (2, 4, 8)
MIN_TOKENS = 1024
HOLD_EVERY = 3


def pivots(path: Path, kernel: str, key: str) -> dict[tuple, pd.DataFrame]:
    """The table's balanced moe-TP-1 rows of ``kernel`` over ``key`` experts, per expert shape (hidden, inter,
    experts, top-k), pivoted to tokens × EP (median of repeats); shapes without EP 1 and :data:`EP_SIZES` left out."""
    d = pd.read_parquet(path)
    d = d[(d.kernel_source == kernel) & (d.moe_dtype == key) & (d.distribution == "balanced") & (d.moe_tp_size == 1)]
    out = {}
    for shape, g in d.groupby(["hidden_size", "inter_size", "num_experts", "topk"]):
        p = g.pivot_table(index="num_tokens", columns="moe_ep_size", values="latency", aggfunc="median")
        if {1, *EP_SIZES} <= set(p.columns):
            out[tuple(int(v) for v in shape)] = p
    return out


def shape_key(shape: dict) -> tuple:
    return (shape["hidden_size"], shape["inter_size"], shape["num_experts"], shape["topk"])


def rows_of(p: pd.DataFrame) -> list[tuple]:
    """(T, EP, measured s, EP-1 time over EP in s) at T ≥ :data:`MIN_TOKENS` and EP in :data:`EP_SIZES`."""
    tokens = [int(t) for t in p.index if t >= MIN_TOKENS]
    return [
        (t, ep, float(p.loc[t, ep]) * 1e-3, float(p.loc[t, 1]) * 1e-3 / ep)
        for t in tokens
        for ep in EP_SIZES
        if np.isfinite(p.loc[t, ep]) and np.isfinite(p.loc[t, 1])
    ]


def least_squares(rows: list[tuple]) -> float:
    """s of ``t(T, EP) − t(T, 1)/EP = s · T · (1 − 1/EP)`` through the origin."""
    x = np.array([t * (1 - 1 / ep) for t, ep, _, _ in rows])
    y = np.array([m - base for _, _, m, base in rows])
    return float(x @ y / (x @ x))


def errors(rows: list[tuple], c: float) -> np.ndarray:
    return np.array([abs(base + c * t * (1 - 1 / ep) - m) / m for t, ep, m, base in rows])


def summary(e: np.ndarray) -> dict:
    return {"median_abs_err": round(float(np.median(e)), 4), "p90_abs_err": round(float(np.quantile(e, 0.9)), 4)}


def fit_device(ps: list[pd.DataFrame]) -> dict:
    """s (s per token per layer) from the fit rows of the shapes ``ps`` pooled; the relative errors of the model on
    fit rows, on every 3rd token count held out, on each EP size held out in turn (s refitted on the other two)
    and, over several shapes, on each shape held out in turn (s refitted on the others)."""
    per_shape = [rows_of(p) for p in ps]
    rows = [r for rs in per_shape for r in rs]
    tokens = sorted({t for t, _, _, _ in rows})
    held = set(tokens[HOLD_EVERY - 1 :: HOLD_EVERY])
    fit = [r for r in rows if r[0] not in held]
    ho = [r for r in rows if r[0] in held]
    c = least_squares(fit)
    by_ep = np.concatenate(
        [errors([r for r in rows if r[1] == ep], least_squares([r for r in rows if r[1] != ep])) for ep in EP_SIZES]
    )
    out = {
        "s_per_token": float(f"{c:.5g}"),
        "shapes": len(ps),
        "rows_fit": len(fit),
        "rows_held_out": len(ho),
        "fit": summary(errors(fit, c)),
        "held_out": summary(errors(ho, c)),
        "held_out_ep": summary(by_ep),
        "without_term": summary(errors(rows, 0.0)),
    }
    if len(ps) > 1:
        others = [[r for j, rs in enumerate(per_shape) if j != i for r in rs] for i in range(len(ps))]
        each = [errors(rs, least_squares(o)) for rs, o in zip(per_shape, others, strict=True)]
        out["held_out_shape"] = summary(np.concatenate(each))
    return out


def check(unpacked: Path, c: float, spec: tuple) -> dict:
    """The fitted ``c`` against the rows of one check (:data:`SOURCES`): median / p90 |error| with and without it."""
    _, table, kernel, shape, grouped = spec
    ps = pivots(unpacked / "systems" / "data" / "b200_sxm" / table, kernel, "nvfp4")
    keep = [ps[k] for k in ps if (k == shape_key(shape) if shape else (k in GROUPED) == grouped)]
    rows = [r for p in keep for r in rows_of(p)]
    if not rows:
        return {"rows": 0}
    return {"rows": len(rows), "shapes": len(keep), "with_term": summary(errors(rows, c)),
            "without_term": summary(errors(rows, 0.0)), "rows_own_s": float(f"{least_squares(rows):.3g}")}  # fmt: skip


def fit_source(unpacked: Path, source: tuple) -> dict | None:
    """One engine's fit (:data:`SOURCES`): the plain-routed ``s_per_token`` and its errors, the grouped-routed
    ``s_per_token_grouped`` and its errors under ``grouped``, the checks; ``None`` where the table lacks the rows."""
    system, _, _, table, kernel, key, plain, grouped, checks = source
    path = unpacked / "systems" / "data" / system / table
    ps = pivots(path, kernel, key) if path.exists() else {}
    shapes = [shape_key(s) for s in plain] if plain else sorted(k for k in ps if k not in GROUPED)
    if not shapes or any(k not in ps for k in shapes):
        return None
    fit = fit_device([ps[k] for k in shapes])
    fit["table"] = f"{system}/{table} ({kernel}, {key}, balanced, EP 1-8; plain-routed shapes {shapes})"
    fit["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    if grouped is not None and shape_key(grouped) in ps:
        g = fit_device([ps[shape_key(grouped)]])
        g["shape"] = list(shape_key(grouped))
        fit["s_per_token_grouped"], fit["grouped"] = g.pop("s_per_token"), g
    if checks:
        own = {False: fit["s_per_token"], True: fit.get("s_per_token_grouped", fit["s_per_token"])}
        fit["checks"] = {s[0]: check(unpacked, own[s[4]], s) for s in checks}
    return fit


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="the unzipped aiconfigurator-core package (holding systems/)")
    ap.add_argument("--write", action="store_true", help=f"store the fits in {OUT}")
    a = ap.parse_args(argv)
    devices: dict = {}
    for source in SOURCES:
        system, name, engine, _, kernel, key = source[:6]
        fit = fit_source(a.unpacked, source)
        if fit is None:
            print(f"{system}: no EP 1 and EP {EP_SIZES} rows of {kernel} ({key})")
            continue
        devices.setdefault(name, {}).setdefault(engine, {})[key] = fit
        print(name, engine, key, json.dumps(fit, indent=1))
    if a.write:
        doc = json.loads(OUT.read_text())
        doc["moe_ep_token"] = {
            "package": "aiconfigurator-core 0.12.0",
            "form": "t(T, EP) = t(T, 1)/EP + s_per_token * T * (1 - 1/EP), per MoE layer on one rank",
            "rule": f"balanced rows, moe-TP 1, EP {EP_SIZES}, T >= {MIN_TOKENS}, every {HOLD_EVERY}rd token count "
            "held out; held_out_ep: each EP size held out in turn; held_out_shape: each shape held out in turn; "
            "s_per_token: plain top-k rows, s_per_token_grouped: grouped top-k rows (scripts/fit_moe_ep_token.py)",
            "devices": devices,
        }
        OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
