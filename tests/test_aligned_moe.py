"""Grouped MoE kernels that compute a worst-case padded row count (llmath.hardware.aligned_moe): vLLM 0.12.0's
DeepGEMM contiguous MoE on Hopper, as the collection's vLLM Qwen3-235B-A22B-FP8 rows ran it."""

from __future__ import annotations

import csv
from dataclasses import replace

import numpy as np
import pytest
from helpers import SERVING_RUNS_HEADER

import llmath
from llmath import hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.aligned_moe import aligned_rows
from llmath.hardware.fitted_columns import columns
from llmath.hardware.kernels import launcher_moe_kernel
from llmath.hardware.roofline import efficiency, op_times, run_format
from llmath.measure.collection_harness import generator_moe_kernel
from llmath.model.dtypes import Precision
from llmath.ops import Scenario, table

P8 = Precision.uniform("fp8")


def test_aligned_rows_follow_vllms_compute_aligned_m():
    # vllm 0.12.0 fused_moe/deep_gemm_utils.py compute_aligned_M without host counts:
    # round_up(M·k + E_local·(128 − 1), 128). Qwen3-235B-A22B: k = 8 of E = 128 experts.
    # M = 16: 128 + 16,256 = 16,384 (already a multiple of 128); M = 4: 32 + 16,256 = 16,288 -> 128 blocks = 16,384
    assert aligned_rows(16, 8, 128, 128) == 16384
    assert aligned_rows(4, 8, 128, 128) == 16384
    # EP 2 (64 local experts): 128 + 64·127 = 8,256 -> 65 blocks = 8,320; a 1,000-token prefill at TP:
    # 8,000 + 16,256 = 24,256 -> 190 blocks = 24,320
    assert aligned_rows(16, 8, 64, 128) == 8320
    assert aligned_rows(1000, 8, 128, 128) == 24320


def _row(**kw) -> dict[str, str]:
    r = {"backend": "vllm", "backend_version": "0.12.0", "system": "h200_sxm", "model_path": "Qwen/Qwen3-235B-A22B-FP8",
         "moe_tp_size": "2", "moe_ep_size": "1"}  # fmt: skip
    r.update({k: str(v) for k, v in kw.items()})
    return r


def test_the_collections_vllm_012_block_fp8_rows_run_deepgemm_moe():
    # get_fp8_moe_backend (vllm 0.12.0 quantization/fp8.py) disables DeepGEMM MoE by default at a MoE TP >= 8
    kernel = {"moe_kernel": "vllm_deepgemm_fp8_block"}
    assert generator_moe_kernel(_row()) == kernel
    assert generator_moe_kernel(_row(moe_tp_size=4)) == kernel
    assert generator_moe_kernel(_row(moe_tp_size=1, moe_ep_size=2)) == kernel
    assert generator_moe_kernel(_row(moe_tp_size=8)) == {}
    assert generator_moe_kernel(_row(backend_version="0.14.1")) == {}
    assert generator_moe_kernel(_row(backend="sglang", backend_version="0.5.6.post2")) == {}
    assert generator_moe_kernel(_row(model_path="Qwen/Qwen3-32B", system="h100_sxm")) == {}
    # the rule reads the checkpoint, not its name: dense block FP8 runs no grouped experts, another block-FP8
    # MoE checkpoint (DeepSeek-R1's quantization_config.weight_block_size [128, 128]) takes the same kernel
    assert generator_moe_kernel(_row(model_path="Qwen/Qwen3-32B-FP8", system="h100_sxm")) == {}
    assert generator_moe_kernel(_row(model_path="deepseek-ai/DeepSeek-R1")) == kernel
    assert "vllm_deepgemm_fp8_block" in ef.LAUNCHER_MOE_KERNELS


def _routed_compute(tokens: int, aligned: bool) -> tuple[np.ndarray, np.ndarray, object]:
    hw = hardware.get("h200")
    eff = efficiency("expected", hw)
    eff = launcher_moe_kernel(eff, hw, "vllm_deepgemm_fp8_block") if aligned else eff
    t = table(llmath.resolve("qwen3-30b-a3b"), "decode")
    values = t.values(Scenario(tokens, 1, 1024))
    _, comp, _, _ = op_times(values, t, hw, P8, eff, tokens, tokens, decode=True, context=1024)
    r = columns(t).routed
    return comp[r], values[r, 0], eff


def test_padded_rows_run_at_the_gemm_fit_whatever_the_batch():
    # Qwen3-30B-A3B (config.json): 128 experts, top-8, hidden 2048, expert inter 768. Both 4 and 16 tokens pad
    # to 16,384 rows (test above), so the routed GEMMs' compute does not move with the batch
    c4, _, eff = _routed_compute(4, aligned=True)
    c16, flops16, _ = _routed_compute(16, aligned=True)
    assert eff.moe_aligned_rows == 128
    assert c4 == pytest.approx(c16, rel=1e-9)
    # each routed GEMM computes 16,384 / (16 · 8) = 128 times its routed FLOPs, at the fp8 dense peak of H200
    # (1,979 TFLOP/s) × the GEMM fit's fraction at m = 16,384 and n·k = 2048 · 768
    coef = eff.gemm_coef(run_format(hardware.get("h200"), P8))
    eta = coef[0] * ef.sat(16384, coef[1], coef[2]) * ef.sat(2048 * 768, coef[3], coef[4])
    assert c16 == pytest.approx(flops16 * 128 / (1979e12 * eta), rel=1e-6)
    # without the kernel the routed experts follow the batch (the MoE fit at the experts hit)
    p4, _, _ = _routed_compute(4, aligned=False)
    p16, _, _ = _routed_compute(16, aligned=False)
    assert p16.sum() > 1.4 * p4.sum()
    assert c16.sum() > p16.sum()


def test_vllm_012_qwen3_235b_tp2_decode_is_near_the_measured_step():
    # serving_runs.csv, id ..._8000x1000_c9_tp2_epnone_43: vLLM 0.12.0, Qwen3-235B-A22B-FP8 on H200, TP 2
    # (moe_tp 2), 8,000/1,000 at 9 clients, measured TPOT 56.01 ms; the rows' step is flat in the batch from 4 to
    # 20 clients (51-59 ms). Without the padded rows the step is under 60% of it
    from llmath.measure.serving_runs import predict_run, to_run

    line = (
        "r,vllm,0.12.0,Qwen/Qwen3-235B-A22B-FP8,h200_sxm,fp8,agg,8000,1000,fp8,fp8,9,2,1,,2,1,,,,,,,,,,,,,,,"
        "1049.7,56.01,silicon_concurrency=9"
    )
    run = to_run(next(csv.DictReader([SERVING_RUNS_HEADER, line])))
    assert dict(run.engine_settings)["moe_kernel"] == "vllm_deepgemm_fp8_block"
    assert predict_run(run)["tpot_s"] == pytest.approx(56.01e-3, rel=0.15)
    plain = replace(run, engine_settings=tuple(kv for kv in run.engine_settings if kv[0] != "moe_kernel"))
    assert predict_run(plain)["tpot_s"] < 0.6 * 56.01e-3
