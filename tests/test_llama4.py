"""Llama-4 (llama4_text): interleaved MoE layers, chunked attention on the rope layers, NoPE layers with
full attention; transformers' eager experts (all of them, every token) against serving's top-k."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath.analysis import kv_cache_bytes
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402

B, P = 2, 9
# the lists the config class writes out, dropped so that llmath derives them as the class does
DERIVED = dict(moe_layers=None, layer_types=None, no_rope_layers=None)


def _cfg(tmp_path, **extra) -> dict:
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
