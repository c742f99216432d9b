"""Facts shared by the adapter tables of :mod:`llmath.model.families`: how a family reads a yes/no fact
from its config (``_k``), derives its sliding-window ``layer_types`` and MoE layers the way its transformers
config class does, the MoE key tables several families share (:data:`MOE_KINDS`, :func:`moe_keys`), the base
rows a row states its differences from (``LLAMA_LIKE``, ``QWEN3_LIKE``, ``GPT_LIKE``, ...), and the per-model_type
data (tied-embedding defaults of the config classes, encoders, aliases, architecture names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmath.errors import ConfigError

# Values of a table row are constants, or ("key", default) to read a bool from the config, or a callable(cfg).


def _k(name: str, default: Any) -> tuple[str, Any]:
    return (name, default)


_SAME = object()


def _attn_bias(value: Any, o: Any = _SAME) -> dict[str, Any]:
    """The same bias fact for the q, k and v projections, and for o unless ``o`` states its own."""
    return dict(q_bias=value, k_bias=value, v_bias=value, o_bias=value if o is _SAME else o)


def _all_bias(value: Any) -> dict[str, Any]:
    """The same bias fact for every projection: q, k, v, o and the FFN's."""
    return dict(_attn_bias(value), ffn_bias=value)


def moe_keys(experts: Any, d_ff: str, top_k: Any = "num_experts_per_tok", **facts: Any) -> dict[str, Any]:
    """A table's ``moe`` entry: the config keys of the routed expert count, each expert's width and the top-k
    (``num_experts_per_tok`` unless the family names another), plus the optional ``facts`` that
    :func:`llmath.model.hf._moe_from_keys` reads (``shared_width``, ``shared_count``, ``layers``, ...)."""
    return dict(experts=experts, top_k=top_k, d_ff=d_ff, **facts)


def router_groups(default: int | None, only_when: tuple[str, str, str] | None = None) -> dict[str, Any]:
    """A grouped top-k router's MoE facts (DeepSeek-V3's: the experts split into ``n_group`` groups, each token's
    top-k picked within its best ``topk_group``; modeling_deepseek_v3.py DeepseekV3TopkRouter): its expert groups
    read from ``n_group`` (a class's attribute_map alias, e.g. Kimi-Linear's ``num_expert_group``, read as
    ``n_group``: data/config_aliases.json), else ``default``, the family's config class's own default, which
    transformers builds when a file leaves the key out (None: no groups). ``only_when`` (key, value, the
    class's default of key): groups apply only when the file's ``key`` equals ``value`` (DeepSeek-V2's
    ``topk_method``)."""
    facts: dict[str, Any] = dict(expert_groups=("n_group", default or 1))
    if only_when is not None:
        facts["groups_only_when"] = only_when
    return facts


def _falcon_kv_heads(cfg: Mapping[str, Any], n_heads: int) -> int:
    """Falcon: the new decoder architecture reads num_kv_heads; the old one is multi-query or MHA."""
    if cfg.get("new_decoder_architecture"):
        v = cfg.get("num_kv_heads") or cfg.get("n_head_kv")
        return int(v) if v else n_heads
    return 1 if cfg.get("multi_query", True) else n_heads


def _every(k: int, *, full_first: bool = False, key: str | None = None):
    """layer_types as a config class derives them: every k-th layer full, the others sliding
    (``full_first``: layers 0, k, 2k, ... are full; else k-1, 2k-1, ...). ``key`` reads k from the file."""

    def types(cfg: Mapping[str, Any], n: int) -> list[str]:
        every = int(cfg.get(key) or k) if key else k
        full = (lambda i: i % every == 0) if full_first else (lambda i: (i + 1) % every == 0)
        return ["full_attention" if full(i) else "sliding_attention" for i in range(n)]

    return types


def _smollm3_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    """SmolLM3: sliding only on NoPE layers, and only with use_sliding_window (configuration_smollm3.py)."""
    rope = cfg.get("no_rope_layers") or [1] * n
    slide = bool(cfg.get("use_sliding_window")) and cfg.get("sliding_window") is not None
    return ["sliding_attention" if slide and not rope[i] else "full_attention" for i in range(n)]


def _ernie_moe_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """ERNIE-4.5-MoE: MoE from moe_layer_start_index to moe_layer_end_index, every moe_layer_interval-th."""
    start, every = int(cfg.get("moe_layer_start_index") or 0), int(cfg.get("moe_layer_interval") or 1)
    end = cfg.get("moe_layer_end_index")
    end = n - 1 if end is None or end < 0 else int(end)
    return [(i + 1) % every == 0 and start <= i <= end for i in range(n)]


def _llama4_moe_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """Llama-4: ``moe_layers``, else every ``interleave_moe_layer_step``-th layer from step − 1
    (configuration_llama4.py)."""
    layers = cfg.get("moe_layers")
    if layers is None:
        step = int(cfg.get("interleave_moe_layer_step") or 1)
        layers = range(step - 1, n, step)
    return [i in set(layers) for i in range(n)]


def _llama4_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    """Llama-4: rope layers are chunked, NoPE layers (``no_rope_layers[i] == 0``, by default every
    ``no_rope_layer_interval``-th) attend fully (configuration_llama4.py)."""
    every = int(cfg.get("no_rope_layer_interval") or 4)
    rope = cfg.get("no_rope_layers") or [int((i + 1) % every != 0) for i in range(n)]
    return ["chunked_attention" if rope[i] else "full_attention" for i in range(n)]


def _all_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    return [True] * n


def _mlp_layer_types(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """``mlp_layer_types``: 'sparse' layers are MoE, 'dense' ones a plain FFN (all sparse when absent)."""
    types = cfg.get("mlp_layer_types") or ["sparse"] * n
    return [t == "sparse" for t in types[:n]]


LayerRule = Callable[[Mapping[str, Any], int], list[bool]]


def _mlp_types_else(rule: LayerRule) -> LayerRule:
    """MoE layers per the file's ``mlp_layer_types``, else as ``rule`` derives them (the config class's own
    derivation when the file leaves the list out)."""

    def layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
        return _mlp_layer_types(cfg, n) if cfg.get("mlp_layer_types") is not None else list(rule(cfg, n))

    return layers


def _dense_prefix(k: int) -> LayerRule:
    """The first ``k`` layers dense, the rest MoE."""
    return lambda cfg, n: [i >= k for i in range(n)]


def _qwen_moe_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """MoE in every ``decoder_sparse_step``-th layer except ``mlp_only_layers`` (Qwen2-MoE's rule, Flint's too:
    configuration_qwen2_moe.py, configuration_flint.py)."""
    step, dense = int(cfg.get("decoder_sparse_step") or 1), set(cfg.get("mlp_only_layers") or [])
    return [i not in dense and (i + 1) % step == 0 for i in range(n)]


def _qwen_expert_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """Qwen2-MoE / Qwen3-MoE: :func:`_qwen_moe_layers`, and none when ``num_experts`` is 0."""
    experts = cfg.get("num_experts", cfg.get("num_local_experts"))
    return [x and experts != 0 for x in _qwen_moe_layers(cfg, n)]


def _deepseek_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """DeepSeek-V2/V3: MoE from layer ``first_k_dense_replace`` (default 0) on, every ``moe_layer_freq``-th
    (default 1) (configuration_deepseek_v3.py)."""
    first, freq = cfg.get("first_k_dense_replace") or 0, cfg.get("moe_layer_freq") or 1
    if not isinstance(freq, int):
        raise ConfigError(f"moe_layer_freq={freq!r} must be an integer for a DeepSeek MoE (every k-th layer MoE)")
    return [i >= first and i % freq == 0 for i in range(n)]


#: MoE key tables that several families share, named by the family that introduced them; a table's ``moe``
#: is one of these names or its own :func:`moe_keys`.
MOE_KINDS: dict[str, dict[str, Any]] = {
    "mixtral": moe_keys(("num_local_experts", "num_experts"), "intermediate_size"),
    # the shared expert behind a sigmoid gate (modeling_qwen2_moe.py shared_expert_gate)
    "qwen2_moe": moe_keys(
        ("num_experts", "num_local_experts"),
        "moe_intermediate_size",
        shared_width="shared_expert_intermediate_size",
        shared_gate=True,
        layers=_qwen_expert_layers,
    ),
    "qwen3_moe": moe_keys(("num_experts", "num_local_experts"), "moe_intermediate_size", layers=_qwen_expert_layers),
    # grouped top-k over n_group expert groups (the hub files set it: DeepSeek-V3/R1 8, Kimi-K2 and GLM-4.5 1); a
    # file without the key: its config class's default, n_group: int = 1 in Dots1Config and Glm4MoeConfig
    # (configuration_dots1.py, configuration_glm4_moe.py, transformers 5.23)
    "deepseek": moe_keys(
        "n_routed_experts",
        "moe_intermediate_size",
        shared_count="n_shared_experts",
        layers=_deepseek_layers,
        **router_groups(1),
    ),
    # biased router and experts (modeling_gpt_oss.py GptOssTopKRouter, GptOssExperts)
    "gpt_oss": moe_keys(
        ("num_local_experts", "num_experts"),
        "intermediate_size",
        top_k=("num_experts_per_tok", "experts_per_token"),
        router_bias=True,
        expert_bias=True,
    ),
}


LLAMA_LIKE = dict(
    norm="rms",
    ffn="gated",
    position="rotary",
    **_attn_bias(_k("attention_bias", False)),
    ffn_bias=_k("mlp_bias", False),
    norms_per_layer=2,
)
# Base rows that several families share; a row states what differs from its base.
#: Llama's block without any bias (Mistral, Phi-3, DeepSeek, OLMoE, ...)
LLAMA_NO_BIAS = dict(LLAMA_LIKE, **_all_bias(False))
#: Qwen2's block: biased q/k/v, sliding layers from max_window_layers (configuration_qwen2.py)
QWEN2_LIKE = dict(LLAMA_LIKE, **_attn_bias(True, o=False), ffn_bias=False, windows="from_layer")
#: Llama's block with per-head q/k RMSNorms and no FFN bias (Qwen3, Hunyuan, ...)
LLAMA_QK_NORM = dict(LLAMA_LIKE, ffn_bias=False, qk_norm="head")
#: Qwen3's block: sliding layers from max_window_layers
QWEN3_LIKE = dict(LLAMA_QK_NORM, windows="from_layer")
#: Gemma's block: embeddings × √D, GELU-tanh gated FFN without bias
GEMMA_LIKE = dict(LLAMA_LIKE, ffn_bias=False, embedding_scale=True, activation="gelu_tanh")
#: Gemma 2's: four norms per layer (sandwich) and logit soft-capping; Gemma 3's adds per-head q/k norms
GEMMA2_LIKE = dict(GEMMA_LIKE, norms_per_layer=4, softcap=True)
GEMMA3_LIKE = dict(GEMMA2_LIKE, qk_norm="head")
#: Cohere's parallel block: one LayerNorm without bias feeds attention and the gated MLP
COHERE_LIKE = dict(LLAMA_LIKE, norm="layer", norm_bias=False, parallel=True, norms_per_layer=1, ffn_bias=False)
#: GPT-2-era blocks: LayerNorms and a plain MLP, biases everywhere
GPT_LIKE = dict(norm="layer", ffn="mlp", **_all_bias(True))


TIED_BY_DEFAULT = {
    "bart",
    "biogpt",
    "bloom",
    "cohere",
    "cohere2",
    "cohere2_moe",
    "cohere_compass_text",
    "cpmant",
    "ctrl",
    "ernie4_5",
    "ernie4_5_moe",
    "falcon",
    "falcon_mamba",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gemma3n_text",
    "gemma4_text",
    "gemma4_unified_text",
    "gpt-sw3",
    "gpt2",
    "gpt_bigcode",
    "gpt_neo",
    "gpt_neox_japanese",
    "granite_swa",
    "jetmoe",
    "lfm2",
    "lfm2_moe",
    "lfm3",
    "mamba",
    "minicpm3",
    "modernbert-decoder",
    "mpt",
    "openai-gpt",
    "opt",
    "qwen3_vl_moe_text",
    "recurrent_gemma",
    "smollm3",
    "starcoder2",
    "t5",
    "transformer",
    "trocr",
    "vaultgemma",
    "xglm",
    "youtu",
    "zamba",
    "zamba2",
    "zaya",
    "whisper",
}

# BERT-style encoders: transformers offers a *ForCausalLM for them (the bidirectional encoder run with
# is_decoder=True), but they are not decoder LMs; llmath refuses them with a clear error.
ENCODERS = frozenset(
    "bert bert-generation big_bird camembert data2vec-text electra ernie megatron-bert rembert roberta "
    "roberta-prelayernorm roc_bert roformer xlm xlm-roberta xlm-roberta-xl xlnet xmod reformer".split()
)

# Config aliases that older hub files use for the same family.
MODEL_TYPE_ALIASES = {
    "RefinedWeb": "falcon",
    "RefinedWebModel": "falcon",
    "gemma3": "gemma3_text",
    # Kimi K2 (moonshotai/Kimi-K2-Instruct, remote code): DeepseekV3ForCausalLM with DeepSeek-V3's keys.
    "kimi_k2": "deepseek_v3",
    # MiMo (XiaomiMiMo/MiMo-7B-Base, remote code MiMoForCausalLM): Qwen2's keys and layers (q/k/v biased). Its
    # modeling_mimo.py adds num_nextn_predict_layers MTP layers to Qwen2Model; vLLM's MiMo model serves the Qwen2
    # main model and skips their weights (vllm/model_executor/models/mimo.py, "mtp_layers"), and llmath counts
    # what is served, as for DeepSeek's MTP layers
    "mimo": "qwen2",
}

# transformers classes named in a file's ``architectures``: a model_type without a table of its own whose
# checkpoint loads with one of these classes is read with that class's table.
ARCHITECTURE_TYPES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Phi3ForCausalLM": "phi3",
}
