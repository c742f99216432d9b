"""Llama 3.2 Vision (mllama): its language model, with the image cross-attention layers, read exactly for a
text-only request (ops/vision_cross.py), against transformers on the meta device. The wrapper's defaults are
the 11B model's text sizes; five layers keep the test fast, layer 3 a cross-attention layer."""

from __future__ import annotations

import copy

import pytest
from causal_lm_types import default_config
from helpers import hf_groups, llmath_groups, matmul_flops

import llmath
from llmath import Workload
from llmath.analysis import kv_cache_bytes
from llmath.deploy.layout import ParallelConfig
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario
from llmath.ops.params import param_report

B, P = 2, 9


def _config(tmp_path) -> dict:
    cfg = default_config("mllama", str(tmp_path))
    text = copy.deepcopy(cfg["text_config"])
    text.update(num_hidden_layers=5, cross_attention_layers=[3])
    return dict(cfg, text_config=text)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    cfg = _config(tmp_path_factory.mktemp("mllama"))
    return spec_from_config(cfg, "mllama"), oracle.build_meta(oracle.hf_config(cfg)), oracle, cfg


def test_params_by_component_equal_transformers(built):
    """The whole wrapper (MllamaForConditionalGeneration): language model, vision tower and projector."""
    import torch
    import transformers

    spec, model, oracle, cfg = built
    with torch.device("meta"):
        full = transformers.MllamaForConditionalGeneration(oracle.hf_config(cfg))
    hf = hf_groups(full)  # named_parameters: a tied head once
    assert llmath_groups(param_report(spec)) == hf
    # the token table has vocab_size + 8 rows (MllamaTextModel.embed_tokens), the LM head vocab_size
    assert param_report(spec).by_component["embedding.token"] == (128256 + 8) * 4096
    # the language model alone is what MllamaForCausalLM builds
    assert param_report(spec).total - sum(param_report(spec).towers.values()) == oracle.count_params(model)


def test_11b_vision_total_is_the_published_size(tmp_path):
    # MllamaConfig's defaults are Llama-3.2-11B-Vision's sizes; Meta's model card: 10.6B parameters
    spec = spec_from_config(default_config("mllama", str(tmp_path)), "mllama")
    assert abs(param_report(spec).total / 10.6e9 - 1) < 0.005 and not spec.towers_not_counted


def test_text_only_flops_and_cache_equal_transformers(built):
    spec, model, oracle, _ = built
    hf_prefill, out = oracle.forward_flops(model, B, P)
    past = oracle.past_of(out)
    # 4 self-attention layers of 8 KV heads x 128, K and V, bf16: 4 x 2 x 8 x 128 x 2 B per position
    assert oracle.cache_bytes(past) == kv_cache_bytes(spec, B, P, Precision()) == B * P * 4 * 2 * 8 * 128 * 2
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=past, seen=P)
    assert matmul_flops(spec, "prefill", Scenario(B, P)) == hf_prefill  # the cross-attention layer runs nothing
    assert matmul_flops(spec, "decode", Scenario(B, 1, P)) == hf_decode


def test_layouts_hold_every_weight_and_say_what_is_skipped(tmp_path):
    pytest.importorskip("transformers")
    spec = spec_from_config(_config(tmp_path), "mllama")
    one = llmath.analyze(spec, "h100-sxm", workload=Workload(prompt=64, gen=4))
    pp = llmath.analyze(spec, "h100-sxm", workload=Workload(prompt=64, gen=4), parallel=ParallelConfig(pp=2))
    # every weight is on some GPU: the towers on the first pipeline stage (with the embedding)
    assert sum(s["params"] for s in pp.parallel["stages"]) == one.params.total
    assert any("cross-attention layers" in w and "skipped" in w for w in one.warnings)
    assert any(
        "cross-attention layers" in w
        for w in llmath.analyze(
            spec, "h100-sxm", workload=Workload(prompt=64, gen=4), parallel=ParallelConfig(tp=2)
        ).warnings
    )


def test_wrapper_towers_are_split_over_the_first_stage_tp_ranks():
    from llmath.deploy import make_layout
    from llmath.deploy.cost import rank_memory_parts
    from llmath.model.registry import resolve

    spec = resolve("qwen2.5-vl-7b-instruct")
    towers = sum(n for _, n in spec.tower_params)
    ((_, ops, _, _),) = rank_memory_parts(spec, "flash", make_layout(spec, ParallelConfig(tp=2)))
    lm = sum(n * op.count for op in ops for _, n in op.params)
    a = llmath.analyze(spec, "h100-sxm", workload=Workload(prompt=64, gen=4), parallel=ParallelConfig(tp=2))
    # bf16: 2 B per parameter of the rank's language-model shard and of half the vision tower and merger
    # (vLLM's default mm_encoder_tp_mode "weights" splits the encoder over the TP ranks)
    assert a.memory.weights_bytes == 2 * (lm + towers / 2)
