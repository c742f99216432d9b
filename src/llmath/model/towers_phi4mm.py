"""The towers of Phi-4-multimodal (``phi4_multimodal``), counted from its config the way transformers 5.23
builds them (modeling_phi4_multimodal.py): its config is the language model itself beside a
``vision_config`` and an ``audio_config``, and ``Phi4MultimodalModel.embed_tokens_extend`` holds both towers
and their projections. transformers builds no LoRA adapters (the checkpoint's vision / speech LoRA weights
are loaded through PEFT, outside the model class), so none are counted.

Components: ``vision.*`` (a SigLIP encoder with its attention-pooling head), ``audio.*`` (a conformer
encoder: NeMo conv subsampling, a relative-attention bias table, conformer blocks) and ``projector`` (the
image feature separators and up/down projections; the audio up/down projections for speech and for
vision-speech)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from llmath.model.towers_vl import vit_layer

Counts = dict[str, int]
Cfg = Mapping[str, Any]

# Phi4MultimodalVisionConfig / Phi4MultimodalAudioConfig defaults (transformers 5.23), for keys a file leaves out
VISION_DEFAULTS = dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_channels=3,
                       image_size=448, patch_size=14)  # fmt: skip
AUDIO_DEFAULTS = dict(hidden_size=1024, intermediate_size=1536, num_blocks=24, num_attention_heads=16,
                      ext_pw_out_channel=1024, depthwise_separable_out_channel=1024, depthwise_multiplier=1,
                      kernel_size=3, time_reduction=8, bias_max_distance=1000, bias_symmetric=False,
                      nemo_conv_channels=1024, nemo_final_size=10, downsample_rate=1)  # fmt: skip


def _sub(cfg: Cfg, key: str, defaults: dict[str, Any]) -> dict[str, Any]:
    got = cfg.get(key)
    raw: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    return {**defaults, **{k: v for k, v in raw.items() if v is not None}}


def vision(v: Cfg) -> Counts:
    """SigLIP: a biased patch conv, (image/patch)² positions, LayerNorm layers (biased q/k/v/o, fc1/fc2), a
    post LayerNorm and the attention-pooling head (probe, fused in_proj, out_proj, LayerNorm, MLP)."""
    D, F, C, p = v["hidden_size"], v["intermediate_size"], v["num_channels"], v["patch_size"]
    return {
        "vision.embeddings": C * p * p * D + D + (v["image_size"] // p) ** 2 * D,
        "vision.layers": v["num_hidden_layers"] * vit_layer(D, F),
        "vision.norm": 2 * D,
        "vision.head": D + 3 * D * D + 3 * D + D * D + D + 2 * D + 2 * D * F + F + D,
    }


def _conformer_block(a: Cfg) -> int:
    """Two macaron FFNs (LayerNorm, biased gate_up D -> 2F, down F -> D), biased q/k/v/o, the conv module
    (LayerNorm; GLU pointwise conv D -> 2E with biases b1, b2; depthwise conv of ``kernel_size`` × multiplier M
    and pointwise conv to O; pointwise conv D -> E), two LayerNorms; every conv with a bias."""
    D, F, E = a["hidden_size"], a["intermediate_size"], a["ext_pw_out_channel"]
    M, O, k = a["depthwise_multiplier"], a["depthwise_separable_out_channel"], a["kernel_size"]
    ffn = 2 * D + D * 2 * F + 2 * F + F * D + D
    conv = 2 * D + 2 * E + D * 2 * E + 2 * E + D * M * k + D * M + D * M * O + O + D * E + E
    return 2 * ffn + 4 * D * D + 4 * D + conv + 4 * D


def audio(a: Cfg) -> Counts:
    """The conformer: NeMo subsampling (a 3×3 conv 1 -> C, then log2(time_reduction) − 1 depthwise 3×3 and
    pointwise 1×1 pairs, all biased; Linear(C·nemo_final_size, D) with bias), the relative-attention bias
    (2·bias_max_distance buckets, bias_max_distance when symmetric, × heads), ``num_blocks`` blocks."""
    C, D = a["nemo_conv_channels"], a["hidden_size"]
    steps = int(math.log2(a["time_reduction"]))
    buckets = a["bias_max_distance"] * (1 if a["bias_symmetric"] else 2)
    return {
        "audio.embeddings": 10 * C + (steps - 1) * (10 * C + C * C + C) + C * a["nemo_final_size"] * D + D,
        "audio.bias": buckets * a["num_attention_heads"],
        "audio.layers": a["num_blocks"] * _conformer_block(a),
    }


def phi4_multimodal(cfg: Cfg, dt: int) -> Counts:
    """Both towers and the projections into the ``dt``-wide language model."""
    v, a = _sub(cfg, "vision_config", VISION_DEFAULTS), _sub(cfg, "audio_config", AUDIO_DEFAULTS)
    dv, da = v["hidden_size"], a["hidden_size"] * a["downsample_rate"]
    image = 2 * dv + dv * dt + dt + dt * dt + dt  # the two feature separators, img_projection_up / _down
    speech = 2 * (da * dt + dt + dt * dt + dt)  # up/down projections for speech and for vision-speech
    return {**vision(v), **audio(a), "projector": image + speech}


# wrappers whose towers are counted together from the whole config (model/towers.py WHOLE)
WHOLE: dict[str, Callable[[Cfg, int], Counts | None]] = {"phi4_multimodal": phi4_multimodal}
