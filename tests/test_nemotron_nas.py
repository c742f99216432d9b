"""Nemotron-NAS (model_type nemotron-nas, remote code DeciLMForCausalLM): per-layer attention (GQA or none) and
FFN widths from ``block_configs``. transformers has no class for it, so the expected values are the arithmetic
of its modeling code as vLLM ports it (vllm/model_executor/models/nemotron_nas.py: DeciLMDecoderLayer skips the
attention and its input norm when ``no_op``; the gated MLP's width is ``_ffn_mult_to_intermediate_size``),
written out below from the bundled hub config of nvidia/Llama-3_3-Nemotron-Super-49B-v1."""

from __future__ import annotations

import math

import pytest

from llmath.analysis import analyze, kv_cache_bytes
from llmath.deploy.layout import ParallelConfig
from llmath.errors import ConfigError
from llmath.model import registry
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

NAME = "llama-3_3-nemotron-super-49b-v1"


def _width(mult, d):
    n = int(2 * mult * d / 3)  # DeciLM: 2/3 of ffn_mult x hidden, rounded up to a multiple of 256
    return math.ceil(n / 256) * 256


def _layer_params(b, d, N):
    hd, total = d // N, 3 * d * _width(b["ffn"]["ffn_mult"], d) + d  # gate, up, down; post-attention norm
    if not b["attention"]["no_op"]:
        K = N // b["attention"]["n_heads_in_group"]
        total += 2 * d * N * hd + 2 * d * K * hd + d  # q, o; k, v; input norm
    return total


def _expected_params(cfg):
    d, V, N = cfg["hidden_size"], cfg["vocab_size"], cfg["num_attention_heads"]
    # untied token table and LM head, final norm
    return 2 * V * d + d + sum(_layer_params(b, d, N) for b in cfg["block_configs"])


def test_params_equal_the_block_arithmetic():
    cfg = registry.config(NAME)
    rep = param_report(registry.spec(NAME))
    assert rep.total == _expected_params(cfg)
    assert abs(rep.total / registry.info(NAME)["published_params"] - 1) < 0.02  # 49.87B, "49B" in the name


def test_cache_holds_only_the_attention_layers():
    cfg, spec = registry.config(NAME), registry.spec(NAME)
    attn = sum(not b["attention"]["no_op"] for b in cfg["block_configs"])
    assert attn == 49 and spec.layer_mixers.count("none") == 31
    K, hd = cfg["num_attention_heads"] // 8, cfg["hidden_size"] // cfg["num_attention_heads"]
    # batch 2 x 100 tokens, K and V, 2 bytes each
    assert kv_cache_bytes(spec, 2, 100, Precision()) == 2 * 100 * attn * 2 * K * hd * 2


def test_each_layers_ffn_runs_at_its_own_width():
    cfg, spec = registry.config(NAME), registry.spec(NAME)
    d = cfg["hidden_size"]
    got = {}
    for c in evaluate(build_ops(spec, "decode", "eager"), Scenario(1, 1, 16), spec):
        if c.op.name == "ffn.up":
            got[c.op.layer_kind] = (c.op.count, c.values["flops"] // c.op.count)
    widths = [_width(b["ffn"]["ffn_mult"], d) for b in cfg["block_configs"]]
    # one decode token: 2 x D x width FLOPs per up projection, summed over the layers of each width
    assert sum(n * f for n, f in got.values()) == sum(2 * d * w for w in widths)
    assert sum(n for n, _ in got.values()) == len(widths)


def test_pipeline_stages_split_the_layers_exactly():
    whole = analyze(NAME, "h100-sxm", parallel=ParallelConfig(gpus=1))
    split = analyze(NAME, "h100-sxm", parallel=ParallelConfig(gpus=2, tp=1, pp=2))
    assert split.memory.weights_bytes < whole.memory.weights_bytes
    cfg, stages = registry.config(NAME), split.parallel["stages"]
    d, V, N, blocks = cfg["hidden_size"], cfg["vocab_size"], cfg["num_attention_heads"], cfg["block_configs"]
    assert [s["layers"] for s in stages] == [[0, 40], [40, 80]]
    # stage 0: token table + layers 0-39; stage 1: layers 40-79 + final norm + LM head, each at its own widths
    assert stages[0]["params"] == V * d + sum(_layer_params(b, d, N) for b in blocks[:40])
    assert stages[1]["params"] == sum(_layer_params(b, d, N) for b in blocks[40:]) + d + V * d


@pytest.mark.parametrize(
    "part,key,value",
    [("attention", "replace_with_linear", True), ("ffn", "no_op", True), ("attention", "window_length", 4096)],
)
def test_unmodelled_block_options_are_refused(part, key, value):
    cfg = registry.config(NAME)
    cfg["block_configs"][0][part][key] = value
    with pytest.raises(ConfigError, match=key):
        spec_from_config(cfg, "nas")


def test_differing_kv_groups_are_refused():
    cfg = registry.config(NAME)
    cfg["block_configs"][0]["attention"]["n_heads_in_group"] = 4
    with pytest.raises(ConfigError, match="n_heads_in_group"):
        spec_from_config(cfg, "nas")
