"""Fit each engine's own decode-attention kernel over an fp8 KV cache on Hopper to aiconfigurator-core's tables.

    PYTHONPATH=src eff-data/venv/bin/python scripts/fit_engine_attention.py eff-data/unpacked

Why: the ``attn_decode`` fits are TensorRT-LLM's kernel (``torch_flow``), which reads an fp8 KV cache in about
0.6-0.7x the bf16 cache's time on H100 and H200. vLLM's and SGLang's decode kernel there is FlashAttention-3
(``vllm_flash_attn_fa3``, SGLang ``fa3``), and their own tables time it over an fp8 cache at the bf16 cache's
time or longer (median fp8 / bf16 over rows where bf16 takes more than 50 µs: vLLM 0.24.0 0.85 on H100, 0.96 on
H200; SGLang 0.5.14 0.85 and 0.97). So per engine and device, the ``attn_decode`` form of
``llmath.hardware.efficiency_fit`` is fitted to that engine's fp8-KV rows (``window_size = 0``, one row per
distinct (batch, step, heads, KV heads, head dim), the median of repeats; every 5th distinct (heads, KV heads,
head dim) held out), as ``scripts/fit_efficiency.py`` fits TensorRT-LLM's. Writes ``engine_attn_decode`` into
``data/efficiency_fit.json`` with the held-out errors and the tables' sha256. Per-kernel tables only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from fit_efficiency import PACKAGE, VERSION, attn_feats, median_rows, run_fit, sha256

from llmath.hardware import get as get_hardware

OUT = Path(__file__).resolve().parent.parent / "src" / "llmath" / "data" / "efficiency_fit.json"
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200"}
# engine -> (table version, kernel_source): the FlashAttention-3 decode kernel each serves with on Hopper
ENGINES = {"vllm": ("0.24.0", "vllm_flash_attn_fa3"), "sglang": ("0.5.14", "fa3")}
KEYS = ["num_heads", "num_key_value_heads", "head_dim"]


def fit_engine(root: Path, sysname: str, name: str, engine: str) -> dict | None:
    version, kernel = ENGINES[engine]
    path = root / sysname / "attention" / engine / version / "generation_attention_perf.parquet"
    if not path.exists():
        return None
    df = pd.read_parquet(path)
    df = df[(df.kernel_source == kernel) & (df.kv_cache_dtype == "fp8")]
    if "window_size" in df:
        df = df[df.window_size == 0]
    if len(df) < 50:
        return None
    hw = get_hardware(name)
    d = median_rows(df, ["batch_size", "isl", "step", *KEYS])
    rel = str(path.relative_to(root))
    got = run_fit(
        "attn_decode",
        d,
        lambda x: attn_feats(x, "fp8", "attn_decode"),
        KEYS,
        hw.vector_peak,
        hw.memory_bandwidth_bytes_per_s,
        f"{rel} ({kernel}, kv fp8)",
        name,
        "fp8",
    )
    return got | {"sha256": sha256(path)}


def main(argv=None) -> None:
    root = Path((argv or sys.argv[1:])[0]) / "aiconfigurator_core" / "systems" / "data"
    data = json.loads(OUT.read_text())
    devices: dict = {}
    for sysname, name in SYSTEMS.items():
        for engine in ENGINES:
            got = fit_engine(root, sysname, name, engine)
            if got is None:
                continue
            devices.setdefault(name, {}).setdefault(engine, {})["fp8"] = got
            print(f"{name} {engine}: held-out {got['held_out']}, coef {got['coef']}")
    data["engine_attn_decode"] = {
        "package": f"{PACKAGE} {VERSION}",
        "form": "attn_decode of llmath.hardware.efficiency_fit, KV cache fp8",
        "rule": "generation_attention_perf, the engine's FlashAttention-3 kernel, kv_cache_dtype fp8, window 0; "
        "median of repeats per shape; every 5th (heads, KV heads, head dim) held out",
        "devices": devices,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
