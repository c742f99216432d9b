"""Parallel layouts: invariants of the sharded operator lists, collectives' formulas, errors.

Independent anchors: the single-device operator list (itself proven against transformers), NCCL's
documented bus-bandwidth factors (nccl-tests doc/PERFORMANCE.md), and per-rank shapes written out by hand.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

import llmath
from llmath import Workload
from llmath.deploy.collectives import bus_factor, collective_time
from llmath.deploy.layout import ParallelConfig, make_layout, stage_layers
from llmath.deploy.shard import rank_plans
from llmath.errors import LayoutError
from llmath.model.registry import resolve
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.split import Split


def _flops(ops, sc, spec, mt=1):
    return sum(c.values.get("flops", 0) for c in evaluate(ops, sc, spec, mt))


def _replicated(op, spec) -> bool:
    return op.split == Split.REPLICATED  # norms, residual adds, position tables: whole on every rank


@pytest.mark.parametrize("name,tp", [("llama-3.1-70b", 2), ("llama-3.1-70b", 8), ("qwen2.5-7b", 4), ("gpt2", 4)])
@pytest.mark.parametrize("stage", ["prefill", "decode"])
def test_sum_over_ranks_of_sharded_flops_is_single_gpu(name, tp, stage):
    spec = resolve(name)
    sc = Scenario(3, 17 if stage == "prefill" else 1, 0 if stage == "prefill" else 40)
    one = _flops(build_ops(spec, stage, "flash"), sc, spec)
    (plan,) = rank_plans(spec, stage, "flash", make_layout(spec, ParallelConfig(tp=tp)))
    # every rank runs the same (symmetric) ops; replicated ops run on all tp ranks
    sharded = [o for o in plan.ops if not _replicated(o, spec)]
    repl = [o for o in plan.ops if _replicated(o, spec)]
    extra = 0
    if spec.n_kv_heads < tp:  # one KV head per rank: K/V projections replicated tp/K times
        kv = [o.name for o in build_ops(spec, stage, "flash") if o.name in ("attn.k_proj", "attn.v_proj")]
        extra = (tp // spec.n_kv_heads - 1) * _flops(
            [o for o in build_ops(spec, stage, "flash") if o.name in kv], sc, spec
        )
    # a vocabulary not divisible by tp is padded to ceil(V/tp)·tp rows: 2·D FLOPs per extra row per logit row
    extra += (-(-spec.vocab_size // tp) * tp - spec.vocab_size) * 2 * spec.d_model * sc.B
    # Σ over the tp ranks of the sharded ops + one copy of the replicated ones = the single device
    assert tp * _flops(sharded, sc, spec) + _flops(repl, sc, spec) == one + extra


def test_tp1_layout_equals_single_device_exactly():
    kw = dict(workload=Workload(batch=4, prompt=300, gen=50), precision=llmath.Precision())
    for name in ("llama-3.1-8b", "mixtral-8x7b", "deepseek-v2-lite", "gemma-2-2b"):
        a = llmath.analyze(name, "h100-sxm", **kw)
        b = llmath.analyze(name, "h100-sxm", parallel=ParallelConfig(gpus=1), **kw)
        for k in ("ttft_s", "tpot_s", "e2e_s", "throughput_tok_s"):
            assert a.generation[k] == b.generation[k], (name, k)
        assert a.prefill.flops == b.prefill.flops and a.decode.bytes == b.decode.bytes
        assert a.memory.total_bytes == b.memory.per_gpu_bytes
        assert b.comm == {"prefill": {}, "decode": {}, "decode_total_s": 0.0}


def test_tp2_per_rank_shapes_by_hand():
    # Llama-3.1-70B (D=8192, N=64, K=8, H=128, F=28672, V=128256, L=80) at TP=2, per rank:
    #   q: 8192 x 32·128, k/v: 8192 x 4·128, o: 32·128 x 8192, gate/up: 8192 x 14336, down: 14336 x 8192,
    #   embedding and LM head: 64128 x 8192 each, 2 RMSNorm weights per layer + the final one (replicated).
    per_layer = 8192 * 4096 + 2 * 8192 * 512 + 4096 * 8192 + 3 * 8192 * 14336 + 2 * 8192
    expected = 80 * per_layer + 2 * 64128 * 8192 + 8192
    spec = resolve("llama-3.1-70b")
    (plan,) = rank_plans(spec, "prefill", "flash", make_layout(spec, ParallelConfig(gpus=2)))
    assert sum(n * op.count for op in plan.ops for _, n in op.params) == expected


def test_bus_factors_are_ncclss():
    # nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw · 2(n-1)/n; all-gather, reduce-scatter: (n-1)/n
    assert bus_factor("all_reduce", 8) == Fraction(14, 8)
    assert bus_factor("all_gather", 8) == Fraction(7, 8)
    assert bus_factor("reduce_scatter", 4) == Fraction(3, 4)
    assert bus_factor("all_to_all", 2) == Fraction(1, 2)
    # 1 GB all-reduce over 8 ranks at 100 GB/s bus bandwidth, 10 µs latency: 10e-6 + 1.75e9/1e11 = 0.01751 s
    assert collective_time("all_reduce", 8, 1e9, 1e11, 1e-5) == pytest.approx(0.01751)
    assert collective_time("all_reduce", 1, 1e9, 1e11, 1e-5) == 0.0


def test_stage_layers_as_vllm():
    # vLLM vllm/distributed/utils.py get_pp_indices: L // pp each, then partitions[-i] += 1 for i = 2..rem+1
    # 80 on 3: 26 each, rem 2 -> stages -2 and -3 get one more: 27, 27, 26
    assert [len(r) for r in stage_layers(80, 3)] == [27, 27, 26]
    # 61 on 4: 15 each, rem 1 -> stage -2: 15, 15, 16, 15
    assert [len(r) for r in stage_layers(61, 4)] == [15, 15, 16, 15]


def test_invalid_layouts_say_what_works():
    spec = resolve("llama-3.1-70b")
    with pytest.raises(LayoutError, match="tp=3 must divide the 64 attention heads.*--tp"):
        make_layout(spec, ParallelConfig(tp=3))
    with pytest.raises(LayoutError, match="must equal --gpus 8"):
        make_layout(spec, ParallelConfig(gpus=8, tp=4, dp=4))
    with pytest.raises(LayoutError, match="ep=2 applies to MoE"):
        make_layout(spec, ParallelConfig(tp=2, ep=2))
    with pytest.raises(LayoutError, match="ep values that work"):
        make_layout(resolve("mixtral-8x7b"), ParallelConfig(tp=4, dp=4, ep=16))


def test_per_gpu_stage_grid_equals_scalar_points():
    import numpy as np

    from llmath.deploy import per_gpu_stage
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency

    spec, hw = resolve("mixtral-8x7b"), get("h100-sxm")
    lay, eff = make_layout(spec, ParallelConfig(tp=2, ep=2, overlap="tbo")), efficiency("expected", hw)
    grid = per_gpu_stage(spec, lay, "decode", Scenario(np.array([1, 8, 64]), 1, 1024), hw, llmath.Precision(), eff)
    for i, b in enumerate((1, 8, 64)):
        one = per_gpu_stage(spec, lay, "decode", Scenario(b, 1, 1024), hw, llmath.Precision(), eff)
        assert grid.time_s[i] == pytest.approx(one.time_s, rel=1e-12)


def _layer_params(plan, lk_prefix: str, key_prefix: str) -> int:
    """Parameters under ``key_prefix`` of one layer of the first layer kind starting with ``lk_prefix``."""
    lk = next(o.layer_kind for o in plan.ops if o.layer_kind.startswith(lk_prefix))
    return sum(n for o in plan.ops if o.layer_kind == lk for k, n in o.params if k.startswith(key_prefix))


def test_mla_tp8_rank_shapes_by_hand():
    # DeepSeek-V3 (D=7168, N=128, q_lora 1536, kv_lora C=512, rope R=64, nope 128, v 128) at TP=8, one rank,
    # one layer: q_a 7168x1536 + its norm 1536 and kv_a 7168x(512+64) + its norm 512 replicated (latent);
    # q_b 1536 x 16·(128+64), kv_b 512 x 16·(128+128), o 16·128 x 7168 split by heads (128/8 = 16).
    by_hand = 7168 * 1536 + 1536 + 7168 * 576 + 512 + 1536 * 16 * 192 + 512 * 16 * 256 + 16 * 128 * 7168
    spec = resolve("deepseek-v3")
    (plan,) = rank_plans(spec, "prefill", "flash", make_layout(spec, ParallelConfig(tp=8, ep=1)))
    assert _layer_params(plan, "moe", "attention") == by_hand
    # the latent cache is replicated: each rank holds (512 + 64) per position per layer, like one device
    from llmath.analysis import kv_elements_per_position

    assert kv_elements_per_position(spec, ops=plan.ops) == {None: 576 * 61}


def test_experts_ep8_dp8_rank_shapes_by_hand():
    # DeepSeek-V3, ep=8 over tp·dp = 1·8 GPUs: 256/8 = 32 routed experts per GPU, each whole (expert-TP 1):
    # gate, up 7168 x 2048 and down 2048 x 7168 -> 32 · 3 · 7168 · 2048 per MoE layer; shared expert whole (tp=1)
    spec = resolve("deepseek-v3")
    (plan,) = rank_plans(spec, "prefill", "flash", make_layout(spec, ParallelConfig(gpus=8, ep=8, dp=8)))
    assert _layer_params(plan, "moe", "moe.experts") == 32 * 3 * 7168 * 2048
    assert _layer_params(plan, "moe", "moe.shared") == 3 * 7168 * 2048
    # expert-TP 2 (tp=2, dp=4, ep=4): 64 experts per GPU, each half as wide
    (plan2,) = rank_plans(spec, "prefill", "flash", make_layout(spec, ParallelConfig(gpus=8, tp=2, ep=4)))
    assert _layer_params(plan2, "moe", "moe.experts") == 64 * 3 * 7168 * 1024


def test_gqa_kv_heads_replicated_when_fewer_than_ranks():
    # Llama-3.1-70B has K=8 KV heads; at TP=16 each rank holds one KV head (replicated twice):
    # K/V cache per position per rank = 2 · 1 · 128 · 80 layers; at TP=4: 2 · 2 · 128 · 80
    from llmath.analysis import kv_elements_per_position

    spec = resolve("llama-3.1-70b")
    for tp, heads in ((16, 1), (4, 2)):
        (plan,) = rank_plans(spec, "decode", "flash", make_layout(spec, ParallelConfig(tp=tp)))
        assert kv_elements_per_position(spec, ops=plan.ops) == {None: 2 * heads * 128 * 80}


def test_pipeline_stages_hold_their_layers_and_the_ends():
    spec = resolve("llama-3.1-8b")  # 32 layers, untied
    plans = rank_plans(spec, "prefill", "flash", make_layout(spec, ParallelConfig(pp=4)))
    assert [len(p.layers) for p in plans] == [8, 8, 8, 8]
    names = [{o.name for o in p.ops} for p in plans]
    assert "embed.tokens" in names[0] and "embed.tokens" not in names[3]
    assert "lm_head" in names[3] and "lm_head" not in names[0]
    total = sum(sum(n * o.count for o in p.ops for _, n in o.params) for p in plans)
    assert total == llmath.params("llama-3.1-8b").total  # nothing replicated across pipeline stages
    assert [c.kind for c in plans[0].collectives] == ["p2p"] and plans[3].collectives == ()


def test_more_bandwidth_is_never_slower():
    from dataclasses import replace

    from llmath.hardware import get

    hw = get("h100-sxm")
    fast = replace(hw, topology={k: replace(v, bytes_per_s=4 * v.bytes_per_s) for k, v in hw.topology.items()})
    hbm = replace(hw, memory_bandwidth_bytes_per_s=2 * hw.memory_bandwidth_bytes_per_s)
    for name, par in (
        ("llama-3.1-70b", ParallelConfig(gpus=8, pp=2)),
        ("mixtral-8x7b", ParallelConfig(gpus=4, dp=2, ep=4)),
    ):
        for b in (1, 16, 128):
            base = llmath.analyze(name, hw, workload=Workload(batch=b, prompt=256, gen=16), parallel=par).generation
            for other in (fast, hbm):
                g = llmath.analyze(name, other, workload=Workload(batch=b, prompt=256, gen=16), parallel=par).generation
                assert g["ttft_s"] < base["ttft_s"] and g["tpot_s"] < base["tpot_s"]


def test_two_batch_overlap_hides_all_to_all_only():
    spec = "mixtral-8x7b"
    # attention-DP 4 x EP 4: the layout whose MoE dispatches and combines by all-to-all (attention-TP with EP
    # holds every token on every rank and only all-reduces)
    a = llmath.analyze(spec, "h100-sxm", workload=Workload(batch=64), parallel=ParallelConfig(gpus=4, dp=4, ep=4))
    b = llmath.analyze(
        spec, "h100-sxm", workload=Workload(batch=64), parallel=ParallelConfig(gpus=4, dp=4, ep=4, overlap="tbo")
    )
    assert b.prefill.comm_s == a.prefill.comm_s  # the same collectives run ...
    assert b.prefill.time_s < a.prefill.time_s  # ... but the all-to-all hides behind compute
    with pytest.raises(LayoutError, match="needs --ep > 1"):
        make_layout(resolve(spec), ParallelConfig(tp=2, overlap="tbo"))
    with pytest.raises(LayoutError, match="applies to multi-GPU layouts"):
        llmath.analyze(spec, "h100-sxm", parallel=ParallelConfig(overlap="tbo"))


def test_topology_read_from_the_registry_or_derived():
    from llmath.errors import HardwareError
    from llmath.hardware import custom, from_dict, get
    from llmath.hardware.topology import topology

    hw = get("h100-sxm")
    t = topology(hw)
    assert (t.scale_up.bytes_per_s, t.domain) == (hw.topology["scale_up"].bytes_per_s, hw.topology["scale_up"].domain)
    # no topology field: datasheet NVLink 900 GB/s is bidirectional -> 450 GB/s per direction, domain 8;
    # scale-out = half the PCIe figure (128 GB/s bidirectional -> 64 GB/s)
    bare = from_dict(
        {"name": "x", "memory_bytes": 8e10, "memory_bandwidth_bytes_per_s": 3e12, "peak_flops_per_s": {"bf16": 1e15},
         "interconnect_bytes_per_s": {"nvlink": 900e9, "pcie": 128e9}}
    )  # fmt: skip
    t = topology(bare)
    assert (t.scale_up.bytes_per_s, t.domain, t.scale_out.bytes_per_s) == (450e9, 8, 64e9) and t.derived
    with pytest.raises(HardwareError, match="lists no interconnect"):
        llmath.analyze("llama-3.1-8b", custom(100, 1000, 80), parallel=ParallelConfig(tp=2))


def test_a_group_beyond_the_scale_up_domain_uses_scale_out():
    # Llama-3.1-405B at tp 8 x pp 2 on H100 boxes of 8: the stage-to-stage send crosses boxes
    spec = resolve("llama-3.1-405b")
    plans = rank_plans(spec, "decode", "flash", make_layout(spec, ParallelConfig(tp=8, pp=2)))
    send = next(c for c in plans[0].collectives if c.kind == "p2p")
    tp_ar = next(c for c in plans[0].collectives if c.name == "attn.all_reduce")
    assert not send.within(8) and tp_ar.within(8) and send.within(16)


def test_collectives_are_rows_of_the_stage_report():
    a = llmath.analyze("llama-3.1-70b", "h100-sxm", workload=Workload(batch=4), parallel=ParallelConfig(gpus=4))
    rows = [r for r in a.decode.ops if r.kind == "collective"]
    assert {r.name for r in rows} == set(a.comm["decode"])
    assert sum(r.time_s for r in rows) == pytest.approx(a.decode.comm_s)
    # no overlap: the stage time is every operator's time plus every collective's
    assert sum(r.time_s for r in a.decode.ops) == pytest.approx(a.decode.time_s)
    # message of the attention all-reduce: B·T·D activations = 4 · 1 · 8192 · 2 bytes, once per layer (80)
    ar = next(r for r in rows if r.name == "attn.all_reduce")
    assert ar.bytes["comm"] == 4 * 8192 * 2 * 80


@pytest.mark.parametrize(
    "name,kw,expected",
    [
        # TP-sharded experts, one replica: the MoE layer ends in the TP all-reduce, like a dense FFN
        ("mixtral-8x7b", dict(tp=2), {"attn.all_reduce": 2, "moe.all_reduce": 2, "embed.all_reduce": 2,
                                       "lm_head.all_gather": 2}),
        # attention-DP 8, experts EP 8 (expert-TP 1): only the dispatch/combine all-to-alls
        ("deepseek-v3", dict(gpus=8, ep=8, dp=8), {"moe.dispatch": 8, "moe.combine": 8}),
        # tp 2 x dp 4, ep 4 -> expert-TP 2: all-to-all over 4 groups, gather/scatter within 2, TP all-reduce
        ("deepseek-v3", dict(gpus=8, tp=2, ep=4), {"embed.all_reduce": 2, "attn.all_reduce": 2, "ffn.all_reduce": 2,
                                                   "moe.dispatch": 4, "moe.all_gather": 2, "moe.reduce_scatter": 2,
                                                   "moe.combine": 4, "moe.all_reduce": 2, "lm_head.all_gather": 2}),
        # dp 4, ep 1 -> experts sharded over all 4 GPUs (expert-TP 4): gather every replica's tokens, scatter back
        ("mixtral-8x7b", dict(gpus=4, dp=4, ep=1), {"moe.all_gather": 4, "moe.reduce_scatter": 4}),
        # attention-TP 8 with EP 8 (or EP 4 x expert-TP 2): every rank already holds every token, its experts'
        # outputs are summed by the MoE all-reduce (vLLM use_all2all_kernels needs dp_size > 1)
        ("deepseek-v3", dict(gpus=8, tp=8, ep=8), {"embed.all_reduce": 8, "attn.all_reduce": 8, "ffn.all_reduce": 8,
                                                   "moe.all_reduce": 8, "lm_head.all_gather": 8}),
        ("deepseek-v3", dict(gpus=8, tp=8, ep=4), {"embed.all_reduce": 8, "attn.all_reduce": 8, "ffn.all_reduce": 8,
                                                   "moe.all_reduce": 8, "lm_head.all_gather": 8}),
    ],
)  # fmt: skip
def test_collectives_of_each_layout(name, kw, expected):
    spec = resolve(name)
    (plan,) = rank_plans(spec, "decode", "flash", make_layout(spec, ParallelConfig(**kw)))
    assert {c.name: c.n for c in plan.collectives} == expected


def test_all_to_all_message_by_hand():
    # DeepSeek-V3 at ep 8, dp 8 (tp 1): each GPU sends its B·T tokens to their k = 8 experts, D = 7168 wide,
    # in each of the 58 MoE layers: 8 · 7168 = 57,344 elements per token per layer; bf16 -> 2 bytes
    a = llmath.analyze(
        "deepseek-v3",
        "h200",
        workload=Workload(batch=16, prompt=64, gen=2),
        parallel=ParallelConfig(gpus=8, ep=8, dp=8),
    )
    B, T = 16 // 8, 64
    assert a.comm["prefill"]["moe.dispatch"]["bytes"] == B * T * 8 * 7168 * 2 * 58
    # bus bytes: (n-1)/n of the message for an all-to-all (NCCL PERFORMANCE.md)
    assert a.comm["prefill"]["moe.dispatch"]["bus_bytes"] == pytest.approx(B * T * 8 * 7168 * 2 * 58 * 7 / 8)
