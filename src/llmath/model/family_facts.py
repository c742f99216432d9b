"""Facts shared by the adapter tables of :mod:`llmath.model.families`: how a family reads a yes/no fact
from its config (``_k``), derives its sliding-window ``layer_types`` and MoE layers the way its transformers
config class does, the Llama-like base row, and the per-model_type data (tied-embedding defaults of the
config classes, encoders, aliases, architecture names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Values of a table row are constants, or ("key", default) to read a bool from the config, or a callable(cfg).


def _k(name: str, default: Any) -> tuple[str, Any]:
    return (name, default)


def _attn_bias(value: Any) -> dict[str, Any]:
    """The same bias fact for the q, k, v and o projections."""
    return dict(q_bias=value, k_bias=value, v_bias=value, o_bias=value)


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


LLAMA_LIKE = dict(
    norm="rms",
    ffn="gated",
    position="rotary",
    **_attn_bias(_k("attention_bias", False)),
    ffn_bias=_k("mlp_bias", False),
    norms_per_layer=2,
)


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
