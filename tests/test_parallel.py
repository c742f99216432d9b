"""Parallel layouts: invariants of the sharded operator lists, collectives' formulas, errors.

Independent anchors: the single-device operator list (itself proven against transformers), NCCL's
documented bus-bandwidth factors (nccl-tests doc/PERFORMANCE.md), and per-rank shapes written out by hand.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

import llmath
from llmath.deploy.collectives import bus_factor, collective_time
from llmath.deploy.layout import make_layout, stage_layers
from llmath.deploy.shard import REPLICATED, rank_plans
from llmath.errors import LayoutError
from llmath.model.registry import resolve
from llmath.ops import Scenario, build_ops, evaluate


def _flops(ops, sc, spec, mt=1):
    return sum(c.values.get("flops", 0) for c in evaluate(ops, sc, spec, mt))


def _replicated(op, spec) -> bool:
    return op.name in REPLICATED or (op.component == "norm" and op.name != "attn.qk_norm") or op.component == "residual"


@pytest.mark.parametrize("name,tp", [("llama-3.1-70b", 2), ("llama-3.1-70b", 8), ("qwen2.5-7b", 4), ("gpt2", 4)])
@pytest.mark.parametrize("stage", ["prefill", "decode"])
def test_sum_over_ranks_of_sharded_flops_is_single_gpu(name, tp, stage):
    spec = resolve(name)
    sc = Scenario(3, 17 if stage == "prefill" else 1, 0 if stage == "prefill" else 40)
    one = _flops(build_ops(spec, stage, "flash"), sc, spec)
    (plan,) = rank_plans(spec, stage, "flash", make_layout(spec, tp=tp))
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
    kw = dict(batch=4, prompt=300, gen=50, precision=llmath.Precision())
    for name in ("llama-3.1-8b", "mixtral-8x7b", "deepseek-v2-lite", "gemma-2-2b"):
        a = llmath.analyze(name, "h100-sxm", **kw)
        b = llmath.analyze(name, "h100-sxm", gpus=1, **kw)
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
    (plan,) = rank_plans(spec, "prefill", "flash", make_layout(spec, gpus=2))
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
        make_layout(spec, tp=3)
    with pytest.raises(LayoutError, match="must equal --gpus 8"):
        make_layout(spec, gpus=8, tp=4, dp=4)
    with pytest.raises(LayoutError, match="ep=2 applies to MoE"):
        make_layout(spec, tp=2, ep=2)
    with pytest.raises(LayoutError, match="ep values that work"):
        make_layout(resolve("mixtral-8x7b"), tp=4, dp=4, ep=16)


def test_per_gpu_stage_grid_equals_scalar_points():
    import numpy as np

    from llmath.deploy import per_gpu_stage
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency

    spec, hw = resolve("mixtral-8x7b"), get("h100-sxm")
    lay, eff = make_layout(spec, tp=2, ep=2, overlap="tbo"), efficiency("expected", hw)
    grid = per_gpu_stage(spec, lay, "decode", Scenario(np.array([1, 8, 64]), 1, 1024), hw, llmath.Precision(), eff)
    for i, b in enumerate((1, 8, 64)):
        one = per_gpu_stage(spec, lay, "decode", Scenario(b, 1, 1024), hw, llmath.Precision(), eff)
        assert grid.time_s[i] == pytest.approx(one.time_s, rel=1e-12)
