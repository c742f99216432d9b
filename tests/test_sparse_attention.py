"""DeepSeek Sparse Attention (deepseek_v32): the lightning indexer's projections, scores and top-k, MLA over
exactly the k selected positions, the indexer keys as per-sequence state; eager = transformers (proven on
meta), flash = serving kernels (arithmetic written out)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import matmul_flops, values_by_op

from llmath.analysis import kv_cache_bytes
from llmath.hardware import get
from llmath.hardware.decode import decode_generation
from llmath.hardware.roofline import efficiency, op_times
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, table
from llmath.ops.params import param_report
from llmath.ops.state import kv_growth

# A DeepSeek-V3.2-shaped config, small: 2 layers (1 dense, 1 MoE), k = 4 selected positions.
D, N, C, R, Hn, Hv, L, I, X, K = 256, 4, 64, 16, 32, 32, 96, 2, 32, 4
CFG = dict(model_type="deepseek_v32", hidden_size=D, num_hidden_layers=2, num_attention_heads=N,
           num_key_value_heads=N, vocab_size=1000, intermediate_size=512, moe_intermediate_size=64,
           n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
           n_group=1, topk_group=1, kv_lora_rank=C, q_lora_rank=L, qk_rope_head_dim=R, qk_nope_head_dim=Hn,
           v_head_dim=Hv, index_n_heads=I, index_head_dim=X, index_topk=K, tie_word_embeddings=False)  # fmt: skip


def test_indexer_parameters():
    """Per layer: wq_b L·I·X, wk D·X, k_norm (LayerNorm) 2·X, weights_proj D·I."""
    spec = spec_from_config(CFG, "v32")
    dense = spec_from_config(dict(CFG, model_type="deepseek_v3"), "v3")
    per_layer = L * I * X + D * X + 2 * X + D * I
    assert param_report(spec).total - param_report(dense).total == 2 * per_layer


def test_flash_attends_exactly_k_positions_and_scores_every_pair():
    """Prefill of P = 9 with k = 4: MLA pairs Σ min(i, 4) = 1+2+3+4·6 = 30 per sequence (absorbed: 2·N·(2C+R)
    FLOPs per pair); the indexer scores every causal pair, 9·10/2 = 45, at 2·I·(X+1) FLOPs each."""
    spec = spec_from_config(CFG, "v32")
    ops = values_by_op(spec, "prefill", "flash", Scenario(1, 9, 0))
    assert ops["attn.flash_mla"]["flops"] == 2 * 30 * 2 * N * (2 * C + R)  # 2 layers
    assert ops["attn.indexer.flash"]["flops"] == 2 * 45 * 2 * I * (X + 1)
    # decode at context 100: the latent of the k selected positions is read; the indexer reads 101 keys
    dec = values_by_op(spec, "decode", "flash", Scenario(1, 1, 100))
    assert dec["attn.flash_mla"]["kv_read"] == 2 * K * (C + R)
    assert dec["attn.indexer.flash"]["kv_read"] == 2 * 101 * X
    assert dec["attn.flash_mla"]["flops"] == 2 * K * 2 * N * (2 * C + R)


def test_indexer_keys_are_per_sequence_state():
    """Each position caches the latent (C + R) and the indexer key (X) per layer: bf16, 2 layers."""
    spec = spec_from_config(CFG, "v32")
    assert kv_growth(spec, Precision())["bytes_per_token"] == 2 * (C + R + X) * 2
    assert kv_cache_bytes(spec, 3, 50, Precision()) == 3 * 50 * 2 * (C + R + X) * 2


@pytest.mark.parametrize("mode", ["ideal", "expected"])
def test_sparse_generation_closed_form_equals_step_by_step(mode):
    """The top-k attention's cost stops growing at k positions: the closed form still equals the steps."""
    spec = spec_from_config(dict(CFG, index_topk=64), "v32")
    t, hw, p = table(spec, "decode", "flash"), get("h100-sxm"), Precision()
    eff = efficiency(mode, hw)
    for B, P, N in ((1, 5, 200), (256, 30, 100)):
        d = decode_generation(t, hw, p, eff, B, P, N)
        S = np.arange(P, P + N - 1)
        times, _, _, _ = op_times(t.values(Scenario(B, 1, S)), t, hw, p, eff, B, B, True)
        assert float(d.total_s) == pytest.approx(times.sum(), rel=1e-9)
        assert float(d.last_s) == pytest.approx(times[-1].sum(), rel=1e-12)


def test_eager_equals_transformers_with_k_below_the_prompt():
    """transformers' DeepseekV32 (eager): the indexer's projections and full score rectangle, MLA over the
    full rectangle with unselected keys masked; its cache holds the latent and the indexer keys."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    spec = spec_from_config(CFG, "v32")
    model = oracle.build_meta(oracle.hf_config(CFG))
    assert param_report(spec).total == oracle.count_params(model)
    B, P = 2, 9
    hf_prefill, out = oracle.forward_flops(model, B, P)
    assert matmul_flops(spec, "prefill", Scenario(B, P, 0)) == hf_prefill
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(out.past_key_values)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=out.past_key_values)
    assert matmul_flops(spec, "decode", Scenario(B, 1, P)) == hf_decode


# GLM-5 (glm_moe_dsa): the same DSA, but layers marked "shared" in indexer_types reuse the previous indexer
# layer's top-k (modeling_glm_moe_dsa.py GlmMoeDsaAttention.skip_topk): here layer 1 of 2.
GLM = dict(CFG, model_type="glm_moe_dsa", indexer_types=["full", "shared"], mlp_layer_types=["dense", "sparse"])


def test_shared_top_k_layers_run_no_indexer():
    """The shared layer has no indexer weights (L·I·X + D·X + 2·X + D·I fewer), scores nothing and caches
    no indexer key; its MLA still attends exactly the k selected positions."""
    shared, full = spec_from_config(GLM, "glm"), spec_from_config(dict(GLM, indexer_types=["full", "full"]), "g")
    assert param_report(full).total - param_report(shared).total == L * I * X + D * X + 2 * X + D * I
    ops = values_by_op(shared, "prefill", "flash", Scenario(1, 9, 0))
    assert ops["attn.flash_mla"]["flops"] == 2 * 30 * 2 * N * (2 * C + R)  # both layers: Σ min(i, 4) = 30 pairs
    assert ops["attn.indexer.flash"]["flops"] == 45 * 2 * I * (X + 1)  # one layer scores the 45 causal pairs
    dec = values_by_op(shared, "decode", "flash", Scenario(1, 1, 100))
    assert dec["attn.flash_mla"]["kv_read"] == 2 * K * (C + R) and dec["attn.indexer.flash"]["kv_read"] == 101 * X
    # per position: the latent (C + R) in both layers, the indexer key (X) in one; bf16
    assert kv_growth(shared, Precision())["bytes_per_token"] == (2 * (C + R) + X) * 2
