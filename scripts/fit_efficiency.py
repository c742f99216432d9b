"""Fit llmath's kernel efficiency models to aiconfigurator-core's per-kernel measurements (run by hand).

    pip download --no-deps aiconfigurator-core==0.12.0 -d eff-data
    unzip eff-data/aiconfigurator_core-0.12.0-*.whl -d eff-data/unpacked
    pip install pandas pyarrow scipy            # in a separate venv; not llmath dependencies
    PYTHONPATH=src python scripts/fit_efficiency.py eff-data/unpacked [--fixture tests/data/...]

Reads only per-kernel tables (GEMM, context/generation attention, MoE, NCCL and custom all-reduce; latency in
milliseconds, CUDA-graph timed by the package's collectors), never its end-to-end or serving results.
Model forms: ``llmath.hardware.efficiency_fit``. Every 5th distinct weight shape (GEMM: (n, k); attention: (H, K, d);
MoE: (hidden, inter, top-k, E); collectives: every 5th message size) is held out of the fit; the median and
p90 |error| of the kernel time on the held-out shapes are written beside the coefficients.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from llmath import hardware
from llmath.hardware.efficiency_fit import (
    COST,
    MOE_STORAGE_RUNS,
    MOE_WEIGHT_ONLY,
    TILED_CLASSES,
    model_time,
    peak_for,
    tile_rows,
)

# Keys of efficiency_fit.json that other scripts write; a rewrite here keeps them as they are.
OTHER_SCRIPTS_FITS = (
    "fp8_quantize",  # scripts/fit_quantize.py
    "fp4_gemm",  # scripts/fit_fp4_gemm.py
    "engine_attn_decode",  # scripts/fit_engine_attention.py
    "fp8_decode_gemm",  # scripts/fit_decode_gemm.py
    "engine_moe_kernel",  # scripts/fit_launcher_moe.py
    "moe_ep_token",  # scripts/fit_moe_ep_token.py
    "engine_mla_decode",  # scripts/fit_mla_decode.py
)
PACKAGE, VERSION = "aiconfigurator-core", "0.12.0"
# aiconfigurator system name -> llmath hardware name, and the TensorRT-LLM table version used per system
SYSTEMS = {
    "h100_sxm": ("h100-sxm", "1.3.0rc20"),
    "h200_sxm": ("h200", "1.3.0rc20"),
    "b200_sxm": ("b200", "1.3.0rc20"),
    "gb200": ("gb200", "1.3.0rc20"),
    "a100_sxm": ("a100-sxm-80gb", "1.0.0"),
    "l40s": ("l40s", "1.3.0rc20"),
    "rtx_pro_6000_server": ("rtx-pro-6000", "1.3.0rc20"),
}
DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
# initial [c, log10 h1, p1, log10 h2, p2, mem, log10 hm, pm, t0 (µs)] per class
INIT = {
    "gemm": [0.8, 1.8, 1.0, 6.0, 1.0, 0.85, 6.0, 1.0, 4.0],
    "attn_context": [0.6, 2.0, 1.0, 4.0, 1.0, 0.8, 6.0, 1.0, 5.0],
    "attn_decode": [0.3, 1.5, 1.0, 1.2, 1.0, 0.85, 7.0, 1.0, 5.0],
    "moe": [0.6, 1.2, 1.0, 6.0, 1.0, 0.8, 7.0, 1.0, 10.0],
    "attn_mla_context": [0.6, 2.0, 1.0, 4.0, 1.0, 0.8, 6.0, 1.0, 5.0],
}
LO = [0.01, -3, 0.2, -3, 0.2, 0.01, 0, 0.2, 0]
HI = [1.0, 14, 4, 14, 4, 1.0, 13, 4, 200]
HOLD_EVERY = 5
GROUP_CLASSES = {
    "gemm": ("gemm",),
    "attention": ("attn_context", "attn_decode"),
    "moe": ("moe",),
    "mla": ("attn_mla_context",),
    "comm": ("all_reduce", "all_gather", "custom_all_reduce"),
}
GROUPS = tuple(GROUP_CLASSES)


def to_coef(theta):
    c, l1, p1, l2, p2, mem, lm, pm, t0 = theta
    return [c, 10**l1, p1, 10**l2, p2, mem, 10**lm, pm, t0 * 1e-6]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def split(df: pd.DataFrame, keys: list[str]) -> pd.Series:
    """True for rows of every HOLD_EVERY-th distinct ``keys`` tuple (held out)."""
    uniq = df[keys].drop_duplicates().sort_values(keys).reset_index(drop=True)
    held = uniq[uniq.index % HOLD_EVERY == HOLD_EVERY - 1]
    return df[keys].apply(tuple, axis=1).isin(set(held.apply(tuple, axis=1)))


def from_coef(coef):
    c, h1, p1, h2, p2, mem, hm, pm, t0 = coef
    return [c, np.log10(h1), p1, np.log10(h2), p2, mem, np.log10(hm), pm, t0 * 1e6]


def fit_class(cls, feats, t, peak, bw, tile, fixed=None, init=None):
    """Least-squares coefficients; ``fixed``: {index: value} of parameters (fit space) held, not fitted;
    ``init``: the starting point (fit space; default ``INIT[cls]``)."""
    x1, x2, xm, fl, by = feats
    fixed = fixed or {}
    free = [i for i in range(len(LO)) if i not in fixed]
    start = INIT[cls] if init is None else init

    def full(th):
        theta = np.array(start, dtype=float)
        theta[free] = th
        theta[list(fixed)] = list(fixed.values())
        return theta

    def resid(th):
        return np.log(model_time(to_coef(full(th)), x1, x2, xm, fl, by, peak, bw, tile) / t)

    x0, lo, hi = ([v[i] for i in free] for v in (start, LO, HI))
    r = least_squares(resid, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.05, max_nfev=4000)
    return to_coef(full(r.x))


def errors(coef, feats, t, peak, bw, tile) -> np.ndarray:
    return model_time(coef, *feats, peak, bw, tile) / t - 1


def summary(err: np.ndarray) -> dict:
    a = np.abs(err)
    return {"median_abs_err": round(float(np.median(a)), 4), "p90_abs_err": round(float(np.quantile(a, 0.9)), 4)}


FIXTURE: list[dict] = []
# (device, class, format) whose held-out rows at the 10/50/90% latency quantiles go into the test fixture
FIXTURE_PICKS = {
    ("h100-sxm", "gemm", "bf16"),
    ("h100-sxm", "gemm", "fp8"),
    ("h100-sxm", "attn_context", "bf16"),
    ("h100-sxm", "attn_decode", "bf16"),
    ("h100-sxm", "moe", "bf16"),
    ("h200", "moe", "fp8_block"),
    ("h200", "attn_mla_context", "fp8"),
    ("b200", "gemm", "bf16"),
    ("b200", "attn_decode", "bf16"),
    ("l40s", "gemm", "bf16"),
}
SHAPE_COLS = {
    "gemm": ["m", "n", "k"],
    "attn_context": ["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim"],
    "attn_decode": ["batch_size", "step", "num_heads", "num_key_value_heads", "head_dim"],
    "moe": ["num_tokens", "hidden_size", "inter_size", "topk", "num_experts"],
    "attn_mla_context": ["batch_size", "isl", "num_heads"],
}


def add_fixture(device, cls, fmt, df, held, table):
    if (device, cls, fmt) not in FIXTURE_PICKS:
        return
    h = df[held].sort_values("raw_latency").reset_index(drop=True)
    for q in (0.1, 0.5, 0.9):
        r = h.iloc[int(q * (len(h) - 1))]
        shape = {c: int(r[c]) for c in SHAPE_COLS[cls]}
        FIXTURE.append(
            {
                "device": device,
                "class": cls,
                "format": fmt,
                "table": table.split(" ")[0],
                "row": int(r["row"]),
                "shape": shape,
                "latency_ms": float(r["raw_latency"]),
            }
        )


def run_fit(cls, df, feats_fn, keys, peak, bw, table, device=None, fmt=None, fixed=None, init=None):
    df = df.reset_index(drop=True)
    held = split(df, keys).to_numpy()
    t = df["latency"].to_numpy() * 1e-3
    feats = [np.asarray(f, dtype=float) for f in feats_fn(df)]
    # the GEMM and MoE forms' tile floor: the measured device's tensor-core tile rows
    tile = tile_rows(hardware.get(device).arch) if (cls in TILED_CLASSES and device) else 0
    coef = fit_class(cls, [f[~held] for f in feats], t[~held], peak, bw, tile, fixed, init)
    e_fit = errors(coef, [f[~held] for f in feats], t[~held], peak, bw, tile)
    e_held = errors(coef, [f[held] for f in feats], t[held], peak, bw, tile)
    add_fixture(device, cls, fmt, df, held, table)
    return {
        "coef": [float(f"{v:.5g}") for v in coef],
        "table": table,
        "rows_fit": int((~held).sum()),
        "rows_held_out": int(held.sum()),
        "fit": summary(e_fit),
        "held_out": summary(e_held),
    }


def median_rows(df, keys):
    """One row per shape: the median latency, and the parquet row number and latency of its first raw row."""
    df = df.assign(row=df.index, raw_latency=df["latency"])
    agg = {"latency": "median", "row": "first", "raw_latency": "first"}
    return df.groupby(keys, as_index=False).agg(agg)


def gemm_fits(root, sysname, ver, hw, files):
    rel = f"{sysname}/gemm/trtllm/{ver}/gemm_perf.parquet"
    df = pd.read_parquet(root / rel)
    files[rel] = sha256(root / rel)
    out = {}
    for raw, fmt in DTYPES.items():
        if fmt not in hw.peak_flops_per_s:
            continue
        d = df[(df.gemm_dtype == raw) & (df.kernel_source == "torch_flow")]
        if d.empty:
            continue
        d = median_rows(d, ["m", "n", "k"])
        out[fmt] = run_fit(
            "gemm",
            d,
            lambda x, f=fmt: COST["gemm"](x.m, x.n, x.k, f),
            ["n", "k"],
            hw.peak(fmt),
            bw(hw),
            rel,
            hw.name,
            fmt,
        )
    return out


def bw(hw):
    return hw.memory_bandwidth_bytes_per_s


def attention_fits(root, sysname, ver, hw, files):
    out = {"attn_context": {}, "attn_decode": {}}
    keys = ["num_heads", "num_key_value_heads", "head_dim"]
    for stage, cls in (("context", "attn_context"), ("generation", "attn_decode")):
        rel = f"{sysname}/attention/trtllm/{ver}/{stage}_attention_perf.parquet"
        if not (root / rel).exists():
            continue
        df = pd.read_parquet(root / rel)
        files[rel] = sha256(root / rel)
        df = df[(df.window_size == 0) & df.attn_dtype.isin(DTYPES) & df.kv_cache_dtype.isin(DTYPES)]
        fmt_col = "attn_dtype" if cls == "attn_context" else "kv_cache_dtype"
        for raw, fmt in DTYPES.items():
            if fmt not in hw.peak_flops_per_s:
                continue
            d = df[df[fmt_col] == raw]
            if cls == "attn_context":
                d = d[d.kv_cache_dtype == raw]
            if d.empty:
                continue
            d = median_rows(d, ["batch_size", "isl", "step", *keys])
            # decode attention runs on the CUDA cores: its compute term is at the vector peak
            peak = hw.peak(fmt) if cls == "attn_context" else hw.vector_peak
            feats = lambda x, f=fmt, c=cls: attn_feats(x, f, c)  # noqa: E731
            out[cls][fmt] = run_fit(cls, d, feats, keys, peak, bw(hw), rel, hw.name, fmt)
    return {k: v for k, v in out.items() if v}


# the context MLA table's per-head widths: DeepSeek-V3/R1's (qk_nope 128 + qk_rope 64, v_head_dim 128), the model
# the package times it for (sdk/models/deepseek.py ContextMLA); num_heads is per rank, mla_dtype bf16 throughout
MLA_DIMS = (192, 128)


def read_table(root: Path, rel: str, files: dict):
    """The table at ``rel`` under ``root`` with its sha256 recorded in ``files``; ``None`` where it is absent."""
    if not (root / rel).exists():
        return None
    files[rel] = sha256(root / rel)
    return pd.read_parquet(root / rel)


def mla_fits(root, sysname, ver, hw, files):
    rel = f"{sysname}/mla/trtllm/{ver}/context_mla_perf.parquet"
    df = read_table(root, rel, files)
    if df is None:
        return {}
    df = df[(df.step == 0) & (df.mla_dtype == "bfloat16")]
    out = {}
    for raw, fmt in DTYPES.items():  # keyed by the KV-cache format, as context attention
        d = df[df.kv_cache_dtype == raw]
        if fmt not in hw.peak_flops_per_s or len(d) < 50:
            continue
        d = median_rows(d, ["batch_size", "isl", "num_heads"])
        feats = lambda x, f=fmt: COST["attn_mla_context"](x.batch_size, x.isl, x.num_heads, *MLA_DIMS, f, f)  # noqa: E731
        cls = "attn_mla_context"
        peak = peak_for(cls, hw, fmt)  # its products run in 16-bit whatever the KV cache's format
        out[fmt] = run_fit(cls, d, feats, ["num_heads", "batch_size"], peak, bw(hw), rel, hw.name, fmt)
    return {"attn_mla_context": out} if out else {}


def attn_feats(x, fmt, cls):
    h, k, d = x.num_heads, x.num_key_value_heads, x.head_dim
    if cls == "attn_context":
        return COST[cls](x.batch_size, x.isl, h, k, d, fmt, fmt)
    return COST[cls](x.batch_size, x.step, h, k, d, fmt)


# MoE tables also fitted per experts' storage format where it runs another grouped kernel (MOE_STORAGE_RUNS:
# block-scaled FP8, one scale per 128 x 128 block, as DeepSeek-V3/R1, Qwen3 and MiniMax FP8 checkpoints store it).
# Its compute terms only: the weight stream and per-kernel time are the per-tensor FP8 fit's (the tables time
# both kernels within 5% at 1-128 tokens on split layers; the block scales cost in the mainloop, at prefill sizes)
MEMORY_TERMS = (5, 6, 7, 8)  # mem, hm, pm, t0
# The MoE tables time each shape under three routings. Fitted on the ``balanced`` rows (the gated kernels with
# the experts hit of independent uniform picks, moe_cost's default; the weight-only kernel with min(E, T·k));
# ``--moe-routing power_law``: on the ``power_law_1.01`` rows aiconfigurator assumes for DeepSeek-style layers
# (sdk/config.py, sdk/models/deepseek.py), with that routing's experts hit (llmath.ops.routing). Measured both
# ways, the power-law fit is not applied: docs/efficiency.md, "MoE routing".
MOE_ROWS = {"power_law": "power_law_1.01", "balanced": "balanced"}
MOE_FEATURE = {"power_law": "power_law", "balanced": None}  # the gated fits' experts-hit routing
MOE_ROUTING = ["balanced"]  # set from the command line


def moe_fits(root, sysname, ver, hw, files):
    rel = f"{sysname}/moe/trtllm/{ver}/moe_perf.parquet"
    df = read_table(root, rel, files)
    if df is None:
        return {}
    routing = MOE_ROUTING[0]
    df = df[(df.distribution == MOE_ROWS[routing]) & (df.moe_tp_size == 1) & (df.moe_ep_size == 1)]
    keys = ["hidden_size", "inter_size", "topk", "num_experts"]
    out = {}
    kinds = {raw: (fmt, fmt) for raw, fmt in DTYPES.items()} | {k: (k, f) for k, f in MOE_STORAGE_RUNS.items()}
    for raw, (key, fmt) in kinds.items():
        d = df[df.moe_dtype == raw]
        # the gated CUTLASS grouped GEMM where measured (A100: the plain torch flow; block-scaled FP8 on
        # Blackwell: DeepGEMM, TensorRT-LLM's kernel for it there)
        srcs = [s for s in ("moe_torch_flow_cutlass", "moe_torch_flow", "deepgemm") if (d.kernel_source == s).any()]
        if fmt not in hw.peak_flops_per_s or not srcs:
            continue
        d = d[d.kernel_source == srcs[0]]
        if len(d) < 50:
            continue
        d = median_rows(d, ["num_tokens", *keys])
        base = out.get(fmt) if key != fmt else None
        fixed = {i: from_coef(base["coef"])[i] for i in MEMORY_TERMS} if base else None
        out[key] = run_fit(
            "moe",
            d,
            lambda x, f=fmt, r=MOE_FEATURE[routing]: COST["moe"](
                x.num_tokens, x.hidden_size, x.inter_size, x.topk, x.num_experts, f, r
            ),
            keys,
            hw.peak(fmt),
            bw(hw),
            f"{rel} ({srcs[0]}, {MOE_ROWS[routing]}, tp=ep=1)",
            hw.name,
            key,
            fixed,
        )
    out |= weight_only_moe_fits(root, sysname, ver, hw, files)
    return {"moe": out} if out else {}


# 4-bit experts dequantised into a bf16 grouped GEMM (MOE_WEIGHT_ONLY; Hopper: GPT-OSS's MXFP4 path, kernel
# ``moe_torch_flow``), fitted like the other MoE classes on the unsplit (moe_tp = ep = 1) rows. Its tables hold
# one or two expert shapes there (gpt-oss's, 32 or 128 experts), so every 5th distinct token count is held out.
# The kernel has a floor per layer that no split lowers (H200, 1 token: 79 µs unsplit, 71-75 µs at EP 2-128):
# its per-kernel time t0 is held at that floor, the median time of the 1-token rows over every split, and the
# other terms are fitted.
WEIGHT_ONLY_INIT = [0.6, 1.2, 1.0, 6.0, 1.0, 0.7, 7.0, 1.0, 60.0]


def weight_only_moe_fits(root, sysname, ver, hw, files):
    rel = f"{sysname}/moe/trtllm/{ver}/moe_perf.parquet"
    df = read_table(root, rel, files)
    out = {}
    for key, runs in MOE_WEIGHT_ONLY.items():
        if df is None or runs not in hw.peak_flops_per_s or "fp4" in hw.peak_flops_per_s:
            continue
        routing = MOE_ROUTING[0]
        d = df[(df.moe_dtype == key) & (df.distribution == MOE_ROWS[routing]) & (df.kernel_source == "moe_torch_flow")]
        floor_us = float(d[(d.moe_tp_size == 1) & (d.num_tokens == 1)].latency.median()) * 1e3
        d = d[(d.moe_tp_size == 1) & (d.moe_ep_size == 1)]
        if len(d) < 20:
            continue
        d = median_rows(d, ["num_tokens", "hidden_size", "inter_size", "topk", "num_experts"])

        def feats(x, k=key, r=routing):
            # the rows' routing gives the experts hit (balanced: min(E, T·k); H200, E = 32, 8-64 tokens of top-4:
            # 201-207 µs, flat once every expert is hit)
            return COST["moe"](x.num_tokens, x.hidden_size, x.inter_size, x.topk, x.num_experts, k, r)

        out[key] = run_fit(
            "moe",
            d,
            feats,
            ["num_tokens"],
            hw.peak(runs),
            bw(hw),
            f"{rel} (moe_torch_flow, {MOE_ROWS[routing]}, tp=ep=1)",
            hw.name,
            key,
            fixed={8: floor_us},
            init=WEIGHT_ONLY_INIT,
        )
    return out


def alpha_beta(sizes, t):
    """Fit t = α + bytes/β by least squares on log t; returns (α s, β bytes/s)."""

    def resid(th):
        return np.log((th[0] * 1e-6 + sizes / (th[1] * 1e9)) / t)

    r = least_squares(resid, [5.0, 100.0], bounds=([0, 0.01], [1e4, 1e5]))
    return r.x[0] * 1e-6, r.x[1] * 1e9


def comm_group(d, rel, size_bytes):
    d = d.sort_values("message_size").reset_index(drop=True)
    held = np.asarray(d.index % HOLD_EVERY == HOLD_EVERY - 1)
    s = d.message_size.to_numpy(float) * size_bytes
    t = d.latency.to_numpy() * 1e-3
    a, b = alpha_beta(s[~held], t[~held])
    e = (a + s / b) / t - 1
    return {
        "coef": [float(f"{a:.5g}"), float(f"{b:.5g}")],
        "table": rel,
        "rows_fit": int((~held).sum()),
        "rows_held_out": int(held.sum()),
        "fit": summary(e[~held]),
        "held_out": summary(e[held]),
    }


def latest(path: Path) -> Path | None:
    vs = (
        sorted(path.iterdir(), key=lambda p: [int(x) if x.isdigit() else x for x in p.name.split(".")])
        if path.exists()
        else []
    )
    return vs[-1] if vs else None


def comm_fits(root, sysname, files):
    out = {}
    nccl = latest(root / sysname / "comm" / "nccl")
    if nccl is not None:
        rel = str((nccl / "nccl_perf.parquet").relative_to(root))
        df = pd.read_parquet(root / rel)
        files[rel] = sha256(root / rel)
        for op in ("all_reduce", "all_gather"):
            d = df[(df.op_name == op) & (df.nccl_dtype == "half")]
            out[op] = {str(g): comm_group(x, rel, 2) for g, x in d.groupby("num_gpus")}
    tr = root / sysname / "comm" / "trtllm"
    vers = [p for p in (sorted(tr.iterdir()) if tr.exists() else []) if (p / "custom_allreduce_perf.parquet").exists()]
    if vers:
        rel = str((vers[-1] / "custom_allreduce_perf.parquet").relative_to(root))
        df = pd.read_parquet(root / rel)
        files[rel] = sha256(root / rel)
        d = df[df.allreduce_dtype == "bfloat16"]
        out["custom_all_reduce"] = {str(g): comm_group(x, rel, 2) for g, x in d.groupby("num_gpus")}
    return {k: v for k, v in out.items() if v}


def fit_system(root: Path, sysname: str, name: str, ver: str, only: tuple[str, ...] = ()):
    """(fits, table sha256s, fixture rows) of one system (run in a worker process); ``only``: the groups to
    fit (``gemm``, ``attention``, ``moe``, ``comm``; empty: all)."""
    hw = hardware.get(name)
    FIXTURE.clear()  # a worker process fits several systems in turn
    files: dict[str, str] = {}
    dev = {"aiconfigurator_system": sysname}
    if not only or "gemm" in only:
        dev["gemm"] = gemm_fits(root, sysname, ver, hw, files)
    if not only or "attention" in only:
        dev.update(attention_fits(root, sysname, ver, hw, files))
    if not only or "moe" in only:
        dev.update(moe_fits(root, sysname, ver, hw, files))
    if not only or "mla" in only:
        dev.update(mla_fits(root, sysname, ver, hw, files))
    if not only or "comm" in only:
        dev.update(comm_fits(root, sysname, files))
    held = {c: {f: v["held_out"] for f, v in x.items()} for c, x in dev.items() if isinstance(x, dict)}
    print(name, json.dumps(held), file=sys.stderr, flush=True)
    return dev, files, list(FIXTURE)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="the unzipped aiconfigurator-core wheel")
    ap.add_argument("--out", type=Path, default=Path("src/llmath/data/efficiency_fit.json"))
    ap.add_argument("--fixture", type=Path, default=Path("tests/data/efficiency_kernels.json"))
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (one system each)")
    ap.add_argument("--only", nargs="*", default=[], choices=GROUPS, help="refit these groups, keep the others")
    ap.add_argument("--moe-routing", choices=sorted(MOE_ROWS), default="balanced", help="the MoE rows fitted")
    a = ap.parse_args(argv)
    MOE_ROUTING[0] = a.moe_routing  # read by the forked workers
    root = a.unpacked / "aiconfigurator_core" / "systems" / "data"
    only = tuple(a.only)
    with Pool(a.jobs) as pool:
        results = pool.starmap(fit_system, [(root, s, name, ver, only) for s, (name, ver) in SYSTEMS.items()])
    old = json.loads(a.out.read_text()) if a.out.exists() else {}
    files = {k: v for _, f, _ in results for k, v in f.items()}
    devices = {name: dev for (name, *_), (dev, _, _) in zip(SYSTEMS.values(), results, strict=True)}
    FIXTURE[:] = [row for _, _, fx in results for row in fx]
    if only:  # keep the other groups' fits, table hashes and fixture rows
        files = {**old["provenance"]["files_sha256"], **files}
        devices = {n: {**old["devices"].get(n, {}), **d} for n, d in devices.items()}
        refit = {c for g in only for c in GROUP_CLASSES[g]}
        kept = json.loads(a.fixture.read_text())["rows"] if a.fixture.exists() else []
        FIXTURE[:] = [r for r in kept if r["class"] not in refit] + FIXTURE
    doc = {
        "provenance": {
            "package": PACKAGE,
            "version": VERSION,
            "license": "Apache-2.0",
            "source": f"https://pypi.org/project/{PACKAGE}/{VERSION}/",
            "tables": "aiconfigurator_core/systems/data/<system>/... (TensorRT-LLM kernels; NCCL; latency in ms)",
            "files_sha256": dict(sorted(files.items())),
            "fit_date": dt.date.today().isoformat(),
            "script": "scripts/fit_efficiency.py",
            "roofline_denominator": "llmath src/llmath/data/hardware.json dense datasheet peaks and bandwidth",
            "held_out": f"every {HOLD_EVERY}th distinct weight/head shape (collectives: message size)",
            "error": "predicted / measured kernel time - 1",
        },
        **{k: old[k] for k in ("arch", "arch_reference", "arch_order", "arch_source") if k in old},
        "devices": devices,
        **{k: old[k] for k in OTHER_SCRIPTS_FITS if k in old},
    }
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    fixture = {
        "source": f"{PACKAGE} {VERSION} (Apache-2.0), https://pypi.org/project/{PACKAGE}/{VERSION}/",
        "what": "raw measured rows (latency in ms) of held-out shapes: table = path under "
        "aiconfigurator_core/systems/data, row = parquet row number; written by scripts/fit_efficiency.py",
        "rows": FIXTURE,
    }
    a.fixture.parent.mkdir(parents=True, exist_ok=True)
    a.fixture.write_text(json.dumps(fixture, indent=1) + "\n")


if __name__ == "__main__":
    main()
