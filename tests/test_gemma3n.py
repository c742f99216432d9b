"""Gemma 3n's language model beyond the oracle sweep (tests/test_oracle_causal_lm.py proves gemma3n_text and its
variants against transformers on meta): AltUp, LAuReL, sparse FFN gates and KV sharing with the arithmetic
written out, and the options llmath refuses."""

from __future__ import annotations

import json

import pytest

from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report
from llmath.ops.state import kv_growth

# Gemma3nTextConfig's defaults (configuration_gemma3n.py, transformers 5.23): 35 layers, every 5th full, the
# last 15 reusing K/V, the first 10 sparse
BASE = {
    "model_type": "gemma3n_text",
    "hidden_size": 2048,
    "intermediate_size": 16384,
    "num_hidden_layers": 35,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "vocab_size": 262400,
    "sliding_window": 512,
}


def _params(spec, prefix: str) -> int:
    return sum(n for k, n in param_report(spec).by_component.items() if k.startswith(prefix))


def test_altup_and_laurel_parameters():
    spec = spec_from_config(BASE)
    assert (spec.altup_inputs, spec.laurel_rank) == (4, 64)
    # per layer: correct_output_scale D, correction_coefs A², prediction_coefs A·A², modality_router D·A
    # (router_norm D is a norm); once: 3 projections and 3 unembed projections D × D
    # 35·(2048 + 16 + 64 + 8192) + 6·2048² = 361200 + 25165824
    assert _params(spec, "altup.") - _params(spec, "altup.router_norm") == 25_527_024
    # LAuReL: 35 layers × (D·R + R·D) = 35 · 2 · 2048 · 64
    assert _params(spec, "laurel.") == 9_175_040
    # K/V projections only in the 20 layers that compute them: 20 · 2048 · 2 · 256 each
    assert _params(spec, "attention.k.") == _params(spec, "attention.v.") == 20_971_520


def test_kv_shared_layers_keep_no_cache():
    g = kv_growth(spec_from_config(BASE), Precision())  # bf16: 2 bytes
    # layers 0..19 cache (layers 20..34 reuse): full 4, 9, 14, 19; K + V × 2 heads × 256 × 2 bytes = 2048 each
    assert g["growth_bytes_per_token"] == 4 * 2048
    assert g["window_bytes"] == 16 * 512 * 2048
    assert g["bytes_per_token"] == 20 * 2048
    unshared = kv_growth(spec_from_config(dict(BASE, num_kv_shared_layers=0)), Precision())
    assert unshared["bytes_per_token"] == 35 * 2048


def test_shared_layers_project_no_kv_but_attend():
    spec = spec_from_config(BASE)
    costs = evaluate(build_ops(spec, "prefill", "eager"), Scenario(1, 100), spec)
    shared = [c for c in costs if "shared kv" in c.op.layer_kind]
    assert not [c for c in shared if c.op.name in ("attn.k_proj", "attn.v_proj", "attn.cache_append")]
    scores = sum(c.values["flops"] for c in shared if c.op.name == "attn.scores")
    # 15 layers × 2·N·H × T·T (eager runs every query against every key of the 100): 15 · 2 · 8 · 256 · 100²
    assert scores == 15 * 2 * 8 * 256 * 100 * 100


def test_sparse_gates_cost_a_gaussian_topk():
    spec = spec_from_config(BASE)
    assert spec.layer_ffn_sparse == (True,) * 10 + (False,) * 25
    ops = [c for c in evaluate(build_ops(spec, "decode", "eager"), Scenario(1, 1, 10), spec)]
    topk = [c for c in ops if c.op.name == "ffn.gaussian_topk"]
    # 10 layers × 6 FLOPs (mean, deviation, square, sum, subtract, ReLU) × F = 16384 per token
    assert sum(c.values["vflops"] for c in topk) == 10 * 6 * 16384


def test_altup_matmuls_of_a_decode_step():
    spec = spec_from_config(BASE)
    ops = evaluate(build_ops(spec, "decode", "eager"), Scenario(1, 1, 10), spec)
    flops = {c.op.name: 0 for c in ops}
    for c in ops:
        flops[c.op.name] += c.values.get("flops", 0)
    # one token: the 3 input and 3 unembed projections 2·D·D each
    assert flops["altup.projections"] == flops["altup.unembed_projections"] == 3 * 2 * 2048 * 2048
    # per layer: the router twice (2·D·A), prediction coefs 2·A·A², the mix 2·D·A·A, correction coefs 2·A·A
    assert flops["altup.router"] + flops["altup.correct_router"] == 35 * 2 * 2 * 2048 * 4
    assert flops["altup.prediction_coefs"] == 35 * 2 * 4 * 16
    assert flops["altup.predict"] == 35 * 2 * 2048 * 4 * 4
    assert flops["altup.correction_coefs"] == 35 * 2 * 4 * 4


def test_matformer_slices_give_layers_their_own_ffn_width():
    """A MatFormer slice of E4B (the FFN widths per layer, e.g. 8192 for the first 15 layers, 16384 after)."""
    widths = [8192] * 15 + [16384] * 20
    spec = spec_from_config(dict(BASE, intermediate_size=widths))
    # gate, up, down: 3 · D · F per layer: 3 · 2048 · (15 · 8192 + 20 · 16384)
    assert _params(spec, "ffn.") == 3 * 2048 * (15 * 8192 + 20 * 16384)
    assert spec_from_config(dict(BASE, intermediate_size=[16384] * 35)).layer_d_ff == ()  # one width: d_ff


@pytest.mark.parametrize(
    "extra,what",
    [
        ({"intermediate_size": [16384] * 34 + [8192] * 2}, "intermediate_size"),
        ({"altup_correct_scale": False}, "altup_correct_scale"),
        ({"altup_active_idx": 1}, "altup_active_idx"),
        ({"num_kv_shared_layers": 35}, "num_kv_shared_layers"),
        ({"activation_sparsity_pattern": [0.95]}, "activation_sparsity_pattern"),
    ],
)
def test_unmodelled_or_invalid_options_are_refused(extra, what):
    with pytest.raises(ConfigError, match=what):
        spec_from_config(dict(BASE, **extra))


def test_kv_sharing_needs_a_producer_of_each_kind():
    # 10 layers every 5th full, the last 6 shared: layer 9 is full but no full layer before layer 4 computes K/V...
    # layers 0..3 are all sliding, so full layer 9 has no producer (transformers raises too)
    with pytest.raises(ConfigError, match="no earlier layer"):
        spec_from_config(dict(BASE, num_hidden_layers=10, num_kv_shared_layers=6))


def test_analyze_runs_tensor_and_pipeline_parallel(capsys, tmp_path):
    from helpers import run_cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps(BASE))
    for flags in (("--tp", "2"), ("--pp", "2", "--gpus", "2")):
        code, out, err = run_cli(capsys, "analyze", str(path), "--hardware", "h100-sxm", *flags, "--json")
        assert code == 0, err
        assert json.loads(out)["params"]["total"] == param_report(spec_from_config(BASE)).total
