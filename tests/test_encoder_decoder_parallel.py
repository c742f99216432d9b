"""Tensor and pipeline parallel layouts of encoder-decoder models (T5, Flan-T5, BART, transformer-base).

transformers 5.23 ships no ``base_model_tp_plan`` for T5, BART or Whisper, so the per-rank shapes are
proven against vLLM's sharding of the same modules (``vllm/model_executor/models/whisper.py``: self-attention
``QKVParallelLinear``, cross-attention ``ColumnParallelLinear`` q and ``MergedColumnParallelLinear`` k/v,
``RowParallelLinear`` out_proj and fc2, ``ColumnParallelLinear`` fc1; ``bart.py``: ``VocabParallelEmbedding``
and ``ParallelLMHead``) applied by module name to transformers' own modules built on the meta device, and by
written arithmetic.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import registry_config

import llmath
from llmath import Workload
from llmath.deploy import make_layout, rank_plans
from llmath.deploy.cost import rank_memory_parts
from llmath.deploy.layout import ParallelConfig
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.model.registry import resolve
from llmath.ops import Scenario, build_ops, evaluate

# transformers module names (T5: q/k/v/o, wi/wi_0/wi_1/wo; BART: q_proj.., out_proj, fc1/fc2)
COL = re.compile(r"\.(q|k|v|wi|wi_0|wi_1|q_proj|k_proj|v_proj|fc1)$")
ROW = re.compile(r"\.(o|wo|out_proj|fc2)$")
LAYER_KEYS = ("num_layers", "num_decoder_layers", "encoder_layers", "decoder_layers", "num_hidden_layers")


def _two_layers(cfg: dict) -> dict:
    return {k: (2 if k in LAYER_KEYS else v) for k, v in cfg.items()}


def _flops(ops, sc, spec, weights_only=False):
    return sum(
        c.values.get("flops", 0)
        for c in evaluate(ops, sc, spec)
        if not weights_only or (c.op.kind == "matmul" and (c.op.n_params or c.op.name == "lm_head"))
    )


def _rank_modules(model, tp: int, vocab: int):
    """(name, in, out) of every Linear on one rank under vLLM's rules, and the rank's parameter count:
    column-parallel out/tp (bias split), row-parallel in/tp (bias whole), the vocabulary table and an
    untied LM head ⌈V/tp⌉ rows, T5's relative-position table split by heads, the rest (norms, learned
    positions) replicated."""
    import torch

    rows = -(-vocab // tp)
    linears, n, seen = [], 0, set()
    for name, mod in model.named_modules():
        own = [p for p in mod.parameters(recurse=False) if id(p) not in seen]
        seen.update(id(p) for p in own)
        if isinstance(mod, torch.nn.Linear):
            out_f, in_f = mod.weight.shape
            bias = out_f if mod.bias is not None else 0
            if COL.search(name):
                out_f, bias = out_f // tp, bias // tp
            elif ROW.search(name):
                in_f //= tp
            elif name == "lm_head":
                out_f = rows
            linears.append((name, in_f, out_f))
            n += (in_f * out_f + bias) if own else 0  # a tied LM head's weight is the table's
        elif isinstance(mod, torch.nn.Embedding) and own:
            num, dim = mod.weight.shape
            if num == vocab:
                n += rows * dim
            elif name.endswith("relative_attention_bias"):
                n += num * dim // tp
            else:
                n += num * dim
        else:
            n += sum(p.numel() for p in own)
    return linears, n


@pytest.mark.parametrize(
    "name,tp", [("t5-base", 2), ("t5-base", 4), ("flan-t5-base", 2), ("bart-large", 2), ("bart-large", 4)]
)
def test_rank_params_and_gemm_flops_equal_vllm_rules_on_transformers_modules(name, tp):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    cfg = _two_layers(registry_config(name))
    spec = spec_from_config(cfg, name)
    model = oracle.build_meta(oracle.hf_config(cfg))
    linears, hf_params = _rank_modules(model, tp, spec.vocab_size)
    if name == "flan-t5-base":  # transformers 5.23's T5Config ties always (test_oracle_params.py); the file
        hf_params += -(-spec.vocab_size // tp) * spec.d_model  # does not: llmath holds its own LM head shard
    layout = make_layout(spec, ParallelConfig(tp=tp))
    ((_, ops, _, _),) = rank_memory_parts(spec, "flash", layout)  # encoder + decoder operators of one GPU
    assert sum(n * op.count for op in ops for _, n in op.params) == hf_params
    # weight GEMMs of one rank, 2 · rows · in · out each: the encoder's over B·P source tokens, the decoder
    # prefill's over B·T tokens, its cross K/V over the B·P encoder outputs, the LM head over B rows
    B, P, T = 3, 13, 2

    def rows(n: str) -> int:
        if re.match(r"(model\.)?encoder\.", n):
            return B * P
        if re.search(r"(EncDecAttention\.[kv]|encoder_attn\.[kv]_proj)$", n):
            return B * P
        return B if n == "lm_head" else B * T

    hf = sum(2 * rows(n) * i * o for n, i, o in linears)
    (enc,) = rank_plans(spec, "encoder", "flash", layout)
    (pre,) = rank_plans(spec, "prefill", "flash", layout)
    ours = _flops(enc.ops, Scenario(B, P), spec, True) + _flops(pre.ops, Scenario(B, T, 0, src=P), spec, True)
    assert ours == hf


def test_t5_base_tp2_rank_params_by_hand():
    # t5-base: d 768, 12 heads of 64, F 3072, V 32128 (tied), 12 + 12 layers, RMSNorm weights only, no biases,
    # 32 relative-position buckets per head in each stack. Per rank at TP = 2:
    embed = 32128 // 2 * 768  # 12,337,152
    enc_layer = 4 * 768 * 768 // 2 + 2 * 768 * 3072 // 2 + 2 * 768  # q,k,v,o; wi, wo; 2 norms
    dec_layer = 8 * 768 * 768 // 2 + 2 * 768 * 3072 // 2 + 3 * 768  # self + cross q,k,v,o; wi, wo; 3 norms
    rel = 2 * 32 * 12 // 2  # both stacks' tables, 6 heads each
    expected = embed + 12 * enc_layer + 12 * dec_layer + rel + 2 * 768  # + both final norms
    assert expected == 111_475_584
    spec = resolve("t5-base")
    ((_, ops, _, _),) = rank_memory_parts(spec, "flash", make_layout(spec, ParallelConfig(tp=2)))
    assert sum(n * op.count for op in ops for _, n in op.params) == expected


def test_cross_kv_cache_per_gpu_by_hand():
    a = llmath.analyze(
        "t5-base", "h100-sxm", workload=Workload(batch=8, prompt=512, gen=64), parallel=ParallelConfig(tp=2)
    )
    # per GPU: 6 of 12 KV heads of 64, K and V, 12 decoder layers, bf16 -> 2·12·6·64·2 = 18,432 B per position
    per = 2 * 12 * 6 * 64 * 2
    # self-attention: 8 sequences x (1 start token + 63 fed tokens); cross: 8 x 512 source positions, fixed
    assert a.memory.kv_cache_bytes == 8 * 64 * per + 8 * 512 * per == 84_934_656
    assert a.parallel["stages"][0]["kv_cache_bytes"] == 84_934_656


@pytest.mark.parametrize("name,tp", [("t5-base", 4), ("bart-large", 2), ("transformer-base", 8)])
@pytest.mark.parametrize("stage", ["encoder", "prefill", "decode"])
def test_sum_over_ranks_of_sharded_flops_is_single_gpu(name, tp, stage):
    spec = resolve(name)
    sc = {"encoder": Scenario(3, 37), "prefill": Scenario(3, 2, 0, src=37), "decode": Scenario(3, 1, 9, src=37)}[stage]
    (plan,) = rank_plans(spec, stage, "flash", make_layout(spec, ParallelConfig(tp=tp)))
    repl = [o for o in plan.ops if o.component in ("norm", "residual") or o.name.endswith("embed.positions")]
    sharded = [o for o in plan.ops if o not in repl]
    # a vocabulary not divisible by tp is padded to ⌈V/tp⌉·tp rows: 2·D FLOPs per extra row per logit row
    pad = 0 if stage == "encoder" else (-(-spec.vocab_size // tp) * tp - spec.vocab_size) * 2 * spec.d_model * 3
    one = _flops(build_ops(spec, stage, "flash"), sc, spec)
    assert tp * _flops(sharded, sc, spec) + _flops(repl, sc, spec) == one + pad


def test_one_gpu_layout_equals_single_device_and_ttft_has_the_encoder():
    kw = dict(workload=Workload(batch=4, prompt=300, gen=50))
    for name in ("t5-base", "bart-large", "transformer-base"):
        a, b = (
            llmath.analyze(name, "h100-sxm", **kw),
            llmath.analyze(name, "h100-sxm", parallel=ParallelConfig(gpus=1), **kw),
        )
        for k in ("ttft_s", "tpot_s", "e2e_s", "encoder_s"):
            assert a.generation[k] == b.generation[k], (name, k)
        assert a.memory.total_bytes == b.memory.per_gpu_bytes
        # bf16 weights: 2 B per parameter of both stacks (the total is proven against transformers)
        assert a.memory.weights_bytes == 2 * a.params.total
    a = llmath.analyze("bart-large", "h100-sxm", parallel=ParallelConfig(tp=2), **kw)
    assert a.encoder is not None and a.encoder.comm  # the encoder pass's all-reduces
    assert a.generation["ttft_s"] == a.encoder.time_s + a.prefill.time_s == a.generation["encoder_s"] + a.prefill.time_s


def test_tp2_collectives_per_pass():
    spec = resolve("transformer-base")
    lay = make_layout(spec, ParallelConfig(tp=2))
    (enc,) = rank_plans(spec, "encoder", "flash", lay)
    (dec,) = rank_plans(spec, "decode", "flash", lay)
    e = {c.name: c.count for c in enc.collectives}
    d = {c.name: c.count for c in dec.collectives}
    # encoder: one all-reduce after each layer's o_proj and FFN down (6 layers); no logits
    assert e == {"embed.all_reduce": 1, "attn.all_reduce": 6, "ffn.all_reduce": 6}
    # decoder: self- and cross-attention o_proj (2 x 6), FFN down (6), the logits' all-gather
    assert d == {"embed.all_reduce": 1, "attn.all_reduce": 12, "ffn.all_reduce": 6, "lm_head.all_gather": 1}


def test_pp2_splits_each_stack_and_sends_the_encoder_output():
    spec = resolve("t5-base")
    lay = make_layout(spec, ParallelConfig(pp=2))
    enc = rank_plans(spec, "encoder", "flash", lay)
    pre = rank_plans(spec, "prefill", "flash", lay)
    assert [p.layers for p in enc] == [range(0, 6), range(6, 12)] == [p.layers for p in pre]
    last = {c.name: c for c in enc[1].collectives}
    # the encoder output, B·P·D elements, goes from the last stage to the pp − 1 = 1 other stage
    out = last["pp.encoder_output"]
    assert out.count == 1 and [(t.coef, t.mono) for t in out.message] == [(768, "BT")]
    assert "pp.encoder_output" not in {c.name for c in pre[1].collectives}
    # every parameter on exactly one stage, plus the last stage's copy of the tied table (V x d)
    held = sum(
        n * op.count for _, ops, _, _ in rank_memory_parts(spec, "flash", lay) for op in ops for _, n in op.params
    )
    assert held == 222_903_552 + 32128 * 768  # t5-base: 222,903,552 parameters (transformers' count)
    a = llmath.analyze(
        "t5-base", "h100-sxm", workload=Workload(batch=2, prompt=256, gen=8), parallel=ParallelConfig(pp=2)
    )
    # the send to the other stage: 2 x 256 x 768 elements in bf16
    assert a.comm["encoder"]["pp.encoder_output"]["bytes"] == 2 * 256 * 768 * 2


def test_sweep_on_a_layout_agrees_with_analyze():
    from llmath.sweep import grid

    spec = resolve("bart-large")
    lay = make_layout(spec, ParallelConfig(tp=2))
    g = grid(spec, "h100-sxm", np.array([1, 8]), np.array([200, 200]), np.array([30, 30]), layout=lay)
    for i, b in enumerate((1, 8)):
        a = llmath.analyze(
            "bart-large", "h100-sxm", workload=Workload(batch=b, prompt=200, gen=30), parallel=ParallelConfig(tp=2)
        )
        assert g["ttft_s"][i] == pytest.approx(a.generation["ttft_s"], rel=1e-12)
        assert g["e2e_s"][i] == pytest.approx(a.generation["e2e_s"], rel=1e-12)
        assert g["memory_bytes"][i] == pytest.approx(a.memory.per_gpu_bytes, rel=1e-12)


def test_layout_errors_name_both_stacks():
    with pytest.raises(llmath.LLMathError, match="layers of 'transformer-base'|6 layers"):
        make_layout(resolve("transformer-base"), ParallelConfig(pp=7))
    with pytest.raises(llmath.LLMathError, match="tp=3 must divide the 8 attention heads"):
        make_layout(resolve("transformer-base"), ParallelConfig(tp=3))
    assert Precision().kv_bytes == 2  # the bf16 default the by-hand figures above assume


# ---- serving and the planner ------------------------------------------------------------------------------


def _dev(name, source, layout=None):
    from llmath.deploy.step import Device
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency

    hw = get("h100-sxm")
    return Device(resolve(name), hw, Precision(), efficiency("expected", hw), layout=layout, source=source)


def test_an_iteration_is_the_static_stages():
    # a pure decode iteration of B requests at decoder context S = the analysed decode step; one iteration
    # prefilling B whole requests = the encoder pass + the decoder prefill of their start tokens (TTFT)
    a = llmath.analyze("bart-large", "h100-sxm", workload=Workload(batch=4, prompt=300, gen=50))
    dev = _dev("bart-large", 300)
    assert float(dev.iteration(4, 1).time_s) == pytest.approx(a.decode.time_s, rel=1e-12)
    assert float(dev.iteration(0, 0, 4, 300).time_s) == pytest.approx(a.generation["ttft_s"], rel=1e-12)
    lay = make_layout(resolve("t5-base"), ParallelConfig(tp=2))
    b = llmath.analyze(
        "t5-base", "h100-sxm", workload=Workload(batch=3, prompt=200, gen=20), parallel=ParallelConfig(tp=2)
    )
    dev2 = _dev("t5-base", 200, lay)
    assert float(dev2.iteration(3, 1).time_s) == pytest.approx(b.decode.time_s, rel=1e-12)
    assert float(dev2.iteration(0, 0, 3, 200).time_s) == pytest.approx(b.generation["ttft_s"], rel=1e-12)


def test_serving_memory_counts_the_cross_cache_and_the_decoder_positions():
    from llmath.deploy import engines
    from llmath.deploy.serving import Requests
    from llmath.deploy.serving_memory import memory
    from llmath.hardware import get

    dev = _dev("transformer-base", 400)
    req = Requests(400, 100, encoder_decoder=True)
    mem = memory(dev, engines.preset("trtllm", get("h100-sxm")), req)
    # transformer-base bf16: 2 (K, V) x 6 layers x 512 x 2 B = 12,288 B per position, self and cross alike;
    # the last position: the start token + 99 fed tokens = 100 decoder positions, plus the 400 source ones
    assert mem.kv_bytes_per_request == 12_288 * (100 + 400)


def test_serving_agrees_with_the_iteration_simulation():
    # the bound serving's docstring states for decoder-only models holds here too: within 5%
    from llmath.deploy import engines
    from llmath.deploy.serving import Requests, steady_state
    from llmath.deploy.serving_memory import memory
    from llmath.deploy.simulate import simulate
    from llmath.hardware import get

    dev = _dev("bart-large", 600)
    eng = engines.preset("vllm", get("h100-sxm"), max_num_batched_tokens=2048)
    req = Requests(600, 64, encoder_decoder=True)
    mem = memory(dev, eng, req)
    ss = steady_state(dev, eng, req, [24], mem.max_resident)
    sim = simulate(dev, eng, req, 24, mem.max_resident, iterations=1200)
    assert ss.ttft_s[0] == pytest.approx(sim.ttft_s, rel=0.05)
    assert ss.tpot_s[0] == pytest.approx(sim.tpot_s, rel=0.05)
    assert ss.throughput_tok_s[0] == pytest.approx(sim.throughput_tok_s, rel=0.05)


def test_single_request_serving_is_the_static_generation():
    from llmath.deploy.service import serve

    r = serve("t5-base", "h100-sxm", workload=Workload(prompt=512, gen=64, concurrency=1), efficiency_mode="ideal")
    a = llmath.analyze("t5-base", "h100-sxm", workload=Workload(batch=1, prompt=512, gen=64), efficiency_mode="ideal")
    assert r.metrics["ttft_s"] == pytest.approx(a.generation["ttft_s"], rel=1e-9)
    # ideal: a decode step is affine in the context, so the step at the mean context is the mean step
    assert r.metrics["tpot_s"] == pytest.approx(a.generation["tpot_s"], rel=1e-9)


def test_plan_searches_encoder_decoder_layouts_and_refuses_what_it_cannot_model():
    from llmath.deploy.plan import plan
    from llmath.deploy.service import serve

    res = plan("bart-large", "h100-sxm", gpus=2, workload=Workload(prompt=512, gen=64))
    assert res.best is not None and {r["tp"] for r in res.pareto} <= {1, 2}
    with pytest.raises(llmath.LLMathError, match="encoder-decoder"):
        plan("bart-large", "h100-sxm", gpus=2, workload=Workload(prompt=512, gen=64), disagg=True)
    with pytest.raises(llmath.LLMathError, match="never chunked"):
        # a source of 500 tokens, within t5-base's 512 positions, over a budget of 256
        serve("t5-base", "h100-sxm", workload=Workload(prompt=500, gen=8, concurrency=2), max_num_batched_tokens=256)
    with pytest.raises(llmath.LLMathError, match="prefix_hit"):
        serve("t5-base", "h100-sxm", workload=Workload(prompt=512, gen=8, concurrency=2, prefix_hit=0.5))
