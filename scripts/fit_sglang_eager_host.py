"""SGLang's host time per eager kernel, by device, from aiconfigurator's module-level SGLang timings.

    PYTHONPATH=src:scripts <python with pandas> scripts/fit_sglang_eager_host.py eff-data/unpacked

aiconfigurator's SGLang collector (ai-dynamo/aiconfigurator ``collector/sglang/collect_wideep_attn.py``,
``run_attention_torch``, as of 57378df40^) times one DeepSeek-V3 attention module (``model.layers[i].self_attn``
of SGLang's ``DeepseekV2ForCausalLM``) the way SGLang runs a prefill: eagerly, a CUDA event recorded before and
after the Python call, synchronised after every run. Its tables (aiconfigurator-core 0.12.0,
``systems/data/<system>/mla/sglang/<version>/wideep_context_mla_perf.parquet``) give that time by prompt length,
batch and local heads. With one prompt of up to 512 tokens the time does not move with the tokens (B200: 0.53 ms
from 1 to 1,024 tokens at 16 heads; it grows only from 2,048): the module is bound by the host's launches, not
by the GPU's work. The median of those rows (batch 1, 1-512 tokens, every head count, backend and version the
system has) over the kernels SGLang launches for that module (:func:`attention_launches`) is the host time per
launch, ``eager_host_per_kernel_s``.

Prints, per system, the rows, the median module time, the ratio of the 512-token to the 1-token time (the
flatness) and the host time per kernel, as SGLang's ``eager_host_per_kernel_s.by_device`` in
``src/llmath/data/engines.json`` carries it (docs/serving-runs.md, "SGLang: the host time per eager kernel by
device"). Module-level kernel timings only; no serving measurement enters.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from llmath import ops
from llmath.model import registry

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200",
           "gb300": "gb300"}  # fmt: skip
FLAT_TOKENS = 512  # the longest prompt taken: the module's time there is within a few % of one token's


def attention_launches() -> float:
    """Kernels SGLang launches for one DeepSeek-V3 attention module: the ``launches`` of its prefill table's
    ``attn.*`` entries of one layer (the projections, the two latent norms, the rotary embedding and the attention
    kernel; the compressed KV projection runs inside the query down-projection's launch, ops/launches.py)."""
    t = ops.table(registry.spec("deepseek-v3"), "prefill")
    per_name = {o.name: o.launches for o in t.ops if o.name.startswith("attn.")}
    return float(sum(per_name.values()))


def module_rows(root: Path, system: str) -> pd.DataFrame:
    """The system's batch-1 rows of every SGLang version's attention-module table."""
    tables = sorted((root / system / "mla" / "sglang").glob("*/wideep_context_mla_perf.parquet"))
    frames = [pd.read_parquet(p) for p in tables]
    if not frames:
        return pd.DataFrame()
    d = pd.concat(frames)
    return d[d.batch_size == 1]


def fit(root: Path) -> dict[str, dict[str, float]]:
    """Per llmath device: rows used, median module ms, 512-token / 1-token ratio, host seconds per kernel."""
    kernels = attention_launches()
    out = {}
    for system, name in SYSTEMS.items():
        d = module_rows(root, system)
        if d.empty:
            continue
        flat = d[d.isl <= FLAT_TOKENS]
        ms = float(flat.latency.median())
        ratio = float(d[d.isl == FLAT_TOKENS].latency.median() / d[d.isl == 1].latency.median())
        out[name] = {"rows": len(flat), "module_ms": ms, "flatness": ratio, "per_kernel_s": ms / 1e3 / kernels}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path, help="aiconfigurator-core's systems/data directory or the unpacked wheel")
    args = ap.parse_args()
    root = args.root if (args.root / "b200_sxm").is_dir() else args.root / "aiconfigurator_core" / "systems" / "data"
    print(f"kernels launched per attention module: {attention_launches():g}")
    for name, r in fit(root).items():
        print(f"{name:9} {r['rows']:4d} rows  module {r['module_ms']:.3f} ms  512/1 tokens {r['flatness']:.2f}  "
              f"{r['per_kernel_s'] * 1e6:.1f} us per kernel")  # fmt: skip


if __name__ == "__main__":
    main()
