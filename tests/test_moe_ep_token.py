"""TensorRT-LLM's weight-only MXFP4 MoE under expert parallelism: a time per token of the layer on every rank.

Measured values: aiconfigurator-core 0.12.0 (Apache-2.0), ``h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet``,
``kernel_source = moe_torch_flow``, ``moe_dtype = w4a16_mxfp4``, ``distribution = balanced``, gpt-oss-120b's shape
(hidden 2880, inter 2880, top-4, 128 experts), ``moe_tp_size = 1``; latency in ms (parquet row in brackets).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmath import hardware
from llmath.deploy.cost import rank_table
from llmath.deploy.layout import Layout
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.execution import checkpoint_precision
from llmath.hardware.fitted_columns import columns
from llmath.hardware.kernels import run_efficiency
from llmath.hardware.moe_ep_token import ep_token_factor
from llmath.model import registry
from llmath.ops import Scenario
from llmath.pass_report import stage_report

# (tokens, EP) -> measured ms
TABLE = {
    (8192, 1): 4.301515,  # row 109589
    (16384, 1): 8.608789,  # row 109592
    (8192, 4): 1.537691,  # row 64148
    (8192, 8): 1.068453,  # row 26214
    (16384, 8): 2.050544,  # row 26216
}


@pytest.mark.parametrize("tokens, ep", [(8192, 4), (8192, 8), (16384, 8)])
def test_fitted_time_per_token_matches_the_tables_excess(tokens, ep):
    # the rank's time beyond the EP-1 layer's over EP, per token it does not compute: 8192 at EP 8:
    # (1.068453 − 4.301515 / 8) ms / (8192 · 7/8) = 74.0 ns; 16384 at EP 8: 68.0 ns; 8192 at EP 4: 75.2 ns
    excess = (TABLE[tokens, ep] - TABLE[tokens, 1] / ep) * 1e-3 / (tokens * (1 - 1 / ep))
    assert ef.moe_ep_token("h200", "w4a16_mxfp4", "trtllm") == pytest.approx(excess, rel=0.15)


def test_factor_adds_the_per_token_time_to_the_compute_time():
    # compute per token 1e9 FLOPs / (1e15 FLOP/s · 0.5) = 2 µs; s · (1 − 1/4) = 75 ns: (2 + 0.075) / 2 = 1.0375
    assert float(ep_token_factor(1e-7, 4, 1e9, 1e15, 0.5, 1.0)) == pytest.approx(1.0375)
    # the busiest rank's slower compute (×1.5: 3 µs per token) takes the same added time: 1.025
    assert float(ep_token_factor(1e-7, 4, 1e9, 1e15, 0.5, 1.5)) == pytest.approx(1.025)
    assert ep_token_factor(1e-7, 1, 1e9, 1e15, 0.5, 1.0) == 1.0
    assert ep_token_factor(0.0, 8, 1e9, 1e15, 0.5, 1.0) == 1.0
    # gpt-oss-120b at EP 8, read from a rank's routed GEMMs: 6 · 4 · 2880 · 2880 / 8 = 24,883,200 FLOPs per token
    # of the layer
    rank = rank_table(registry.resolve("openai/gpt-oss-120b"), "prefill", "flash", Layout(tp=8, ep=8), 0)
    assert columns(rank).routed_flops == 24_883_200


def _experts_ms_per_layer(tokens: int, ep: int, engine: str = "trtllm", drop_term: bool = False) -> float:
    spec, hw = registry.resolve("openai/gpt-oss-120b"), hardware.get("h200")
    p = checkpoint_precision("openai/gpt-oss-120b", None)[0]
    eff = run_efficiency("expected", hw, p, engine, {})
    if drop_term:
        eff = replace(eff, kernel_fits=tuple(k for k in eff.kernel_fits if k[0] != "moe_ep_token"))
    rep = stage_report(spec, "prefill", Scenario(1, tokens), "flash", p, hw, eff, Layout(tp=ep, ep=ep))
    return sum(o.time_s for o in rep.ops if ".experts." in o.name) * 1e3 / spec.n_layers


@pytest.mark.parametrize("tokens, ep", [(8192, 4), (8192, 8), (16384, 8)])
def test_gpt_oss_experts_at_ep_take_the_tables_time(tokens, ep):
    # TensorRT-LLM's prefill experts of gpt-oss-120b on one of EP H200 ranks: the measured kernel within 12%
    assert _experts_ms_per_layer(tokens, ep) == pytest.approx(TABLE[tokens, ep], rel=0.12)


def test_without_the_term_the_ranks_experts_take_the_ep1_time_over_ep():
    # what the EP-1 fit alone gives at EP 8: 4.301515 / 8 = 0.54 ms, the measured 1.07 ms is twice that
    assert _experts_ms_per_layer(8192, 8, drop_term=True) < 0.7 * TABLE[8192, 8]


def test_engines_without_the_kernel_do_not_take_the_term():
    # vLLM serves gpt-oss on Hopper with Marlin or its own Triton kernel, not TensorRT-LLM's (MOE_WEIGHT_ONLY_ENGINES)
    hw = hardware.get("h200")
    p = checkpoint_precision("openai/gpt-oss-120b", None)[0]
    assert not any(k[0] == "moe_ep_token" for k in run_efficiency("expected", hw, p, "vllm", {}).kernel_fits)
    assert any(k[0] == "moe_ep_token" for k in run_efficiency("expected", hw, p, "trtllm", {}).kernel_fits)
