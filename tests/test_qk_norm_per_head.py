"""Per-head q/k LayerNorms (StableLM 2: ``qk_layernorm``, transformers 5.23 ``StableLmLayerNormPerHead``): one
LayerNorm of width H per query head and per K/V head, each with its own weight and no bias. Parameters, matmul
FLOPs and the cache equal transformers' on the meta device; the norms' own FLOPs and their split under tensor
parallelism are the arithmetic written beside each assertion."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config
from helpers import hf_groups, llmath_groups

from llmath.analysis import kv_cache_bytes
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.shard import rank_plans
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402

P, B = 9, 2


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> dict:
    # StableLM's defaults (2560 wide, 32 heads of 80, 32 K/V heads, 32 layers) with the 12B's per-head norms
    cfg = default_config("stablelm", str(tmp_path_factory.mktemp("stablelm")))
    return dict(cfg, qk_layernorm=True)


def _qk_norm(spec) -> dict:
    """The q/k norm's costs for one token (B = T = 1) of a prefill."""
    ops = build_ops(spec, "prefill", "flash")
    return next(c.values for c in evaluate(ops, Scenario(1, 1, 0), spec) if c.op.name == "attn.qk_norm")


def test_parameters_equal_transformers(config):
    spec = spec_from_config(config, "stablelm")
    model = oracle.build_meta(oracle.hf_config(config))
    rep = param_report(spec, "eager")
    assert rep.total == oracle.count_params(model)
    assert llmath_groups(rep) == hf_groups(model)
    # per layer (N + K)·H = (32 + 32)·80 = 5120 weights and no bias, over 32 layers: 163840 more than without
    without = spec_from_config(dict(config, qk_layernorm=False), "stablelm")
    assert rep.total - param_report(without, "eager").total == 32 * 5120 == 163_840


def _matmul_flops(spec, stage: str, scenario: Scenario) -> int:
    return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, "eager"), scenario, spec))


def test_flops_and_cache_equal_transformers(config):
    spec = spec_from_config(config, "stablelm").with_layers(2)
    model = oracle.build_meta(oracle.hf_config(config, 2))
    hf_prefill, out = oracle.forward_flops(model, B, P)
    past = oracle.past_of(out)
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(past, model=model)
    assert _matmul_flops(spec, "prefill", Scenario(B, P, 0)) == hf_prefill
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=past, seen=P)  # appends a position to the cache
    assert _matmul_flops(spec, "decode", Scenario(B, 1, P)) == hf_decode


def test_norm_flops_per_token(config):
    # a LayerNorm's 7 FLOPs per element (ops/core.py NORM_FLOPS) over the (N + K)·H = 5120 query and key
    # elements of a token: 7 · 5120 = 35840 per token per layer, 32 layers
    spec = spec_from_config(config, "stablelm")
    assert _qk_norm(spec)["vflops"] == 7 * 5120 * 32 == 1_146_880


def test_each_rank_holds_its_heads_norms(config):
    # tp = 4: a rank runs 32/4 = 8 query and 8 K/V heads, so it holds (8 + 8)·80 = 1280 of each layer's 5120
    # norm weights (a norm shared by the heads, qk_norm="head", would stay whole on every rank)
    spec = spec_from_config(config, "stablelm")
    (plan,) = rank_plans(spec, "prefill", "flash", make_layout(spec, ParallelConfig(tp=4)))
    (op,) = [o for o in plan.ops if o.name == "attn.qk_norm"]
    assert op.n_params == 1280
