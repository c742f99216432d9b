"""The weight-only MXFP4 MoE under expert parallelism: a time per token of the whole layer on every rank.

TensorRT-LLM runs gpt-oss's MXFP4 experts on Hopper with its Triton MoE backend (``moe_config.backend: TRITON``,
InferenceX's gpt-oss H200 TensorRT-LLM launchers, with ``--ep_size`` equal to the tensor-parallel size): MXFP4
weights dequantised into a bf16 MMA, which aiconfigurator-core times as ``moe_torch_flow`` / ``w4a16_mxfp4``. Its
TensorRT-LLM 1.3.0rc20 H200 table times one rank of that kernel at gpt-oss's shape at EP 1 to 128: a rank holding
E/EP experts takes the EP-1 time over EP (the same rows per expert, 1/EP of them) plus ``s`` · T · (1 − 1/EP), a time
per token of the layer's T that expert parallelism does not divide (``scripts/fit_moe_ep_token.py``:
``s`` = 77 ns per token per layer on H200, held-out median |error| 3.8% against 44% without the term;
``data/efficiency_fit.json``, ``moe_ep_token``). :func:`ep_token_factor` is the factor that adds it to the routed
experts' compute time; the fit itself is carried as the kernel-fit class ``moe_ep_token`` of the format the MoE fit
reads (``w4a16_mxfp4``), only for the engines that run that kernel.

SGLang's NVFP4 MoE on B200 (FlashInfer's ``trtllm_fp4_block_scale_moe``: every rank gets every token under SGLang's
standard dispatcher, its own experts' share of them computed, and routes every token of the layer) shows the same
shape in SGLang 0.5.14's B200 table, with a value set by the router: ``s`` = 10.4 ns per token per layer at its ten
shapes routed plain top-k (held-out median |error| 4.6% against 16% without the term) and 137 ns at DeepSeek-R1's,
routed grouped top-k over 8 expert groups (10.7% against 53%), carried under ``nvfp4`` for SGLang
(``MOE_EP_TOKEN_ENGINES`` of :mod:`llmath.hardware.efficiency_fit`). vLLM runs the same kernel (monolithic under
TP + EP, modular under attention-DP + EP), whose B200 table in vLLM 0.24.0 gives ``s`` = 8.9 ns at MiniMax-M2.5's
expert shape (held-out median |error| 2.3% against 23% without the term) and 148 ns at DeepSeek-R1's, grouped,
carried under ``nvfp4`` for vLLM: each engine's term is its own table's, and a layer takes the grouped value where
its router is grouped (``MoESpec.grouped_routing``; ``Fits.moe_ep_token`` of :mod:`llmath.hardware.fitted_ops`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from llmath.ops import Table


def ep_token_factor(s_per_token: float, ranks: int, rank_flops_per_token: float, peak, ec, busiest):
    """(compute time + s · T · (1 − 1/ranks)) / compute time of one rank's routed experts, whose compute time is
    T · ``rank_flops_per_token`` / (``peak`` · ``ec``) × ``busiest`` (the fitted MoE model's, T cancels; the FLOPs
    from the routed GEMMs' own terms, :func:`routed_flops_per_token`): 1 at one rank or
    without a fitted ``s_per_token``."""
    if ranks <= 1 or s_per_token <= 0.0 or rank_flops_per_token <= 0.0:
        return 1.0
    per_token = rank_flops_per_token / (np.asarray(peak) * np.asarray(ec)) * np.asarray(busiest)
    return 1.0 + s_per_token * (1.0 - 1.0 / ranks) / per_token


def routed_flops_per_token(table: Table, routed: list[int]) -> float:
    """The rank's routed-expert FLOPs per routed token of one MoE layer, from the ``routed`` GEMMs' own terms (their
    per-token coefficients × counts, over the table's routed-expert layers); 0 without routed experts."""
    layers = table.routed_expert_layers
    if not routed or not layers:
        return 0.0
    total = sum(t.coef * table.ops[i].count for i in routed for t in table.ops[i].terms("flops") if t.mono == "BT")
    return float(total) / layers
