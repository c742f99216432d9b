"""Llama-4 (llama4_text): interleaved MoE layers, chunked attention on the rope layers, NoPE layers with
full attention; transformers' eager experts (all of them, every token) against serving's top-k."""

from __future__ import annotations

import numpy as np
import pytest
from causal_lm_types import default_config

from llmath.analysis import kv_cache_bytes
from llmath.hardware import get
from llmath.hardware.decode import decode_generation
from llmath.hardware.roofline import efficiency, op_times
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate, table
from llmath.ops.params import param_report

B, P = 2, 9
# the lists the config class writes out, dropped so that llmath derives them as the class does
DERIVED = dict(moe_layers=None, layer_types=None, no_rope_layers=None)


def _oracle():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    return oracle


def _cfg(tmp_path, **extra) -> dict:
    _oracle()
    return {k: v for k, v in dict(default_config("llama4_text", str(tmp_path)), **extra).items() if v is not None}


def _flops(spec, stage, S0, T, attention="eager", prefix=""):
    ops = build_ops(spec, stage, attention)
    return sum(
        c.values.get("flops", 0) for c in evaluate(ops, Scenario(B, T, S0), spec) if c.op.name.startswith(prefix)
    )


def test_layer_pattern_follows_the_config_class(tmp_path):
    """Rope layers chunked, every 4th (NoPE) full; MoE every interleave_moe_layer_step-th from step − 1."""
    spec = spec_from_config(_cfg(tmp_path, num_hidden_layers=8, interleave_moe_layer_step=2, **DERIVED), "l4")
    C = 8192  # attention_chunk_size default
    assert spec.layer_windows == (C, C, C, None, C, C, C, None)
    assert spec.layer_moe == (False, True) * 4
    assert spec.d_ff == 16384 and spec.moe.d_ff_expert == spec.moe.d_ff_shared == 8192


@pytest.mark.parametrize("step", [1, 2])
def test_reads_exactly_with_a_chunk_shorter_than_the_prompt(step, tmp_path):
    """Parameters, eager prefill and decode matmul FLOPs and cache bytes equal transformers on meta with
    4-token chunks and a 9-token prompt (transformers caches a chunked layer as a window of the chunk)."""
    oracle = _oracle()
    cfg = _cfg(tmp_path, attention_chunk_size=4, interleave_moe_layer_step=step, **DERIVED)
    spec = spec_from_config(cfg, "l4")
    assert param_report(spec).total == oracle.count_params(oracle.build_meta(oracle.hf_config(cfg)))
    small, model = spec.with_layers(4), oracle.build_meta(oracle.hf_config(cfg, 4))
    hf_prefill, out = oracle.forward_flops(model, B, P)
    assert _flops(small, "prefill", 0, P) == hf_prefill
    assert kv_cache_bytes(small, B, P, Precision(), layout="transformers") == oracle.cache_bytes(out.past_key_values)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=out.past_key_values)
    assert _flops(small, "decode", P, 1) == hf_decode


def test_serving_runs_top_k_experts_where_transformers_runs_all(tmp_path):
    """transformers' Llama4TextExperts multiplies every token by all E experts (bmm over E; the sigmoid
    router scores zero the unchosen): eager routed-expert FLOPs per token and MoE layer = E · 3 · 2·D·F.
    Serving kernels (flash, llmath's default) run the top-k: k · 3 · 2·D·F."""
    spec = spec_from_config(_cfg(tmp_path, num_hidden_layers=1), "l4")
    D, F, E, k = 5120, 8192, 16, 1
    tokens = B * P
    assert _flops(spec, "prefill", 0, P, "eager", "moe.experts") == tokens * E * 3 * 2 * D * F
    assert _flops(spec, "prefill", 0, P, "flash", "moe.experts") == tokens * k * 3 * 2 * D * F


# A Llama-4-shaped config written out (no transformers needed): 4 layers, 3 chunked + 1 NoPE, 8-token chunks.
SMALL = dict(model_type="llama4_text", hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
             num_key_value_heads=2, head_dim=64, intermediate_size=256, intermediate_size_mlp=1024,
             vocab_size=1000, num_local_experts=4, num_experts_per_tok=1, attention_chunk_size=8,
             interleave_moe_layer_step=2)  # fmt: skip


def test_flash_computes_only_the_pairs_inside_each_chunk():
    """Serving kernels (vLLM's chunked local attention) compute query p's pairs within its 8-aligned chunk:
    ((p − 1) mod 8) + 1. A 20-token prompt: 36 + 36 + (1+2+3+4) = 82 pairs per chunked layer (a sliding
    window of 8 would compute 1+…+8 + 12·8 = 132); the NoPE layer: 20·21/2 = 210. Scores and values are
    2 · 2·N·H FLOPs per pair."""
    spec = spec_from_config(SMALL, "small")
    ops = build_ops(spec, "prefill", "flash")
    got = {
        c.op.layer_kind: c.values["flops"] for c in evaluate(ops, Scenario(1, 20, 0), spec) if c.op.name == "attn.flash"
    }
    per_pair = 4 * 8 * 64
    assert got == {"dense/chunk 8": 2 * 82 * per_pair, "moe/chunk 8": 82 * per_pair, "moe/full": 210 * per_pair}
    # decode at context S: the new token (position S + 1) attends (S mod 8) + 1 keys of its chunk
    for S, keys in ((20, 5), (23, 8), (24, 1)):
        dec = evaluate(build_ops(spec, "decode", "flash"), Scenario(1, 1, S), spec)
        chunked = [c for c in dec if c.op.name == "attn.flash" and c.op.layer_kind == "moe/chunk 8"]
        assert chunked[0].values["kv_read"] == keys * 2 * 2 * 64


@pytest.mark.parametrize("mode", ["ideal", "expected"])
def test_chunked_generation_closed_form_equals_step_by_step(mode):
    """The decode sum over a sawtooth (chunked) context, in closed form, equals the step-by-step sum; the
    scalar and broadcasting paths agree."""
    spec = spec_from_config(SMALL, "small")
    t, hw, p = table(spec, "decode", "flash"), get("h100-sxm"), Precision()
    eff = efficiency(mode, hw)
    for Bn, Pn, N in ((1, 5, 40), (64, 13, 300), (512, 3, 30)):
        d = decode_generation(t, hw, p, eff, Bn, Pn, N)
        S = np.arange(Pn, Pn + N - 1)
        times, _, _, _ = op_times(t.values(Scenario(Bn, 1, S)), t, hw, p, eff, Bn, Bn, True)
        assert float(d.total_s) == pytest.approx(times.sum(), rel=1e-9)
        assert float(d.first_s) == pytest.approx(times[0].sum(), rel=1e-12)
        assert float(d.last_s) == pytest.approx(times[-1].sum(), rel=1e-12)
        v = decode_generation(t, hw, p, eff, np.array([Bn]), np.array([Pn]), np.array([N]))
        assert float(v.total_s[0]) == pytest.approx(float(d.total_s), rel=1e-12)
        assert float(v.last_s[0]) == pytest.approx(float(d.last_s), rel=1e-12)
