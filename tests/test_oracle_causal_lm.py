"""Every causal-LM model_type of the pinned transformers, built from its own config class's defaults.

For each decoder-only model_type (generated from ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``, see
``causal_lm_types``), the config class's defaults are written with ``to_json_file`` and read back as the
config.json llmath reads. Where llmath reads the type, these must equal transformers on the meta device:
the parameters (total and by component), the matmul FLOPs ``FlopCounterMode`` counts for a prefill and a
decode step (eager, on the first layers that reach every layer kind), and the bytes of the cache after the
prefill. Types llmath does not read yet are listed as xfail("not yet supported"): a wrong number is never
an xfail. BERT-style encoders get llmath's "not a decoder" error.
"""

from __future__ import annotations

import pytest
from causal_lm_types import LFM2_TYPES, ONE_SEQUENCE, causal_lm_types, default_config, of
from helpers import hf_groups, llmath_groups

from llmath.analysis import kv_cache_bytes
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import ADAPTERS, TIED_BY_DEFAULT, spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402

DECODERS = of("decoder")
P, B = 9, 2


def _config_or_xfail(mt: str, tmp_path) -> dict:
    try:
        return default_config(mt, str(tmp_path))
    except Exception as e:  # the config class cannot be built from its own defaults
        pytest.xfail(f"transformers cannot build {mt} from defaults: {type(e).__name__}")


def _meta_or_xfail(cfg: dict, mt: str):
    try:
        return oracle.build_meta(oracle.hf_config(cfg))
    except Exception as e:  # the config class's defaults do not build a model (dots1: n_routed_experts=None)
        pytest.xfail(f"transformers cannot build {mt} from defaults: {type(e).__name__}")


def _spec_or_xfail(cfg: dict, mt: str):
    try:
        return spec_from_config(cfg, mt)
    except ConfigError as e:
        if "is not supported" in str(e):
            pytest.xfail("not yet supported")
        raise


def _keep_layers(spec) -> int:
    kinds, n = set(), 0
    for i, k in enumerate(spec.layer_kinds()):
        if k not in kinds:
            kinds.add(k)
            n = i + 1
    shared = [i for i, k in enumerate(spec.layer_mixers) if k.startswith("shared+")]
    if len(shared) > 1:  # Zamba's shared block: transformers ties its copies and cannot build a lone one
        n = max(n, shared[1] + 1)
    if spec.recurrence is not None:  # HRM-Text: the layers are runs of two stacks; truncating them means nothing
        n = spec.n_layers
    return max(n, 2)


def _matmul_flops(spec, stage, S0, T, batch=B):
    ops = build_ops(spec, stage, "eager")
    return sum(c.values.get("flops", 0) for c in evaluate(ops, Scenario(batch, T, S0), spec))


@pytest.mark.parametrize("mt", DECODERS)
def test_decoder_type_reads_exactly(mt, tmp_path):
    cfg = _config_or_xfail(mt, tmp_path)
    full = _meta_or_xfail(cfg, mt)
    spec = _spec_or_xfail(cfg, mt)
    rep = param_report(spec, "eager")
    assert rep.total == oracle.count_params(full)
    assert llmath_groups(rep) == hf_groups(full)
    if mt in EXPERT_LOOPS_ON_CPU | DATA_DEPENDENT_ON_CPU:
        return
    _flops_and_cache_equal(cfg, spec)
    windowed = [k for k in WINDOW_KEYS if isinstance(cfg.get(k), int)]
    if any(w is not None for w in spec.layer_windows) and windowed:
        # a window shorter than the prompt: sliding layers keep and attend only the window
        cfg = dict(cfg, **{windowed[0]: 4})
        _flops_and_cache_equal(cfg, spec_from_config(cfg, mt))


# transformers runs these families' experts in a data-dependent loop (split by the routed counts) that the meta
# device cannot execute: their FLOPs and cache are proven on small CPU models in tests/test_moe_families.py
EXPERT_LOOPS_ON_CPU = {"jetmoe", "longcat_flash"}
# Qwen4-Exp's QSA indexer loops over batch rows and queries with `nonzero` over the mask: its FLOPs and cache
# are proven on small CPU models in tests/test_qwen4.py
DATA_DEPENDENT_ON_CPU = {"qwen4_exp_text"}
# BLT: its mask checks the position ids' values (not on meta), its patches come from the entropy model's data, and
# transformers 5.23 cannot run it with a cache (DynamicCache(config=BltConfig) fails): its FLOPs with stated patch
# lengths, the decode step without a cache and the empty cache are proven on small CPU models in tests/test_blt.py
DATA_DEPENDENT_ON_CPU |= {"blt"}

WINDOW_KEYS = ("sliding_window", "window_size", "attention_chunk_size")

G4_SMALL = {
    "num_hidden_layers": 8,
    "layer_types": ["sliding_attention", "full_attention"] * 4,
    "per_layer_config": None,
}
G3N_SMALL = {
    "num_hidden_layers": 8,
    "layer_types": ["sliding_attention", "full_attention"] * 4,
    "activation_sparsity_pattern": [0.95, 0.0] * 4,
    "intermediate_size": 4096,
    "num_kv_shared_layers": 4,
}

# Options a family's defaults leave off, switched on: each must still read exactly.
VARIANTS = [
    ("granitemoeshared", {"shared_intermediate_size": 1024}),
    ("glm4_moe", {"use_qk_norm": True, "attention_bias": True}),
    ("stablelm", {"use_parallel_residual": True, "use_qkv_bias": True}),
    ("phimoe", {"lm_head_bias": True}),
    ("hyperclovax", {"use_post_norm": False}),
    ("ernie4_5", {"use_bias": True}),
    ("persimmon", {"qk_layernorm": False}),
    ("modernbert-decoder", {"classifier_bias": True, "norm_bias": True, "mlp_bias": True, "attention_bias": True}),
    ("doge", {"attention_bias": True}),
    # MLA with attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj carry biases (DeepseekV3Attention)
    ("deepseek_v3", {"attention_bias": True}),
    ("axk1", {"attention_bias": True}),
    ("seed_oss", {"attention_out_bias": True}),
    ("smollm3", {"use_sliding_window": True, "sliding_window": 4, "layer_types": None}),
    ("exaone4", {"layer_types": None, "sliding_window_pattern": 3}),
    ("cohere2", {"layer_types": None}),
    ("cwm", {"layer_types": None}),
    ("olmo3", {"layer_types": None}),
    ("granite_swa", {"layer_types": None}),
    ("vaultgemma", {"layer_types": None}),
    ("gpt_bigcode", {"multi_query": False}),
    ("kolibri1", {"layer_types": None}),
    ("flint", {"decoder_sparse_step": 2, "mlp_only_layers": [0]}),
    # hybrids: attention at another place among the state-space layers
    ("bamba", {"attn_layer_indices": [1]}),
    ("granitemoehybrid", {"layer_types": ["linear_attention", "attention"] * 16, "position_embedding_type": "rope"}),
    # linear-attention hybrids: their layer patterns from the keys their config classes derive them from
    ("qwen3_5_moe_text", {"layer_types": None, "full_attention_interval": 2}),
    ("qwen3_next", {"layer_types": ["full_attention", "linear_attention"] * 24, "mlp_only_layers": [1]}),
    (
        "kimi_linear",
        {
            "layer_types": None,
            "mlp_layer_types": None,
            "num_hidden_layers": 3,  # the 1-based lists name every layer (transformers cannot truncate them)
            "first_k_dense_replace": 2,
            "linear_attn_config": {
                "full_attn_layers": [2],
                "kda_layers": [1, 3],
                "num_heads": 16,
                "head_dim": 64,
                "short_conv_kernel_size": 3,
            },
        },
    ),
    ("bailing_hybrid", {"layer_types": None, "mlp_layer_types": None, "layer_group_size": 2}),
    ("minimax", {"layer_types": None, "head_dim": 64}),
    ("olmo_hybrid", {"layer_types": None, "linear_num_key_heads": 10, "linear_num_value_heads": 20}),
    (
        "nemotron_h",
        {
            "layers_block_type": ["mlp", "linear_attention", "full_attention", "moe", "linear_attention"],
            "mlp_bias": True,
            "use_bias": True,
            "use_conv_bias": False,
        },
    ),
    # Nemotron-3 Super/Ultra's latent MoE: the routed experts run in a 1024-wide latent (Super's moe_latent_size)
    ("nemotron_h", {"layers_block_type": ["moe", "full_attention"], "moe_latent_size": 1024, "mlp_bias": True}),
    ("zamba", {"mamba_proj_bias": True, "mamba_conv_bias": False, "mamba_dt_rank": "auto"}),
    (
        "zamba2",
        {"use_shared_attention_adapter": True, "num_mem_blocks": 2, "use_mem_rope": True, "add_bias_linear": True},
    ),
    (
        "falcon_h1",
        {
            "mamba_rms_norm": True,
            "projectors_bias": True,
            "mamba_proj_bias": True,
            "attention_bias": True,
            "mlp_bias": True,
            "mamba_d_ssm": 2048,
            "mamba_d_head": 16,
            "mamba_n_groups": 2,
        },
    ),
    # short convs among attention layers (lfm2's defaults attend in every layer), with and without biases
    ("lfm2", {"num_hidden_layers": 16, "layer_types": LFM2_TYPES}),
    ("lfm2", {"num_hidden_layers": 16, "layer_types": LFM2_TYPES, "conv_bias": True, "conv_L_cache": 4}),
    ("lfm3", {"use_sandwich_norm": False, "use_attention_gate": False, "attention_bias": True}),
    # RecurrentGemma's local attention over a window shorter than the prompt, and GQA
    ("recurrent_gemma", {"attention_window_size": 4, "num_key_value_heads": 1}),
    # Gemma 4 without per-layer embeddings, and full-attention layers with their own head width and K/V heads
    ("gemma4_text", {"hidden_size_per_layer_input": 0}),
    (
        "gemma4_text",
        {"per_layer_config": {str(i): {"head_dim": 128, "num_key_value_heads": 2} for i in (5, 11, 17, 23, 29)}},
    ),
    # Gemma 4's KV sharing (the last layers reuse K/V; eager prefill runs them on the logit row only), its
    # double-wide FFN on those layers, keys as values on full-attention layers, the MoE beside the FFN; on 8
    # layers alternating sliding and full (per_layer_config re-derived from them), to keep the test fast
    ("gemma4_text", dict(G4_SMALL, num_kv_shared_layers=4)),
    ("gemma4_text", dict(G4_SMALL, num_kv_shared_layers=2, use_double_wide_mlp=True)),
    ("gemma4_text", dict(G4_SMALL, attention_k_eq_v=True, num_global_key_value_heads=2)),
    ("gemma4_text", dict(G4_SMALL, enable_moe_block=True, num_experts=8, top_k_experts=2, moe_intermediate_size=512)),
    (
        "gemma4_text",
        dict(
            G4_SMALL,
            num_kv_shared_layers=4,
            attention_k_eq_v=True,
            enable_moe_block=True,
            num_experts=4,
            top_k_experts=1,
            moe_intermediate_size=256,
        ),
    ),  # fmt: skip
    # Gemma 3n: no KV sharing, dense FFN gates, other AltUp / LAuReL sizes, its own layer pattern and widths
    ("gemma3n_text", dict(G3N_SMALL, num_kv_shared_layers=0, activation_sparsity_pattern=[0.0] * 8)),
    ("gemma3n_text", dict(G3N_SMALL, altup_num_inputs=2, laurel_rank=16, hidden_size_per_layer_input=64)),
    ("gemma3n_text", dict(G3N_SMALL, intermediate_size=[1024] * 8, sliding_window=4)),
    ("gemma3n_text", dict(G3N_SMALL, intermediate_size=[1024, 2048, 1024, 2048, 3072, 3072, 2048, 1024])),
    ("rwkv", {"intermediate_size": 8192}),  # (an attention_hidden_size other than D fails in transformers)
    ("xlstm", {"weight_mode": "fused", "num_heads": 4, "qk_dim_factor": 0.25}),
    # dots1's defaults leave the experts unset (transformers cannot build them): one dense layer, then MoE
    ("dots1", {"n_routed_experts": 8, "n_shared_experts": 2, "num_experts_per_tok": 2, "first_k_dense_replace": 1}),
    (
        "dots1",
        {
            "n_routed_experts": 8,
            "n_shared_experts": 1,
            "num_experts_per_tok": 2,
            "max_window_layers": 1,
            "layer_types": None,
            "sliding_window": 4,
        },
    ),
    # GLM-5's DSA: layers that reuse the previous indexer layer's top-k (no indexer weights, keys or scoring)
    ("glm_moe_dsa", {"indexer_types": ["full", "shared", "full", "shared"] + ["full"] * 74}),
    ("glm_moe_dsa", {"indexer_types": None, "index_topk_freq": 3, "first_k_dense_replace": 1}),
    ("glm_moe_dsa", {"indexer_types": None, "index_topk_pattern": "FSSF" + "F" * 74}),
    ("glm_moe_dsa", {"mlp_layer_types": None, "first_k_dense_replace": 1}),
    ("axk1", {"mlp_layer_types": None, "first_k_dense_replace": 2, "moe_layer_freq": 2}),
    ("axk2", {"mlp_layer_types": None, "first_k_dense_replace": 2, "moe_layer_freq": 2, "gated_norm_rank": 4}),
    ("axk2", {"n_group": 4, "topk_group": 2, "attention_bias": True}),
    # MiniMax-M3: block-sparse layers (the indexer's own keys cached) among dense ones, a dense FFN layer; then
    # the hub file's legacy spelling (sparse_attention_config, moe_layer_freq) with blocks smaller than the prompt
    (
        "minimax_m3_vl_text",
        {
            "layer_types": ["full_attention", "minimax_m3_sparse"] * 30,
            "mlp_layer_types": None,
            "moe_layer_freq": [0] + [1] * 59,
        },
    ),  # fmt: skip
    (
        "minimax_m3_vl_text",
        {
            "layer_types": None,
            "mlp_layer_types": None,
            "num_hidden_layers": 3,  # the legacy lists name every layer (transformers cannot truncate them)
            "moe_layer_freq": [0, 1, 1],
            "index_block_size": None,
            "sparse_attention_config": {
                "sparse_attention_freq": [1, 0, 1],
                "sparse_num_index_heads": 2,
                "sparse_index_dim": 64,
                "sparse_block_size": 4,
                "sparse_topk_blocks": 2,
                "sparse_local_block": 1,
            },
        },
    ),
    # Dots 3 Note in the hub file's spelling: swa_* widths of the sliding layers, per-layer MoE flags, the
    # shared experts' width under its hub name; then without DSA and without sliding layers
    (
        "dots3_note_text",
        {
            "per_layer_config": None,
            "layer_types": None,
            "mlp_layer_types": None,
            "rope_parameters": None,
            "sliding_window": None,
            "sliding_window_size": 6,
            "swa_num_attention_heads": 32,
            "swa_num_key_value_heads": 32,
            "swa_kv_lora_rank": 256,
            "swa_q_lora_rank": 512,
            "swa_head_dim": 128,
            "swa_qk_nope_head_dim": 96,
            "swa_v_head_dim": 64,
            "moe_layer_freq": [0, 1, 0] + [1] * 43,
            "n_shared_experts": 2,
            "moe_shared_expert_intermediate_size": 512,
            "attention_bias": True,
        },
    ),
    (
        "dots3_note_text",
        {"per_layer_config": None, "layer_types": None, "rope_parameters": None, "use_dsa": False},
    ),
    (
        "dots3_note_text",
        {"per_layer_config": None, "layer_types": None, "rope_parameters": None, "use_sliding_window": False},
    ),
    # Command A MoE: shared experts, and dense prefix layers of their own width and window pattern
    ("cohere2_moe", {"num_shared_experts": 1, "shared_expert_combination_strategy": "sum"}),
    (
        "cohere2_moe",
        {
            "layer_types": None,
            "mlp_layer_types": None,
            "first_k_dense_replace": 2,
            "prefix_dense_intermediate_size": 1024,
            "prefix_dense_sliding_window_pattern": 2,
        },
    ),
    ("cohere2_moe", {"rms_norm_eps": None}),
    # MiMo-V2-Flash in the hub file's spelling (per-layer 0/1 flags; sliding_window_size + 1 = the window)
    (
        "mimo_v2_flash",
        {
            "layer_types": None,
            "mlp_layer_types": None,
            "sliding_window_size": 3,
            "hybrid_layer_pattern": [int(i and (i + 1) % 6 > 0) for i in range(48)],
            "moe_layer_freq": [0] + [1] * 47,
        },
    ),
    ("afmoe", {"layer_types": None, "global_attn_every_n_layers": 2, "num_dense_layers": 2, "attention_bias": True}),
    # Laguna: the output gate per element instead of per head; sliding layers; the mlp pattern from layer_types
    ("laguna", {"gating": False, "layer_types": ["sliding_attention", "full_attention"] * 20}),
    ("laguna", {"mlp_layer_types": None, "num_experts": 16, "shared_expert_intermediate_size": 256}),
    # Beam: biased q/k/v/o projections, MoE and dense layers alternating, its full layers from layer_types
    (
        "beam",
        {
            "attention_bias": True,
            "mlp_layer_types": ["sparse", "dense"] * 26,
            "layer_types": ["sliding_attention", "full_attention"] * 26,
        },
    ),
    # ZAYA: sliding CCA layers (a window shorter than the prompt), biases, other conv kernel widths
    (
        "zaya",
        {
            "sliding_window": 4,
            "layer_types": ["hybrid_sliding", "hybrid"] * 20,
            "attention_bias": True,
            "lm_head_bias": True,
            "cca_time0": 3,
            "cca_time1": 4,
        },
    ),
    ("zaya", {"cca_time1": 1, "router_hidden_size": 64, "num_key_value_heads": 8}),
    # Inkling: a window shorter than the prompt (sliding layers keep W − 1 keys, their profile bank is W wide),
    # sliding layers of other widths, the pattern from local_layer_ids, dense FFNs below dense_mlp_idx, and a
    # hub file's dense_intermediate_size (then intermediate_size is the experts' width)
    ("inkling_text", {"sliding_window_size": 4, "swa_num_attention_heads": 32, "swa_head_dim": 64}),
    ("inkling_text", {"layer_types": None, "local_layer_ids": [1, 2], "mlp_layer_types": None, "dense_mlp_idx": 2}),
    ("inkling_text", {"mlp_layer_types": ["dense"] + ["sparse"] * 65, "dense_intermediate_size": 1024}),
    # Inkling-2: blocks of 2 layers (several block states within the layers kept), a window shorter than the
    # prompt, and the full layers first
    ("inkling2_text", {"n_layers_per_attn_res_block": 2, "sliding_window_size": 4}),
    ("inkling2_text", {"layer_types": ["hybrid", "hybrid_sliding", "hybrid_sliding"] * 16, "d_rel": 8}),
    # DeepSeek-V4: rates that close windows inside the 9-token prompt and at the decode step (HCA entries, a CSA
    # entry emitted while decoding), fewer streams and output groups; a sliding_attention layer (its generic
    # sliding cache keeps K and V apart) beside CSA and HCA, with a window shorter than the prompt
    (
        "deepseek_v4",
        {
            "compress_rates": {"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
            "hc_mult": 2,
            "o_groups": 4,
            "num_hidden_layers": 4,  # the layer and MoE patterns as the config class derives them for 4 layers
            "layer_types": None,
            "mlp_layer_types": None,
        },
    ),
    (
        "deepseek_v4",
        {
            "num_hidden_layers": 4,
            "layer_types": [
                "sliding_attention",
                "compressed_sparse_attention",
                "heavily_compressed_attention",
                "sliding_attention",
            ],
            "mlp_layer_types": None,
            "sliding_window": 4,
            "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        },
    ),
    # HY-V4: its own shared top-k pattern, two dense layers, two hyper-connection streams
    (
        "hy_v4",
        {
            "indexer_types": ["full", "shared", "full", "shared"] + ["full"] * 30,
            "mlp_layer_types": ["dense", "dense"] + ["sparse"] * 32,
            "hc_mult": 2,
        },
    ),
]


@pytest.mark.parametrize("mt,extra", VARIANTS, ids=[v[0] + ":" + ",".join(v[1]) for v in VARIANTS])
def test_variants_read_exactly(mt, extra, tmp_path):
    cfg = {k: v for k, v in dict(default_config(mt, str(tmp_path)), **extra).items() if v is not None}
    spec = spec_from_config(cfg, mt)
    assert param_report(spec, "eager").total == oracle.count_params(oracle.build_meta(oracle.hf_config(cfg)))
    _flops_and_cache_equal(cfg, spec)


def _flops_and_cache_equal(cfg, spec):
    b = 1 if spec.model_type in ONE_SEQUENCE else B
    n = _keep_layers(spec)
    small = spec.with_layers(n)
    model = oracle.build_meta(oracle.hf_config(cfg, n))
    try:
        hf_prefill, out = oracle.forward_flops(model, b, P)
    except ValueError as e:
        # bamba and granitemoehybrid default to no attention layer, and transformers 5.23 then cannot
        # run them with a cache at all (the model asks the cache for an attention layer's length):
        # their parameters are proven above, VARIANTS proves FLOPs and cache with attention layers
        assert "get_seq_length" in str(e) and all(k != "attention" for k in small.layer_mixers)
        return
    past = oracle.past_of(out)
    if past is None:
        # transformers keeps no cache for this family (openai-gpt recomputes every position each step):
        # only the prefill has a transformers counterpart
        assert _matmul_flops(small, "prefill", 0, P, b) == hf_prefill
        return
    assert kv_cache_bytes(small, b, P, Precision(), layout="transformers") == oracle.cache_bytes(past, model=model)
    assert _matmul_flops(small, "prefill", 0, P, b) == hf_prefill
    hf_decode, _ = oracle.forward_flops(model, b, 1, past=past, seen=P)
    assert _matmul_flops(small, "decode", P, 1, b) == hf_decode


def test_tied_embedding_defaults_follow_the_config_classes():
    """A file without tie_word_embeddings gets its config class's default (5.23): llmath's table agrees."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for mt in DECODERS:
        if mt not in ADAPTERS:
            continue
        try:
            tied = bool(getattr(CONFIG_MAPPING[mt](), "tie_word_embeddings", False))
        except Exception:
            continue
        assert (mt in TIED_BY_DEFAULT) == tied, mt


@pytest.mark.parametrize("mt", of("encoder"))
def test_encoders_are_refused_as_not_decoders(mt, tmp_path):
    cfg = default_config(mt, str(tmp_path))
    with pytest.raises(ConfigError, match="not a decoder"):
        spec_from_config(cfg, mt)


def test_the_list_is_generated_and_complete():
    types = causal_lm_types()
    assert len(types) == len(set(types)) >= 180
    assert {"llama", "mamba", "qwen3_next", "bert", "bart", "gemma3"} <= set(types)
