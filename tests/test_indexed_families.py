"""DSA families beyond DeepSeek-V3.2 (tests/test_sparse_attention.py): A.X K2 (axk2), Dots 3 Note
(dots3_note_text), and MiniMax-M3's block-sparse attention (minimax_m3_vl_text). Eager = transformers
(proven on meta, here with k below the prompt); flash = serving kernels: sparse MLA over exactly the k
selected positions (arithmetic written out), where transformers computes the full rectangle and masks."""

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

# A.X-K2-shaped, small: 2 layers (1 dense, 1 MoE), k = 4 selected positions, gate rank r = 8.
D, N, C, R, Hn, Hv, L, I, X, K, r = 256, 4, 64, 16, 32, 32, 96, 2, 32, 4, 8
AXK2 = dict(model_type="axk2", hidden_size=D, num_hidden_layers=2, num_attention_heads=N,
            num_key_value_heads=N, vocab_size=1000, intermediate_size=512, moe_intermediate_size=64,
            n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, mlp_layer_types=["dense", "sparse"],
            kv_lora_rank=C, q_lora_rank=L, qk_rope_head_dim=R, qk_nope_head_dim=Hn, v_head_dim=Hv,
            index_n_heads=I, index_head_dim=X, index_topk=K, gated_norm_rank=r, tie_word_embeddings=False)  # fmt: skip


def test_axk2_parameters_against_deepseek_v32():
    """A.X K2 = DeepSeek-V3.2 without q_b_proj (L·N·(H+R) per layer), with q_gate_proj 2L·N·(H+R+J) per
    layer, and a gate D·r + r·D after the attention norm of both layers and the MoE norm of the MoE layer."""
    v32 = dict(AXK2, model_type="deepseek_v32", first_k_dense_replace=1, n_group=1, topk_group=1)
    del v32["mlp_layer_types"], v32["gated_norm_rank"]
    per_layer = 2 * L * N * (Hn + R + Hv) - L * N * (Hn + R)
    got = param_report(spec_from_config(AXK2, "k2")).total - param_report(spec_from_config(v32, "v32")).total
    assert got == 2 * per_layer + 3 * 2 * D * r


def test_axk2_flash_attends_k_positions_and_caches_indexer_keys():
    """Prefill of 9 with k = 4: Σ min(i, 4) = 30 absorbed MLA pairs per layer (2·N·(2C+R) FLOPs each); the
    indexer scores the 45 causal pairs; decode at 100 reads k latents. Per position each layer caches the
    latent C + R and the indexer key X (bf16); the output gate costs no projection of its own."""
    spec = spec_from_config(AXK2, "k2")
    ops = values_by_op(spec, "prefill", "flash", Scenario(1, 9, 0))
    assert ops["attn.flash_mla"]["flops"] == 2 * 30 * 2 * N * (2 * C + R)
    assert ops["attn.indexer.flash"]["flops"] == 2 * 45 * 2 * I * (X + 1)
    assert ops["attn.q_gate_proj"]["flops"] == 2 * 9 * 2 * (2 * L) * N * (Hn + R + Hv)
    assert "attn.gate_proj" not in ops and "attn.q_b_proj" not in ops
    dec = values_by_op(spec, "decode", "flash", Scenario(1, 1, 100))
    assert dec["attn.flash_mla"]["kv_read"] == 2 * K * (C + R)
    assert kv_growth(spec, Precision())["bytes_per_token"] == 2 * (C + R + X) * 2
    assert kv_cache_bytes(spec, 3, 50, Precision()) == 3 * 50 * 2 * (C + R + X) * 2


def test_axk2_eager_equals_transformers_with_k_below_the_prompt():
    """transformers' AXK2Attention (eager): indexer projections and full score rectangle, MLA over the full
    rectangle with the unselected keys masked (so top-k changes no FLOP there), gated norms' fc1/fc2."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    spec = spec_from_config(AXK2, "k2")
    model = oracle.build_meta(oracle.hf_config(AXK2))
    assert param_report(spec).total == oracle.count_params(model)
    B, P = 2, 9
    hf_prefill, out = oracle.forward_flops(model, B, P)
    assert matmul_flops(spec, "prefill", Scenario(B, P, 0)) == hf_prefill
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(out.past_key_values)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=out.past_key_values)
    assert matmul_flops(spec, "decode", Scenario(B, 1, P)) == hf_decode


# Dots 3 Note-shaped, small: layers 0, 1 indexed (DSA, N heads, latent C), layer 2 sliding (window W, its own
# N2 heads, latent C2, nope H2, value J2, no indexer); layer 0 dense, 1 and 2 MoE; hub spelling (swa_* keys).
N2, C2, H2, J2, W = 2, 48, 24, 16, 4
DOTS3 = dict(AXK2, model_type="dots3_note_text", num_hidden_layers=3, n_group=1, topk_group=1,
             sliding_window_size=W, swa_num_attention_heads=N2, swa_num_key_value_heads=N2, swa_q_lora_rank=L,
             swa_kv_lora_rank=C2, swa_head_dim=H2 + R, swa_qk_nope_head_dim=H2, swa_v_head_dim=J2,
             shared_experts_intermediate_size=96, head_dim=Hn + R, pad_token_id=0)  # fmt: skip
del DOTS3["mlp_layer_types"], DOTS3["gated_norm_rank"]


def test_dots3_flash_indexed_layers_attend_k_sliding_layers_the_window():
    """Prefill of 9, k = W = 4: each indexed layer attends Σ min(i, 4) = 30 pairs absorbed (2·N·(2C+R) FLOPs
    each) and scores the 45 causal pairs; the sliding layer attends the same 30 pairs decompressed
    (2·N2·(H2+R+J2) each) and runs no indexer. Per position: indexed layers cache C + R + X, the sliding
    layer C2 + R for its last W positions (bf16)."""
    spec = spec_from_config(DOTS3, "d3")
    ops = values_by_op(spec, "prefill", "flash", Scenario(1, 9, 0))
    assert ops["attn.flash_mla"]["flops"] == 2 * 30 * 2 * N * (2 * C + R)
    assert ops["attn.indexer.flash"]["flops"] == 2 * 45 * 2 * I * (X + 1)
    assert ops["attn.flash"]["flops"] == 30 * 2 * N2 * (H2 + R + J2)
    growth = kv_growth(spec, Precision())
    assert growth["bytes_per_token"] == (2 * (C + R + X) + (C2 + R)) * 2
    assert growth["growth_bytes_per_token"] == 2 * (C + R + X) * 2
    assert growth["window_bytes"] == W * (C2 + R) * 2


def test_dots3_eager_equals_transformers_with_k_and_window_below_the_prompt():
    """transformers' Dots3NoteTextAttention (eager): every layer's full rectangle masked (top-k on the indexed
    layers, the window on the sliding one); its cache keeps the sliding layer's last W − 1 positions."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    spec = spec_from_config(DOTS3, "d3")
    model = oracle.build_meta(oracle.hf_config(DOTS3))
    assert param_report(spec).total == oracle.count_params(model)
    B, P = 2, 9
    hf_prefill, out = oracle.forward_flops(model, B, P)
    assert matmul_flops(spec, "prefill", Scenario(B, P, 0)) == hf_prefill
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(out.past_key_values)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=out.past_key_values)
    assert matmul_flops(spec, "decode", Scenario(B, 1, P)) == hf_decode


# MiniMax-M3-shaped, small: layer 0 block-sparse (indexer: I2 heads of width X2; blocks of 2 keys, 2 kept:
# at most 4 keys per query), layer 1 dense; N2 query heads over K2 KV heads of width H3; layer 0 a dense FFN.
N3, K3, H3, I3, X3 = 4, 2, 32, 2, 16
M3 = dict(model_type="minimax_m3_vl_text", hidden_size=D, num_hidden_layers=2, num_attention_heads=N3,
          num_key_value_heads=K3, head_dim=H3, rotary_dim=16, vocab_size=1000, intermediate_size=64,
          dense_intermediate_size=128, shared_intermediate_size=64, num_local_experts=4, num_experts_per_tok=2,
          layer_types=["minimax_m3_sparse", "full_attention"], mlp_layer_types=["dense", "sparse"],
          index_n_heads=I3, index_head_dim=X3, index_block_size=2, index_topk_blocks=2, index_local_blocks=1,
          tie_word_embeddings=False)  # fmt: skip


def test_minimax_m3_flash_sparse_layer_attends_k_blocks():
    """Prefill of 9 with at most 2·2 = 4 keys per query: the sparse layer's Σ min(i, 4) = 30 pairs plus the
    dense layer's 45, at 4·N·H FLOPs each; the indexer scores the 45 causal pairs at 2·I·X each. Decode at
    100: the sparse layer reads 4 positions' K and V, the dense one 101, the indexer 101 keys of width X.
    Per position the sparse layer caches its K, V and indexer key: 2·K·H·2 + X elements (bf16)."""
    spec = spec_from_config(M3, "m3")
    assert spec.layer_indexer == (True, False)
    ops = values_by_op(spec, "prefill", "flash", Scenario(1, 9, 0))
    assert ops["attn.flash"]["flops"] == (30 + 45) * 4 * N3 * H3
    assert ops["attn.indexer.flash"]["flops"] == 45 * 2 * I3 * X3
    dec = values_by_op(spec, "decode", "flash", Scenario(1, 1, 100))
    assert dec["attn.flash"]["kv_read"] == (4 + 101) * 2 * K3 * H3
    assert dec["attn.indexer.flash"]["kv_read"] == 101 * X3
    assert kv_growth(spec, Precision())["bytes_per_token"] == (2 * 2 * K3 * H3 + X3) * 2


def test_minimax_m3_eager_equals_transformers_with_blocks_below_the_prompt():
    """transformers' MiniMaxM3VLAttention (eager): the indexer scores the full rectangle (a float matmul) and
    attention runs the full rectangle with the unselected blocks masked; its cache keeps the indexer keys."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    spec = spec_from_config(M3, "m3")
    model = oracle.build_meta(oracle.hf_config(M3))
    assert param_report(spec).total == oracle.count_params(model)
    B, P = 2, 9
    hf_prefill, out = oracle.forward_flops(model, B, P)
    assert matmul_flops(spec, "prefill", Scenario(B, P, 0)) == hf_prefill
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(out.past_key_values)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=out.past_key_values)
    assert matmul_flops(spec, "decode", Scenario(B, 1, P)) == hf_decode


@pytest.mark.parametrize("mode", ["ideal", "expected"])
@pytest.mark.parametrize("cfg", [M3, DOTS3], ids=["minimax_m3", "dots3"])
def test_sparse_generation_closed_form_equals_step_by_step(cfg, mode):
    """The kept keys (and the sliding window) stop the attention's cost growing: the closed form still equals
    the steps (``expected`` on a GQA model: the fitted decode attention is summed per context band through
    secants, within 1.5% by construction: hardware/fitted_ops.py)."""
    spec = spec_from_config(cfg, "x")
    t, hw, p = table(spec, "decode", "flash"), get("h100-sxm"), Precision()
    eff = efficiency(mode, hw)
    rel = 0.015 if mode == "expected" and spec.mla is None else 1e-9
    for B, P, N in ((1, 2, 50), (64, 30, 40)):
        d = decode_generation(t, hw, p, eff, B, P, N)
        S = np.arange(P, P + N - 1)
        # each step at its own context S (without it the fitted decode attention keeps its scalar fraction)
        times, _, _, _ = op_times(t.values(Scenario(B, 1, S)), t, hw, p, eff, B, B, True, S)
        assert float(d.total_s) == pytest.approx(times.sum(), rel=rel)


def test_dots3_note_wrapper_reads_its_language_model_beside_its_towers(tmp_path):
    """Dots 3 Note's wrapper (transformers' default config): llmath counts the language model (and its head)
    exactly as transformers builds it beside the towers, and counts the towers too (its MoE vision tower and
    audio tower: proven by component in tests/test_multimodal.py and tests/test_towers.py)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from causal_lm_types import default_config
    from test_multimodal import _build

    cfg = default_config("dots3_note", str(tmp_path))
    spec = spec_from_config(cfg, "dots3_note")
    tower = ("model.vision_tower.", "model.audio_tower.", "model.multi_modal_projector.")
    hf = sum(p.numel() for n, p in _build(cfg).named_parameters() if not n.startswith(tower))
    rep = param_report(spec)
    assert rep.total - sum(rep.towers.values()) == hf
    assert spec.towers_not_counted == () and spec.wrapper == "dots3_note" and set(rep.towers) == {"vision", "audio"}
