"""The model spec composed by concern (model/spec_parts.py): what deploy/ reads of a model, grouped as the
published configs describe it."""

from __future__ import annotations

from llmath.model.registry import resolve


def test_feed_forward_part_of_deepseek_v3():
    # config.json (deepseek-ai/DeepSeek-V3): num_hidden_layers 61, first_k_dense_replace 3 dense layers of
    # intermediate_size 18432, the other 61 - 3 = 58 layers MoE (n_routed_experts 256, moe_intermediate_size 2048)
    p = resolve("deepseek-v3").parts
    assert p.ffn.dense_widths == {18432}
    assert p.ffn.moe_layers == (False,) * 3 + (True,) * 58
    assert p.ffn.moe is not None and (p.ffn.moe.n_experts, p.ffn.moe.d_ff_expert) == (256, 2048)
    assert p.attention.mla is not None and p.stack.layers == 61 and p.family == ()


def test_family_parts_are_the_optional_parts_one_family_owns():
    # DeepSeek-V4's compressed attention is its family's part; MoE, MLA, mixers and encoders are concerns
    v4 = resolve("deepseek-v4-flash")
    assert v4.parts.family == (v4.compressed,)
    assert resolve("llama-3-8b").parts.family == ()


def test_an_encoder_decoder_stack():
    # t5-base: num_layers 12 encoder layers and as many decoder layers; pipeline stages are bounded by the
    # shorter stack, so a 12-layer encoder with a 6-layer decoder allows 6
    t5 = resolve("t5-base")
    assert t5.parts.stack.encoder is not None and t5.parts.stack.pipeline_layers == 12
    assert t5.with_layers(6).parts.stack.pipeline_layers == 6


def test_parts_are_built_once_per_spec():
    spec = resolve("llama-3-8b")
    assert spec.parts is spec.parts
    assert spec.with_layers(2).parts.stack.layers == 2
