"""DeepSeek-V4's compressed attention (CSA / HCA), hyper-connections and compressed caches, against hand arithmetic.

transformers on the meta device proves parameters, eager FLOPs and cache bytes in tests/test_oracle_causal_lm.py
(deepseek_v4 and its VARIANTS); these check the formulas' pieces and what has no transformers counterpart
(the flash execution, the growth of the state, the generation sum).
"""

from __future__ import annotations

import numpy as np
import pytest

from llmath.analysis import kv_cache_bytes
from llmath.errors import ConfigError
from llmath.hardware import get
from llmath.hardware.decode import _decode_stepwise, decode_generation
from llmath.hardware.roofline import efficiency, op_times
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate, table
from llmath.ops.pair_counts import compressed_pairs
from llmath.ops.state import kv_growth

# DeepseekV4Config's defaults (configuration_deepseek_v4.py, transformers 5.23), as a hub-style file would state
# them: D 4096, N 64 heads of H 512, q rank 1024, 8 output groups of rank 1024, window 128, CSA every 4
# positions with an indexer of 64 heads × 128 (top 512), HCA every 128, 4 hyper-connection streams
D, N, H, W, I, X, K = 4096, 64, 512, 128, 64, 128, 512
CFG = dict(
    model_type="deepseek_v4", vocab_size=129280, hidden_size=D, moe_intermediate_size=2048, num_hidden_layers=43,
    num_attention_heads=N, num_key_value_heads=1, head_dim=H, q_lora_rank=1024, num_experts_per_tok=6,
    n_routed_experts=256, n_shared_experts=1, sliding_window=W, o_groups=8, o_lora_rank=1024, index_n_heads=I,
    index_head_dim=X, index_topk=K, hc_mult=4, tie_word_embeddings=False,
)  # fmt: skip


def _spec(**extra):
    return spec_from_config(dict(CFG, **extra), "deepseek_v4")


def test_compressed_pairs_hand_counted():
    # queries at positions 4..8 with m = 2 see ⌊4/2⌋, ⌊5/2⌋, ... = 2, 2, 3, 3, 4 entries: 14; capped at 3: 13
    assert compressed_pairs(5, 3, 2) == 14
    assert compressed_pairs(5, 3, 2, 3) == 13
    assert compressed_pairs(np.array([5]), np.array([3]), 2, 3)[0] == 13
    assert compressed_pairs(3, 0, 4) == 0  # no window of 4 closes within 3 positions


def test_default_layer_pattern_and_cache_after_a_prompt():
    """Layers: two HCA, then HCA and CSA alternating (DeepseekV4Config.__post_init__). After P = 9 positions,
    per sequence (elements): an HCA layer holds the window's 9 K=V rows (512), 9 buffered kv and gate rows
    (512 each), no entry: 27·512 = 13824; the CSA layer 9·512 window rows, 2 entries of 512, 1 buffered kv and
    gate row of 2·512, the overlap of 4 rows' halves for kv and gate (2·4·512), and its indexer the same at 128:
    4608 + 1024 + 2048 + 4096 + 256 + 512 + 1024 = 13568. Four layers, 2 sequences, bf16."""
    spec = _spec()
    assert spec.layer_compress[:6] == ("hca", "hca", "hca", "csa", "hca", "csa")
    assert spec.layer_compress.count("csa") == 20 and spec.layer_compress.count("hca") == 23
    assert kv_cache_bytes(spec.with_layers(4), 2, 9, Precision(), layout="transformers") == 2 * 2 * (3 * 13824 + 13568)


def test_state_grows_by_an_entry_every_rate_positions():
    """Growth per position once the windows are full: 23 HCA layers × 512/128 + 20 CSA layers × (512 + 128)/4
    = 92 + 3200 = 3292 elements; a first position also adds a window row in each of the 43 layers (43·512)."""
    g = kv_growth(_spec(), Precision())
    assert g["growth_bytes_per_token"] == 3292 * 2
    assert g["bytes_per_token"] == (43 * 512 + 3292) * 2
    # at 1M positions: windows full (127 rows in transformers' layout), entries ⌊S/m⌋, buffers S mod m (0 here)
    S = 1 << 20
    per_seq = 43 * 127 * 512 + 23 * (S // 128) * 512 + 20 * ((S // 4) * (512 + 128) + 2 * 4 * (512 + 128))
    assert kv_cache_bytes(_spec(), 1, S, Precision(), layout="transformers") == per_seq * 2


def _flops(spec, stage, attention, scen, name):
    return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, attention), scen, spec) if
               c.op.name == name and c.op.layer_kind.endswith("/csa"))  # fmt: skip


def test_flash_decode_attends_the_top_k_entries_eager_attends_all():
    """Why the serving default differs from transformers: eager (modeling_deepseek_v4.py) multiplies the query
    by every compressed entry and masks the unselected ones; the sparse execution attends only the indexer's
    top k (vLLM's vllm/models/deepseek_v4/nvidia/flashmla.py: sparse MLA over the window plus the top-k).
    Decode at S0 = 100000 on the 20 CSA layers: 25000 entries visible; eager scores 2·N·H·(127 window rows
    + the new one + 25000) and as much for the context product, flash 4·N·H·(128 + 512)."""
    spec, scen = _spec(), Scenario(1, 1, 100_000)
    eager = _flops(spec, "decode", "eager", scen, "attn.scores") + _flops(spec, "decode", "eager", scen, "attn.context")
    assert eager == 20 * 2 * 2 * N * H * (128 + 25_000)
    assert _flops(spec, "decode", "flash", scen, "attn.flash") == 20 * 4 * N * H * (128 + 512)
    # the indexer scores every visible entry either way: 2·I·X per (query, entry)
    assert _flops(spec, "decode", "flash", scen, "attn.indexer.scores") == 20 * 2 * I * X * 25_000


def test_hyper_connection_parameters():
    """Per layer two hyper-connections of fn ((2+n)·n × n·D), base (2+n)·n and scale 3; the head hc_fn n × n·D,
    hc_base n, hc_scale 1: with n = 4, D = 4096: 2·(24·16384 + 24 + 3) per layer, 65536 + 5 once."""
    from llmath.ops.params import param_report

    rep = param_report(_spec())
    assert sum(v for k, v in rep.by_component.items() if k.startswith("hyper")) == 43 * 2 * (24 * 16384 + 27) + 65541


@pytest.mark.parametrize("mode", ["ideal", "expected"])
def test_generation_is_the_sum_of_its_steps(mode):
    """The compressed caches' staircase has no closed form: each step is summed (its cost from op_times)."""
    spec = _spec(num_hidden_layers=4)
    t, hw, p = table(spec, "decode", "flash"), get("h100-sxm"), Precision()
    eff = efficiency(mode, hw)
    for B, P, Ntok in ((1, 5, 40), (64, 1000, 300)):
        d = decode_generation(t, hw, p, eff, B, P, Ntok)
        S = np.arange(P, P + Ntok - 1)
        times, _, _, _ = op_times(t.values(Scenario(B, 1, S)), t, hw, p, eff, B, B, True, S)
        assert float(d.total_s) == pytest.approx(times.sum(), rel=1e-12)
        assert float(d.first_s) == pytest.approx(times[0].sum(), rel=1e-12)
        assert float(d.last_s) == pytest.approx(times[-1].sum(), rel=1e-12)
    arr = decode_generation(t, hw, p, eff, np.array([1, 64]), np.array([5, 1000]), np.array([40, 300]))
    assert float(arr.total_s[1]) == pytest.approx(float(decode_generation(t, hw, p, eff, 64, 1000, 300).total_s))


def test_the_stepwise_sum_equals_the_closed_form_where_both_apply():
    from llmath.model import registry

    t, hw, p = table(registry.spec("llama-3-8b"), "decode", "flash"), get("h100-sxm"), Precision()
    eff = efficiency("ideal", hw)
    for B, P, Ntok in ((1, 100, 50), (64, 4000, 300)):
        closed, steps = decode_generation(t, hw, p, eff, B, P, Ntok), _decode_stepwise(t, hw, p, eff, B, P, Ntok, 0)
        assert float(steps.total_s) == pytest.approx(float(closed.total_s), rel=1e-12)


@pytest.mark.parametrize(
    "extra,match",
    [
        ({"layer_types": ["full_attention"] * 43}, "layer_types needs 43 entries"),
        ({"o_groups": 7}, "o_groups=7"),
        ({"hc_mult": 0}, "hc_mult=0 must be a positive integer"),
    ],
)
def test_bad_configs_are_refused_with_the_rule(extra, match):
    with pytest.raises(ConfigError, match=match):
        _spec(**extra)


def test_hy_v4_independent_hyper_connections():
    """HY-V4's iHC (modeling_hy_v4.py): fn 2·n × n·D, base 2·n, scale 2 per connection, two per layer, no comb
    matmul; the head as DeepSeek-V4's. Defaults n = 4, D = 2816, 34 layers: fn 8·11264 = 90112, so
    34·2·(90112 + 8 + 2) + (4·11264 + 4 + 1) = 6128296 + 45061. Per token per layer, matmul FLOPs
    2·(2·11264·8) for the two projections."""
    from llmath.ops.params import param_report

    cfg = dict(model_type="hy_v4", vocab_size=120832, hidden_size=2816, intermediate_size=6912,
               moe_intermediate_size=768, num_hidden_layers=34, num_attention_heads=32, q_lora_rank=1536,
               kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256, n_routed_experts=256,
               num_experts_per_tok=8, n_shared_experts=1, index_topk=2048, index_head_dim=128, index_n_heads=16,
               tie_word_embeddings=False)  # fmt: skip
    spec = spec_from_config(cfg, "hy")
    assert spec.layer_indexer[:6] == (True, True, False, False, False, True)
    rep = param_report(spec)
    assert sum(v for k, v in rep.by_component.items() if k.startswith("hyper")) == 6128296 + 45061
    ops = [
        c for c in evaluate(build_ops(spec, "decode", "flash"), Scenario(1, 1, 10), spec) if c.op.component == "hyper"
    ]
    assert not any(c.op.name.endswith(".comb") for c in ops)
    layer_fn = sum(c.values["flops"] for c in ops if c.op.name in ("hyper.attn.fn", "hyper.ffn.fn"))
    assert layer_fn == 34 * 2 * 2 * 11264 * 8
