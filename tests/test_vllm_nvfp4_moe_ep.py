"""vLLM's NVFP4 MoE on B200 (FlashInfer's TensorRT-LLM-generated MoE) under expert parallelism, against vLLM's own
per-kernel table: a time per token of the layer on every rank, about 9 ns at MiniMax-M2.5's expert shape.

Measured values: aiconfigurator-core 0.12.0 (Apache-2.0), ``b200_sxm/moe/vllm/0.24.0/moe_perf.parquet``,
``kernel_source = vllm_compressedtensorsw4a4nvfp4moe_flashinfer_trtllm_trtllmnvfp4expertsmonolithic``,
``moe_dtype = nvfp4``, ``distribution = balanced``, hidden 3072, inter 1536, 256 experts, top-8, ``moe_tp_size = 1``;
latency in ms of one rank's layer (parquet row in brackets; one row per point).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmath import hardware
from llmath.deploy.layout import Layout
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.kernels import launcher_moe_kernel, run_efficiency
from llmath.model import registry
from llmath.model.checkpoint import precision_for
from llmath.ops import Scenario
from llmath.pass_report import stage_report

# (tokens, EP) -> measured ms
TABLE = {
    (8192, 1): 0.774480,  # row 2141
    (8192, 4): 0.251803,  # row 19313
    (8192, 8): 0.172192,  # row 29138
    (16384, 1): 1.439040,  # row 2148
    (16384, 4): 0.465589,  # row 19322
    (16384, 8): 0.309819,  # row 29143
}
EP_ROWS = [(8192, 4), (8192, 8), (16384, 4), (16384, 8)]


@pytest.mark.parametrize("tokens, ep", EP_ROWS)
def test_fitted_time_per_token_matches_the_tables_excess(tokens, ep):
    # the rank's time beyond the EP-1 layer's over EP, per token it does not compute:
    # 8192 at EP 4: (0.251803 − 0.774480 / 4) ms / (8192 · 3/4) = 0.058183 / 6144 = 9.47 ns
    # 8192 at EP 8: (0.172192 − 0.774480 / 8) / (8192 · 7/8) = 0.075382 / 7168 = 10.52 ns
    # 16384 at EP 4: (0.465589 − 1.439040 / 4) / (16384 · 3/4) = 0.105829 / 12288 = 8.61 ns
    # 16384 at EP 8: (0.309819 − 1.439040 / 8) / (16384 · 7/8) = 0.129939 / 14336 = 9.06 ns
    excess = (TABLE[tokens, ep] - TABLE[tokens, 1] / ep) * 1e-3 / (tokens * (1 - 1 / ep))
    assert ef.moe_ep_token("b200", "nvfp4", "vllm") == pytest.approx(excess, rel=0.2)


def test_vllms_time_per_token_is_its_own_tables_not_sglangs():
    # SGLang's grouped-routed fit is DeepSeek-R1's shape in SGLang's table (0.14 µs), fifteen times vLLM's plain one at
    # MiniMax-M2.5's; the largest excess above, 10.52 ns, is under a tenth of it
    assert ef.moe_ep_token("b200", "nvfp4", "vllm") < 0.1 * ef.moe_ep_token("b200", "nvfp4", "sglang", grouped=True)


def _experts_ms_per_layer(tokens: int, ep: int, drop_term: bool = False) -> float:
    spec, hw = registry.resolve("minimax-m2.5"), hardware.get("b200")
    p = precision_for("minimax-m2.5", weights="nvfp4")
    eff = run_efficiency("expected", hw, p, "vllm", {})
    if drop_term:
        eff = replace(eff, kernel_fits=tuple(k for k in eff.kernel_fits if k[0] != "moe_ep_token"))
    rep = stage_report(spec, "prefill", Scenario(1, tokens), "flash", p, hw, eff, Layout(tp=ep, ep=ep))
    return sum(o.time_s for o in rep.ops if ".experts." in o.name) * 1e3 / spec.n_layers


def test_the_term_adds_its_time_per_token_not_computed():
    # s · T · (1 − 1/EP) per layer on top of the EP-1 model over EP: 16384 tokens at EP 8 with s ≈ 9 ns:
    # 9e-9 · 16384 · 7/8 = 0.129 ms
    s = ef.moe_ep_token("b200", "nvfp4", "vllm")
    added = _experts_ms_per_layer(16384, 8) - _experts_ms_per_layer(16384, 8, drop_term=True)
    assert added == pytest.approx(s * 16384 * (1 - 1 / 8) * 1e3, rel=0.02)


@pytest.mark.parametrize("tokens, ep", EP_ROWS)
def test_minimax_experts_at_ep_fall_from_ep1_as_the_table_does(tokens, ep):
    # the EP-1 fit over-predicts this shape from 8,192 tokens on (docs/efficiency.md), so the rank's time is compared
    # as a share of the EP-1 layer's: 8192 at EP 8: 0.172192 / 0.774480 = 0.222; at EP 4: 0.325; 16384 at EP 4:
    # 0.465589 / 1.439040 = 0.324; at EP 8: 0.215 (the EP-1 time over EP alone: 0.125 and 0.25)
    measured = TABLE[tokens, ep] / TABLE[tokens, 1]
    assert _experts_ms_per_layer(tokens, ep) / _experts_ms_per_layer(tokens, 1) == pytest.approx(measured, rel=0.12)


def test_without_the_term_the_share_at_ep8_is_the_ep1_time_over_ep():
    # what the EP-1 fit alone gives at EP 8, 8192 tokens: well under the measured share 0.222
    share = _experts_ms_per_layer(8192, 8, drop_term=True) / _experts_ms_per_layer(8192, 1)
    assert share < 0.85 * TABLE[8192, 8] / TABLE[8192, 1]


def test_a_launchers_mxfp4_kernel_drops_the_nvfp4_term_with_the_nvfp4_fit():
    # gpt-oss on B200 under vLLM runs FlashInfer's MXFP4 × MXFP8 MoE (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1), not the
    # NVFP4 kernel: neither its moe fit nor its time per token under EP stays
    hw = hardware.get("b200")
    p = precision_for("deepseek-r1", weights="nvfp4")
    eff = run_efficiency("expected", hw, p, "vllm", {})
    assert any(k[:2] == ("moe_ep_token", "nvfp4") for k in eff.kernel_fits)
    launched = launcher_moe_kernel(eff, hw, "flashinfer_mxfp8")
    assert not any(k[:2] in (("moe", "nvfp4"), ("moe_ep_token", "nvfp4")) for k in launched.kernel_fits)
