"""Tensor-parallel Mamba and Mamba-2 mixers (deploy/shard.py), as vLLM shards them.

Sources: vLLM ``vllm/model_executor/layers/mamba/mamba_mixer.py`` (MambaMixer: in_proj
MergedColumnParallelLinear [I, I], conv1d ColumnParallelLinear over I, x_proj RowParallelLinear I -> R + 2·N
(its output all-reduced), dt_proj ColumnParallelLinear R -> I, A (I/T × N) and D (I/T) split, out_proj
RowParallelLinear) and ``mamba_mixer2.py`` (MambaMixer2: asserts tp divides the heads, and divides the
groups or groups = 1; ``extra_groups_for_head_shards`` pads G = 1 to one group per rank; in_proj z, x, B,
C, dt and conv1d x, B, C split by ``mamba_v2_sharded_weight_loader``; A, D, dt_bias H/T; the gated norm per
rank, its one-group variance all-reduced in ``Mixer2RMSNormGated``; out_proj RowParallelLinear).
Expected values are the arithmetic in the comments, from the configs' sizes.
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
from llmath.ops.split import Split

DECODE = Scenario(1, 1, 40)  # one sequence, one new token


def _plan(spec, tp, stage="decode"):
    (plan,) = rank_plans(spec, stage, "flash", make_layout(spec, ParallelConfig(tp=tp)))
    return plan


def _mixer(ops):
    return {o.name: o for o in ops if o.name.startswith("mixer.")}


def _per_layer(op, cls, spec):
    (c,) = evaluate((op,), DECODE, spec)
    return c.values.get(cls, 0) // op.count


def test_falcon_mamba_per_rank_parameters_flops_state_at_tp2():
    spec = spec_from_config(default_config("falcon_mamba"), "falcon_mamba")
    ops = _mixer(_plan(spec, 2).ops)
    params = {k: n for o in ops.values() for k, n in o.params}
    # D = 768, I = 1536 (I/2 = 768 per rank), N = 16, conv width C = 4, R = 48
    assert params["mixer.in_proj.weight"] == 768 * 2 * 768  # column: 2·I/2 outputs
    assert params["mixer.conv.weight"] == 768 * 4 and params["mixer.conv.bias"] == 768
    assert params["mixer.x_proj.weight"] == 768 * (48 + 2 * 16)  # row: I/2 inputs, R + 2·N outputs
    assert params["mixer.dt_proj.weight"] == 48 * 768 and params["mixer.dt_proj.bias"] == 768
    assert params["mixer.A_log"] == 768 * 16 and params["mixer.D"] == 768
    assert params["mixer.out_proj.weight"] == 768 * 768
    # 1,885,440 per rank; two ranks = the unsharded 2·768·1536 + 1536·4 + 1536 + 1536·80 + 48·1536 + 1536
    # + 1536·16 + 1536 + 1536·768 = 3,770,880
    assert sum(params.values()) == 1_885_440 and 2 * 1_885_440 == 3_770_880
    single = sum(n for o in build_ops(spec, "decode", "flash") if o.name.startswith("mixer.") for _, n in o.params)
    assert single == 3_770_880
    # decode matmul FLOPs per token: 2·768·1536 + 2·768·4 + 2·768·80 + 2·48·768 + 2·768·16 + 2·768·768
    flops = sum(_per_layer(o, "flops", spec) for o in ops.values())
    assert flops == 2 * 768 * 1536 + 2 * 768 * 4 + 2 * 768 * 80 + 2 * 48 * 768 + 2 * 768 * 16 + 2 * 768 * 768
    # state per sequence: conv (C − 1)·I/2 = 3·768 plus SSM I/2·N = 768·16, half the unsharded 3·1536 + 1536·16
    state = sum(_per_layer(o, "kv_write", spec) for o in ops.values())
    assert state == 3 * 768 + 768 * 16 == (3 * 1536 + 1536 * 16) // 2
    colls = {c.name: c for c in _plan(spec, 2).collectives}
    # per layer: out_proj's all-reduce of D and x_proj's of R + 2·N = 80 elements per token
    assert colls["mixer.all_reduce"].count == 32 and colls["mixer.x_proj.all_reduce"].message[0].coef == 80


def test_mamba2_per_rank_with_groups_split_at_tp4():
    spec = spec_from_config(default_config("mamba2"), "mamba2")
    ops = _mixer(_plan(spec, 4).ops)
    params = {k: n for o in ops.values() for k, n in o.params}
    # D = 4096, I = 8192, H = 128 heads of P = 64, N = 128, G = 8 groups: per rank I/4 = 2048, H/4 = 32, G/4 = 2
    assert params["mixer.in_proj.weight"] == 4096 * (2 * 2048 + 2 * 2 * 128 + 32)  # z, x, B, C, dt
    assert 4 * params["mixer.in_proj.weight"] == 4096 * (2 * 8192 + 2 * 8 * 128 + 128)
    assert params["mixer.conv.weight"] == (2048 + 2 * 2 * 128) * 4 and params["mixer.conv.bias"] == 2560
    assert params["mixer.A_log"] == params["mixer.D"] == params["mixer.dt_bias"] == 32
    assert params["norm.mixer"] == 2048 and params["mixer.out_proj.weight"] == 2048 * 4096
    # state: conv 3·(2048 + 512) = 7,680; SSM 32·64·128 = 262,144: a quarter of 3·10,240 + 128·64·128
    state = sum(_per_layer(o, "kv_write", spec) for o in ops.values())
    assert state == 3 * 2560 + 32 * 64 * 128 and 4 * state == 3 * 10240 + 128 * 64 * 128
    assert {c.name for c in _plan(spec, 4).collectives} >= {"mixer.all_reduce"}
    assert "mixer.norm.all_reduce" not in {c.name for c in _plan(spec, 4).collectives}


def test_mamba2_one_group_is_replicated_on_every_rank():
    spec = spec_from_config(dict(default_config("mamba2"), n_groups=1), "mamba2")
    plan = _plan(spec, 4, "prefill")
    ops = _mixer(plan.ops)
    params = {k: n for o in ops.values() for k, n in o.params}
    # each rank holds the whole group's B and C (N = 128 each): 4096·(2·2048 + 2·128 + 32) = 17,956,864;
    # four ranks hold 3 copies more of B, C than one GPU: 4·17,956,864 − 4096·(2·8192 + 256 + 128) = 3·256·4096
    assert params["mixer.in_proj.weight"] == 4096 * 4384 == 17_956_864
    assert 4 * 17_956_864 - 4096 * (2 * 8192 + 256 + 128) == 3 * 256 * 4096
    assert params["mixer.conv.weight"] == (2048 + 256) * 4
    # flash C·Bᵀ per chunk position: 2·(1·N + H/4·P) = 2·(128 + 2048) (unsharded 2·(128 + 8192))
    (xterm,) = [t for t in dict(ops["mixer.scan"].costs)["flops"] if t.mono.startswith("X:")]
    assert xterm.coef == 2 * (128 + 2048)
    norm = {c.name: c for c in plan.collectives}["mixer.norm.all_reduce"]
    assert norm.message[0].coef == 1  # each token's sum of squares


def _replicated(op):
    return op.split == Split.REPLICATED  # norms, residual adds, the router: whole on every rank


@pytest.mark.parametrize("stage", ["prefill", "decode"])
def test_nemotron_h_sum_over_ranks_is_single_gpu(stage):
    """Nemotron-H 8B (24 Mamba-2 layers, G = 8, K = 8 KV heads, V = 131,072): everything divides tp = 2, so
    the sharded operators' parameters, FLOPs and state summed over the two ranks, plus one copy of the
    replicated ones, are the single GPU's."""
    spec = spec_from_config(registry_config("nemotron-h-8b-base-8k"), "nemotron-h-8b-base-8k")
    sc = Scenario(3, 17, 0) if stage == "prefill" else Scenario(3, 1, 40)
    one = evaluate(build_ops(spec, stage, "flash"), sc, spec)
    plan = _plan(spec, 2, stage)
    rank = evaluate(plan.ops, sc, spec)
    for cls in ("flops", "kv_write", "weight"):
        got = sum((1 if _replicated(o) else 2) * c.values.get(cls, 0) for o, c in zip(plan.ops, rank, strict=True))
        assert got == sum(c.values.get(cls, 0) for c in one), cls
    params = sum((1 if _replicated(o) else 2) * n * o.count for o in plan.ops for _, n in o.params)
    assert params == sum(n * o.count for o in build_ops(spec, stage, "flash") for _, n in o.params)
    colls = {c.name: c.count for c in plan.collectives}
    # 52 layers: 24 Mamba-2, 4 attention, 24 FFN-only ("none"): one all-reduce after each block
    assert (colls["mixer.all_reduce"], colls["attn.all_reduce"], colls["ffn.all_reduce"]) == (24, 4, 24)


@pytest.mark.parametrize(
    "model,over,tp,why",
    [
        ("mamba2", {}, 3, "divide the Mamba-2 mixer's 128 heads"),
        ("mamba2", {}, 16, "divide the Mamba-2 mixer's 8 groups"),
        ("falcon_mamba", {}, 5, "divide the Mamba mixer's 1536 inner channels"),
    ],
)
def test_tp_that_vllm_refuses_is_refused(model, over, tp, why):
    spec = spec_from_config(dict(default_config(model), **over), model)
    with pytest.raises(LayoutError, match=why):
        make_layout(spec, ParallelConfig(tp=tp))


def test_analyze_runs_a_mamba2_model_on_two_gpus():
    spec = spec_from_config(default_config("mamba2"), "mamba2")
    one = analyze(spec, "h100-sxm", workload=Workload(batch=8, prompt=64, gen=8))
    two = analyze(spec, "h100-sxm", workload=Workload(batch=8, prompt=64, gen=8), parallel=ParallelConfig(gpus=2, tp=2))
    assert two.memory.per_gpu_bytes < one.memory.total_bytes
