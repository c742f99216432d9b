"""Fit: the grouped-expert kernels InferenceX's launchers pick, each to its engine's own per-kernel table.

    PYTHONPATH=src:scripts eff-data/venv/bin/python scripts/fit_launcher_moe.py eff-data/unpacked [--write]

vLLM chooses its MXFP4 MoE backend in ``vllm/model_executor/layers/quantization/mxfp4.py`` (``get_mxfp4_backend``,
vllm-project/vllm 007d50058a06) and, after the backend refactor, ``vllm/model_executor/layers/fused_moe/oracle/
mxfp4.py`` (``select_mxfp4_moe_backend``, 001eda31e3d0); environment variables pick among them:

* ``marlin`` (Hopper, ``VLLM_MXFP4_USE_MARLIN=1``: InferenceX's gpt-oss H100 and H200 launchers from 4e52ed4c6):
  weight-only, MXFP4 dequantised into a bf16 MMA. vLLM 0.24.0's tables time it
  (``vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu``) at one expert shape only (hidden 3584,
  inter 3072, 896 experts, top-16; moe-TP 1-16: hidden · inter / moe-TP 0.69-11 M, gpt-oss's 8.3 M unsplit).
* ``flashinfer_mxfp8`` (datacenter Blackwell, ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``: every InferenceX gpt-oss
  B200 vLLM launcher): FlashInfer's TensorRT-LLM-generated MoE with activations quantised to MXFP8, so its MMA
  runs at the fp8 rate, not fp4's. vLLM 0.24.0's B200 table times it
  (``vllm_mxfp4moe_flashinfer_trtllm_mxfp4_mxfp8_trtllmmxfp4expertsmodular``) at two shapes (hidden 4096, inter
  2048, 256 experts, top-6; hidden 7168, inter 3072, 384 experts, top-6; moe-TP 1-32); SGLang 0.5.14's B200 table
  times the same FlashInfer kernel at gpt-oss's shape (``sglang_flashinfer_trtllm_moe``), a check across shapes.
* ``trtllm_gen_mxfp8`` (datacenter Blackwell, TensorRT-LLM's ``moe_config.backend: TRTLLM``: every InferenceX
  gpt-oss B200 TensorRT-LLM script): ``ModelConfig.get_mxfp4_quant_algo`` runs MXFP4 experts as W4A8_MXFP4_MXFP8 from
  sm100 (NVIDIA/TensorRT-LLM ``tensorrt_llm/_torch/model_config.py``). TensorRT-LLM 1.3.0rc20's B200 table times it
  (``moe_torch_flow``, ``w4a8_mxfp4_mxfp8``) at gpt-oss's shape (32 and 128 experts) and two others, moe-TP 1 only.
* ``triton_fp8_block`` (B200, ``VLLM_USE_FLASHINFER_MOE_FP8=0`` with ``VLLM_MOE_USE_DEEP_GEMM=0``: InferenceX's
  MiniMax-M2.5 FP8 B200 launcher from f342df18e to bddbf403): vLLM's Triton fused MoE over block-scaled FP8
  experts. vLLM 0.19.0's B200 table times its fused MoE (``vllm_fused_moe``, ``fp8_block``) at eleven expert shapes,
  MiniMax-M2.5's (hidden 3072, inter 1536, 256 experts, top-8) among them, moe-TP 1-32.

The ``moe`` form of ``llmath.hardware.efficiency_fit`` is fitted per device and kernel to the ``balanced``,
``moe_ep_size = 1`` rows (one row per (tokens, moe-TP, shape), the median of repeats), compute at the peak of the
format the kernel's MMA runs in, MXFP4 weights (17 bytes per 32; FP8 1 byte), the experts hit as the balanced
routing spreads them (min(E, T·k)); every 5th distinct token count is held out. Prints each fit, its held-out error
and its time for one MoE layer of the model its launcher serves (gpt-oss-120b: hidden 2880, inter 2880 / moe-TP, 128
experts, top-4; MiniMax-M2.5 for the Triton kernel) beside other tables' rows at that shape. With ``--write`` it
stores the fits in ``src/llmath/data/efficiency_fit.json`` under ``engine_moe_kernel``,
which llmath applies to prefill passes where a launcher picks the kernel (docs/efficiency.md, "MoE kernels as
InferenceX's vLLM launchers pick them"). Per-kernel tables only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
from fit_efficiency import WEIGHT_ONLY_INIT, median_rows, run_fit

from llmath.hardware import get as get_hardware
from llmath.hardware.efficiency_fit import COST, model_time

# kernel name (EngineConfig.moe_kernel) -> systems, table, kernel_source, format key, the peak it computes at
KERNELS = {
    "marlin": {
        "systems": {"h100_sxm": "h100-sxm", "h200_sxm": "h200"},
        "table": "vllm/0.24.0",
        "kernel": "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu",
        "key": "w4a16_mxfp4",
        "peak": "bf16",
    },
    "flashinfer_mxfp8": {
        "systems": {"b200_sxm": "b200"},
        "table": "vllm/0.24.0",
        "kernel": "vllm_mxfp4moe_flashinfer_trtllm_mxfp4_mxfp8_trtllmmxfp4expertsmodular",
        "key": "w4a8_mxfp4_mxfp8",
        "peak": "fp8",
    },
    "trtllm_gen_mxfp8": {
        "systems": {"b200_sxm": "b200"},
        "table": "trtllm/1.3.0rc20",
        "kernel": "moe_torch_flow",
        "key": "w4a8_mxfp4_mxfp8",
        "peak": "fp8",
    },
    "trtllm_cutlass_nvfp4": {
        "systems": {"b200_sxm": "b200"},
        "table": "trtllm/1.3.0rc20",
        "kernel": "moe_torch_flow_cutlass",
        "key": "nvfp4",
        "peak": "fp4",
    },
    "trtllm_deepgemm_fp8_block": {
        "systems": {"b200_sxm": "b200"},
        "table": "trtllm/1.3.0rc20",
        "kernel": "deepgemm",
        "key": "fp8_block",
        "peak": "fp8",
    },
    "triton_fp8_block": {
        "systems": {"b200_sxm": "b200"},
        "table": "vllm/0.19.0",
        "kernel": "vllm_fused_moe",
        "key": "fp8_block",
        "peak": "fp8",
    },
    # vLLM's own NVFP4 MoE on B200 (ENGINE_NVFP4_MOE of llmath.hardware.efficiency_fit): FlashInfer's
    # TensorRT-LLM-generated kernel, first in vLLM's NVFP4 MoE oracle, timed by vLLM 0.24.0's collector (0.19.0's
    # rows of it at MiniMax-M2.5's shape within 3%)
    "vllm_flashinfer_nvfp4": {
        "systems": {"b200_sxm": "b200"},
        "table": "vllm/0.24.0",
        "kernel": "vllm_compressedtensorsw4a4nvfp4moe_flashinfer_trtllm_trtllmnvfp4expertsmonolithic",
        "key": "nvfp4",
        "peak": "fp4",
    },
    # TensorRT-LLM's TRTLLM MoE backend over NVFP4 experts (TRTLLMGenFusedMoE: the TensorRT-LLM-generated
    # block-scale kernels), which FlashInfer ships as trtllm_fp4_block_scale_moe; TensorRT-LLM's own table times only
    # its CUTLASS NVFP4 MoE, vLLM 0.19.0's times FlashInfer's at DeepSeek-R1's expert shape among ten
    "trtllm_gen_nvfp4": {
        "systems": {"b200_sxm": "b200"},
        "table": "vllm/0.19.0",
        "kernel": "vllm_flashinfer_trtllm_moe_fp4",
        "key": "nvfp4",
        "peak": "fp4",
    },
    # each engine's own block-FP8 MoE where no launcher variable picks another (ENGINE_FP8_BLOCK_MOE of
    # llmath.hardware.efficiency_fit): rows only where the stated experts' weights could stream (PHYSICAL)
    "trtllm_gen_fp8_block": {
        "systems": {"b200_sxm": "b200"},
        "table": "vllm/0.24.0",
        "kernel": "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic",
        "key": "fp8_block",
        "peak": "fp8",
        "physical": True,
    },
    "vllm_triton_fp8_block": {
        "systems": {"h100_sxm": "h100-sxm", "h200_sxm": "h200"},
        "table": "vllm/0.24.0",
        "kernel": "vllm_fp8moe_triton_tritonexperts",
        "key": "fp8_block",
        "peak": "fp8",
        "physical": True,
    },
    "sglang_flashinfer_fp8_block": {
        "systems": {"b200_sxm": "b200"},
        "table": "sglang/0.5.14",
        "kernel": "sglang_flashinfer_trtllm_moe",
        "key": "fp8_block",
        "peak": "fp8",
        "physical": True,
    },
    # SGLang's own NVFP4 MoE on Blackwell (ENGINE_NVFP4_MOE of llmath.hardware.efficiency_fit): FlashInfer's
    # trtllm_fp4_block_scale_moe, the MoE runner SGLang picks for DeepSeek-V3 and Qwen3 MoE checkpoints in
    # modelopt_fp4 on sm100 (python/sglang/srt/server_args.py, sglang 0.5.9 wheel), timed by SGLang 0.5.14's collector
    "sglang_flashinfer_nvfp4": {
        "systems": {"b200_sxm": "b200"},
        "table": "sglang/0.5.14",
        "kernel": "sglang_flashinfer_trtllm_moe",
        "key": "nvfp4",
        "peak": "fp4",
    },
    "sglang_triton_fp8_block": {
        "systems": {"h100_sxm": "h100-sxm", "h200_sxm": "h200"},
        "table": "sglang/0.5.14",
        "kernel": "sglang_fused_moe_triton",
        "key": "fp8_block",
        "peak": "fp8",
        "physical": True,
    },
}
# gpt-oss-shaped rows of other kernels: (label, table under <system>/moe/, kernel_source, format key)
OTHERS = {
    "marlin": (
        ("vllm triton", "vllm/0.24.0", "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic", "w4a16_mxfp4"),
        ("trtllm", "trtllm/1.3.0rc20", "moe_torch_flow", "w4a16_mxfp4"),
    ),
    "flashinfer_mxfp8": (
        ("sglang flashinfer (same kernel)", "sglang/0.5.14", "sglang_flashinfer_trtllm_moe", "w4a8_mxfp4_mxfp8"),
        ("trtllm", "trtllm/1.3.0rc20", "moe_torch_flow", "w4a8_mxfp4_mxfp8"),
    ),
    "trtllm_gen_mxfp8": (
        ("itself", "trtllm/1.3.0rc20", "moe_torch_flow", "w4a8_mxfp4_mxfp8"),
        (
            "vllm flashinfer (same kernel family)",
            "vllm/0.24.0",
            "vllm_mxfp4moe_flashinfer_trtllm_mxfp4_mxfp8_trtllmmxfp4expertsmodular",
            "w4a8_mxfp4_mxfp8",
        ),
    ),
    "trtllm_cutlass_nvfp4": (
        ("itself", "trtllm/1.3.0rc20", "moe_torch_flow_cutlass", "nvfp4"),
        ("min-latency path", "trtllm/1.3.0rc20", "moe_torch_flow_min_latency", "nvfp4"),
    ),
    "trtllm_deepgemm_fp8_block": (("itself", "trtllm/1.3.0rc20", "deepgemm", "fp8_block"),),
    "vllm_flashinfer_nvfp4": (
        ("itself", "vllm/0.24.0", KERNELS["vllm_flashinfer_nvfp4"]["kernel"], "nvfp4"),
        ("vLLM 0.19.0 (same kernel)", "vllm/0.19.0", "vllm_flashinfer_trtllm_moe_fp4", "nvfp4"),
    ),
    "sglang_flashinfer_nvfp4": (
        ("itself", "sglang/0.5.14", "sglang_flashinfer_trtllm_moe", "nvfp4"),
        ("vLLM 0.24.0 (same kernel)", "vllm/0.24.0", KERNELS["vllm_flashinfer_nvfp4"]["kernel"], "nvfp4"),
    ),
    "triton_fp8_block": (
        ("itself", "vllm/0.19.0", "vllm_fused_moe", "fp8_block"),
        ("trtllm", "trtllm/1.3.0rc20", "moe_torch_flow", "fp8_block"),
    ),
}
for _k, _v in KERNELS.items():
    OTHERS.setdefault(_k, (("itself", _v["table"], _v["kernel"], _v["key"]),))
TOKENS = (1024, 8192)


def features(x, key: str):
    """The ``moe`` cost of one rank's layer: moe-TP splits each expert's intermediate width, all experts held."""
    tp_inter = x.inter_size / x.moe_tp_size
    return COST["moe"](x.num_tokens, x.hidden_size, tp_inter, x.topk, x.num_experts, key, "balanced")


def streamable(df, bandwidth: float):
    """Rows whose balanced routing's experts (min(E, tokens · top-k), each 3 · hidden · inter / moe-TP FP8 bytes)
    could stream in the measured time at the device's memory bandwidth: a faster row hit fewer experts than it
    states (SGLang's and vLLM's B200 FlashInfer rows at DeepSeek-R1's shape reach 1.2-1.7 x the bandwidth)."""
    hit = np.minimum(df.num_experts, df.num_tokens * df.topk)
    weights = hit * 3.0 * df.hidden_size * df.inter_size / df.moe_tp_size
    return weights / (df.latency * 1e-3) <= bandwidth


def fit_kernel(root: Path, sysname: str, name: str, kernel: str) -> dict | None:
    k = KERNELS[kernel]
    path = root / sysname / "moe" / k["table"] / "moe_perf.parquet"
    if not path.exists():
        return None
    df = pd.read_parquet(path)
    df = df[(df.moe_dtype == k["key"]) & (df.kernel_source == k["kernel"]) & (df.distribution == "balanced")]
    df = df[df.moe_ep_size == 1]
    if len(df) < 50:
        return None
    hw = get_hardware(name)
    if k.get("physical"):
        df = df[streamable(df, hw.memory_bandwidth_bytes_per_s)]
    d = median_rows(df, ["num_tokens", "moe_tp_size", "hidden_size", "inter_size", "topk", "num_experts"])
    rel = str(path.relative_to(root))
    return run_fit(
        "moe",
        d,
        lambda x: features(x, k["key"]),
        ["num_tokens"],
        hw.peak(k["peak"]),
        hw.memory_bandwidth_bytes_per_s,
        f"{rel} ({k['kernel']}, balanced, ep=1, moe-TP 1-{int(d.moe_tp_size.max())})",
        name,
        k["key"],
        init=WEIGHT_ONLY_INIT,
    )


# the model whose layer each kernel is checked at: (name, hidden, inter, experts, top-k)
MINIMAX = ("MiniMax-M2.5", 3072, 1536, 256, 8)
DEEPSEEK = ("DeepSeek-R1", 7168, 2048, 256, 8)
CHECK = {
    **{k: MINIMAX for k in KERNELS if KERNELS[k]["key"] == "fp8_block"},
    "trtllm_cutlass_nvfp4": DEEPSEEK,
    "trtllm_deepgemm_fp8_block": DEEPSEEK,
    "trtllm_gen_nvfp4": DEEPSEEK,
    "vllm_flashinfer_nvfp4": MINIMAX,
    "sglang_flashinfer_nvfp4": DEEPSEEK,
}
GPT_OSS = ("gpt-oss", 2880, 2880, 128, 4)


def layer_row(root: Path, sysname: str, table: str, source: str, key: str, shape, tokens: int, tp: int) -> float | None:
    """Measured ms of one MoE layer of ``shape`` (balanced, EP 1) in a table, if it has one."""
    path = root / sysname / "moe" / table / "moe_perf.parquet"
    if not path.exists():
        return None
    df = pd.read_parquet(path)
    _, h, i, e, k = shape
    d = df[(df.moe_dtype == key) & (df.kernel_source == source) & (df.distribution == "balanced")]
    d = d[(d.num_experts == e) & (d.hidden_size == h) & (d.inter_size == i) & (d.topk == k) & (d.moe_ep_size == 1)]
    d = d[(d.num_tokens == tokens) & (d.moe_tp_size == tp)]
    return float(d.latency.median()) if len(d) else None


def layer_line(root: Path, sysname: str, name: str, kernel: str, coef, tokens: int, tp: int) -> str:
    hw, k = get_hardware(name), KERNELS[kernel]
    shape = CHECK.get(kernel, GPT_OSS)
    x = COST["moe"](tokens, shape[1], shape[2] / tp, shape[4], shape[3], k["key"], "balanced")
    fit = float(model_time(coef, *x, hw.peak(k["peak"]), hw.memory_bandwidth_bytes_per_s, 64)) * 1e3
    others = [
        f"{label} {layer_row(root, sysname, t, src, key, shape, tokens, tp) or float('nan'):.3f}"
        for label, t, src, key in OTHERS[kernel]
    ]
    return f"  {shape[0]} layer, {tokens} tokens, moe-TP {tp}: {kernel} fit {fit:.3f} ms; measured " + ", ".join(others)


OUT = Path("src/llmath/data/efficiency_fit.json")


def write_fits(fits: dict[str, dict[str, dict]], out: Path = OUT) -> None:
    """Store the fits (device -> kernel -> fit) under ``engine_moe_kernel`` in ``out``, keeping everything else."""
    doc = json.loads(out.read_text())
    doc["engine_moe_kernel"] = {
        "package": "aiconfigurator-core 0.12.0",
        "form": "moe of llmath.hardware.efficiency_fit; compute at the peak of the format the kernel's MMA runs in "
        "(bf16 for w4a16_mxfp4, fp8 for w4a8_mxfp4_mxfp8 and fp8_block, fp4 for nvfp4), MXFP4, NVFP4 or FP8 weight "
        "bytes",
        "rule": "vLLM moe_perf (0.24.0, its FlashInfer NVFP4 kernel's monolithic rows for vllm_flashinfer_nvfp4; "
        "0.19.0 for triton_fp8_block and trtllm_gen_nvfp4; TensorRT-LLM 1.3.0rc20 for the other trtllm_*), SGLang "
        "moe_perf 0.5.14 (sglang_*), the kernel's own rows, balanced routing, EP 1, every moe-TP split; the engines' "
        "own block-FP8 kernels only on rows whose stated experts could stream at the memory bandwidth; median of "
        "repeats per (tokens, moe-TP, "
        "shape); every 5th distinct token count held out (scripts/fit_launcher_moe.py)",
        "devices": {
            name: {kernel: {KERNELS[kernel]["key"]: fit} for kernel, fit in by_kernel.items()}
            for name, by_kernel in fits.items()
        },
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unpacked", type=Path, help="the unzipped aiconfigurator-core wheel")
    ap.add_argument("--write", action="store_true", help=f"store the fits in {OUT}")
    a = ap.parse_args(argv)
    root = a.unpacked / "aiconfigurator_core" / "systems" / "data"
    fits: dict[str, dict[str, dict]] = {}
    for kernel, k in KERNELS.items():
        for sysname, name in k["systems"].items():
            got = fit_kernel(root, sysname, name, kernel)
            if got is None:
                continue
            print(
                f"{name} {kernel} ({got['rows_fit']} + {got['rows_held_out']} rows): fit {got['fit']}, "
                f"held-out {got['held_out']}, coef {got['coef']}"
            )
            for tokens in TOKENS:
                for tp in (1, 8):
                    print(layer_line(root, sysname, name, kernel, got["coef"], tokens, tp))
            path = root / sysname / "moe" / k["table"] / "moe_perf.parquet"
            fits.setdefault(name, {})[kernel] = {**got, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    if a.write:
        write_fits(fits)


if __name__ == "__main__":
    main()
