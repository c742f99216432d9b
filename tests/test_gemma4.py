"""Gemma 4's language model beyond what the oracle sweep covers: what the per-layer head widths, KV sharing and
keys-as-values mean for the serving KV cache, and the MoE beside the FFN (arithmetic written out), and the
options llmath refuses until it models them.
(tests/test_oracle_causal_lm.py proves gemma4_text / gemma4_unified_text against transformers on meta.)"""

from __future__ import annotations

import pytest

from llmath.deploy.layout import ParallelConfig
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops.params import param_report
from llmath.ops.state import kv_growth

# Gemma4TextConfig's defaults (configuration_gemma4.py, transformers 5.23): 30 layers, every 6th full
BASE = {
    "model_type": "gemma4_text",
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 30,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "vocab_size": 262144,
    "sliding_window": 512,
}


def test_full_layers_cache_their_own_head_width():
    spec = spec_from_config(dict(BASE, global_head_dim=512))
    g = kv_growth(spec, Precision())  # bf16: 2 bytes
    # full layers (5, 11, 17, 23, 29): 5 layers × (K + V) 2 × 4 heads × 512 wide × 2 bytes
    assert g["growth_bytes_per_token"] == 5 * 2 * 4 * 512 * 2
    # the 25 sliding layers hold 512 positions of 2 × 4 × 256 × 2 bytes each when full
    assert g["window_bytes"] == 25 * 512 * 2 * 4 * 256 * 2
    # without global_head_dim, transformers' default 512 applies (Gemma4TextConfig.__post_init__)
    assert spec_from_config(BASE).full_head_dim == 512


def test_per_layer_embeddings_count_from_the_config():
    spec = spec_from_config(dict(BASE, hidden_size_per_layer_input=128, vocab_size_per_layer_input=1000))
    assert (spec.per_layer_width, spec.per_layer_vocab) == (128, 1000)
    assert spec_from_config(dict(BASE, model_type="gemma4_unified_text")).per_layer_width == 0  # no PLE


@pytest.mark.parametrize(
    "extra,what",
    [
        ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention"),
        ({"per_layer_config": {"0": {"head_dim": 128}}}, "per_layer_config"),  # a sliding layer's override
    ],
)
def test_unmodelled_options_are_refused(extra, what):
    with pytest.raises(ConfigError, match=f"{what}.*not modelled yet"):
        spec_from_config(dict(BASE, **extra))


def test_tensor_parallel_needs_both_kv_head_counts_divisible():
    from llmath.deploy.layout import make_layout
    from llmath.errors import LayoutError

    over = {str(i): {"num_key_value_heads": 2} for i in (5, 11, 17, 23, 29)}
    spec = spec_from_config(dict(BASE, per_layer_config=over))
    assert (spec.n_kv_heads, spec.full_kv_heads) == (4, 2)
    assert make_layout(spec, ParallelConfig(tp=2)).tp == 2  # 2 divides 4 and 2
    with pytest.raises(LayoutError, match="full-attention layers' 2 KV heads"):
        make_layout(spec, ParallelConfig(tp=4))  # the full layers would replicate their 2 KV heads: not modelled


def test_analyze_runs_tensor_parallel(capsys, tmp_path):
    """Every Gemma 4 operator has a sharding rule (the per-layer inputs are replicated on each rank)."""
    import json

    from helpers import run_cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps(BASE))
    code, out, err = run_cli(capsys, "analyze", str(path), "--hardware", "h100-sxm", "--tp", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["params"]


def test_kv_shared_layers_keep_no_cache():
    g = kv_growth(spec_from_config(dict(BASE, global_head_dim=512, num_kv_shared_layers=10)), Precision())
    # layers 20..29 reuse K/V: full layers 5, 11, 17 cache (K + V) 2 × 4 heads × 512 × 2 bytes
    assert g["growth_bytes_per_token"] == 3 * 2 * 4 * 512 * 2
    # the 17 sliding layers among 0..19 hold 512 positions of 2 × 4 × 256 × 2 bytes
    assert g["window_bytes"] == 17 * 512 * 2 * 4 * 256 * 2


def _flops(spec, attention, name):
    from llmath.ops import Scenario, build_ops, evaluate

    ops = evaluate(build_ops(spec, "prefill", attention), Scenario(1, 100), spec)
    return sum(c.values.get("flops", 0) for c in ops if c.op.name == name and "shared kv" in c.op.layer_kind)


def test_shared_layers_run_the_logit_row_only_in_eager_prefill():
    """transformers (``_maybe_slice_kv_shared_inputs``) runs the KV-shared layers of a prefill on the
    ``logits_to_keep`` rows only: their outputs elsewhere feed no cache. llmath's ``flash`` (serving) keeps every
    row: an engine computes the whole batch of tokens through every layer unless a fast-prefill option says
    otherwise (vLLM's ``kv_sharing_fast_prefill``, False by default in vllm/config/cache.py), so the two
    executions differ on purpose."""
    spec = spec_from_config(dict(BASE, num_kv_shared_layers=10))
    # shared layers 20..29 × q_proj 2·D·N·H: 8 sliding (H = 256) and 2 full (23, 29: H = 512); one row (the
    # last) in eager, all 100 in flash
    q_rows = 2 * 2304 * 8 * (8 * 256 + 2 * 512)
    assert _flops(spec, "eager", "attn.q_proj") == q_rows * 1
    assert _flops(spec, "flash", "attn.q_proj") == q_rows * 100
    # the one query of a shared full-attention layer (23, 29) scores all 100 keys: 2 × 2·N·H × 100
    assert _flops(spec, "eager", "attn.scores") == 8 * 2 * 8 * 256 * 100 + 2 * 2 * 8 * 512 * 100


def test_keys_as_values_drop_v_proj_but_cache_both():
    plain, k_eq_v = spec_from_config(BASE), spec_from_config(dict(BASE, attention_k_eq_v=True))
    # the 5 full-attention layers lose v_proj: 5 × D · K · H = 5 · 2304 · 4 · 512
    assert param_report(plain).total - param_report(k_eq_v).total == 5 * 2304 * 4 * 512
    # V is still cached (the K projection's output under its own norm)
    assert kv_growth(plain, Precision()) == kv_growth(k_eq_v, Precision())
    # Gemma4TextConfig.__post_init__ gives the full layers num_global_key_value_heads only with k = v
    assert spec_from_config(dict(BASE, attention_k_eq_v=True, num_global_key_value_heads=2)).full_kv_heads == 2
    assert spec_from_config(dict(BASE, num_global_key_value_heads=2)).full_kv_heads is None


def test_moe_beside_the_ffn_parameters():
    moe = dict(enable_moe_block=True, num_experts=8, top_k_experts=2, moe_intermediate_size=512)
    plain, both = spec_from_config(BASE), spec_from_config(dict(BASE, **moe))
    assert both.layer_moe == (True,) * 30 and both.moe_beside_ffn and both.d_ff == 9216
    # per layer: experts 8 × 3 · D · 512, router D · 8, its scale D, per-expert scale 8, three norms D
    per_layer = 8 * 3 * 2304 * 512 + 2304 * 8 + 2304 + 8 + 3 * 2304
    assert param_report(both).total - param_report(plain).total == 30 * per_layer
