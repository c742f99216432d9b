"""The towers of a multimodal wrapper: vision encoders and projectors, counted exactly.

A wrapper config (``text_config`` plus ``vision_config`` under a wrapper model_type) is analysed stage by
stage as its language model; its towers are parameters too (they are loaded, and they run once per
image). This module counts them from the config the way transformers 5.23 builds the modules, one row
per vision-encoder kind (:data:`VISION`, keyed by ``vision_config.model_type``) and one per wrapper's
projector (:data:`PROJECTORS`); ``tests/test_multimodal.py`` proves each against the meta-device module.

Components: ``vision.embeddings`` (patch convolution, position table, class token), ``vision.layers``,
``vision.norm`` (pre/post norms), ``vision.head`` (SigLIP's attention-pooling head) and ``projector``
(the multimodal projector, patch merger, image-newline vector). A tower kind not listed here is named
in ``towers_not_counted`` instead of being guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmath.model import (
    towers_audio,
    towers_dots3,
    towers_emu3,
    towers_gemma3n,
    towers_gemma4,
    towers_inkling,
    towers_kimi,
    towers_minimax,
    towers_mllama,
    towers_phi4mm,
    towers_vl,
    towers_wrappers,
)

Counts = dict[str, int]
Cfg = Mapping[str, Any]


def _g(cfg: Cfg, key: str, default: Any) -> Any:
    v = cfg.get(key)
    return default if v is None else v


def _vit_layer(D: int, F: int, *, inner: int | None = None, bias: bool = True, gated: bool = False,
               norm: int = 2) -> int:  # fmt: skip
    """One pre-norm encoder layer: two norms (``norm`` parameters per element), q/k/v/o of ``inner`` width,
    an MLP (fc1/fc2 with biases) or a gated FFN (gate/up/down, no biases)."""
    inner = D if inner is None else inner
    attn = 4 * D * inner + (3 * inner + D if bias else 0)
    ffn = 3 * D * F if gated else 2 * D * F + (F + D if bias else 0)
    return 2 * norm * D + attn + ffn


def siglip(v: Cfg, head: bool, positions: int | None = None) -> Counts:
    """SigLIP (siglip_vision_model, idefics3/smolvlm vision): patch conv with bias, a position table of
    (image/patch)² rows, LayerNorm layers with biased q/k/v/o and fc1/fc2, a post LayerNorm and, when
    ``vision_use_head``, the attention-pooling head (probe, fused in_proj, out_proj, norm, MLP). SigLIP 2:
    a biased patch Linear (as many weights as the conv) and a table of ``positions`` (num_patches) rows."""
    D, F, L = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    C, p = _g(v, "num_channels", 3), v["patch_size"]
    rows = (v["image_size"] // p) ** 2 if positions is None else positions
    out = {
        "vision.embeddings": C * p * p * D + D + rows * D,
        "vision.layers": L * _vit_layer(D, F),
        "vision.norm": 2 * D,
    }
    if head:
        out["vision.head"] = D + 3 * D * D + 3 * D + D * D + D + 2 * D + 2 * D * F + F + D
    return out


def clip(v: Cfg) -> Counts:
    """CLIP: class token, patch conv without bias, (image/patch)² + 1 positions, pre and post LayerNorms."""
    D, F, L = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    C, p, img = _g(v, "num_channels", 3), v["patch_size"], v["image_size"]
    return {
        "vision.embeddings": D + C * p * p * D + ((img // p) ** 2 + 1) * D,
        "vision.layers": L * _vit_layer(D, F),
        "vision.norm": 4 * D,
    }


def pixtral(v: Cfg) -> Counts:
    """Pixtral: patch conv without bias, RMS ln_pre, RMSNorm layers with unbiased q/k/v/o (heads·head_dim
    wide) and a gated FFN; rotary positions (no table)."""
    D, F, L = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    N = v["num_attention_heads"]
    inner = N * _g(v, "head_dim", D // N)
    C, p = _g(v, "num_channels", 3), v["patch_size"]
    return {
        "vision.embeddings": C * p * p * D,
        "vision.layers": L * _vit_layer(D, F, inner=inner, bias=False, gated=True, norm=1),
        "vision.norm": D,
    }


# Defaults of the transformers 5.23 vision config classes (SiglipVisionConfig, Idefics3VisionConfig,
# SmolVLMVisionConfig, CLIPVisionConfig, PixtralVisionConfig) for keys a hub file leaves out.
_SIGLIP = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, image_size=224, patch_size=16)
_IDEFICS3 = dict(hidden_size=1152, intermediate_size=3072, num_hidden_layers=12, image_size=224, patch_size=32)
_PIXTRAL = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16, image_size=1024,
                patch_size=16)  # fmt: skip
VISION_DEFAULTS: dict[str, dict[str, Any]] = {
    "siglip_vision_model": _SIGLIP,
    "idefics3_vision": _IDEFICS3,
    "smolvlm_vision": _IDEFICS3,
    "clip_vision_model": dict(_SIGLIP, patch_size=32),
    "git_vision_model": _SIGLIP,  # GitVisionConfig: CLIP's layout, SigLIP's default widths (patch 16)
    "siglip2_vision_model": dict(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=12, patch_size=16, num_patches=256
    ),  # fmt: skip
    "pixtral": _PIXTRAL,
}

VISION: dict[str, Callable[[Cfg], Counts]] = {
    "siglip_vision_model": lambda v: siglip(v, bool(_g(v, "vision_use_head", True))),
    "idefics3_vision": lambda v: siglip(v, False),
    "smolvlm_vision": lambda v: siglip(v, False),
    "clip_vision_model": clip,
    "git_vision_model": clip,
    "pixtral": pixtral,
    "siglip2_vision_model": lambda v: siglip(v, bool(_g(v, "vision_use_head", True)), v["num_patches"]),
}


def _layers_used(cfg: Cfg, key: str) -> int:
    """How many vision layers' features are concatenated (a list in ``vision_feature_layer(s)``)."""
    sel = cfg.get(key)
    return len(sel) if isinstance(sel, list | tuple) else 1


def _two_linear(din: int, dt: int, bias: bool) -> int:
    """Linear(din, dt) → act → Linear(dt, dt)."""
    return din * dt + dt * dt + (2 * dt if bias else 0)


def _llava(cfg: Cfg, dv: int, dt: int, newline: bool) -> int:
    k = _layers_used(cfg, "vision_feature_layer")
    return _two_linear(dv * k, dt, bool(_g(cfg, "multimodal_projector_bias", True))) + (dt if newline else 0)


def _mistral3(cfg: Cfg, dv: int, dt: int) -> int:
    """RMS norm, patch merger Linear(dv·s², dv) without bias, then the two linears."""
    s = _g(cfg, "spatial_merge_size", 2)
    bias = bool(_g(cfg, "multimodal_projector_bias", False))
    return dv + dv * s * s * dv + _two_linear(dv, dt, bias)


def _vipllava(cfg: Cfg, dv: int, dt: int) -> int:
    n = _layers_used(cfg, "vision_feature_layers") if cfg.get("vision_feature_layers") else 5  # (-2,-5,-8,-11,6)
    return 2 * dv * n + _two_linear(dv * n, dt, True)


# wrapper model_type -> projector parameters (cfg, vision width, text width); and how many vision towers
_BY_WIDTH: dict[str, Callable[[Cfg, int, int], int]] = {
    "gemma3": lambda c, dv, dt: dv * dt + dv,  # mm_input_projection_weight + mm_soft_emb_norm
    "paligemma": lambda c, dv, dt: dv * _g(c, "projection_dim", 2048) + _g(c, "projection_dim", 2048),
    "llava": lambda c, dv, dt: _llava(c, dv, dt, False),
    "video_llava": lambda c, dv, dt: _llava(c, dv, dt, False),
    "llava_next": lambda c, dv, dt: _llava(c, dv, dt, True),
    "llava_onevision": lambda c, dv, dt: _llava(c, dv, dt, True),
    "vipllava": _vipllava,
    "mistral3": _mistral3,
    "lighton_ocr": _mistral3,
    "idefics3": lambda c, dv, dt: dv * _g(c, "scale_factor", 2) ** 2 * dt,
    "smolvlm": lambda c, dv, dt: dv * _g(c, "scale_factor", 2) ** 2 * dt,
    "shieldgemma2": lambda c, dv, dt: dv * dt + dv,  # Gemma 3's projector
    "llava_next_video": lambda c, dv, dt: _llava(c, dv, dt, True),
    "cohere2_vision": lambda c, dv, dt: _cohere2_vision(c, dv, dt),
    "lfm2_vl": lambda c, dv, dt: _lfm2_vl(c, dv, dt),
    # GIT: Linear(dv, dt) with bias, LayerNorm(dt); one learned dv vector per image when num_image_with_embedding
    "git": lambda c, dv, dt: dv * dt + 3 * dt + _g(c, "num_image_with_embedding", 0) * dv,
}


def _cohere2_vision(cfg: Cfg, dv: int, dt: int) -> int:
    """Pixel shuffle by downsample_factor, Linear(dv·f², A) with bias, SwiGLU halves it, Linear(A/2, dt)."""
    a, f = _g(cfg, "alignment_intermediate_size", 36864), _g(cfg, "downsample_factor", 2)
    return dv * f * f * a + a + a // 2 * dt + dt


def _lfm2_vl(cfg: Cfg, dv: int, dt: int) -> int:
    """Pixel unshuffle by downsample_factor, a LayerNorm (projector_use_layernorm), Linear(dv·f², P),
    Linear(P, dt), biases per projector_bias; P = projector_hidden_size (Lfm2VlConfig's defaults)."""
    f, P, bias = (
        _g(cfg, "downsample_factor", 2),
        _g(cfg, "projector_hidden_size", 2560),
        _g(cfg, "projector_bias", True),
    )
    wide = dv * f * f
    return (2 * wide if _g(cfg, "projector_use_layernorm", True) else 0) + wide * P + P * dt + ((P + dt) if bias else 0)


def _by_width(f: Callable[[Cfg, int, int], int]) -> Callable[[Cfg, Cfg, int], int]:
    return lambda c, v, dt: f(c, v["hidden_size"], dt)


# wrapper model_type -> projector parameters (wrapper config, vision config, text width)
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {k: _by_width(f) for k, f in _BY_WIDTH.items()}
PROJECTORS.update(towers_vl.PROJECTORS)
PROJECTORS.update(towers_mllama.PROJECTORS)
PROJECTORS.update(towers_audio.PROJECTORS)
VISION.update(towers_vl.VISION)
VISION_DEFAULTS.update(towers_vl.DEFAULTS)
PROJECTORS.update(towers_inkling.PROJECTORS)
VISION.update(towers_inkling.VISION)
VISION_DEFAULTS.update(towers_inkling.DEFAULTS)
VISION.update(towers_mllama.VISION)
VISION_DEFAULTS.update(towers_mllama.DEFAULTS)
VISION.update(towers_minimax.VISION)  # MiniMax-M3 (model/towers_minimax.py)
VISION_DEFAULTS.update(towers_minimax.DEFAULTS)
PROJECTORS.update(towers_minimax.PROJECTORS)
VISION.update(towers_gemma4.VISION)  # Gemma 4 (model/towers_gemma4.py)
VISION_DEFAULTS.update(towers_gemma4.DEFAULTS)
PROJECTORS.update(towers_gemma4.PROJECTORS)
VISION.update(towers_kimi.VISION)  # Kimi-K2.5 (model/towers_kimi.py)
VISION_DEFAULTS.update(towers_kimi.DEFAULTS)
PROJECTORS.update(towers_kimi.PROJECTORS)
VISION.update(towers_wrappers.VISION)  # InternVL (model/towers_wrappers.py)
VISION_DEFAULTS.update(towers_wrappers.DEFAULTS)
PROJECTORS.update(towers_wrappers.PROJECTORS)
PROJECTORS.update(towers_emu3.PROJECTORS)
TOWER_COPIES = {"video_llava": 2}  # an image tower and a video tower, both built from vision_config
# Wrappers whose several towers are counted together from the whole config: wrapper -> (config, text width) ->
# components, or None when the config needs what llmath cannot count (every tower sub-config is then named).
# Phi-4-multimodal builds its vision and audio towers in one module; Inkling's audio and vision towers;
# BLIP-2's vision model and Q-Former; Idefics2's vision model and perceiver connector.
WHOLE: dict[str, Callable[[Cfg, int], Counts | None]] = {
    **towers_phi4mm.WHOLE,
    **towers_inkling.WHOLE,
    **towers_wrappers.WHOLE,  # BLIP-2 (a Q-Former), Idefics2 (a perceiver connector)
    **towers_dots3.WHOLE,  # Dots 3 Note: an MoE vision tower and an audio tower
    **towers_gemma3n.WHOLE,  # Gemma 3n: a timm MobileNetV5 vision tower and an audio conformer
}


# sub-config -> (tower counters by its model_type, their defaults)
TOWERS: dict[str, tuple[dict[str, Callable[[Cfg], Counts]], dict[str, dict[str, Any]]]] = {
    "vision_config": (VISION, VISION_DEFAULTS),
    "audio_config": (towers_audio.AUDIO, towers_audio.DEFAULTS),
    "vq_config": (towers_emu3.VQ, towers_emu3.DEFAULTS),  # Emu3's VQ-VAE image tokenizer
}


def _tower_config(raw: Any, key: str, wrapper: Any) -> tuple[Callable[[Cfg], Counts], dict[str, Any]] | None:
    """The counter of a tower sub-config and the config with its class's defaults filled in (None when
    llmath has no counter for that kind). An older Qwen-VL file names its vision config by the wrapper's
    model_type, or not at all."""
    table, defaults = TOWERS.get(key, ({}, {}))
    if not isinstance(raw, Mapping):
        return None
    kind = str(raw.get("model_type") or (wrapper if wrapper in towers_vl.FLAT_WRAPPERS else "") or
               towers_kimi.UNTYPED.get(str(wrapper), ""))  # fmt: skip
    kind = towers_vl.VISION_ALIASES.get(kind, kind) if key == "vision_config" else kind
    if kind not in table:
        return None
    return table[kind], {**defaults[kind], **{k: v for k, v in raw.items() if v is not None}}


# *_config keys of a wrapper that are not towers: the language model and a checkpoint's quantisation block
# (nvidia/Gemma-4-31B-IT-NVFP4 states quantization_config at the wrapper's top level)
NOT_TOWERS = frozenset({"text_config", "quantization_config"})


def tower_params(cfg: Cfg, text_width: int) -> tuple[tuple[tuple[str, int], ...], tuple[str, ...]]:
    """(counted components, sub-configs not counted) of a wrapper config whose language model is
    ``text_width`` wide: every tower sub-config is counted, or none is (all are named)."""
    wrapper = cfg.get("model_type")
    subs = sorted(k for k, v in cfg.items() if k.endswith("_config") and k not in NOT_TOWERS and v)
    if not subs and wrapper in towers_vl.PATCH_ONLY:
        return tuple(towers_vl.PATCH_ONLY[str(wrapper)](cfg, text_width).items()), ()
    if wrapper in WHOLE:  # several towers counted together from the whole config
        whole = WHOLE[str(wrapper)](cfg, text_width)
        return (tuple(whole.items()), ()) if whole is not None else ((), tuple(subs))
    towers = [_tower_config(cfg[k], k, wrapper) for k in subs]
    if len(subs) != 1 or wrapper not in PROJECTORS or any(t is None for t in towers):
        return (), tuple(subs)
    count, sub = towers[0]  # type: ignore[misc]
    copies = TOWER_COPIES.get(str(wrapper), 1)
    out = {k: n * copies for k, n in count(sub).items()}
    out["projector"] = out.get("projector", 0) + PROJECTORS[wrapper](cfg, sub, text_width)
    return tuple(out.items()), ()


# The wrapper's own tie_word_embeddings decides whether the LM head is the token table (transformers 5.23
# ties from the top-level config): the config classes' defaults, and the classes whose __post_init__ also
# takes a True from text_config (configuration_llava.py, llava_next_video, llava_onevision).
WRAPPER_TIES = {"gemma3": True, "paligemma": True, "mistral3": True, "lighton_ocr": True, "llava": False,
                "video_llava": False, "llava_next": False, "llava_onevision": False, "vipllava": False,
                "idefics3": False, "smolvlm": False, "shieldgemma2": True,
                "llava_next_video": False, "cohere2_vision": True, "lfm2_vl": True,
                "kimi_k25": True,  # Kimi_K25Config (configuration_kimi_k25.py): tie_word_embeddings True
                **towers_vl.WRAPPER_TIES, **towers_audio.WRAPPER_TIES, **towers_wrappers.WRAPPER_TIES}  # fmt: skip
TIES_FROM_TEXT = frozenset({"llava", "llava_next_video", "llava_onevision"})


def wrapper_ties(cfg: Cfg, text_tied: bool) -> bool:
    """Whether a wrapper's LM head is tied to its token table (the text config's answer for a wrapper
    whose rule is not listed)."""
    wrapper = cfg.get("model_type")
    if wrapper not in WRAPPER_TIES:
        return text_tied
    tied = bool(_g(cfg, "tie_word_embeddings", WRAPPER_TIES[str(wrapper)]))
    return tied or (text_tied and wrapper in TIES_FROM_TEXT)
