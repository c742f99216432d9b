"""Gemma 4's language model beyond what the oracle sweep covers: what the per-layer head widths mean for the
serving KV cache (arithmetic written out), and the options llmath refuses until it models them.
(tests/test_oracle_causal_lm.py proves gemma4_text / gemma4_unified_text against transformers on meta.)"""

from __future__ import annotations

import pytest

from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
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
        ({"num_kv_shared_layers": 10}, "num_kv_shared_layers"),
        ({"attention_k_eq_v": True}, "attention_k_eq_v"),
        ({"enable_moe_block": True}, "enable_moe_block"),
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
    assert make_layout(spec, tp=2).tp == 2  # 2 divides 4 and 2
    with pytest.raises(LayoutError, match="full-attention layers' 2 KV heads"):
        make_layout(spec, tp=4)  # the full layers would replicate their 2 KV heads: not modelled


def test_analyze_runs_tensor_parallel(capsys, tmp_path):
    """Every Gemma 4 operator has a sharding rule (the per-layer inputs are replicated on each rank)."""
    import json

    from helpers import run_cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps(BASE))
    code, out, err = run_cli(capsys, "analyze", str(path), "--hardware", "h100-sxm", "--tp", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["params"]
