"""MoE families whose transformers experts run a data-dependent loop (``nonzero`` over the experts hit),
which the meta device cannot execute: a small config of each is built on the CPU with random weights and
its eager forward counted by ``FlopCounterMode``. Every token reaches top-k distinct experts whatever the
routing, so the routed FLOPs are tokens · k · one expert's, which is what llmath counts."""

from __future__ import annotations

import pytest
from helpers import registry_config

from llmath.analysis import kv_cache_bytes
from llmath.errors import ConfigError
from llmath.model import registry
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

B, P = 2, 9


# The authors' rounded figures (index.json names each source: model card, vLLM recipe, transformers docs): the
# total within 1 %, the active parameters (llmath's count with the embedding row read per token; the authors
# do not say what theirs include) within 5 %. total / active: dbrx-instruct 131.60B / 35.85B (132B, 36B);
# dots.llm1.base 142.77B / 14.02B (142B, 14B); MiMo-V2-Flash 308.78B / 15.45B (309B, 15B); GLM-5 743.91B /
# 41.78B (744B, 40B); each total equal to transformers' by tests/test_oracle_params.py.
@pytest.mark.parametrize("name", ["dbrx-instruct", "dots.llm1.base", "mimo-v2-flash", "glm-5"])
def test_bundled_moe_checkpoints_match_published_counts(name):
    entry, rep = registry.info(name), param_report(registry.spec(name))
    assert abs(rep.total / entry["published_params"] - 1) < 0.01
    assert abs(rep.active_per_token_with_embedding / entry["published_active_params"] - 1) < 0.05


# Hub configs cached by aiconfigurator (index.json): Qwen3.5-397B-A17B 396.35B / 17.35B active (397B, 17B:
# within 1 % / 5 % as above); DeepSeek-V4-Flash 284.33B (284B). DeepSeek-V4-Pro's "1.6T" is stated to two
# significant figures and counts the MTP layer transformers does not build: 1.573T rounds to it. The V4 active
# figures (13B, 49B) are not asserted: llmath's 13.80B / 49.78B include the LM head and the hash-routed
# layers' experts, and the release does not say what its figures include. Nemotron-3 Super 120.67B (120B) and
# Ultra 549.31B (550B), totals only: their "A12B" / "A55B" are rounded in the names.
@pytest.mark.parametrize(
    "name",
    [
        "qwen3.5-397b-a17b",
        "deepseek-v4-flash",
        "deepseek-v4-pro",
        "nvidia-nemotron-3-super-120b-a12b-fp8",
        "nvidia-nemotron-3-ultra-550b-a55b-bf16",
        "kimi-k2-instruct",
    ],
)
def test_bundled_2026_checkpoints_match_published_counts(name):
    entry, rep = registry.info(name), param_report(registry.spec(name))
    if name == "kimi-k2-instruct":  # "1T" to one significant figure: 1.026T; 32.86B active (32B), within 5 %
        assert round(rep.total / 1e12) == entry["published_params"] / 1e12 == 1
        assert abs(rep.active_per_token_with_embedding / entry["published_active_params"] - 1) < 0.05
        return
    if name == "deepseek-v4-pro":
        assert round(rep.total / 1e12, 1) == entry["published_params"] / 1e12 == 1.6
        return
    assert abs(rep.total / entry["published_params"] - 1) < 0.01
    if name.startswith("qwen"):
        assert abs(rep.active_per_token_with_embedding / entry["published_active_params"] - 1) < 0.05


JETMOE_SMALL = {  # JetMoE-8B's layout (kv_channels, top-2 of 8 attention and FFN experts), small sizes
    "model_type": "jetmoe",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "kv_channels": 16,
    "intermediate_size": 40,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 128,
    "max_position_embeddings": 64,
    "tie_word_embeddings": True,
}


def _oracle():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    return oracle


DBRX_SMALL = {  # dbrx-instruct's layout (attn_config / ffn_config), small sizes
    "model_type": "dbrx",
    "d_model": 64,
    "n_heads": 4,
    "n_layers": 2,
    "max_seq_len": 64,
    "vocab_size": 128,
    "attn_config": {"kv_n_heads": 2, "clip_qkv": 8, "rope_theta": 500000.0},
    "ffn_config": {"ffn_hidden_size": 48, "moe_num_experts": 4, "moe_top_k": 2},
    "tie_word_embeddings": False,
}


def _cpu_model(cfg):
    import torch
    import transformers

    oracle = _oracle()
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = transformers.AutoModelForCausalLM.from_config(oracle.hf_config(cfg), attn_implementation="eager")
    return model.eval().requires_grad_(False)


def _matmul_flops(spec, stage, S0, T):
    ops = build_ops(spec, stage, "eager")
    return sum(c.values.get("flops", 0) for c in evaluate(ops, Scenario(B, T, S0), spec))


@pytest.mark.parametrize("cfg", [DBRX_SMALL, JETMOE_SMALL], ids=lambda c: c["model_type"])
def test_loop_experts_read_exactly_on_cpu(cfg):
    oracle = _oracle()
    spec = spec_from_config(cfg, cfg["model_type"])
    model = _cpu_model(cfg)
    assert param_report(spec).total == oracle.count_params(model)
    hf_prefill, out = oracle.forward_flops(model, B, P)
    past = oracle.past_of(out)
    assert _matmul_flops(spec, "prefill", 0, P) == hf_prefill
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(past)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=past, seen=P)
    assert _matmul_flops(spec, "decode", P, 1) == hf_decode


def test_mimo_flags_that_disagree_with_transformers_are_refused():
    """transformers derives MiMo-V2-Flash's layer pattern and ignores the hub file's hybrid_layer_pattern,
    which serving engines read: a file where they differ is refused, not read one way silently."""
    cfg = registry_config("mimo-v2-flash")
    with pytest.raises(ConfigError, match="hybrid_layer_pattern"):
        spec_from_config(dict(cfg, hybrid_layer_pattern=[1] * 48), "mimo")
    with pytest.raises(ConfigError, match="moe_layer_freq"):
        spec_from_config(dict(cfg, moe_layer_freq=[1] * 48), "mimo")
    spec = spec_from_config(dict(cfg, moe_layer_freq=[1] * 48, mlp_layer_types=["sparse"] * 48), "mimo")
    assert all(spec.layer_moe)


def test_a_layout_keeps_every_layer_kind():
    """Under a layout each rank runs its stage's layers by kind; the labels come from one function
    (ops/assemble.py layer_kind), so chunked (Llama-4) and shared-top-k (GLM-5) layers are not dropped:
    one GPU with pp = 2 runs, over both stages, exactly the single-device operator list's FLOPs."""
    from llmath.deploy.layout import Layout
    from llmath.deploy.shard import rank_plans

    glm = dict(CFG_GLM, indexer_types=["full", "shared", "shared", "full"])
    llama4 = dict(model_type="llama4_text", hidden_size=64, intermediate_size=32, intermediate_size_mlp=96,
                  num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  num_local_experts=4, num_experts_per_tok=1, vocab_size=128, attention_chunk_size=8,
                  interleave_moe_layer_step=2)  # fmt: skip
    for cfg in (glm, llama4):
        spec = spec_from_config(cfg, cfg["model_type"])
        scen = Scenario(B, 16, 0)
        whole = sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, "prefill", "flash"), scen, spec))
        ranks = rank_plans(spec, "prefill", "flash", Layout(pp=2))
        assert sum(c.values.get("flops", 0) for r in ranks for c in evaluate(r.ops, scen, spec)) == whole


CFG_GLM = dict(  # GLM-5's layout (MLA + DSA + MoE), small
    model_type="glm_moe_dsa", hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
    vocab_size=128, intermediate_size=96, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2,
    n_shared_experts=1, mlp_layer_types=["dense", "sparse", "sparse", "sparse"], kv_lora_rank=16, q_lora_rank=32,
    qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, index_n_heads=2, index_head_dim=16, index_topk=4,
)  # fmt: skip


def test_laguna_layers_with_their_own_head_counts_are_refused(tmp_path):
    """Per-layer query-head counts are not modelled: a file that uses them is refused, not miscounted."""
    cfg = dict(model_type="laguna", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               head_dim=16, intermediate_size=96, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
               shared_expert_intermediate_size=32, vocab_size=128)  # fmt: skip
    assert spec_from_config(dict(cfg, num_attention_heads_per_layer=[4, 4]), "laguna").n_heads == 4
    with pytest.raises(ConfigError, match="num_attention_heads_per_layer"):
        spec_from_config(dict(cfg, num_attention_heads_per_layer=[4, 8]), "laguna")


LONGCAT_SMALL = {  # LongCat-Flash's layout (two MLA + MLP blocks and one shortcut MoE per layer), small sizes
    "model_type": "longcat_flash",
    "hidden_size": 64,
    "num_layers": 2,
    "num_attention_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4,
    "head_dim": 4,  # the rotary width (LongcatFlashRotaryEmbedding reads head_dim)
    "v_head_dim": 8,
    "ffn_hidden_size": 96,
    "expert_ffn_hidden_size": 24,
    "n_routed_experts": 6,
    "zero_expert_num": 3,
    "moe_topk": 2,
    "vocab_size": 128,
    "max_position_embeddings": 64,
}


def test_longcat_flash_reads_exactly_on_cpu_when_top_k_are_real():
    """The eager form with every token's top-k at real experts: the zero experts' correction bias (a buffer)
    is set so low that the router never picks them; llmath charges top-k real experts per token."""
    oracle = _oracle()
    spec = spec_from_config(LONGCAT_SMALL, "longcat_flash")
    model = _cpu_model(LONGCAT_SMALL)
    for layer in model.model.layers:
        layer.mlp.router.e_score_correction_bias[6:] = -10.0  # softmax scores lie in [0, 1]
    assert param_report(spec, "eager").total == oracle.count_params(model)  # transformers' allocation
    # served (vLLM's LongcatMoe: a FusedMoE of the 6 real experts): no gate/up weights for the 3 zero experts,
    # 2 layers x 3 zero experts x (gate + up) 2 x 64 x 24 fewer
    assert param_report(spec).total == oracle.count_params(model) - 2 * 3 * 2 * 64 * 24
    hf_prefill, out = oracle.forward_flops(model, B, P)
    past = oracle.past_of(out)
    assert _matmul_flops(spec, "prefill", 0, P) == hf_prefill
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(past)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=past, seen=P)
    assert _matmul_flops(spec, "decode", P, 1) == hf_decode


def test_longcat_flash_tokens_at_zero_experts_cost_no_matmul():
    """Every top-k pick at a zero expert (their bias set high): transformers runs no routed expert at all, so
    its FLOPs are llmath's less the routed experts' (tokens · k · 3 matmuls of 2·D·F each: B·P·2·3·2·64·24 per
    MoE layer, two MoE layers)."""
    oracle = _oracle()
    spec = spec_from_config(LONGCAT_SMALL, "longcat_flash")
    model = _cpu_model(LONGCAT_SMALL)
    for layer in model.model.layers:
        layer.mlp.router.e_score_correction_bias[6:] = 10.0
    hf_prefill, _ = oracle.forward_flops(model, B, P)
    assert _matmul_flops(spec, "prefill", 0, P) - hf_prefill == 2 * (B * P * 2 * 3 * 2 * 64 * 24)


def test_longcat_flash_served_count_matches_the_published_size(tmp_path):
    """LongcatFlashConfig's defaults are LongCat-Flash's sizes (28 layers, d 6144, 512 experts of 2048, 256 zero
    experts). transformers allocates gate and up weights for the zero experts too; vLLM does not (ops/moe.py).
    The served count is the published one: 560B total (huggingface.co/meituan-longcat/LongCat-Flash-Chat model
    card; LongCat-Flash technical report, arXiv:2509.01322)."""
    pytest.importorskip("transformers")
    from causal_lm_types import default_config

    spec = spec_from_config(default_config("longcat_flash", str(tmp_path)), "longcat_flash")
    served, allocated = param_report(spec).total, param_report(spec, "eager").total
    assert allocated - served == 28 * 256 * 2 * 6144 * 2048  # layers x zero experts x (gate, up) x D x F
    assert abs(served / 560e9 - 1) < 0.005
