"""Small formulas with their arithmetic written out."""

import numpy as np
import pytest

from llmath import Precision
from llmath.analysis import kv_cache_bytes
from llmath.model import registry
from llmath.ops import Scenario, build_ops, causal_pairs, evaluate, experts_hit, explain, visible_keys
from llmath.pass_report import stage_report


def test_causal_pairs():
    # 4 new tokens, no prefix: 1+2+3+4 = 10
    assert causal_pairs(4, 0, None) == 10
    # after a prefix of 3: 4+5+6+7 = 22
    assert causal_pairs(4, 3, None) == 22
    # window 5: min(4,5)+min(5,5)+min(6,5)+min(7,5) = 4+5+5+5 = 19
    assert causal_pairs(4, 3, 5) == 19
    # arrays broadcast and agree with the int path
    assert list(causal_pairs(np.array([4, 4]), np.array([0, 3]), 5)) == [10, 19]


def test_visible_keys():
    assert visible_keys(1, 10, None) == 11
    # transformers' sliding cache keeps W-1 = 3 of 10 cached, plus the new one
    assert visible_keys(1, 10, 4) == 4


def test_experts_hit():
    # one token routing top-2 of 8 hits exactly 2 experts: 8*(1-(1-2/8)^1) = 2
    assert experts_hit(1, 8, 2) == pytest.approx(2.0)
    # many tokens hit nearly all of them
    assert experts_hit(10_000, 8, 2) == pytest.approx(8.0)


def _op(spec, name, stage="prefill", attention="flash"):
    return next(o for o in build_ops(spec, stage, attention) if o.name == name)


def test_llama3_8b_k_proj_decode():
    spec = registry.spec("llama-3-8b")
    sc = Scenario(16, 1, 4096)
    cost = next(c for c in evaluate(build_ops(spec, "decode"), sc, spec) if c.op.name == "attn.k_proj")
    # 2*B*T*D*K*H per layer = 2*16*1*4096*8*128 = 134,217,728; x 32 layers = 4,294,967,296
    assert cost.values["flops"] == 2 * 16 * 4096 * 8 * 128 * 32 == 4_294_967_296
    # it writes B*T*K*H = 16*1024 KV elements per layer
    assert cost.values["kv_write"] == 16 * 8 * 128 * 32
    text = explain(cost.op, sc, spec, "flops")
    assert "2·D·K·H" in text and "4,294,967,296" in text


def test_kv_bytes_per_token():
    p = Precision()
    # Llama-3-8B: 2 (K,V) * 32 layers * 8 KV heads * 128 * 2 bytes = 131,072
    assert kv_cache_bytes(registry.spec("llama-3-8b"), 1, 1, p) == 2 * 32 * 8 * 128 * 2 == 131_072
    # Llama-2-7B (MHA, 32 heads): 2*32*32*128*2 = 524,288
    assert kv_cache_bytes(registry.spec("llama-2-7b"), 1, 1, p) == 524_288
    # fp8 KV halves it
    assert kv_cache_bytes(registry.spec("llama-3-8b"), 1, 1, Precision(kv="fp8")) == 65_536


def test_kv_window_capped():
    # Mistral-7B-v0.1: sliding window 4096 on all 32 layers, 8 KV heads of 128:
    # 10,000 positions hold only 4096: 2*32*8*128*2*4096 bytes
    spec = registry.spec("mistral-7b-v0.1")
    assert kv_cache_bytes(spec, 1, 10_000, Precision()) == 2 * 32 * 8 * 128 * 2 * 4096


def test_int4_group_scales():
    # int4 with groups of 128 and fp16 scales: 0.5 + 2/128 bytes per element
    assert Precision(weights="int4").weight_bytes == 0.5 + 2 / 128


def test_decode_weight_bytes_llama2_7b():
    spec = registry.spec("llama-2-7b")
    rep = stage_report(spec, "decode", Scenario(1, 1, 100), "flash", Precision())
    # a decode step reads every weight once except the embedding table (one row per token):
    # (6,738,415,616 - 32000*4096) * 2 bytes + 4096 * 2 bytes for the gathered row
    assert rep.bytes["weights"] == (6_738_415_616 - 32000 * 4096) * 2 + 4096 * 2


def test_training_step_is_three_forwards():
    spec = registry.spec("llama-3-8b")
    fwd = sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec), Scenario(1, 64, 0, logits="all"), spec))
    # forward with logits at all 64 positions: lm_head 2*64*4096*128256 of it
    last = sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec), Scenario(1, 64, 0), spec))
    assert fwd - last == 2 * 63 * 4096 * 128256
