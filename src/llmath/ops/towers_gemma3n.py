"""Matmul FLOPs of Gemma 3n's encoders: the MobileNetV5 vision tower per image and the conformer audio tower per
clip (model/towers_gemma3n.py holds their structure and parameter counts).

Conventions (as ``torch.utils.flop_counter``, which ``tests/test_gemma3n_towers.py`` checks them against): 2 FLOPs
per multiply-add; a convolution costs 2 × output elements × its kernel's input channels per group × kernel area
(a depthwise conv: one input channel); attention costs its two products, 2·h·Tq·Tk·d each. Norms, activations,
softmax, interpolation and pooling are not counted. A "same"-padded conv of stride s maps a side n to ceil(n/s)
(timm's Conv2dSame). One clip, one image (batch 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import WorkloadError
from llmath.model.towers_gemma3n import (
    FUSION_EXPANSION,
    FUSION_TAPS,
    FUSION_WIDTH,
    IMAGE,
    STEM,
    Block,
    Er,
    Uir,
    make_divisible,
    sub_configs,
)
from llmath.validation import check_float, check_int

Counts = dict[str, int]


def _down(n: int, s: int) -> int:
    return -(-n // s)


def block_flops(b: Block, cin: int, n: int) -> tuple[int, int]:
    """(FLOPs, output side) of one block on an n × n input of ``cin`` channels."""
    if isinstance(b, Er):
        mid, m = make_divisible(cin * b.e), _down(n, b.s)
        return 2 * m * m * (mid * cin * b.k * b.k + b.c * mid), m
    if isinstance(b, Uir):
        mid = make_divisible(cin * b.e)
        n1 = _down(n, b.s) if b.a and not b.k else n  # the a×a conv strides only when there is no k×k conv
        m = _down(n1, b.s) if b.k else n1
        start = 2 * n1 * n1 * cin * b.a * b.a if b.a else 0
        middle = 2 * m * m * mid * b.k * b.k if b.k else 0
        return start + 2 * n1 * n1 * mid * cin + middle + 2 * m * m * b.c * mid, m
    t, kv = n * n, _down(n, b.v) ** 2
    down = 2 * kv * cin * b.k * b.k if b.v > 1 else 0
    qkv = 2 * t * cin * b.h * b.d + 2 * (down + 2 * kv * cin * b.d)
    return qkv + 2 * (2 * b.h * t * kv * b.d) + 2 * t * b.h * b.d * b.c, n


def vision_flops(stages: tuple[tuple[Block, ...], ...], image: int = IMAGE, channels: int = 3) -> Counts:
    """Per image of ``image`` × ``image`` pixels: the stride-2 stem, the blocks, and the fusion adapter, which runs
    at the side of the first of the fused stage outputs (the others are upsampled to it) before pooling."""
    n = _down(image, 2)
    stem = 2 * n * n * STEM * channels * 9
    cin, layers, ends = STEM, 0, []
    for stage in stages:
        for b in stage:
            f, n = block_flops(b, cin, n)
            layers, cin = layers + f, b.c
        ends.append((cin, n))
    taps = ends[-FUSION_TAPS:]
    fused, side = sum(c for c, _ in taps), taps[0][1]
    mid = make_divisible(fused * FUSION_EXPANSION)
    head = 2 * side * side * (mid * fused + FUSION_WIDTH * mid)
    return {"vision.embeddings": stem, "vision.layers": layers, "vision.head": head}


# Gemma3nAudioFeatureExtractor defaults (feature_extraction_gemma3n.py, transformers 5.23): 16 kHz, 32 ms frames
# (512 samples, unfolded with one extra sample), a 10 ms hop (160 samples), the waveform padded to a multiple of 128
SAMPLE_RATE, FRAME, HOP, PAD_TO = 16_000, 512, 160, 128


def mel_frames(seconds: float) -> int:
    """Mel frames the feature extractor yields for ``seconds`` of 16 kHz audio: the samples padded up to a multiple
    of 128, then (samples − 513) // 160 + 1."""
    samples = -(-round(seconds * SAMPLE_RATE) // PAD_TO) * PAD_TO
    return max(0, (samples - FRAME - 1) // HOP + 1)


def audio_flops(a: Mapping[str, Any], frames: int) -> Counts:
    """Per clip of ``frames`` mel frames: the two sub-sampling convs (time padded by kh − 1 at the end, frequency by
    1 each side) and the input Linear; per conformer block at T sub-sampled positions, width D, N heads of H:
    46·T·D² of projections (FFNs 2 × 16, q/k/v/post 8, light conv 6), the depthwise conv 2·T·D·K, the
    relative-position projection of P = max(0, left − 1) + right + 1 offsets (2·P·D²), and chunked local
    attention: ceil(T/W) chunks of W queries over W + max(0, left − 1) + right keys, plus the position logits."""
    D, N, L = a["hidden_size"], a["conf_num_attention_heads"], a["conf_num_hidden_layers"]
    t, f, cin, convs = frames, a["input_feat_size"], 1, 0
    for c, (kh, kw), (sh, sw) in zip(a["sscp_conv_channel_size"], a["sscp_conv_kernel_size"],
                                     a["sscp_conv_stride_size"], strict=True):  # fmt: skip
        t, f = (t - 1) // sh + 1, (f + 2 - kw) // sw + 1
        convs, cin = convs + 2 * t * f * c * cin * kh * kw, c
    W, left, right = a["conf_attention_chunk_size"], a["conf_attention_context_left"], a["conf_attention_context_right"]
    past = max(0, left - 1)
    P, C, chunks = past + right + 1, W + past + right, -(-t // W)
    attn = 2 * N * chunks * W * (D // N) * (2 * C + P)
    layer = 46 * t * D * D + 2 * t * D * a["conf_conv_kernel_size"] + 2 * P * D * D + attn
    return {"audio.embeddings": convs + 2 * t * cin * f * D, "audio.layers": L * layer}


def encoder_flops(cfg: Mapping[str, Any], image: int = IMAGE, seconds: float = 30.0) -> Counts | None:
    """Matmul FLOPs of a gemma3n config's encoders: the vision tower on one ``image``-pixel square image and the
    audio tower on one clip of ``seconds`` (None when the vision block list is unknown)."""
    image = check_int("image", image, 32, 16_384)
    frames = mel_frames(check_float("seconds", seconds, 0, 86_400, lo_open=True))
    if frames < 1:
        raise WorkloadError(f"seconds={seconds!r} gives no mel frame: an audio clip needs at least 513 samples at "
                            f"16 kHz (0.0321 s); pass a longer clip")  # fmt: skip
    _, a, stages = sub_configs(cfg)
    if stages is None:
        return None
    return {**vision_flops(stages, image), **audio_flops(a, frames)}
