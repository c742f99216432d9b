"""Tensor parallelism of the layers that used to be refused (deploy/shard_shared.py, deploy/shard_mixers.py).

Sources: Zamba2's shared block as vLLM shards it (``vllm/model_executor/models/zamba2.py``: QKVParallelLinear q/k/v,
RowParallelLinear o_proj and down, MergedColumnParallelLinear gate_up, Zamba2LoRA A ColumnParallelLinear with
gather_output=True and B (Merged)ColumnParallelLinear, ReplicatedLinear ``linear``; Zamba2ForCausalLM does not
implement SupportsPP). transformers 5.23 ships no ``base_model_tp_plan`` for Zamba2, so the expected values are the
arithmetic in the comments.
"""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath.analysis import analyze
from llmath.deploy.layout import make_layout
from llmath.deploy.shard import rank_plans
from llmath.errors import LayoutError
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate

PREFILL, DECODE = Scenario(3, 130, 0), Scenario(3, 1, 40)


def _spec(name, **over):
    return spec_from_config(dict(default_config(name), **over), name)


def _plan(spec, tp, stage="decode"):
    (plan,) = rank_plans(spec, stage, "flash", make_layout(spec, tp=tp))
    return plan


def _params(ops, prefix):
    return {k: n for o in ops if o.name.startswith(prefix) for k, n in o.params}


def test_zamba2_shared_block_params_per_rank_at_tp2():
    spec = _spec("zamba2")
    p = _params(_plan(spec, 2).ops, "shared.")
    # D = 2560, block input W = 2·D = 5120, N = K = 32 heads of H = W/N = 160, F = 10240, LoRA rank r = 128
    assert p["attention.shared.q.weight"] == p["attention.shared.k.weight"] == 5120 * 32 * 160 // 2 == 13_107_200
    assert p["attention.shared.o.weight"] == 32 * 160 * 2560 // 2
    assert p["ffn.shared.gate.weight"] == p["ffn.shared.down.weight"] == 2560 * 10240 // 2
    assert p["ffn.adapters.gate_up.down.weight"] == 2560 * 128 // 2  # A: r/T outputs, then all-gathered
    assert p["ffn.adapters.gate_up.up.weight"] == 128 * 2 * 10240 // 2  # B: 2·F/T outputs
    assert p["shared.linear.weight"] == 2560 * 2560  # ReplicatedLinear
    assert p["norm.shared"] in (5120, 2560)  # both RMSNorms whole


def test_zamba2_collectives_and_cache_at_tp4():
    spec = _spec("zamba2")
    plan = _plan(spec, 4)
    colls = {c.name: c for c in plan.collectives}
    # 54 layers, all Mamba-2; 9 of them hybrid (the shared block first): one out_proj all-reduce per Mamba-2 layer,
    # o_proj and down per hybrid layer, and the one MLP adapter's all-gather of r = 128 per token
    assert colls["mixer.all_reduce"].count == 54
    assert colls["shared.attn.all_reduce"].count == colls["shared.ffn.all_reduce"].count == 9
    g = colls["shared.adapter.all_gather"]
    assert (g.count, g.kind, g.message[0].coef) == (9, "all_gather", 128)
    kv = sum(c.values.get("kv_write", 0) for c in evaluate(plan.ops, DECODE, spec) if c.op.name.startswith("shared."))
    # K/T = 8 KV heads of 160, K and V, 3 sequences × 1 token, 9 hybrid layers
    assert kv == 2 * 8 * 160 * 3 * 9


REPLICATED = {"shared.attn.concat", "shared.norm.attn_in", "shared.norm.ffn_in", "shared.linear", "shared.add"}


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("stage,sc", [("prefill", PREFILL), ("decode", DECODE)])
def test_zamba2_shared_sum_over_ranks_is_single_gpu(tp, stage, sc):
    """Each shared-block operator is either split (tp × a rank's = one GPU's) or replicated (a rank's = one
    GPU's), in every cost class and parameter; the replicated ones are exactly the module doc's."""
    spec = _spec("zamba2", use_shared_attention_adapter=True)
    one = {c.op.name: c for c in evaluate(build_ops(spec, stage, "flash"), sc, spec) if c.op.name.startswith("shared.")}
    rank = {c.op.name: c for c in evaluate(_plan(spec, tp, stage).ops, sc, spec) if c.op.name.startswith("shared.")}
    assert rank.keys() == one.keys()
    for name, c in rank.items():
        f = 1 if name in REPLICATED else tp
        for cls in ("flops", "kv_write", "weight"):
            assert f * c.values.get(cls, 0) == one[name].values.get(cls, 0), (name, cls)
    held = {k: n for n_, c in rank.items() for k, n in c.op.params}
    whole = {k: n for n_, c in one.items() for k, n in c.op.params}
    for k, n in whole.items():
        assert held[k] * (1 if k in ("norm.shared", "shared.linear.weight") else tp) == n, k
    assert rank_colls(spec, tp)["shared.adapter.all_gather"].count == 4 * 9  # q, k, v and gate/up adapters


def rank_colls(spec, tp):
    return {c.name: c for c in _plan(spec, tp).collectives}


@pytest.mark.parametrize(
    "name,kw,why",
    [
        ("zamba", {"tp": 2}, "Zamba \\(v1\\)'s shared blocks have no engine sharding rule"),
        ("zamba2", {"tp": 2, "pp": 2}, "not pipeline-parallel in vLLM"),
        ("zamba2", {"tp": 3}, "must divide"),
    ],
)
def test_refused_layouts(name, kw, why):
    with pytest.raises(LayoutError, match=why):
        make_layout(_spec(name), **kw)


def test_analyze_zamba2_on_two_gpus():
    spec = _spec("zamba2")
    one = analyze(spec, "h100-sxm", batch=4, prompt=64, gen=4)
    two = analyze(spec, "h100-sxm", batch=4, prompt=64, gen=4, gpus=2, tp=2)
    assert two.memory.per_gpu_bytes < one.memory.total_bytes
    # decode step, batch 4, bf16: the adapter all-gather output is B·r = 4·128 elements of 2 bytes, 9 layers
    assert two.comm["decode"]["shared.adapter.all_gather"]["bytes"] == 9 * 4 * 128 * 2
