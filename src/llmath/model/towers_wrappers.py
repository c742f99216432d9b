"""Towers of the BLIP-2 family (``blip-2``, ``instructblip``, ``instructblipvideo``), Idefics2 and InternVL,
counted from their sub-configs the way transformers 5.23 builds them (modeling_blip_2.py,
modeling_instructblip.py, modeling_instructblipvideo.py, modeling_idefics2.py, modeling_internvl.py);
:mod:`llmath.model.towers` merges these rows and ``tests/test_multimodal.py`` proves each against the
meta-device module.

Also the projectors of Cosmos3-Omni, HyperCLOVA X Vision v2 and DeepSeek-VL, whose vision models llmath
already counts (Qwen3-VL's, Qwen2.5-VL's, SigLIP's).

Components: ``vision.*``; ``qformer.*`` (BLIP-2's querying transformer: its learned query tokens, its
layers, and InstructBLIP's text embeddings); ``projector`` (BLIP-2's language projection, Idefics2's
connector: a gated MLP into the text width and a perceiver resampler, InternVL's pixel-shuffle MLP).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Counts = dict[str, int]
Cfg = Mapping[str, Any]


def _sub(cfg: Cfg, key: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    got = cfg.get(key)
    raw: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    return {**defaults, **{k: v for k, v in raw.items() if v is not None}}


def blip_vision(v: Cfg) -> Counts:
    """BLIP-2's ViT: a biased patch conv (3 channels), class token, (image/patch)² + 1 positions; LayerNorm
    layers with a fused qkv (its bias, when ``qkv_bias``, is q and v biases beside a zero k part: 3·D
    parameters), a biased projection and fc1/fc2; a post LayerNorm."""
    D, F, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    layer = 4 * D + 3 * D * D + (3 * D if v["qkv_bias"] else 0) + D * D + D + 2 * D * F + F + D
    return {
        "vision.embeddings": D + ((v["image_size"] // p) ** 2 + 1) * D + 3 * p * p * D + D,
        "vision.layers": v["num_hidden_layers"] * layer,
        "vision.norm": 2 * D,
    }


def _bert_attention(q: int, kv: int) -> int:
    """Biased query (q -> q), key and value (kv -> q), output dense and its LayerNorm."""
    return q * q + q + 2 * (kv * q + q) + q * q + q + 2 * q


def qformer(Q: Cfg, queries: int, dv: int, text_table: bool, text_ffn: bool) -> Counts:
    """The Q-Former: ``queries`` learned query vectors, a LayerNorm (BLIP-2's ``layernorm``, InstructBLIP's in
    its embeddings beside a word table and a position table when ``text_table``), layers of self-attention,
    cross-attention to the ``dv``-wide image features on every ``cross_attention_frequency``-th layer (from
    layer 0), and a biased FFN with its LayerNorm for the queries (and another for text when ``text_ffn``)."""
    H, F, L, f = Q["hidden_size"], Q["intermediate_size"], Q["num_hidden_layers"], Q["cross_attention_frequency"]
    ffn = H * F + F + F * H + H + 2 * H
    cross = len(range(0, L, f)) * _bert_attention(H, dv)
    table = (Q["vocab_size"] + Q["max_position_embeddings"]) * H if text_table else 0
    return {
        "qformer.embeddings": queries * H + table + 2 * H,
        "qformer.layers": L * (_bert_attention(H, H) + ffn * (2 if text_ffn else 1)) + cross,
    }


def _blip(instruct: bool) -> Callable[[Cfg, int], Counts]:
    """BLIP-2 (its Q-Former's text FFN per ``use_qformer_text_input``, no text table) or InstructBLIP (both)."""

    def count(cfg: Cfg, dt: int) -> Counts:
        v, Q = _sub(cfg, "vision_config", BLIP_VISION), _sub(cfg, "qformer_config", QFORMER)
        queries = cfg.get("num_query_tokens") or 32
        q = qformer(Q, queries, v["hidden_size"], instruct, instruct or bool(Q["use_qformer_text_input"]))
        return {**blip_vision(v), **q, "projector": Q["hidden_size"] * dt + dt}  # language_projection, biased

    return count


def idefics2(cfg: Cfg, dt: int) -> Counts:
    """Idefics2: a SigLIP-style vision model without pooling head (biased patch conv, (image/patch)²
    positions, biased layers, post LayerNorm); the connector: a gated MLP dv -> the text FFN width -> dt
    without biases, then the perceiver resampler (latents × dt; per layer three RMSNorms, q of
    resampler_n_heads·head_dim, k and v of num_key_value_heads·head_dim, o, a 4·dt gated MLP; a final RMSNorm)
    whose width is the text width (Idefics2Config forces it)."""
    v, r = _sub(cfg, "vision_config", IDEFICS2_VISION), _sub(cfg, "perceiver_config", PERCEIVER)
    D, F, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    layer = 4 * D + 4 * D * D + 4 * D + 2 * D * F + F + D
    ft = _sub(cfg, "text_config", {"intermediate_size": 14336})["intermediate_size"]  # MistralConfig's default
    hd = r["resampler_head_dim"]
    attn = dt * r["resampler_n_heads"] * hd * 2 + 2 * dt * r["num_key_value_heads"] * hd
    resampler = r["resampler_n_latents"] * dt + r["resampler_depth"] * (3 * dt + attn + 3 * dt * 4 * dt) + dt
    return {
        "vision.embeddings": v["num_channels"] * p * p * D + D + (v["image_size"] // p) ** 2 * D,
        "vision.layers": v["num_hidden_layers"] * layer,
        "vision.norm": 2 * D,
        "projector": 2 * D * ft + ft * dt + resampler,
    }


def _pair(x: Any) -> tuple[int, int]:
    return (int(x[0]), int(x[1])) if isinstance(x, list | tuple) else (int(x), int(x))


def internvl_vision(v: Cfg) -> Counts:
    """InternVL's ViT: class token (and a mask token when ``use_mask_token``), (image/patch) positions + 1
    when ``use_absolute_position_embeddings``, a biased patch conv; layers of two norms (LayerNorm or RMSNorm
    per ``norm_type``), q/k/v (biases per ``attention_bias``, RMSNorms on q and k when ``use_qk_norm``), a
    biased output projection, biased fc1/fc2 and two layer scales; a final LayerNorm unless mean pooling."""
    D, F = v["hidden_size"], v["intermediate_size"]
    (ih, iw), (ph, pw) = _pair(v["image_size"]), _pair(v["patch_size"])
    patches = (ih // ph) * (iw // pw)
    norm = 2 * D if v["norm_type"] == "layer_norm" else D
    attn = 3 * D * D + (3 * D if v["attention_bias"] else 0) + D * D + D + (2 * D if v["use_qk_norm"] else 0)
    layer = 2 * norm + attn + 2 * D * F + F + D + 2 * D
    embeddings = D * (2 if v["use_mask_token"] else 1) + v["num_channels"] * ph * pw * D + D
    embeddings += (patches + 1) * D if v["use_absolute_position_embeddings"] else 0
    return {
        "vision.embeddings": embeddings,
        "vision.layers": v["num_hidden_layers"] * layer,
        "vision.norm": 0 if v["use_mean_pooling"] else 2 * D,
    }


def internvl_projector(cfg: Cfg, v: Cfg, dt: int) -> int:
    """LayerNorm over dv·s² (s = 1/downsample_ratio, truncated as transformers does), Linear(dv·s², dt) and
    Linear(dt, dt), both biased."""
    wide = v["hidden_size"] * int(1 / (cfg.get("downsample_ratio") or 0.5)) ** 2
    return 2 * wide + wide * dt + dt + dt * dt + dt


# Defaults of the transformers 5.23 config classes (Blip2VisionConfig = InstructBlip(Video)VisionConfig,
# Blip2QFormerConfig = InstructBlip(Video)QFormerConfig, Idefics2VisionConfig, Idefics2PerceiverConfig,
# InternVLVisionConfig), for keys a hub file leaves out; tests/test_multimodal.py checks them.
BLIP_VISION: dict[str, Any] = dict(hidden_size=1408, intermediate_size=6144, num_hidden_layers=39, image_size=224,
                                   patch_size=14, qkv_bias=True)  # fmt: skip
QFORMER: dict[str, Any] = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, vocab_size=30522,
                               max_position_embeddings=512, cross_attention_frequency=2,
                               use_qformer_text_input=False)  # fmt: skip
IDEFICS2_VISION: dict[str, Any] = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_channels=3,
                                       image_size=224, patch_size=32)  # fmt: skip
PERCEIVER: dict[str, Any] = dict(resampler_n_latents=64, resampler_depth=3, resampler_n_heads=16, resampler_head_dim=96,
                                 num_key_value_heads=4)  # fmt: skip
DEFAULTS: dict[str, dict[str, Any]] = {
    "internvl_vision": dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_channels=3,
                            image_size=448, patch_size=14, attention_bias=False, use_qk_norm=False,
                            norm_type="layer_norm", use_mask_token=False, use_absolute_position_embeddings=True,
                            use_mean_pooling=True),
}  # fmt: skip
# Qianfan-OCR: InternVL's vision model and projector (modeling_qianfan_ocr.py, the same modules renamed)
DEFAULTS["qianfan_ocr_vision"] = dict(DEFAULTS["internvl_vision"], attention_bias=True)
VISION: dict[str, Callable[[Cfg], Counts]] = {"internvl_vision": internvl_vision, "qianfan_ocr_vision": internvl_vision}
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {
    "internvl": internvl_projector,
    "qianfan_ocr": internvl_projector,
    # Cosmos3-Omni: Qwen3-VL's vision model and mergers (modeling_cosmos3_omni.py builds it from vision_config)
    "cosmos3_omni": lambda c, v, dt: 0,
    # HyperCLOVA X Vision v2: Qwen2.5-VL's vision model and merger, then Linear(out_hidden_size, dt) with bias
    "hyperclovax_vision_v2": lambda c, v, dt: v["out_hidden_size"] * dt + dt,
    # DeepSeek-VL: SigLIP with its pooling head, the aligner Linear(dv, dt) -> GELU -> Linear(dt, dt), biased
    "deepseek_vl": lambda c, v, dt: v["hidden_size"] * dt + dt + dt * dt + dt,
}
# wrappers whose several towers are counted together (model/towers.py WHOLE)
WHOLE: dict[str, Callable[[Cfg, int], Counts | None]] = {
    "blip-2": _blip(False),
    "instructblip": _blip(True),
    "instructblipvideo": _blip(True),
    "idefics2": idefics2,
}
# the wrapper config classes' tie_word_embeddings (Idefics2Config, InternVLConfig, Cosmos3OmniConfig, ...)
WRAPPER_TIES = {"idefics2": False, "internvl": True, "cosmos3_omni": False, "hyperclovax_vision_v2": True,
                "deepseek_vl": True, "qianfan_ocr": False}  # fmt: skip
