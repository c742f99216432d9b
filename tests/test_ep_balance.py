"""The busiest expert-parallel rank's slowdown (deploy/ep_balance.py) and where the step applies it."""

from dataclasses import replace

import numpy as np
import pytest

from llmath.deploy import ep_balance
from llmath.deploy.cost import per_gpu_stage
from llmath.deploy.ep_balance import busiest_rank_factor
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.checkpoint import precision_for
from llmath.model.registry import resolve
from llmath.ops import Scenario

# aiconfigurator-core 0.12.0, systems/data/h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet, kernel
# moe_torch_flow_cutlass, fp8_block, hidden 7168, inter 2048, 256 experts, top-8 (DeepSeek-R1's experts), moe-TP 1,
# EP 8, median latency over repeats, power_law_1.01 vs balanced: 2048 tokens 0.7640 vs 0.5259 ms (ratio 1.453);
# 4096 tokens 1.1681 vs 0.7258 ms (1.609); 8192 tokens 2.1746 vs 1.2844 ms (1.693); 16384 tokens 4.0098 vs
# 2.4992 ms (1.604). t = tokens · 8 / 256 token-expert pairs per expert.
H200_DEEPSEEK_EP8 = {
    2048 * 8 / 256: 0.7640 / 0.5259,
    4096 * 8 / 256: 1.1681 / 0.7258,
    8192 * 8 / 256: 2.1746 / 1.2844,
    16384 * 8 / 256: 4.0098 / 2.4992,
}


@pytest.mark.parametrize("t, ratio", sorted(H200_DEEPSEEK_EP8.items()))
def test_factor_close_to_the_kernel_tables_ratio(t, ratio):
    # one lookup per (device, format, EP) over every many-expert shape: within 15% of DeepSeek-R1's own rows
    assert busiest_rank_factor("h200", "fp8-block", 8, t) == pytest.approx(ratio, rel=0.15)


def test_factor_levels_off_beyond_the_tables_largest_token_count():
    # the table's DeepSeek-R1 ratio stops growing from 4096 to 16384 tokens (1.609, 1.693, 1.604 above): at 65,536
    # and 262,144 tokens (t = 2048, 8192) the factor stays within 15% of the 16,384-token ratio and does not grow
    f = busiest_rank_factor("h200", "fp8-block", 8, np.array([65536 * 8 / 256, 262144 * 8 / 256]))
    assert f[0] == pytest.approx(4.0098 / 2.4992, rel=0.15)
    assert f[1] == f[0]


def test_factor_is_one_where_balanced_and_busiest_read_the_same_experts():
    # below 8 token-expert pairs per expert the form applies no slowdown (its stated floor)
    assert busiest_rank_factor("h200", "fp8-block", 8, [0.5, 4.0, 7.9]).tolist() == [1.0, 1.0, 1.0]


def test_factor_is_one_without_expert_parallelism_or_a_fit():
    assert busiest_rank_factor("h200", "fp8-block", 1, 64.0) == 1.0  # one EP rank is the busiest
    assert busiest_rank_factor("h200", "mxfp4", 8, 64.0) == 1.0  # no table of that format on H200
    assert busiest_rank_factor("h200", "fp8-block", 3, 64.0) == 1.0  # no EP 3 rows


def _device(tp: int, dp: int, ep: int) -> Device:
    spec, hw = resolve("deepseek-ai/DeepSeek-R1"), get("h200")
    layout = ParallelConfig(tp=tp, dp=dp, ep=ep).requested(spec)
    return Device(spec, hw, precision_for("deepseek-ai/DeepSeek-R1"), efficiency("expected", hw), layout=layout)


def _balanced(monkeypatch):
    monkeypatch.setattr(ep_balance, "busiest_rank_factor", lambda d, f, ep, t: np.ones_like(np.asarray(t, float)))


def test_attention_dp_step_adds_the_slowdown_to_the_routed_experts_only(monkeypatch):
    dev = _device(1, 8, 8)
    # 64 decoders per rank, 8 ranks' tokens routed, top-8 over 256 experts: 64·8·8/256 = 16 pairs per expert
    f = busiest_rank_factor("h200", "fp8-block", 8, 64 * 8 * 8 / 256)
    assert f > 1.0
    busy = dev.iteration(64, 1500).time_s
    _balanced(monkeypatch)
    balanced = dev.iteration(64, 1500).time_s
    st = per_gpu_stage(dev.spec, dev.layout, "decode", Scenario(64.0, 1.0, 1500.0), dev.hw, dev.precision, dev.eff)
    experts = ep_balance.expert_columns(dev.decode_table)
    assert experts.size == 4  # gate, up, act and down of the routed experts
    experts_s = float(np.asarray(st.stages[0].op_time_s)[experts].sum())
    assert busy - balanced == pytest.approx((f - 1.0) * experts_s, rel=1e-6)


def test_under_eight_pairs_per_expert_is_the_balanced_step(monkeypatch):
    dev = _device(1, 8, 8)
    busy = dev.iteration(16, 1500).time_s  # 16·8·8/256 = 4 pairs per expert: below the form's floor
    _balanced(monkeypatch)
    assert dev.iteration(16, 1500).time_s == pytest.approx(busy)


def test_tensor_parallel_experts_are_not_slowed(monkeypatch):
    dev = _device(8, 1, 1)  # every rank holds 1/8 of every expert: each carries the same routed tokens
    tp = dev.iteration(256, 1500).time_s
    _balanced(monkeypatch)
    assert dev.iteration(256, 1500).time_s == tp


def test_report_names_the_busiest_rank_on_expert_parallel_layouts_only():
    from llmath.deploy.ep_balance import busiest_rank_note

    spec = resolve("deepseek-ai/DeepSeek-R1")
    ep8 = ParallelConfig(tp=1, dp=8, ep=8).requested(spec)
    tp8 = ParallelConfig(tp=8).requested(spec)
    # 64 sequences per replica, 8 replicas' tokens, top-8 of 256 experts: 64·8·8/256 = 16 pairs per expert
    (note,) = busiest_rank_note(spec, ep8, "h200", "fp8-block", 64.0)
    assert "16.0 token-expert pairs" in note
    assert busiest_rank_note(spec, tp8, "h200", "fp8-block", 64.0) == []


def test_a_kernel_padding_every_expert_to_a_worst_case_has_no_busiest_rank(monkeypatch):
    # vllm 0.12.0 deep_gemm_utils.py compute_aligned_M sizes DeepGEMM's buffer from every token's k picks, whatever
    # the routing, and deepgemm_moe_permute marks the rows it does not fill as expert 0's, which the kernel computes:
    # each EP rank computes the same rows, so a skewed routing slows none of them
    dev = _device(1, 8, 8)
    aligned = replace(dev, eff=replace(dev.eff, moe_aligned_rows=128))
    assert busiest_rank_factor("h200", "fp8-block", 8, 64 * 8 * 8 / 256) > 1.0  # the factor where rows are routed
    busy = aligned.iteration(64, 1500).time_s
    _balanced(monkeypatch)
    assert aligned.iteration(64, 1500).time_s == busy


def test_the_report_names_no_busiest_rank_where_the_kernel_pads_every_rank():
    # the aligned kernel's step applies no busiest-rank factor (the test above), so its report names no busiest-rank
    # slowdown either; the same layout with the engine's default kernel does (512 requests over 8 replicas: at most
    # 64 decoding per replica, 64·8·8/256 = 16 token-expert pairs per expert, above the form's floor of 8)
    import llmath

    work = llmath.Workload(concurrency=512, prompt=1024, gen=256)
    par = ParallelConfig(tp=1, dp=8, ep=8)
    kw = dict(workload=work, engine="vllm", parallel=par)
    plain = llmath.serve("deepseek-ai/DeepSeek-R1", "h200", **kw)
    padded = llmath.serve("deepseek-ai/DeepSeek-R1", "h200", moe_kernel="vllm_deepgemm_fp8_block", **kw)
    assert any("busiest rank's pace" in n for n in plain.notes)
    assert not any("busiest rank's pace" in n for n in padded.notes)
    assert any("no rank is busier" in n for n in padded.notes)
