"""Grouped MoE kernels that compute a worst-case padded row count whatever the routing.

vLLM 0.12.0 runs block-scaled FP8 experts on Hopper with DeepGEMM's contiguous grouped GEMM
(``m_grouped_fp8_gemm_nt_contiguous``) at every batch size, decode included, when the MoE layer is
tensor-parallel over fewer than 8 GPUs (docs/serving-runs.md, "vLLM 0.12.0's DeepGEMM MoE on Hopper"). Without host
counts of each expert's tokens, ``DeepGemmExperts.apply`` sizes the permuted activations by
``compute_aligned_M``: M·k routed rows plus ``align − 1`` rows of padding for each of the rank's E_local
experts, rounded up to ``align`` (``vllm/model_executor/layers/fused_moe/deep_gemm_utils.py`` in the vllm 0.12.0
wheel; ``align`` = 128, DeepGEMM's ``get_mk_alignment_for_contiguous_layout``). ``deepgemm_moe_permute`` (same
file) fills the expert index of every row with zeros before scattering the routed rows (``torch.zeros`` when host
counts are absent), so the padding blocks read as expert 0's and DeepGEMM's SM90 kernel computes every 128-row
block of the buffer (it skips only blocks whose index is negative: deepseek-ai/DeepGEMM
ea9c5d9270226c5dd7a577c212e9ea385f6ef048, ``scheduler.cuh``, ``is_computation_valid``). Each routed GEMM of a
pass is therefore timed as a dense GEMM of the padded rows (the fitted GEMM model at m = padded rows), its
weights' stream as the MoE fit reads it.
"""

from __future__ import annotations

import numpy as np

from llmath.hardware import efficiency_fit as ef
from llmath.hardware.efficiency import Efficiency
from llmath.hardware.fitted_columns import columns
from llmath.ops import Table


def aligned_rows(tokens, top_k: int, local_experts: float, align: int):
    """vLLM's ``compute_aligned_M`` without host counts: ⌈(M·k + E_local·(align − 1)) / align⌉ · align rows,
    for M = ``tokens`` the layer routes (every token a rank sees, its own experts or not)."""
    m = np.asarray(tokens, dtype=float) * top_k + local_experts * (align - 1)
    return np.ceil(m / align - ef.WHOLE_TILE_SLACK) * align  # a whole block an ulp over: not a new one


def apply(table: Table, eff: Efficiency, tokens, f, rts):
    """``f`` (:func:`llmath.hardware.fitted_ops.apply`'s compute factors) with the routed-expert columns computing
    the dense FLOPs of :func:`aligned_rows` at the fitted GEMM model's fraction for that many rows; ``f``
    unchanged where ``eff`` pads no rows, the table has no routed experts or the GEMM format has no fit.
    ``tokens``: the pass's tokens per replica (the layer routes ``table.moe_tokens`` times as many)."""
    mm, peaks, run_fmt = rts
    coef = eff.gemm_coef(run_fmt)
    cols = columns(table)
    if not eff.moe_aligned_rows or f is None or coef is None or not cols.routed.size:
        return f
    h, i, k, E = cols.moe
    ep = max(round(cols.inter_share / cols.share), 1)  # expert-parallel ranks: each holds E / ep experts
    M = np.asarray(tokens, dtype=float)[..., None] * table.moe_tokens
    padded = aligned_rows(M, k, E / ep, eff.moe_aligned_rows)
    routed_rows = np.maximum(M * k / ep, 1e-30)  # the rows the table's routed FLOPs count on this rank
    eta = coef[0] * ef.sat(padded, coef[1], coef[2]) * ef.sat(h * i * cols.inter_share, coef[3], coef[4])
    r = cols.routed
    f = np.array(f, dtype=float, copy=True)
    f[..., r] = mm[r] / (peaks[r] * eta) * (padded / routed_rows)
    return f
