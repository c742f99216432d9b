"""The towers of Gemma 3n (``gemma3n``), counted from its config the way transformers 5.23 and timm build them.

- Vision: ``Gemma3nModel.vision_tower`` is ``TimmWrapperModel`` (modeling_timm_wrapper.py), which calls
  ``timm.create_model(vision_config.architecture, pretrained=False, num_classes=0, **model_args)``; the
  default architecture is ``mobilenetv5_300m_enc``, timm's ``MobileNetV5Encoder`` (timm 1.0.31,
  ``timm/models/mobilenetv5.py``: ``_gen_mobilenet_v5`` and ``MobileNetV5Encoder``; its blocks are
  ``EdgeResidual``, ``UniversalInvertedResidual`` and ``MobileAttention`` of
  ``timm/models/_efficientnet_blocks.py``). Its block list is :data:`MOBILENETV5_300M` below, one row per
  block of timm's ``arch_def`` strings; another architecture or any ``model_args`` is not counted.
- Audio: ``Gemma3nAudioEncoder`` (modeling_gemma3n.py): the sub-sampling conv projection (two bias-free
  convs, each with a per-channel cumulative group-norm scale, then a bias-free Linear) and the conformer.
- Projector: ``embed_vision`` and ``embed_audio`` (``Gemma3nMultimodalEmbedder``): a ``vocab_size`` × width
  table, hard and soft RMS norms (scale each), a bias-free Linear to the text width and a scale-free norm.

Components: ``vision.embeddings`` (timm's ``conv_stem``), ``vision.layers`` (``blocks``), ``vision.head``
(``msfa``, the multi-scale fusion adapter whose output the language model receives), ``audio.embeddings``
(``subsample_conv_projection``), ``audio.layers`` (``conformer``) and ``projector`` (both embedders).
"""

# no ``from __future__ import annotations``: the NamedTuples' field types are read as objects, not compiled
# from strings on every import (docs/speed.md)

from collections.abc import Mapping
from typing import Any, NamedTuple

Counts = dict[str, int]
Cfg = Mapping[str, Any]


class Er(NamedTuple):
    """timm ``er_k{k}_s{s}_e{e}_c{c}`` (EdgeResidual): a k×k conv of stride s, in -> make_divisible(in·e), a
    norm, a 1×1 conv to c, a norm; no biases, no layer scale."""

    k: int
    s: int
    e: float
    c: int


class Uir(NamedTuple):
    """timm ``uir_a{a}_k{k}_s{s}_e{e}_c{c}`` (UniversalInvertedResidual): an optional a×a depthwise conv on the
    input (a = 0: none), a 1×1 expansion to make_divisible(in·e), an optional k×k depthwise conv on it, a 1×1
    projection to c, a norm after each conv and a layer scale of c; no biases. The stride s is the k×k conv's,
    the a×a conv's when k = 0."""

    a: int
    k: int
    s: int
    e: float
    c: int


class Mqa(NamedTuple):
    """timm ``mqa_k{k}_h{h}_v{v}_s1_d{d}_c{c}`` (MobileAttention, multi-query): a norm, a 1×1 query conv to h·d,
    one key and one value head of d (each preceded, when the kv stride v > 1, by a k×k depthwise conv and a
    norm), a 1×1 output conv h·d -> c and a layer scale of c; no biases."""

    k: int
    h: int
    v: int
    d: int
    c: int


Block = Er | Uir | Mqa

# timm 1.0.31 timm/models/mobilenetv5.py, _gen_mobilenet_v5 (the arch_def of every variant but mobilenetv5_base)
MOBILENETV5_300M: tuple[tuple[Block, ...], ...] = (
    (Er(3, 2, 4, 128),) + (Er(3, 1, 4, 128),) * 2,
    (Uir(3, 5, 2, 6, 256), Uir(5, 0, 1, 4, 256), Uir(3, 0, 1, 4, 256), Uir(5, 0, 1, 4, 256), Uir(3, 0, 1, 4, 256)),
    (Uir(5, 5, 2, 6, 640),) + (Uir(5, 0, 1, 4, 640),) * 7 + (Uir(0, 0, 1, 1, 640),)
    + (Mqa(3, 12, 2, 64, 640), Uir(0, 0, 1, 2, 640)) * 14,
    (Uir(5, 5, 2, 6, 1280),) + (Mqa(3, 16, 1, 96, 1280), Uir(0, 0, 1, 2, 1280)) * 19,
)  # fmt: skip
STEM = 64  # MobileNetV5Encoder stem_size, a biased 3×3 conv of stride 2 from the 3 image channels, then a norm
IMAGE = 768  # timm default_cfgs["mobilenetv5_300m_enc"] input_size (3, 768, 768); Gemma 3n's processor resizes to it
FUSION_WIDTH = 2048  # MobileNetV5Encoder.num_features: the msfa output width
FUSION_EXPANSION = 2.0  # MobileNetV5MultiScaleFusionAdapter expansion_ratio
FUSION_TAPS = 2  # msfa_indices (-2, -1): the outputs of the last two stages are concatenated
ARCHITECTURES = {"mobilenetv5_300m_enc": MOBILENETV5_300M}


def make_divisible(v: float, divisor: int = 8) -> int:
    """timm.layers.make_divisible: the nearest multiple of ``divisor`` (at least one), raised by one step when
    rounding lost more than 10%."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def block_params(b: Block, cin: int) -> int:
    """Parameters of one block whose input has ``cin`` channels (every norm is an RmsNorm2d: one scale per
    channel)."""
    if isinstance(b, Er):
        mid = make_divisible(cin * b.e)
        return cin * mid * b.k * b.k + mid + mid * b.c + b.c
    if isinstance(b, Uir):
        mid = make_divisible(cin * b.e)
        start = cin * b.a * b.a + cin if b.a else 0
        middle = mid * b.k * b.k + mid if b.k else 0
        return start + cin * mid + mid + middle + mid * b.c + b.c + b.c
    down = cin * b.k * b.k + cin if b.v > 1 else 0
    return cin + cin * b.h * b.d + 2 * (down + cin * b.d) + b.h * b.d * b.c + b.c


def mobilenetv5(stages: tuple[tuple[Block, ...], ...], channels: int = 3) -> Counts:
    """The stem, the blocks stage by stage and the fusion adapter (a UniversalInvertedResidual without depthwise
    convs or layer scale over the concatenated last-stage outputs, then a norm)."""
    cin, layers, ends = STEM, 0, []
    for stage in stages:
        for b in stage:
            layers += block_params(b, cin)
            cin = b.c
        ends.append(cin)
    fused = sum(ends[-FUSION_TAPS:])
    mid = make_divisible(fused * FUSION_EXPANSION)
    return {
        "vision.embeddings": channels * STEM * 9 + STEM + STEM,
        "vision.layers": layers,
        "vision.head": fused * mid + mid + mid * FUSION_WIDTH + FUSION_WIDTH + FUSION_WIDTH,
    }


def _subsampled_width(a: Cfg) -> int:
    """The frequency bins left after the two convs (padding 1 each side of the frequency axis)."""
    f = a["input_feat_size"]
    for (_, kw), (_, sw) in zip(a["sscp_conv_kernel_size"], a["sscp_conv_stride_size"], strict=True):
        f = (f + 2 - kw) // sw + 1
    return int(f)


def audio(a: Cfg) -> Counts:
    """The sub-sampling projection (conv i: C_i·C_{i−1}·kh·kw + C_i norm scales, C_{-1} = 1; Linear(C·f, D)) and
    the conformer blocks: two macaron FFNs (two norms, D -> 4D -> D), attention (two norms, a per-dimension
    query scale of D/N, the relative-position projection, q/k/v/post, all D×D), the light conv (two norms,
    D -> 2D GLU, a depthwise conv of the kernel size, D -> D) and the block's norm; no biases."""
    D, N, K = a["hidden_size"], a["conf_num_attention_heads"], a["conf_conv_kernel_size"]
    chans = [1, *a["sscp_conv_channel_size"]]
    convs = sum(
        chans[i + 1] * chans[i] * kh * kw + chans[i + 1] for i, (kh, kw) in enumerate(a["sscp_conv_kernel_size"])
    )
    ffn = 2 * D + 8 * D * D
    attn = 2 * D + D // N + 5 * D * D
    conv = 2 * D + 2 * D * D + D * K + D * D
    return {
        "audio.embeddings": convs + chans[-1] * _subsampled_width(a) * D,
        "audio.layers": a["conf_num_hidden_layers"] * (2 * ffn + attn + conv + D),
    }


def embedder(m: Cfg, dt: int) -> int:
    """Gemma3nMultimodalEmbedder: table, hard and soft norms, projection to ``dt`` (its last norm has no scale)."""
    dm = m["hidden_size"]
    return m["vocab_size"] * dm + 2 * dm + dm * dt


# Gemma3nVisionConfig / Gemma3nAudioConfig defaults (configuration_gemma3n.py, transformers 5.23)
VISION_DEFAULTS = dict(architecture="mobilenetv5_300m_enc", model_args=None, hidden_size=2048, vocab_size=128)
AUDIO_DEFAULTS = dict(vocab_size=128, input_feat_size=128, hidden_size=1536, conf_num_attention_heads=8,
                      conf_num_hidden_layers=12, conf_conv_kernel_size=5, sscp_conv_channel_size=[128, 32],
                      sscp_conv_kernel_size=[[3, 3], [3, 3]], sscp_conv_stride_size=[[2, 2], [2, 2]],
                      conf_attention_chunk_size=12, conf_attention_context_left=13,
                      conf_attention_context_right=0)  # fmt: skip


def _sub(cfg: Cfg, key: str, defaults: dict[str, Any]) -> dict[str, Any]:
    got = cfg.get(key)
    raw: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    return {**defaults, **{k: v for k, v in raw.items() if v is not None}}


def sub_configs(cfg: Cfg) -> tuple[dict[str, Any], dict[str, Any], tuple[tuple[Block, ...], ...] | None]:
    """(vision config, audio config, the vision block list) of a gemma3n config, defaults filled in; the block
    list is None for a timm architecture, or ``model_args``, that llmath has no block list for."""
    v, a = _sub(cfg, "vision_config", VISION_DEFAULTS), _sub(cfg, "audio_config", AUDIO_DEFAULTS)
    stages = None if v["model_args"] else ARCHITECTURES.get(str(v["architecture"]))
    return v, a, stages


def gemma3n(cfg: Cfg, dt: int) -> Counts | None:
    """Vision, audio and both embedders into the ``dt``-wide language model; None (all named as not counted)
    when the vision tower's block list is unknown (:func:`sub_configs`)."""
    v, a, stages = sub_configs(cfg)
    if stages is None:
        return None
    return {**mobilenetv5(stages), **audio(a), "projector": embedder(v, dt) + embedder(a, dt)}


# wrappers whose towers are counted together from the whole config
WHOLE = {"gemma3n": gemma3n}
