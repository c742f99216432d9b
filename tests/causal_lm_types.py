"""The causal-LM model_types of the pinned transformers, each built from its own config class's defaults.

The list is generated from ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` (never written by hand) and sorted
into decoder-only language models, encoder-decoder models (whose ``*ForCausalLM`` is the decoder alone),
BERT-style encoders (a ``*ForCausalLM`` that is an encoder run with ``is_decoder``) and multimodal
wrappers (a ``text_config`` holding the language model).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path

# BERT-style encoders: their *ForCausalLM is the bidirectional encoder with `is_decoder=True`; the
# config classes are BERT/RoBERTa/XLM/XLNet/Reformer descendants (transformers/models/<type>/).
ENCODERS = frozenset(
    {
        "bert",
        "bert-generation",
        "big_bird",
        "camembert",
        "data2vec-text",
        "electra",
        "ernie",
        "megatron-bert",
        "rembert",
        "roberta",
        "roberta-prelayernorm",
        "roc_bert",
        "roformer",
        "xlm",
        "xlm-roberta",
        "xlm-roberta-xl",
        "xlnet",
        "xmod",
        "reformer",
    }
)


# Multimodal models whose config is the text decoder itself beside a vision_config (no text_config): GIT's
# GitForCausalLM carries a CLIP image encoder and a projection. They are wrappers (towers counted,
# tests/test_multimodal.py; the text decoder's FLOPs and cache: tests/test_dense_variants.py).
MULTIMODAL_DECODERS = frozenset({"git"})


# The decoder half of an encoder-decoder whose encoder is another model: TrOCRForCausalLM is the text decoder
# of a VisionEncoderDecoderModel (its layers cross-attend the image encoder's output); proven with
# encoder_hidden_states in tests/test_dense_variants.py.
DECODERS_OF = frozenset({"trocr"})


@cache
def causal_lm_types() -> dict[str, str]:
    """model_type -> category ('decoder', 'encoder_decoder', 'encoder', 'wrapper') for every entry."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    out = {}
    for mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        cls = CONFIG_MAPPING[mt]
        if mt in ENCODERS:
            out[mt] = "encoder"
        elif "text_config" in getattr(cls, "sub_configs", {}) or mt in MULTIMODAL_DECODERS:
            out[mt] = "wrapper"
        elif getattr(cls, "is_encoder_decoder", False) or _default_is_encoder_decoder(mt) or mt in DECODERS_OF:
            out[mt] = "encoder_decoder"
        else:
            out[mt] = "decoder"
    return out


def _default_is_encoder_decoder(mt: str) -> bool:
    try:
        return bool(default_config(mt).get("is_encoder_decoder"))
    except Exception:  # a config class that cannot be built from defaults
        return False


@cache
def _default_text(mt: str, tmp: str) -> str:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = Path(tmp) / f"{mt}.json"
    CONFIG_MAPPING[mt]().to_json_file(path, use_diff=False)
    return path.read_text()


# transformers 5.23's RWKV decode step broadcasts each layer's (batch, D) shift state against the
# (batch, 1, D) token, so a batch of B runs B² rows (RwkvSelfAttention.extract_key_value,
# RwkvFeedForward.forward): its batch-1 step is the one without the bug
ONE_SEQUENCE = {"rwkv"}

LFM2_MOE_TYPES = ["full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(24)]
# LFM2-1.2B's 16 layers (its hub config.json's full_attn_idxs), for lfm2's defaults (every layer attends)
LFM2_TYPES = ["full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)]

# Types whose defaults transformers itself cannot run get the missing values of a real checkpoint.
REALISTIC = {
    # DeepSeekV2Config leaves num_experts_per_tok None and its forward fails (topk k=None); DeepSeek-V2
    # routes 6 of 160 experts per token (arXiv:2405.04434, section 3.1).
    "deepseek_v2": {"num_experts_per_tok": 6},
    # These config classes default head_dim / num_key_value_heads to None and their modules then fail;
    # a checkpoint states them: hidden_size / num_attention_heads = 128 (Ministral-8B, Hunyuan-7B) and
    # multi-head attention for Nemotron-3-8B (num_key_value_heads = num_attention_heads = 48).
    "ministral": {"head_dim": 128},
    "hunyuan_v1_dense": {"head_dim": 128},
    # ... and more than its single default expert (8, top-2: chosen, not a checkpoint's) so that routing is
    # exercised
    "hunyuan_v1_moe": {"head_dim": 128, "num_experts": 8, "moe_topk": 2},
    "nemotron": {"num_key_value_heads": 48},
    # Lfm2MoeConfig leaves layer_types None and its layers then fail: LFM2-8B-A1B's 24 layers, attention at
    # 2, 6, 10, 14, 18, 21 (src/llmath/data/models/lfm2-8b-a1b.json, from its hub config.json)
    "lfm2_moe": {"num_hidden_layers": 24, "layer_types": LFM2_MOE_TYPES},
    # Qwen4ExpTextConfig leaves the QSA indexer unset and its attention layers then fail (None // None); no
    # Qwen4-Exp checkpoint config is public (transformers' model docs name "Qwen/Qwen4-Exp"): these values
    # are chosen, not a checkpoint's. Indexer: 16 heads of 128, 2048 positions in blocks of 4; the rotary
    # over a quarter of the 256-wide heads, Qwen3.5's partial_rotary_factor 0.25 (64 <= the indexer width,
    # as the config class requires); n-gram embeddings on layers 1 and 2 (they need an eos_token_id; the
    # id is chosen); number_of_conv_states 3 as the class derives it with PLE layers (its defaults file
    # writes 1, which would override that).
    "qwen4_exp_text": {
        "indexer_n_heads": 16,
        "indexer_kv_heads": 1,
        "indexer_head_dim": 128,
        "indexer_budget": 2048,
        "indexer_compress_ratio": 4,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        "ple_layer_ids": [1, 2],
        "eos_token_id": 248044,
        "number_of_conv_states": 3,
    },
}


# Wrappers whose language model needs a REALISTIC entry: sub-config -> the entry's model_type
SUB_REALISTIC = {"qwen4_exp": {"text_config": "qwen4_exp_text"}}


def default_config(mt: str, tmp: str = "/tmp") -> dict:
    """The config class's defaults, written with ``to_json_file`` and read back as a config.json."""
    cfg = copy.deepcopy(json.loads(_default_text(mt, tmp)))
    cfg.update(REALISTIC.get(mt, {}))
    for sub, text_type in SUB_REALISTIC.get(mt, {}).items():  # a wrapper's sub-config: its own type's values
        cfg[sub] = dict(cfg[sub], **REALISTIC[text_type])
    return cfg


def of(category: str) -> list[str]:
    return sorted(t for t, c in causal_lm_types().items() if c == category)
