"""Qwen4-Exp (``qwen4_exp_text``): hyper-connection streams, the QSA indexer, hashed n-gram embeddings.

transformers 5.23 runs the QSA indexer as a loop over batch rows and queries with ``nonzero`` over the mask,
which the meta device cannot execute: small configs are built on the CPU with random weights (the
transformers test suite's sizes, tests/models/qwen4_exp/test_modeling_qwen4_exp.py) and their eager
forward counted by ``FlopCounterMode``; the full-size defaults' parameters are proven on meta by
tests/test_oracle_causal_lm.py. The selection depends only on the mask (how many complete blocks each
query sees), not on the weights, so the indexer's matmul FLOPs are data-independent.
"""

from __future__ import annotations

import pytest
from helpers import coarse_hf, coarse_llmath

from llmath.analysis import kv_cache_bytes, kv_growth
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.model.spec_hyper import primes_from
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.pair_counts import qsa_blocks, qsa_pairs
from llmath.ops.params import param_report

B, P = 2, 9

SMALL = {  # Qwen4ExpTextModelTester's sizes (transformers tests), a linear layer with PLE, then QSA attention
    "model_type": "qwen4_exp_text",
    "vocab_size": 128,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
    "layer_types": ["linear_attention", "indexed_attention"],
    "linear_conv_kernel_dim": 2,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_key_heads": 4,
    "linear_num_value_heads": 8,
    "hc_count": 2,
    "hc_lowrank": 8,
    "ple_layer_ids": [1],
    "ple_embed_dim": 16,
    "ple_conv_kernel_size": 2,
    "ngram_size": 3,
    "heads_per_ngram": 2,
    "ngram_vocab_size_base": 31,
    "make_ngram_vocab_size_divisible_by": 8,
    "indexer_n_heads": 2,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 8,
    "indexer_budget": 4,
    "indexer_compress_ratio": 2,
    "moe_intermediate_size": 8,
    "shared_expert_intermediate_size": 8,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "eos_token_id": 127,
    "number_of_conv_states": 3,
}
# three streams, two PLE layers with 4-grams and a wider conv, blocks of 3, a sigmoid output gate
WIDER = dict(
    SMALL,
    num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "indexed_attention", "linear_attention"],
    ple_layer_ids=[1, 2],
    hc_count=3,
    ngram_size=4,
    heads_per_ngram=1,
    ple_embed_dim=12,
    ple_conv_kernel_size=3,
    indexer_budget=3,
    indexer_compress_ratio=3,
    indexer_n_heads=3,
    output_gate_type="sigmoid",
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
)


def _cpu_model(cfg):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch
    import transformers

    from llmath.measure import oracle

    torch.manual_seed(0)
    with torch.device("cpu"):
        model = transformers.AutoModelForCausalLM.from_config(
            oracle.hf_config(cfg), attn_implementation="eager", experts_implementation="batched_mm"
        )
    return oracle, model.eval().requires_grad_(False)


def _matmul_flops(spec, stage, S0, T, attention="eager"):
    ops = build_ops(spec, stage, attention)
    return sum(c.values.get("flops", 0) for c in evaluate(ops, Scenario(B, T, S0), spec))


@pytest.mark.parametrize("cfg", [SMALL, WIDER], ids=["small", "wider"])
def test_small_models_read_exactly_on_cpu(cfg):
    oracle, model = _cpu_model(cfg)
    spec = spec_from_config(cfg, "qwen4")
    rep = param_report(spec)
    assert rep.total == oracle.count_params(model)
    hf: dict[str, int] = {}
    for n, p in model.named_parameters():
        hf[coarse_hf(n)] = hf.get(coarse_hf(n), 0) + p.numel()
    ours: dict[str, int] = {}
    for k, v in rep.by_component.items():
        ours[coarse_llmath(k)] = ours.get(coarse_llmath(k), 0) + v
    assert ours == hf
    hf_prefill, out = oracle.forward_flops(model, B, P)
    past = oracle.past_of(out)
    assert _matmul_flops(spec, "prefill", 0, P) == hf_prefill
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(past, model=model)
    hf_decode, out = oracle.forward_flops(model, B, 1, past=past, seen=P)
    assert _matmul_flops(spec, "decode", P, 1) == hf_decode
    # a second step: one more complete block for the indexer in SMALL (11 keys: 5 blocks of 2)
    hf_decode2, _ = oracle.forward_flops(model, B, 1, past=oracle.past_of(out), seen=P + 1)
    assert _matmul_flops(spec, "decode", P + 1, 1) == hf_decode2


def test_indexer_monomials_by_hand():
    # blocks of 2 seen by queries 1..9 (keys 1..9): 0+1+1+2+2+3+3+4+4 = 20
    assert qsa_blocks(9, 0, 2) == 20
    # a decode step at context 9 (10 keys): 5 blocks
    assert qsa_blocks(1, 9, 2) == 5
    # budget 4, blocks of 2: a query seeing v keys attends v while v < 6, else 4 + (v mod 2):
    # v = 1..9 -> 1+2+3+4+5 + 4+5+4+5 = 33
    assert qsa_pairs(9, 0, 4, 2) == 33
    assert qsa_pairs(1, 100, 4, 2) == 5  # 101 keys: 2 best blocks of 2 and the 1-key tail


def test_ngram_tables_are_the_primes_by_hand():
    # primes >= 31: 31, 37, 41, 43 | 47, 53, 59, 61; SMALL has (3 − 1)·2 = 4 heads per PLE layer
    assert primes_from(31, 8) == (31, 37, 41, 43, 47, 53, 59, 61)
    spec = spec_from_config(WIDER, "qwen4")
    # WIDER: (4 − 1)·1 = 3 heads; layer 0: 31 + 37 + 41 = 109 -> 112 (multiple of 8); layer 1: 43 + 47 + 53 =
    # 143 -> 144; rows of 12 / 3 = 4: (112 + 144)·4 = 1024
    assert param_report(spec).by_component["embedding.ngram"] == 1024


def test_primes_after_twenty_million_by_trial_division():
    def prime(n):
        return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))

    found, n = [], 20_000_000
    while len(found) < 3:
        found += [n] if prime(n) else []
        n += 1
    assert primes_from(20_000_000, 3) == tuple(found)


def test_sparse_attention_and_state_by_hand():
    spec = spec_from_config(SMALL, "qwen4")
    ops = build_ops(spec, "decode", "flash")
    (flash,) = [c for c in evaluate(ops, Scenario(B, 1, 100), spec) if c.op.name == "attn.flash"]
    # 101 keys: 4 + 101 mod 2 = 5 attended; 4·N·H per pair = 4·4·16 = 256; B = 2: 2·5·256 = 2560
    assert flash.values["flops"] == 2560
    g = kv_growth(spec, Precision())
    # per position: K and V 2·K·H = 2·2·16 = 64, the indexer key 8: 72 elements, 144 bytes (bf16)
    assert g["bytes_per_token"] == g["growth_bytes_per_token"] == 144
    # per sequence: Gated DeltaNet conv (C − 1)·(2·G·N + I) = 1·(2·4·16 + 128) = 256, its state H·N·P =
    # 8·16·16 = 2048; PLE conv (k − 1)·3·S·D = 1·3·64 = 192 and the last 2 token ids: 2498 elements, 4996 bytes
    assert g["fixed_bytes_per_sequence"] == 4996


def test_active_parameters_read_one_row_per_head():
    spec = spec_from_config(SMALL, "qwen4")
    rep = param_report(spec)
    # the n-gram table (152 rows of 4) is read one row per head: 4 heads·4 = 16 of its 608 per token
    assert rep.active_per_token_with_embedding - rep.active_per_token == (128 - 1) * 32 + (152 - 4) * 4


@pytest.mark.parametrize(
    "extra,match",
    [
        ({"ple_layer_ids": [2]}, "attention layer"),
        ({"indexer_n_heads": None}, "indexer_n_heads"),
        ({"indexer_kv_heads": 2}, "one key head"),
        ({"layer_types": ["linear_attention", "sliding_attention"]}, "sliding_attention"),
        ({"indexer_budget": 5}, "multiple"),
    ],
)
def test_what_transformers_refuses_is_refused(extra, match):
    with pytest.raises(ConfigError, match=match):
        spec_from_config(dict(SMALL, **extra), "qwen4")
