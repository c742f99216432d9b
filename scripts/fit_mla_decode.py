"""Fit TensorRT-LLM's MLA decode kernel on Hopper to its own per-kernel table (aiconfigurator-core).

    PYTHONPATH=src eff-data/venv/bin/python scripts/fit_mla_decode.py eff-data/unpacked

Why: llmath times DeepSeek-V3-style absorbed attention in decode (``attn.flash_mla``) at the roofline's scalar
fractions, with an fp8 cache read at the memory fraction and the products at the fp8 rate. TensorRT-LLM 1.3.0rc20's
H200 and H100 tables time that kernel (``mla/trtllm/1.3.0rc20/generation_mla_perf.parquet``) at about twice that:
over an fp8 cache it computes at about the bf16 cache's rate (the products run in 16 bit) and streams the cache at
about half the bandwidth (H200, batch 32, context 8,191: 67.5 µs at 16 heads, 125.1 µs at 128, where llmath took
40 and 65). So per device and KV format, the ``attn_decode`` form of ``llmath.hardware.efficiency_fit`` (features of
:func:`~llmath.hardware.efficiency_fit.mla_decode_cost`, latent 512 + rope 64, compute against the dense bf16
peak) is fitted with its context and bytes saturations held at 1 (h2 = 10⁻³, hm = 1 byte, p2 = pm = 4): its
fractions follow the query rows (batch × heads) alone, so llmath's closed-form decode sums stay exact. One row per
(heads, batch, step), the median of repeats; every 5th distinct (heads, batch) held out. Writes
``engine_mla_decode`` into ``data/efficiency_fit.json`` with the held-out errors and the tables' sha256.
Per-kernel tables only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from fit_efficiency import PACKAGE, VERSION, median_rows, run_fit, sha256

from llmath.hardware import get as get_hardware
from llmath.hardware.efficiency_fit import mla_decode_cost

OUT = Path(__file__).resolve().parent.parent / "src" / "llmath" / "data" / "efficiency_fit.json"
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200"}
ENGINES = {"trtllm": "1.3.0rc20"}
KV = {"fp8": "fp8", "bfloat16": "bf16"}
LATENT, ROPE = 512, 64  # DeepSeek-V3's kv_lora_rank and qk_rope_head_dim, the shape the table times
# fit space of fit_efficiency.to_coef: [c, log10 h1, p1, log10 h2, p2, mem, log10 hm, pm, t0 µs]
HELD = {3: -3.0, 4: 4.0, 6: 0.0, 7: 4.0}
START = [0.6, 2.5, 1.0, -3.0, 4.0, 0.6, 0.0, 4.0, 10.0]


def fit_engine(root: Path, sysname: str, name: str, engine: str, kv: str) -> dict | None:
    version = ENGINES[engine]
    path = root / sysname / "mla" / engine / version / "generation_mla_perf.parquet"
    if not path.exists():
        return None
    df = pd.read_parquet(path)
    df = df[df.kv_cache_dtype == kv]
    if len(df) < 50:
        return None
    hw = get_hardware(name)
    d = median_rows(df, ["num_heads", "batch_size", "step"])
    rel = str(path.relative_to(root))
    fmt = KV[kv]
    got = run_fit(
        "attn_decode",
        d,
        lambda x: mla_decode_cost(x.batch_size, x.step, x.num_heads, LATENT, ROPE, fmt),
        ["num_heads", "batch_size"],
        hw.peak("bf16"),
        hw.memory_bandwidth_bytes_per_s,
        f"{rel} (kv {kv})",
        fixed=HELD,
        init=START,
    )
    return got | {"sha256": sha256(path)}


def main(argv=None) -> None:
    root = Path((argv or sys.argv[1:])[0]) / "aiconfigurator_core" / "systems" / "data"
    data = json.loads(OUT.read_text())
    devices: dict = {}
    for sysname, name in SYSTEMS.items():
        for engine in ENGINES:
            for kv, fmt in KV.items():
                got = fit_engine(root, sysname, name, engine, kv)
                if got is None:
                    continue
                devices.setdefault(name, {}).setdefault(engine, {})[fmt] = got
                print(f"{name} {engine} {fmt}: fit {got['fit']}, held-out {got['held_out']}, coef {got['coef']}")
    data["engine_mla_decode"] = {
        "package": f"{PACKAGE} {VERSION}",
        "form": "attn_decode of llmath.hardware.efficiency_fit with h2 = 1e-3, p2 = 4, hm = 1, pm = 4 held "
        "(fractions by query rows B·H alone); features mla_decode_cost (latent 512, rope 64); compute at the bf16 peak",
        "rule": "generation_mla_perf, kv_cache_dtype as keyed; median of repeats per (heads, batch, step); "
        "every 5th (heads, batch) held out",
        "devices": devices,
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
