"""The fitted context-attention, decode-attention and MoE kernel models wired into the roofline
(llmath.hardware.fitted_ops): each wiring against the fit's own arithmetic or a raw kernel row of the fixture,
and the properties the roofline must keep (fractions in (0, 1], more rows never slower per row)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

import llmath
from llmath import Workload, hardware
from llmath.deploy.layout import ParallelConfig
from llmath.hardware import decode_attention_sum as das
from llmath.hardware import efficiency_fit as ef
from llmath.hardware import fitted_columns as fc
from llmath.hardware import fitted_ops as fo
from llmath.hardware.decode import decode_generation
from llmath.hardware.roofline import efficiency, op_times, stage_times
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, table

P16 = Precision.uniform("bf16")
FIXTURE = json.loads((Path(__file__).parent / "data" / "efficiency_kernels.json").read_text())["rows"]


def _coef(device, cls, fmt="bf16"):
    return ef.data()["devices"][device][cls][fmt]["coef"]


def _op(t, name):
    return [op.name for op in t.ops].index(name)


def test_context_attention_uses_the_fitted_fraction_and_kernel_time():
    hw, e = hardware.get("h100-sxm"), efficiency("expected", hardware.get("h100-sxm"))
    t = table(llmath.resolve("llama-3-8b"), "prefill")
    B, T = 2, 256
    tm, comp, _, _ = op_times(t.values(Scenario(B, T, 0)), t, hw, P16, e, B, B * T, decode=False)
    i = _op(t, "attn.flash")
    # Llama-3-8B (config.json): 32 layers, H = 32 heads of d = 128. Causal flash attention: QK and PV over the
    # T(T+1)/2 visible pairs, 2 FLOPs each: 2·B·H·d·T(T+1) per layer, at the bf16 dense peak 989.5e12 × ηc(T, B·H·T)
    flops = 32 * 2 * B * 32 * 128 * T * (T + 1)
    xm = ef.attn_context_cost(B, T, 32, 8, 128, "bf16", "bf16")[2]
    eta = ef.fractions(_coef("h100-sxm", "attn_context"), T, B * 32 * T, xm)[0]
    vflops = t.values(Scenario(B, T, 0))[i, 1]
    assert comp[i] == pytest.approx(flops / (989.5e12 * eta) + vflops / (67e12 * e.vector), rel=1e-9)
    # per kernel: the fitted t0 (12.65 µs on H100), above the 4 µs eager launch
    t0 = _coef("h100-sxm", "attn_context")[8]
    assert t0 > e.overhead_s
    assert tm[i] - max(comp[i], tm[i] - 32 * t0) == pytest.approx(32 * t0, rel=1e-9)


def test_decode_attention_fraction_depends_on_the_context():
    hw, e = hardware.get("h100-sxm"), efficiency("expected", hardware.get("h100-sxm"))
    t = table(llmath.resolve("llama-3-8b"), "decode")
    i = _op(t, "attn.flash")
    B, S = 16, 4095
    vals = t.values(Scenario(B, 1, S))
    _, comp, mem, byts = op_times(vals, t, hw, P16, e, B, B, True, context=S)
    coef = _coef("h100-sxm", "attn_decode")
    xm = ef.attn_decode_cost(B, S, 32, 8, 128, "bf16")[2]
    ec, em, _ = ef.fractions(coef, B * 32, S + 1, xm)
    # 4·B·H·d·(S+1) FLOPs per layer at the vector peak (67e12, H100 SXM datasheet) × ηc(B·H, S+1)
    flops = 32 * 4 * B * 32 * 128 * (S + 1)
    assert comp[i] == pytest.approx(flops / (67e12 * ec) + vals[i, 1] / (67e12 * e.vector), rel=1e-9)
    assert mem[i] == pytest.approx(byts[i] / (3.35e12 * em), rel=1e-9)
    # a short context reads less, at a lower fitted fraction of the bandwidth than the long one
    _, _, mem_short, b_short = op_times(t.values(Scenario(B, 1, 255)), t, hw, P16, e, B, B, True, context=255)
    assert b_short[i] / mem_short[i] < byts[i] / mem[i]


def _moe_spec(row):
    s = row["shape"]
    cfg = {
        "model_type": "mixtral",
        "hidden_size": s["hidden_size"],
        "intermediate_size": s["inter_size"],
        "num_local_experts": s["num_experts"],
        "num_experts_per_tok": s["topk"],
        "num_hidden_layers": 1,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
    }
    return spec_from_config(cfg, name="moe-fixture")


@pytest.mark.parametrize("row", [r for r in FIXTURE if r["class"] == "moe" and r["format"] == "bf16"], ids=str)
def test_routed_experts_reproduce_a_measured_moe_kernel(row):
    # one MoE layer of the fixture's shape (a held-out row of aiconfigurator-core's moe_perf table): the three
    # routed expert GEMMs of llmath's prefill must add up to the measured grouped-MoE kernel within the fit's
    # reported held-out p90 error (+ the gap between llmath's and the fit's count of experts hit)
    hw = hardware.get(row["device"])
    t = table(_moe_spec(row), "prefill")
    n = row["shape"]["num_tokens"]
    e = efficiency("expected", hw)
    tm, _, _, _ = op_times(t.values(Scenario(1, n, 0)), t, hw, P16, e, 1, n, decode=False)
    routed = fc.columns(t).routed
    assert len(routed) == 3  # gate, up, down
    # in prefill each routed GEMM pays at least the eager launch; the fit's t0 is one grouped kernel
    t0 = _coef(row["device"], "moe")[8]
    pred = tm[routed].sum() - 3 * max(e.overhead_s, t0 / 3) + t0
    p90 = ef.data()["devices"][row["device"]]["moe"]["bf16"]["held_out"]["p90_abs_err"]
    assert abs(pred / (row["latency_ms"] * 1e-3) - 1) <= p90 + 0.05


@pytest.mark.parametrize("row", [r for r in FIXTURE if r["format"] == "fp8_block"], ids=str)
def test_block_scaled_experts_reproduce_a_measured_block_scaled_moe_kernel(row):
    # experts stored as block-scaled FP8 (one scale per 128 × 128 block) and run W8A8: their routed GEMMs are
    # timed by the fit of that kernel (TensorRT-LLM's block-scaled grouped GEMM: CUTLASS on H200, DeepGEMM on
    # B200), and add up to a held-out measured row of it within its reported held-out p90 (+ the experts-hit gap)
    hw = hardware.get(row["device"])
    t = table(_moe_spec(row), "prefill")
    n = row["shape"]["num_tokens"]
    e = efficiency("expected", hw)
    p = replace(P16.override(weights="fp8-block"), act_quant="fp8")
    assert e.fit("moe", "fp8-block") == tuple(_coef(row["device"], "moe", "fp8_block"))
    tm, _, _, _ = op_times(t.values(Scenario(1, n, 0)), t, hw, p, e, 1, n, decode=False)
    routed = fc.columns(t).routed
    t0 = _coef(row["device"], "moe", "fp8_block")[8]
    pred = tm[routed].sum() - 3 * max(e.overhead_s, t0 / 3) + t0
    p90 = ef.data()["devices"][row["device"]]["moe"]["fp8_block"]["held_out"]["p90_abs_err"]
    assert abs(pred / (row["latency_ms"] * 1e-3) - 1) <= p90 + 0.05


def test_block_scaled_experts_are_slower_than_per_tensor_at_prefill_sizes():
    # aiconfigurator-core 0.12.0, h200_sxm moe/trtllm/1.3.0rc20 moe_perf.parquet, moe_torch_flow_cutlass,
    # balanced, tp = ep = 1, 8192 tokens, hidden 6144, inter 2048, top-8 of 256: fp8 4.559 ms, fp8_block
    # 8.828 ms (medians of the table's repeats); each fit within its reported held-out p90
    hw = hardware.get("h200")
    shape = dict(tokens=8192, hidden=6144, inter=2048, topk=8, experts=256)
    for fmt, ms in (("fp8", 4.559), ("fp8_block", 8.828)):
        p90 = ef.data()["devices"]["h200"]["moe"][fmt]["held_out"]["p90_abs_err"]
        assert ef.kernel_time_on(hw, "moe", fmt=fmt, **shape) == pytest.approx(ms * 1e-3, rel=p90)


@pytest.mark.parametrize("B", [1, 8])
def test_mla_prefill_attention_runs_the_fitted_context_mla_kernel(B):
    # DeepSeek-R1's prefill attention (config.json: 128 heads, qk_nope 128 + qk_rope 64, v_head_dim 128) declares
    # the MLA context kernel: per layer it takes the fit's time for its shape (+ its softmax FLOPs at the vector
    # rate), and that is TensorRT-LLM's measured kernel: aiconfigurator-core 0.12.0 h200_sxm
    # mla/trtllm/1.3.0rc20 context_mla_perf.parquet, 128 heads, FP8 KV cache, 1024 tokens: 0.1752 ms for one
    # sequence, 1.172 ms for 8 (medians of the table's repeats), within the fit's reported held-out p90
    hw, T = hardware.get("h200"), 1024
    t = table(llmath.resolve("deepseek-r1"), "prefill")
    cols = fc.columns(t)
    assert cols.mla.size and not cols.attn.size and cols.mla_dims == (128 + 64, 128)
    assert np.all(cols.mla_heads == 128)
    e = efficiency("expected", hw)
    p = P16.override(kv="fp8")
    tm = op_times(t.values(Scenario(B, T, 0)), t, hw, p, e, B, B * T, decode=False)[0]
    per_layer = tm[cols.mla] / t.kernels[cols.mla]
    fit = ef.kernel_time_on(hw, "attn_mla_context", batch=B, context=T, heads=128, qk_dim=192, v_dim=128,
                            fmt="fp8", kv_fmt="fp8")  # fmt: skip
    assert per_layer == pytest.approx(fit, rel=0.05)
    p90 = ef.data()["devices"]["h200"]["attn_mla_context"]["fp8"]["held_out"]["p90_abs_err"]
    assert fit == pytest.approx({1: 0.1752e-3, 8: 1.172e-3}[B], rel=p90)


@pytest.mark.parametrize("device", ["h100-sxm", "a100-sxm-80gb", "l40s", "b200", "h100-pcie"])
@pytest.mark.parametrize("model", ["llama-3-8b", "mixtral-8x7b", "gemma-2-9b"])
def test_more_rows_never_slower_per_row(device, model):
    hw = hardware.get(device)
    e = efficiency("expected", hw)
    spec = llmath.resolve(model)
    B = 2 ** np.arange(0, 9)
    pre = stage_times(table(spec, "prefill"), Scenario(B, 512, 0), hw, P16, e, False)[0].sum(-1)
    assert np.all(np.diff(pre / B) <= 1e-9 * pre[1:] / B[1:]), pre / B
    dec = np.array(
        [stage_times(table(spec, "decode"), Scenario(int(b), 1, 2048), hw, P16, e, True)[0].sum() for b in B]
    )
    assert np.all(np.diff(dec / B) <= 1e-9 * dec[1:] / B[1:]), dec / B


@pytest.mark.parametrize("device", sorted(ef.data()["devices"]))
def test_decode_band_sum_matches_step_by_step(device):
    hw = hardware.get(device)
    e = efficiency("expected", hw)
    t = table(llmath.resolve("llama-3-8b"), "decode")
    for B, P, N in ((1, 1, 3000), (64, 700, 900)):
        d = decode_generation(t, hw, P16, e, B, P, N)
        S = np.arange(P, P + N - 1)
        steps = op_times(t.values(Scenario(B, 1, S)), t, hw, P16, e, B, B, True, context=S)[0].sum(-1)
        # secants per band [2^k, 2^(k+1)): within 1.5% of the attention op, so well within 0.5% of the step
        assert float(d.total_s) == pytest.approx(steps.sum(), rel=5e-3)
        assert float(d.first_s) == pytest.approx(steps[0], rel=1e-12)
        assert float(d.last_s) == pytest.approx(steps[-1], rel=1e-12)
        dv = decode_generation(t, hw, P16, e, np.array([B, 2]), np.array([P, 5]), np.array([N, 7]))
        assert float(dv.total_s[0]) == pytest.approx(float(d.total_s), rel=1e-12)


def test_line_sums_split_where_the_lines_cross():
    # Σ_{u=1}^{9} max(u, 10 − u): 9 + 8 + 7 + 6 + 5 + 6 + 7 + 8 + 9 = 65
    assert das._lsum1(0.0, 1.0, 10.0, -1.0, 1.0, 10.0) == 65
    assert float(das._lsum(np.array(0.0), 1.0, 10.0, -1.0, 1.0, 10.0)) == 65
    # parallel lines: the larger all the way, Σ_{u=0}^{3} (2 + u) = 14
    assert das._lsum1(2.0, 1.0, 1.0, 1.0, 0.0, 4.0) == 14


def test_user_overrides_turn_the_fits_off():
    hw = hardware.get("h100-sxm")
    e = efficiency("expected", hw, matmul=0.5)
    assert e.fit("attn_context", "bf16") is None and e.fit("moe", "bf16") is None
    assert e.fit("attn_decode", "bf16") is not None  # on the vector peak, not a matmul fraction
    e = efficiency("expected", hw, overhead_s=1e-6)
    t = table(llmath.resolve("mixtral-8x7b"), "prefill")
    tm = stage_times(t, Scenario(1, 8, 0), hw, P16, e, False)[0]
    assert not e.fit_overheads and np.all(tm >= 0)
    assert not efficiency("ideal", hw).kernel_fits


def test_tp_all_reduce_uses_the_fitted_alpha_beta_models():
    a = llmath.analyze(
        "llama-3-70b", "h100-sxm", workload=Workload(batch=8, prompt=1024, gen=4), parallel=ParallelConfig(tp=4)
    ).to_dict()
    c = a["comm"]["decode"]["attn.all_reduce"]
    # Llama-3-70B (config.json): 80 layers, d_model 8192; a decode step all-reduces B·D = 8·8192 bf16
    # elements (131,072 bytes) after every attention block, 80 times
    one = 8 * 8192 * 2
    assert c["bytes"] == 80 * one
    d = ef.data()["devices"]["h100-sxm"]
    nccl, custom = (d[op]["4"]["coef"] for op in ("all_reduce", "custom_all_reduce"))
    fitted = min(nccl[0] + one / nccl[1], custom[0] + one / custom[1])  # the faster kernel, as engines pick
    assert c["time_s"] == pytest.approx(80 * fitted, rel=1e-9)
    # ideal keeps the analytic model; so does a device without fits (MI300X: rule none)
    run = dict(workload=Workload(batch=8, prompt=1024, gen=4), parallel=ParallelConfig(tp=4))
    ideal = llmath.analyze("llama-3-70b", "h100-sxm", **run, efficiency_mode="ideal")
    assert ideal.to_dict()["comm"]["decode"]["attn.all_reduce"]["time_s"] != pytest.approx(c["time_s"])
    amd = llmath.analyze("llama-3-70b", "mi300x", **run).to_dict()
    amd_ideal = llmath.analyze("llama-3-70b", "mi300x", **run, efficiency_mode="ideal")
    assert amd["comm"]["decode"]["attn.all_reduce"]["time_s"] == pytest.approx(
        amd_ideal.to_dict()["comm"]["decode"]["attn.all_reduce"]["time_s"], rel=1e-12
    )


MOE_ROW = {"shape": {"hidden_size": 4096, "inter_size": 1536, "num_experts": 128, "topk": 8}}


@pytest.mark.parametrize(
    "tp, ep, dp, share, inter_share",
    [
        (4, 1, 1, 1 / 4, 1 / 4),  # moe-TP 4: every expert's gate/up/down split four ways
        (4, 4, 1, 1 / 4, 1.0),  # EP 4: a quarter of the experts, each whole
        (1, 8, 8, 1 / 8, 1.0),  # attention-DP 8 with EP 8: an eighth of the experts, the tokens of all 8 replicas
    ],
)
def test_a_rank_holds_its_share_of_the_expert_layer(tp, ep, dp, share, inter_share):
    from llmath.deploy.cost import rank_table
    from llmath.deploy.layout import make_layout

    spec = _moe_spec(MOE_ROW)
    cols = fc.columns(rank_table(spec, "decode", "flash", make_layout(spec, ParallelConfig(None, tp, 1, ep, dp)), 0))
    assert len(cols.routed) == 3  # gate, up, down
    assert cols.share == pytest.approx(share) and cols.inter_share == pytest.approx(inter_share)


# EP 4, 16 tokens × top-8 of 128 experts: the uniform routing's busiest rank 1 + z4·√((4 − 1)/(16·8)), with
# z4 = Φ⁻¹((4 − 0.375)/4.25), Blom's expected maximum of 4 standard normals
EP4_BUSIEST = 1 + NormalDist().inv_cdf(3.625 / 4.25) * (3 / 128) ** 0.5


@pytest.mark.parametrize(
    "ep, inter_split, busiest",
    [
        (1, 4, 1.0),  # tp=4, moe-TP 4: each rank's grouped kernel is the layer with inter / 4
        (4, 1, EP4_BUSIEST),  # tp=4, EP 4: a quarter of the experts, each whole; the layer waits for the busiest
    ],
)
def test_rank_routed_experts_run_at_the_moe_fit_of_their_share(ep, inter_split, busiest):
    # on an H100, 16 decode tokens: the fit's features are x1 = tokens · top-k / E, x2 = hidden · inter / moe-TP,
    # xm = the whole layer's bytes / 4 (the rank's share); compute × the busiest-rank factor, the stream not
    from llmath.deploy.cost import rank_table
    from llmath.deploy.layout import make_layout

    hw = hardware.get("h100-sxm")
    spec = _moe_spec(MOE_ROW)
    t = rank_table(spec, "decode", "flash", make_layout(spec, ParallelConfig(None, 4, 1, ep, 1)), 0)
    e = efficiency("expected", hw)
    B = 16
    n = len(t.ops)
    rts = (np.ones(n), np.full(n, 989.5e12), "bf16")  # matmul rate, dense bf16 peak (H100 SXM datasheet), format
    f, inv = fo.apply(t, hw, P16, e, B, B, True, None, np.ones(n), None, rts)
    coef = _coef("h100-sxm", "moe")
    xm = ef.moe_cost(B, 4096, 1536, 8, 128, "bf16")[2] / 4
    ec, em, _ = ef.fractions(coef, B * 8 / 128, 4096 * 1536 / inter_split, xm, ef.tile_rows("hopper"))
    r = fc.columns(t).routed
    assert inv[r] == pytest.approx(np.full(3, 1 / (3.35e12 * em)), rel=1e-9)  # H100 SXM: 3.35 TB/s
    assert f[r] == pytest.approx(np.full(3, busiest / (989.5e12 * ec)), rel=1e-9)  # the rates passed in: 1 FLOP/s
