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
"""

from __future__ import annotations

import numpy as np


def ep_token_factor(s_per_token: float, ranks: int, rank_flops_per_token: float, peak, ec, busiest):
    """(compute time + s · T · (1 − 1/ranks)) / compute time of one rank's routed experts, whose compute time is
    T · ``rank_flops_per_token`` / (``peak`` · ``ec``) × ``busiest`` (the fitted MoE model's, T cancels): 1 at one
    rank or without a fitted ``s_per_token``."""
    if ranks <= 1 or s_per_token <= 0.0 or rank_flops_per_token <= 0.0:
        return 1.0
    per_token = rank_flops_per_token / (np.asarray(peak) * np.asarray(ec)) * np.asarray(busiest)
    return 1.0 + s_per_token * (1.0 - 1.0 / ranks) / per_token


def rank_flops_per_token(hidden: int, inter: int, top_k: int, share: float) -> float:
    """A rank's routed-expert FLOPs per token of the layer: the gate, up and down GEMMs (2 · hidden · inter each) of
    each of top-k picks, times the share of every expert's weights the rank holds."""
    return 6.0 * top_k * hidden * inter * share
