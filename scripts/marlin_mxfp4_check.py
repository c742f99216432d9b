"""Fit: vLLM's weight-only MXFP4 MoE kernel on Hopper (Marlin), fitted to its per-kernel table, at gpt-oss's shape.

    PYTHONPATH=src:scripts eff-data/venv/bin/python scripts/marlin_mxfp4_check.py eff-data/unpacked [--write]

Why: on Hopper (no fp4 tensor cores) vLLM runs MXFP4 experts as a weight-only kernel. Its backend choice
(vllm-project/vllm ``vllm/model_executor/layers/quantization/mxfp4.py`` ``get_mxfp4_backend`` at commit
007d50058a06, and ``vllm/model_executor/layers/fused_moe/oracle/mxfp4.py`` ``select_mxfp4_moe_backend`` at
001eda31e3d0) takes Marlin (``MarlinExperts``, ``fused_marlin_moe``) when ``VLLM_MXFP4_USE_MARLIN`` is set and
triton_kernels' ``matmul_ogs`` otherwise; InferenceX's gpt-oss launchers for vLLM on H100 and H200 set
``VLLM_MXFP4_USE_MARLIN=1`` (SemiAnalysisAI/InferenceX ``benchmarks/gptoss_fp4_h100.sh`` at 1fc5d73c,
``benchmarks/gptoss_fp4_h200.sh`` at 16cd9556). vLLM 0.24.0's tables time that Marlin kernel over MXFP4 weights
(``kernel_source = vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu``) at one expert shape
(hidden 3584, inter 3072, 896 experts, top-16), split by moe-TP 1-16: the split gives five expert widths
(hidden · inter / moe-TP from 0.69 M to 11 M; gpt-oss's 2880 × 2880 is 8.3 M unsplit, 1.0 M at moe-TP 8).
Their gpt-oss-shaped ``w4a16_mxfp4`` rows are the triton_kernels backend, which the launchers above do not run.

The ``moe`` form of ``llmath.hardware.efficiency_fit`` is fitted per device to the ``balanced``,
``moe_ep_size = 1`` rows (one row per (tokens, moe-TP), the median of repeats), compute at the bf16 peak, MXFP4
weights (17 bytes per 32), the experts hit counted as the balanced routing spreads them (min(E, T·k)); every
5th distinct token count is held out. Prints the fit, its held-out error, and its time for one gpt-oss-120b MoE
layer (hidden 2880, inter 2880 / moe-TP, 128 experts, top-4) beside the tables' own gpt-oss-shaped rows of the
other weight-only kernels (vLLM's triton_kernels backend, TensorRT-LLM's ``moe_torch_flow``). With ``--write`` it
stores each device's fit in ``src/llmath/data/efficiency_fit.json`` under ``engine_moe_kernel`` (kernel ``marlin``,
format ``w4a16_mxfp4``), which llmath applies where a launcher picks Marlin (docs/efficiency.md, "vLLM's MXFP4 experts
on Hopper"). Per-kernel tables only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pandas as pd
from fit_efficiency import WEIGHT_ONLY_INIT, median_rows, run_fit

from llmath.hardware import get as get_hardware
from llmath.hardware.efficiency_fit import COST, model_time

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200"}
# engine -> (table version, kernel_source) of the weight-only MXFP4 MoE kernel it serves gpt-oss with on Hopper
ENGINES = {"vllm": ("0.24.0", "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu")}
KEY = "w4a16_mxfp4"
# gpt-oss-shaped rows of the other weight-only kernels: (label, table under <system>/moe/, kernel_source)
OTHERS = (
    ("vllm triton", "vllm/0.24.0", "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic"),
    ("trtllm", "trtllm/1.3.0rc20", "moe_torch_flow"),
)
TOKENS = (1024, 8192)


def features(x):
    """The ``moe`` cost of one rank's layer: moe-TP splits each expert's intermediate width, all experts held."""
    tp_inter = x.inter_size / x.moe_tp_size
    return COST["moe"](x.num_tokens, x.hidden_size, tp_inter, x.topk, x.num_experts, KEY, "balanced")


def fit_engine(root: Path, sysname: str, name: str, engine: str) -> dict | None:
    version, kernel = ENGINES[engine]
    path = root / sysname / "moe" / engine / version / "moe_perf.parquet"
    if not path.exists():
        return None
    df = pd.read_parquet(path)
    df = df[(df.moe_dtype == KEY) & (df.kernel_source == kernel) & (df.distribution == "balanced")]
    df = df[df.moe_ep_size == 1]
    if len(df) < 50:
        return None
    hw = get_hardware(name)
    d = median_rows(df, ["num_tokens", "moe_tp_size", "hidden_size", "inter_size", "topk", "num_experts"])
    rel = str(path.relative_to(root))
    got = run_fit(
        "moe",
        d,
        features,
        ["num_tokens"],
        hw.peak("bf16"),
        hw.memory_bandwidth_bytes_per_s,
        f"{rel} ({kernel}, balanced, ep=1, moe-TP 1-16)",
        name,
        KEY,
        init=WEIGHT_ONLY_INIT,
    )
    return got


def gpt_oss_row(root: Path, sysname: str, table: str, kernel: str, tokens: int, tp: int) -> float | None:
    """Measured ms of one gpt-oss-shaped MoE layer (128 experts, balanced, EP 1) in a table, if it has one."""
    df = pd.read_parquet(root / sysname / "moe" / table / "moe_perf.parquet")
    d = df[(df.moe_dtype == KEY) & (df.kernel_source == kernel) & (df.distribution == "balanced")]
    d = d[(d.num_experts == 128) & (d.hidden_size == 2880) & (d.moe_ep_size == 1)]
    d = d[(d.num_tokens == tokens) & (d.moe_tp_size == tp)]
    return float(d.latency.median()) if len(d) else None


def gpt_oss_line(root: Path, sysname: str, name: str, coef, tokens: int, tp: int) -> str:
    hw = get_hardware(name)
    x = COST["moe"](tokens, 2880, 2880 / tp, 4, 128, KEY, "balanced")
    fit = float(model_time(coef, *x, hw.peak("bf16"), hw.memory_bandwidth_bytes_per_s, 64)) * 1e3
    others = [f"{label} {gpt_oss_row(root, sysname, t, k, tokens, tp) or float('nan'):.3f}" for label, t, k in OTHERS]
    return f"  gpt-oss layer, {tokens} tokens, moe-TP {tp}: Marlin fit {fit:.3f} ms; measured " + ", ".join(others)


OUT = Path("src/llmath/data/efficiency_fit.json")


def write_fits(fits: dict[str, dict], out: Path = OUT) -> None:
    """Store the fits under ``engine_moe_kernel`` in ``out``, keeping everything else."""
    doc = json.loads(out.read_text())
    doc["engine_moe_kernel"] = {
        "package": "aiconfigurator-core 0.12.0",
        "form": "moe of llmath.hardware.efficiency_fit, compute at the bf16 peak, MXFP4 weight bytes",
        "rule": "vLLM 0.24.0 moe_perf, the Marlin MXFP4 kernel, balanced routing, EP 1, moe-TP 1-16; median of "
        "repeats per (tokens, moe-TP); every 5th distinct token count held out (scripts/marlin_mxfp4_check.py)",
        "devices": {name: {"marlin": {KEY: fit}} for name, fit in fits.items()},
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="the unzipped aiconfigurator-core wheel")
    ap.add_argument("--write", action="store_true", help=f"store the fits in {OUT}")
    a = ap.parse_args(argv)
    root = a.unpacked / "aiconfigurator_core" / "systems" / "data"
    fits: dict[str, dict] = {}
    for sysname, name in SYSTEMS.items():
        for engine in ENGINES:
            got = fit_engine(root, sysname, name, engine)
            if got is None:
                continue
            print(
                f"{name} {engine} ({got['rows_fit']} + {got['rows_held_out']} rows): fit {got['fit']}, "
                f"held-out {got['held_out']}, coef {got['coef']}"
            )
            for tokens in TOKENS:
                for tp in (1, 8):
                    print(gpt_oss_line(root, sysname, name, got["coef"], tokens, tp))
            path = root / sysname / "moe" / engine / ENGINES[engine][0] / "moe_perf.parquet"
            fits[name] = {**got, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    if a.write:
        write_fits(fits)


if __name__ == "__main__":
    main()
