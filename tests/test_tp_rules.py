"""Tensor parallelism of shared blocks and recurrent / linear-attention mixers (deploy/shard_shared.py,
deploy/shard_mixers.py).

Sources: Zamba2's shared block as vLLM shards it (``vllm/model_executor/models/zamba2.py``: QKVParallelLinear q/k/v,
RowParallelLinear o_proj and down, MergedColumnParallelLinear gate_up, Zamba2LoRA A ColumnParallelLinear with
gather_output=True and B (Merged)ColumnParallelLinear, ReplicatedLinear ``linear``; Zamba2ForCausalLM does not
implement SupportsPP). RG-LRU, RWKV-4 and mLSTM have no engine implementation; their rules are llmath's choice
(deploy/shard_mixers.py's module doc: heads / channels split, in-projections column- and out-projections
row-parallel). transformers 5.23 ships no ``base_model_tp_plan`` for Zamba2, RecurrentGemma, RWKV or xLSTM, so the
expected values are the arithmetic in the comments. DeepSeek-V4 as vLLM shards it (``vllm/model_executor/models/
deepseek_v4.py``, ``layers/deepseek_v4_attention.py``, ``layers/deepseek_compressor.py``: fused_wqa_wkv, the
compressors and the indexer replicated, wq_b and wo_a column-parallel, wo_b row-parallel, the mHC parameters plain
``nn.Parameter``); HY-V4's attention is compared with transformers' ``HYV4Config.base_model_tp_plan``, and
Qwen4-Exp's n-gram tables and Gated DeltaNet projections with ``Qwen4ExpTextConfig.base_model_tp_plan``.
"""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath import Workload
from llmath.analysis import analyze
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.shard import rank_plans
from llmath.errors import LayoutError
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate

PREFILL, DECODE = Scenario(3, 130, 0), Scenario(3, 1, 40)


def _spec(name, **over):
    return spec_from_config(dict(default_config(name), **over), name)


def _plan(spec, tp, stage="decode"):
    (plan,) = rank_plans(spec, stage, "flash", make_layout(spec, ParallelConfig(tp=tp)))
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
        make_layout(_spec(name), ParallelConfig(**kw))


def test_analyze_zamba2_on_two_gpus():
    spec = _spec("zamba2")
    one = analyze(spec, "h100-sxm", workload=Workload(batch=4, prompt=64, gen=4))
    two = analyze(spec, "h100-sxm", workload=Workload(batch=4, prompt=64, gen=4), parallel=ParallelConfig(gpus=2, tp=2))
    assert two.memory.per_gpu_bytes < one.memory.total_bytes
    # decode step, batch 4, bf16: the adapter all-gather output is B·r = 4·128 elements of 2 bytes, 9 layers
    assert two.comm["decode"]["shared.adapter.all_gather"]["bytes"] == 9 * 4 * 128 * 2


def _state(ops, spec, prefixes=("mixer.",)):
    """Per-sequence state elements of one layer of the first mixer layer kind (DECODE has B = 3)."""
    lk = next(o.layer_kind for o in ops if o.name.startswith("mixer."))
    one = [o for o in ops if o.name.startswith(prefixes) and o.layer_kind == lk]
    return sum(c.values.get("kv_write", 0) // c.op.count for c in evaluate(tuple(one), DECODE, spec)) // 3


def test_rglru_per_rank_at_tp2():
    spec = _spec("recurrent_gemma")
    plan = _plan(spec, 2)
    p = _params(plan.ops, "mixer.")
    # D = I = 2560, H = 10 gate blocks of 256, conv C = 4
    assert (p["mixer.in_proj.weight"], p["mixer.in_proj.bias"]) == (2560 * 2 * 2560 // 2, 2 * 2560 // 2)
    assert p["mixer.gates"] == 2 * (2560 * 2560 // 10 + 2560) // 2 == 657_920  # 5 of the 10 blocks, with biases
    assert (p["mixer.conv.weight"], p["mixer.conv.bias"], p["mixer.recurrent_param"]) == (1280 * 4, 1280, 1280)
    assert (p["mixer.out_proj.weight"], p["mixer.out_proj.bias"]) == (1280 * 2560, 2560)  # row-parallel, bias whole
    assert _state(plan.ops, spec) == 3 * 1280 + 1280  # conv (C − 1)·I/2 + recurrence I/2
    colls = {c.name: c.count for c in plan.collectives}
    # 26 layers: 18 recurrent, 8 local attention, each with a dense MLP
    assert (colls["mixer.all_reduce"], colls["attn.all_reduce"], colls["ffn.all_reduce"]) == (18, 8, 26)


def test_rwkv_per_rank_at_tp2():
    spec = _spec("rwkv")
    plan = _plan(spec, 2)
    p = _params(plan.ops, ("mixer.", "ffn."))
    # D = I = 4096, channel mix F = 16384
    assert p["mixer.kvr.weight"] == 4096 * 3 * 4096 // 2 and p["mixer.output.weight"] == 4096 // 2 * 4096
    assert p["mixer.time_decay"] == p["mixer.time_first"] == 4096 // 2
    assert p["mixer.time_mix"] == 3 * 4096 and p["ffn.time_mix"] == 2 * 4096  # token shifts whole
    assert p["ffn.key.weight"] == p["ffn.value.weight"] == 4096 * 16384 // 2
    assert p["ffn.receptance.weight"] == 4096 * 4096  # whole: it gates the reduced output
    # two token-shift states D each (whole) + WKV numerator, denominator and maximum over I/2 channels
    assert _state(plan.ops, spec, ("mixer.", "ffn.")) == 2 * 4096 + 3 * 4096 // 2
    colls = {c.name: c.count for c in plan.collectives}
    assert colls["mixer.all_reduce"] == colls["ffn.all_reduce"] == 32  # output and value, every layer


def test_mlstm_per_rank_at_tp2():
    spec = _spec("xlstm")
    plan = _plan(spec, 2)
    p = _params(plan.ops, "mixer.")
    # D = I = 4096, K = 2048, H = 8 heads
    assert p["mixer.qkvo.weight"] == 4096 * (2 * 2048 + 2 * 4096) // 2 == 25_165_824
    assert (p["mixer.if_gates.weight"], p["mixer.if_gates.bias"]) == (4096 * 2 * 8 // 2, 8)
    assert p["norm.mixer"] == 4096 // 2 and p["mixer.out_proj.weight"] == 4096 // 2 * 4096
    # per head a K/H × I/H memory, a K/H normaliser and one stabiliser: 4 of the 8 heads
    assert _state(plan.ops, spec) == 4 * (256 * 512 + 256 + 1)
    colls = {c.name: c.count for c in plan.collectives}
    assert colls["mixer.all_reduce"] == colls["ffn.all_reduce"] == 32


WHOLE = {"mixer.time_shift", "ffn.time_shift", "ffn.receptance", "ffn.gate"}  # RWKV's replicated operators


@pytest.mark.parametrize("name,tp", [("recurrent_gemma", 2), ("recurrent_gemma", 5), ("rwkv", 4), ("xlstm", 8)])
@pytest.mark.parametrize("stage,sc", [("prefill", PREFILL), ("decode", DECODE)])
def test_recurrent_sum_over_ranks_is_single_gpu(name, tp, stage, sc):
    """Every mixer operator (and RWKV's channel mix) is split tp ways in every cost class and parameter, except
    the row-parallel out-projections' full-width outputs and bias and RWKV's replicated operators."""
    spec = _spec(name)
    keep = ("mixer.", "ffn.") if name == "rwkv" else ("mixer.",)
    one = {c.op.name: c for c in evaluate(build_ops(spec, stage, "flash"), sc, spec) if c.op.name.startswith(keep)}
    rank = {c.op.name: c for c in evaluate(_plan(spec, tp, stage).ops, sc, spec) if c.op.name.startswith(keep)}
    assert rank.keys() == one.keys()
    for name_, c in rank.items():
        f = 1 if name_ in WHOLE else tp
        for cls in ("flops", "kv_write", "weight"):
            assert f * c.values.get(cls, 0) == one[name_].values.get(cls, 0), (name_, cls)
        for (k, n), (_, n1) in zip(c.op.params, one[name_].op.params, strict=True):
            row_bias = k.endswith(".bias") and name_ in ("mixer.out_proj", "mixer.output")
            assert n * (1 if row_bias or name_ in WHOLE else tp) == n1, k


@pytest.mark.parametrize(
    "name,tp,why",
    [
        ("recurrent_gemma", 4, "divide the RG-LRU mixer's 10 heads \\(llmath's rule"),
        ("rwkv", 3, "divide the RWKV mixer's 4096 channels"),
        ("xlstm", 16, "divide the mLSTM mixer's 8 heads"),
    ],
)
def test_recurrent_tp_divisibility(name, tp, why):
    with pytest.raises(LayoutError, match=why):
        make_layout(_spec(name), ParallelConfig(tp=tp))


def _first_layer_params(ops, prefix):
    """Parameters of each ``prefix…`` operator's first occurrence, summed by key (MLA's kv_b is split between
    two ops)."""
    seen, out = set(), {}
    for o in ops:
        if o.name.startswith(prefix) and o.name not in seen:
            seen.add(o.name)
            for k, n in o.params:
                out[k] = out.get(k, 0) + n
    return out


def test_deepseek_v4_per_rank_at_tp2():
    spec = _spec("deepseek_v4")
    plan = _plan(spec, 2)
    p = _first_layer_params(plan.ops, "attn.")
    # D = 4096, N = 64 heads of H = 512, q_lora 1024, o_groups G = 8 of o_lora R = 1024
    assert p["attention.q_b.weight"] == 1024 * 64 * 512 // 2  # wq_b ColumnParallelLinear
    assert p["attention.o_a.weight"] == 64 * 512 // 8 * 8 * 1024 // 2  # wo_a: G/2 groups, each N·H/G -> R
    assert p["attention.o_b.weight"] == 8 * 1024 * 4096 // 2  # wo_b RowParallelLinear
    assert p["attention.sinks"] == 64 // 2
    # replicated: fused_wqa_wkv (q_a D -> 1024, the latent D -> H), the compressor, the indexer's q_b
    assert (p["attention.q_a.weight"], p["attention.kv.weight"]) == (4096 * 1024, 4096 * 512)
    assert p["attention.compressor.kv_proj.weight"] == 4096 * 512
    assert p["attention.indexer.q_b.weight"] == 1024 * 64 * 128
    h = _first_layer_params(plan.ops, "hyper.")
    assert h["hyper.layers.fn"] == 2 * (2 + 4) * 4 * 4 * 4096  # hc_attn_fn and hc_ffn_fn: (2 + hc)·hc × hc·D, whole
    colls = {c.name: c.count for c in plan.collectives}
    assert colls["attn.all_reduce"] == colls["moe.all_reduce"] == 43  # wo_b and the MoE, each of the 43 layers
    # the latent window, compressed caches, compressor and indexer states are whole on every rank
    one = sum(c.values.get("kv_write", 0) for c in evaluate(build_ops(spec, "decode", "flash"), DECODE, spec))
    assert sum(c.values.get("kv_write", 0) for c in evaluate(plan.ops, DECODE, spec)) == one


@pytest.mark.parametrize("name", ["deepseek_v4", "hy_v4"])
def test_hyper_connection_models_refuse_pp(name):
    with pytest.raises(LayoutError, match="residual streams between stages"):
        make_layout(_spec(name), ParallelConfig(tp=1, pp=2))


def test_deepseek_v4_output_groups_bound_tp():
    with pytest.raises(LayoutError, match="divide the 8 output groups"):
        make_layout(_spec("deepseek_v4"), ParallelConfig(tp=16))


def test_hy_v4_attention_equal_transformers_plan():
    """transformers' HYV4Config plan splits q_b, kv_b, gate_proj and the sinks column-wise and o_proj row-wise
    (numel / T on a rank either way) and leaves q_a, the indexer and the hyper-connections out (whole on every
    rank); llmath holds the same on one of 4 ranks."""
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg, tp = default_config("hy_v4"), 4
    model = oracle.build_meta(oracle.hf_config(cfg, n_layers=2))
    tp_plan, attn = model.config.base_model_tp_plan, model.model.layers[0].self_attn
    split = {"q_b_proj": "colwise", "kv_b_proj": "colwise", "gate_proj": "colwise", "o_proj": "rowwise"}
    hf = 0
    for n, style in split.items():
        assert tp_plan[f"layers.*.self_attn.{n}"] == style
        hf += getattr(attn, n).weight.numel() // tp
    assert tp_plan["layers.*.self_attn.sinks"] == "colwise"
    assert not any("hc" in k or "indexer" in k or "q_a" in k for k in tp_plan)
    p = _first_layer_params(_plan(_spec("hy_v4"), tp).ops, "attn.")
    keys = ("attention.mla.q_b.weight", "attention.mla.kv_b.weight", "attention.gate.weight", "attention.o.weight")
    assert sum(p[k] for k in keys) == hf
    assert p["attention.sinks"] == attn.sinks.numel() // tp
    assert p["attention.mla.q_a.weight"] == attn.q_a_proj.weight.numel()
    assert p["attention.indexer.wq_b.weight"] == attn.indexer.wq_b.weight.numel()
    h = _first_layer_params(_plan(_spec("hy_v4"), tp).ops, "hyper.")
    layer = model.model.layers[0]
    assert h["hyper.layers.fn"] == layer.attn_hc.fn.numel() + layer.ffn_hc.fn.numel()


def test_qwen4_exp_per_rank_at_tp2():
    spec = _spec("qwen4_exp_text")
    plan = _plan(spec, 2)
    g = spec.ngram
    p = _first_layer_params(plan.ops, "ple.")
    # every PLE layer's table: its rows × W/2 of the W = E/H = 2048/16 = 128 columns
    rows = sum(g.table_rows(i) for i in range(2))
    assert p["embedding.ngram"] == rows * 128 // 2
    # the layer's projections are whole: key E -> S·D = 2048 -> 4·2048, value E -> D
    assert (p["ple.key.weight"], p["ple.value.weight"]) == (2048 * 4 * 2048, 2048 * 2048)
    h = _first_layer_params(plan.ops, "hyper.attn.")
    assert h["hyper.down.weight"] == h["hyper.up.weight"] == 4 * 2048 * 320  # S·D <-> rank 320, whole
    i = _first_layer_params(plan.ops, "attn.indexer.")
    assert i["attention.indexer.q.weight"] == 2048 * 2048  # the QSA indexer, whole
    colls = {c.name: c for c in plan.collectives}
    # 40 layers: 30 Gated DeltaNet (2 of them n-gram layers), 10 attention, MoE everywhere
    assert (colls["mixer.all_reduce"].count, colls["attn.all_reduce"].count, colls["moe.all_reduce"].count) == (
        30, 10, 40,
    )  # fmt: skip
    assert (colls["ple.all_gather"].count, colls["ple.all_gather"].message[0].coef) == (2, 2048)  # E per token


def test_qwen4_exp_equal_transformers_plan():
    """transformers' plan shards each n-gram table's columns (``embedding_colwise``: EmbeddingParallel over dim 1)
    and the linear-attention projections column-wise; llmath holds the same weights on one of 4 ranks (it keeps
    the QSA indexer and the hyper-connections whole, where transformers splits index_qk_proj and the streams'
    down projections: llmath follows vLLM's treatment of DeepSeek's indexer and mHC, module doc)."""
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg, tp = default_config("qwen4_exp_text"), 4
    model = oracle.build_meta(oracle.hf_config(cfg, n_layers=4))
    tp_plan = model.config.base_model_tp_plan
    assert tp_plan["layers.*.ple.ple_embedding.ngram_embedding"] == "embedding_colwise"
    table = model.model.layers[0].ple.ple_embedding.ngram_embedding.weight
    assert table.shape[1] % tp == 0
    spec = _spec("qwen4_exp_text")
    rank = _plan(spec, tp).ops
    assert spec.ngram.table_rows(0) * table.shape[1] == table.numel()
    assert _first_layer_params(rank, "ple.")["embedding.ngram"] * tp == sum(
        spec.ngram.table_rows(i) * table.shape[1] for i in range(2)
    )
    layer = model.model.layers[0].linear_attn
    hf = 0
    for n in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"):
        assert tp_plan[f"layers.*.linear_attn.{n}"] == "colwise_gather_output"
        hf += getattr(layer, n).weight.numel() // tp
    p = _first_layer_params(rank, "mixer.")
    assert p["attention.linear.in_proj.weight"] + p["attention.linear.out_proj.weight"] == hf


def test_qwen4_exp_ngram_width_bounds_tp():
    with pytest.raises(LayoutError, match="divide the n-gram tables' row width 128"):
        make_layout(_spec("qwen4_exp_text"), ParallelConfig(tp=256))


def test_full_rank_kda_per_rank_at_tp2():
    """Ling hybrid's KDA with full-rank gates: f_proj and g_proj ColumnParallelLinear (vLLM's KDA layer with
    kda_use_full_proj, vllm/model_executor/models/solar_open2.py), the rest as KimiDeltaAttention."""
    spec = _spec("bailing_hybrid")
    plan = _plan(spec, 2)
    p = _first_layer_params(plan.ops, "mixer.")
    # D = 2560, H = 32 heads of 128 (I = 4096)
    assert p["attention.linear.f.weight"] == p["attention.linear.g.weight"] == 2560 * 4096 // 2
    assert p["attention.linear.qkv_proj.weight"] == 2560 * 3 * 4096 // 2
    assert (p["attention.linear.A_log"], p["attention.linear.dt_bias"], p["norm.mixer"]) == (16, 2048, 128)
    assert _state(plan.ops, spec) == 3 * 3 * 4096 // 2 + 16 * 128 * 128  # conv (C − 1)·3·I/2 + H/2·P·P
    one = [c for c in evaluate(build_ops(spec, "prefill", "flash"), PREFILL, spec) if c.op.name == "mixer.f_proj"]
    rank = [c for c in evaluate(_plan(spec, 2, "prefill").ops, PREFILL, spec) if c.op.name == "mixer.f_proj"]
    assert 2 * rank[0].values["flops"] == one[0].values["flops"]


@pytest.mark.parametrize(
    "name,kw,why",
    [
        ("inkling_text", {"tp": 2}, "Inkling's layers .* no sharding rule for tensor or pipeline parallelism"),
        ("inkling_text", {"pp": 2}, "no sharding rule for tensor or pipeline parallelism"),
        ("zaya", {"tp": 2}, "ZAYA's compressed convolutional attention layers have no sharding rule"),
        ("hrm_text", {"pp": 2}, "weight-shared stacks"),
    ],
)
def test_layouts_without_rules_are_refused_when_made(name, kw, why):
    """Refused by make_layout, so `llmath plan` skips them instead of failing on the whole search."""
    with pytest.raises(LayoutError, match=why):
        make_layout(_spec(name), ParallelConfig(**kw))


def test_zaya_runs_expert_parallel_replicas():
    """At tp = 1 nothing is split: a ZAYA rank runs every non-expert operator whole, its experts spread 2 ways."""
    spec = _spec("zaya")
    (plan,) = rank_plans(spec, "decode", "flash", make_layout(spec, ParallelConfig(tp=1, dp=2, ep=2)))
    one = {c.op.name: c for c in evaluate(build_ops(spec, "decode", "flash"), DECODE, spec)}
    for c in evaluate(plan.ops, DECODE, spec):
        if not c.op.name.startswith("moe.experts."):
            assert c.values.get("flops", 0) == one[c.op.name].values.get("flops", 0), c.op.name
        else:  # E/2 experts per rank, each whole: the rank's weights are half
            assert 2 * sum(n for _, n in c.op.params) == sum(n for _, n in one[c.op.name].op.params)


def test_plan_searches_the_new_tensor_parallel_layouts():
    """`llmath plan`'s candidate layouts now hold TP for these families, and skip (not fail on) the refused ones."""
    from llmath.deploy.plan import _candidate_layouts, plan

    free = {"tp": None, "pp": None, "dp": None, "ep": None}
    for name in ("zamba2", "recurrent_gemma", "rwkv", "xlstm", "hrm_text"):
        tps = {lay.tp for lay in _candidate_layouts(_spec(name), 4, free) if lay is not None}
        assert 2 in tps, name
    for name in ("inkling_text", "zaya"):
        assert all(lay is None or lay.tp == 1 for lay in _candidate_layouts(_spec(name), 4, free)), name
    r = plan(_spec("rwkv"), "h100-sxm", gpus=4, workload=Workload(prompt=256, gen=32))
    assert r.pareto and r.best is not None
