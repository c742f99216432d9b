"""Llama-4's NoPE layers apply no rotary (modeling_llama4.py, ``Llama4TextAttention.forward``: the rotary
and the q/k L2 norm only ``if self.use_rope``); its rope layers do. (llmath does not model Llama-4's
weightless L2 q/k norm yet; :func:`llmath.ops.attention.nope` gates it too for when it does.)"""

from __future__ import annotations

from test_llama4 import SMALL

from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate


def _vflops(spec, name: str, sc: Scenario) -> dict[str, int]:
    ops = build_ops(spec, "prefill", "flash")
    return {c.op.layer_kind: c.values["vflops"] for c in evaluate(ops, sc, spec) if c.op.name == name}


def test_nope_layers_have_no_rotary():
    # SMALL: 4 layers, layer 3 (every 4th) NoPE with full attention, layers 0-2 rope with 8-token chunks;
    # MoE every 2nd layer, so the rope layers are groups dense/chunk 8 (layers 0, 2) and moe/chunk 8 (1).
    spec = spec_from_config(SMALL, "small")
    B, T, N, K, H = 2, 5, 8, 2, 64
    # rotary: 3 FLOPs per element of the N query and K key heads of width H (ROTARY_FLOPS), per token
    rope = 3 * (N + K) * H * B * T  # = 3 * 640 * 10 = 19,200 per layer
    assert _vflops(spec, "attn.rotary", Scenario(B, T)) == {"dense/chunk 8": 2 * rope, "moe/chunk 8": rope}
    # before the fix the NoPE layer (group moe/full) was charged the same 19,200: now no such operator
    assert "moe/full" not in _vflops(spec, "attn.rotary", Scenario(B, T))


def test_without_chunk_windows_every_layer_keeps_its_rotary():
    # attention_chunk_size null: every layer attends fully; llmath cannot tell the NoPE ones apart, so it
    # charges all 4 layers (dense: layers 0, 2; moe: 1, 3) rather than none
    spec = spec_from_config(dict(SMALL, attention_chunk_size=None), "small")
    rope = 3 * (8 + 2) * 64 * 1 * 3
    assert _vflops(spec, "attn.rotary", Scenario(1, 3)) == {"dense/full": 2 * rope, "moe/full": 2 * rope}
