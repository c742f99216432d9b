"""Tensor-parallel linear-attention, short-conv and Falcon-H1 layers (deploy/shard_mixers.py), as vLLM shards them.

Sources (vllm-project/vllm): ``vllm/model_executor/layers/mamba/gdn_linear_attn.py`` (GatedDeltaNetAttention:
in_proj_qkvz / in_proj_ba MergedColumnParallelLinear, conv1d split per q/k/v part, A_log and dt_bias H/T,
RMSNormGated(head_v_dim) whole, out_proj RowParallelLinear), ``vllm/model_executor/layers/kda.py``
(KimiDeltaAttention: q/k/v/b/f_b/g_b ColumnParallelLinear, f_a/g_a ReplicatedLinear, convs split, A_log H/T,
dt_bias I/T, o_norm(head_dim) whole, o_proj RowParallelLinear), ``vllm/model_executor/layers/mamba/linear_attn.py``
(MiniMaxText01LinearAttention: qkv_proj and output_gate ColumnParallelLinear, MiniMaxText01RMSNormTP weight
I/T with its variance all-reduced, out_proj RowParallelLinear), ``vllm/model_executor/layers/mamba/short_conv.py``
(ShortConv: in_proj MergedColumnParallelLinear [I]*3, conv ColumnParallelLinear, out_proj RowParallelLinear) and
``vllm/model_executor/models/falcon_h1.py`` (FalconH1ParallelHybrid: attention o_proj and MambaMixer2 out_proj
each a RowParallelLinear reducing its own output). Expected values are the arithmetic in the comments.
"""

from __future__ import annotations

import pytest
from causal_lm_types import default_config
from helpers import registry_config

from llmath import Workload
from llmath.analysis import analyze
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.shard import rank_plans
from llmath.errors import LayoutError
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate

DECODE = Scenario(1, 1, 40)


def _spec(name, **over):
    cfg = registry_config(name) if "-" in name else default_config(name)
    return spec_from_config(dict(cfg, **over), name)


def _plan(spec, tp, stage="decode"):
    (plan,) = rank_plans(spec, stage, "flash", make_layout(spec, ParallelConfig(tp=tp)))
    return plan


def _params(ops, prefix="mixer."):
    """Per-layer parameters of the first layer kind's ops named ``prefix…`` (a later kind repeats them)."""
    seen, out = set(), {}
    for o in ops:
        if o.name.startswith(prefix) and o.name not in seen:
            seen.add(o.name)
            out.update(dict(o.params))
    return out


def _state(ops, spec):
    """Per-sequence state elements of one mixer layer (``kv_write`` per sequence over the first layer kind)."""
    kinds = [o.layer_kind for o in ops if o.name.startswith("mixer.")]
    one = [o for o in ops if o.name.startswith("mixer.") and o.layer_kind == kinds[0]]
    return sum(c.values.get("kv_write", 0) // c.op.count for c in evaluate(tuple(one), DECODE, spec))


def test_gated_deltanet_per_rank_at_tp2():
    spec = _spec("qwen3_next")
    ops = _plan(spec, 2).ops
    p = _params(ops)
    # D = 2048, H = 32 value heads of P = 128 (I = 4096), G = 16 key heads of N = 128, conv C = 4
    # in_proj D·(2·G·N + 2·I + 2·H) = 2048·12,352 = 25,296,896, half per rank
    assert p["attention.linear.in_proj.weight"] == 2048 * 12_352 // 2 == 12_648_448
    # conv over q, k, v: (I + 2·G·N)·C = 8,192·4, half per rank
    assert p["attention.linear.conv.weight"] == 8192 * 4 // 2
    assert p["attention.linear.A_log"] == p["attention.linear.dt_bias"] == 16  # H/2
    assert p["norm.mixer"] == 128  # RMSNormGated(head_v_dim): whole on every rank
    assert p["attention.linear.out_proj.weight"] == 4096 * 2048 // 2
    # state: conv (C − 1)·8,192/2 = 12,288 + recurrent H/2·N·P = 16·128·128 = 262,144
    assert _state(ops, spec) == 3 * 4096 + 16 * 128 * 128
    colls = {c.name: c.count for c in _plan(spec, 2).collectives}
    # 48 layers: 36 Gated DeltaNet + 12 attention, one all-reduce after each block; MoE FFN everywhere
    assert (colls["mixer.all_reduce"], colls["attn.all_reduce"], colls["moe.all_reduce"]) == (36, 12, 48)
    assert "mixer.norm.all_reduce" not in colls


def test_kda_per_rank_at_tp2():
    spec = _spec("kimi_linear")
    ops = _plan(spec, 2).ops
    p = _params(ops)
    # D = 2304, H = 32 heads of P = N = 128 (I = 4096), low-rank gates R = 128, conv C = 4
    assert p["attention.linear.qkv_proj.weight"] == 2304 * 3 * 4096 // 2 == 14_155_776
    assert p["attention.linear.conv.weight"] == 3 * 4096 * 4 // 2
    assert p["attention.linear.b_proj.weight"] == 2304 * 32 // 2
    assert p["attention.linear.f_a.weight"] == p["attention.linear.g_a.weight"] == 2304 * 128  # ReplicatedLinear
    assert p["attention.linear.f_b.weight"] == p["attention.linear.g_b.weight"] == 128 * 4096 // 2
    assert (p["attention.linear.A_log"], p["attention.linear.dt_bias"]) == (16, 2048)  # H/2, I/2
    assert p["norm.mixer"] == 128 and p["attention.linear.out_proj.weight"] == 4096 * 2304 // 2
    # state: conv 3·(3·4096)/2 = 18,432 + H/2·N·P = 16·128·128 = 262,144
    assert _state(ops, spec) == 3 * 3 * 4096 // 2 + 16 * 128 * 128


def test_lightning_per_rank_at_tp4():
    spec = _spec("minimax")
    plan = _plan(spec, 4)
    p = _params(plan.ops)
    # D = 4096, H = 32 heads of P = 128 (I = 4096): H/4 = 8 heads per rank
    assert p["attention.linear.qkv_proj.weight"] == 4096 * 3 * 4096 // 4
    assert p["norm.mixer"] == 4096 // 4  # MiniMaxText01RMSNormTP: weight I/T
    assert p["attention.linear.output_gate.weight"] == p["attention.linear.out_proj.weight"] == 4096 * 4096 // 4
    assert _state(plan.ops, spec) == 8 * 128 * 128  # H/4·P·P, no conv
    colls = {c.name: c for c in plan.collectives}
    # 32 layers alternate: 16 lightning; the split norm all-reduces one sum of squares per token
    assert colls["mixer.all_reduce"].count == colls["mixer.norm.all_reduce"].count == 16
    assert colls["mixer.norm.all_reduce"].message[0].coef == 1


def test_short_conv_per_rank_at_tp2():
    spec = _spec("lfm2-1.2b")
    plan = _plan(spec, 2)
    p = _params(plan.ops)
    # D = I = 2048, conv width C = 3, no biases
    assert p["mixer.in_proj.weight"] == 2048 * 3 * 2048 // 2
    assert p["mixer.conv.weight"] == 2048 * 3 // 2 and p["mixer.out_proj.weight"] == 2048 * 2048 // 2
    assert _state(plan.ops, spec) == 2 * 1024  # (C − 1)·I/2
    colls = {c.name: c.count for c in plan.collectives}
    # 16 layers: 10 short-conv, 6 attention, all with a dense FFN
    assert (colls["mixer.all_reduce"], colls["attn.all_reduce"], colls["ffn.all_reduce"]) == (10, 6, 16)


def test_falcon_h1_parallel_layer_per_rank_at_tp2():
    spec = _spec("falcon_h1")
    plan = _plan(spec, 2)
    p = _params(plan.ops)
    # Mamba-2: D = 4096, I = 1024, H = 128 heads of P = 8, N = 256, one group (replicated), C = 4
    assert p["mixer.in_proj.weight"] == 4096 * (2 * 512 + 2 * 256 + 64) == 6_553_600
    assert p["mixer.conv.weight"] == (512 + 2 * 256) * 4 and p["mixer.conv.bias"] == 1024
    assert p["mixer.A_log"] == p["mixer.D"] == p["mixer.dt_bias"] == 64
    assert p["mixer.out_proj.weight"] == 512 * 4096
    # attention: N = 32, K = 8 heads of 128: 16 and 4 per rank
    a = _params(plan.ops, "attn.")
    assert a["attention.q.weight"] == a["attention.o.weight"] == 4096 * 16 * 128
    assert a["attention.k.weight"] == 4096 * 4 * 128
    # state per layer: conv 3·(512 + 512) + SSM H/2·P·N = 64·8·256
    assert _state(plan.ops, spec) == 3 * 1024 + 64 * 8 * 256
    colls = {c.name: c.count for c in plan.collectives}
    # every one of the 32 layers: attention and mixer reduce separately (two RowParallelLinear), then the FFN
    assert (colls["attn.all_reduce"], colls["mixer.all_reduce"], colls["ffn.all_reduce"]) == (32, 32, 32)


def _replicated(op, cls, spec):
    """Whether ``cls`` of the mixer op ``op`` is held whole on every rank (the rules in the module doc)."""
    if op.name in ("mixer.f_a_proj", "mixer.g_a_proj"):
        return True
    return op.name == "mixer.norm" and spec.mixer.kind in ("gated_delta", "kda") and cls in ("weight", "params")


@pytest.mark.parametrize(
    "name,tp,over",
    [
        ("qwen3_next", 2, {}),
        ("qwen3_next", 4, {}),
        ("qwen3_5_text", 4, {}),
        ("kimi_linear", 4, {}),
        ("minimax", 8, {}),
        ("lfm2-1.2b", 4, {}),
        ("falcon_h1", 2, {"mamba_n_groups": 2}),
    ],
)
@pytest.mark.parametrize("stage", ["prefill", "decode"])
def test_mixer_sum_over_ranks_is_single_gpu(name, tp, over, stage):
    """Σ over the tp ranks of the mixer operators' FLOPs, state written, weight bytes and parameters, with the
    replicated parts counted once, equals one GPU's (no vocabulary padding or KV replication in mixers)."""
    spec = _spec(name, **over)
    sc = Scenario(3, 130, 0) if stage == "prefill" else Scenario(3, 1, 40)
    one = [c for c in evaluate(build_ops(spec, stage, "flash"), sc, spec) if c.op.name.startswith("mixer.")]
    rank = [c for c in evaluate(_plan(spec, tp, stage).ops, sc, spec) if c.op.name.startswith("mixer.")]
    assert [c.op.name for c in rank] == [c.op.name for c in one]
    for cls in ("flops", "vflops", "kv_write", "weight"):
        got = sum((1 if _replicated(c.op, cls, spec) else tp) * c.values.get(cls, 0) for c in rank)
        assert got == sum(c.values.get(cls, 0) for c in one), cls
    got = sum((1 if _replicated(c.op, "params", spec) else tp) * n * c.op.count for c in rank for _, n in c.op.params)
    assert got == sum(n * c.op.count for c in one for _, n in c.op.params)


@pytest.mark.parametrize(
    "name,tp,why",
    [
        ("qwen3_next", 32, "divide the Gated DeltaNet mixer's 16 key heads"),
        ("kimi_linear", 64, "divide the KDA mixer's 32 heads"),
        ("minimax", 64, "divide the lightning mixer's 32 heads"),
        ("lfm2-1.2b", 3, "divide the short-conv mixer's 2048 inner channels"),
    ],
)
def test_tp_without_a_rule_is_refused(name, tp, why):
    spec = _spec(name)
    with pytest.raises(LayoutError, match=why):
        make_layout(spec, ParallelConfig(tp=tp))


def test_analyze_runs_qwen3_next_on_two_gpus():
    spec = _spec("qwen3_next")
    one = analyze(spec, "h100-sxm", workload=Workload(batch=4, prompt=64, gen=4))
    two = analyze(spec, "h100-sxm", workload=Workload(batch=4, prompt=64, gen=4), parallel=ParallelConfig(gpus=2, tp=2))
    assert two.memory.per_gpu_bytes < one.memory.total_bytes
    # one decode step, batch 4, bf16: the mixer's all-reduce moves B·D = 4·2048 elements of 2 bytes per layer
    assert two.comm["decode"]["mixer.all_reduce"]["bytes"] == 36 * 4 * 2048 * 2


def _hf_rank_linear_params(model, names, tp):
    """Parameters on one rank of the first linear-attention layer's ``names`` Linears under transformers'
    plan: every one is ``colwise_gather_output`` (weight [out, in] split on out)."""
    layer = next(layer for layer in model.model.layers if hasattr(layer, "linear_attn"))
    plan = model.config.base_model_tp_plan
    total = 0
    for n in names:
        assert plan[f"layers.*.linear_attn.{n}"] == "colwise_gather_output"
        out_f, in_f = getattr(layer.linear_attn, n).weight.shape
        assert out_f % tp == 0
        total += out_f // tp * in_f
    return total


@pytest.mark.parametrize(
    "name,names",
    [
        ("qwen3_next", ("in_proj_qkvz", "in_proj_ba", "out_proj")),
        ("qwen3_5_text", ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")),
    ],
)
def test_gated_deltanet_projections_equal_transformers_plan(name, names):
    """transformers' plan splits the linear-attention projections column-wise (out_proj over its D outputs,
    vLLM over its I inputs: the same weights and GEMM FLOPs per rank). By design it keeps conv1d, A_log,
    dt_bias and the norm whole and gathers each output, so every rank runs the whole recurrence; llmath
    follows vLLM, which splits them by heads (test_gated_deltanet_per_rank_at_tp2)."""
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg = default_config(name)
    model = oracle.build_meta(oracle.hf_config(cfg, n_layers=4))
    spec = spec_from_config(cfg, name)
    p = _params(_plan(spec, 4).ops)
    ours = p["attention.linear.in_proj.weight"] + p["attention.linear.out_proj.weight"]
    assert ours == _hf_rank_linear_params(model, names, 4)
