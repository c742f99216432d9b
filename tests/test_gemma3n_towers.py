"""Gemma 3n's towers (model/towers_gemma3n.py): the audio encoder and both multimodal embedders equal transformers
5.23's modules on meta; the MobileNetV5 vision encoder equals timm's arithmetic, written out below.

Why the vision tower is not built here: transformers builds it with timm (TimmWrapperModel), and timm 1.0.31
imports torchvision at import time (timm/layers/norm_act.py, create_norm.py). The only torchvision wheel on PyPI
for torch 2.13.0 (0.28.0) links libtorch_cuda.so and libc10_cuda.so, which the CPU torch lacks, so it cannot load
here and timm is not in the test extra. ``test_timm_builds_the_same_encoder`` runs wherever timm imports."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath.model.hf import spec_from_config
from llmath.ops.params import param_report

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# timm 1.0.31 create_model("mobilenetv5_300m_enc", pretrained=False, num_classes=0) on meta, counted per child
# (run once on a machine where timm imported: conv_stem 1,856, blocks 278,880,000, msfa 15,245,056)
TIMM_300M = {"vision.embeddings": 1_856, "vision.layers": 278_880_000, "vision.head": 15_245_056}


def _modules(**audio):
    """Gemma3nAudioEncoder and both Gemma3nMultimodalEmbedders of the default Gemma3nConfig, on meta."""
    from transformers import Gemma3nAudioConfig, Gemma3nTextConfig, Gemma3nVisionConfig
    from transformers.models.gemma3n.modeling_gemma3n import Gemma3nAudioEncoder, Gemma3nMultimodalEmbedder

    a, text = Gemma3nAudioConfig(**audio), Gemma3nTextConfig()
    with torch.device("meta"):
        return (Gemma3nAudioEncoder(a), Gemma3nMultimodalEmbedder(Gemma3nVisionConfig(), text),
                Gemma3nMultimodalEmbedder(a, text))  # fmt: skip


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _spec(tmp_path, **audio):
    cfg = default_config("gemma3n", str(tmp_path))
    cfg["audio_config"] = dict(cfg["audio_config"], **audio)
    return spec_from_config(cfg, "gemma3n")


AUDIO_VARIANTS = [
    {},  # Gemma3nAudioConfig's defaults
    dict(input_feat_size=80, sscp_conv_channel_size=[64, 16], sscp_conv_kernel_size=[[3, 5], [3, 3]],
         sscp_conv_stride_size=[[2, 3], [2, 2]]),
    dict(hidden_size=512, conf_num_attention_heads=4, conf_num_hidden_layers=3, conf_conv_kernel_size=7,
         vocab_size=64),
]  # fmt: skip


@pytest.mark.parametrize("audio", AUDIO_VARIANTS, ids=["defaults", "subsampling", "widths"])
def test_audio_tower_and_embedders_equal_transformers(audio, tmp_path):
    enc, vision_embed, audio_embed = _modules(**audio)
    got = dict(_spec(tmp_path, **audio).tower_params)
    assert got["audio.embeddings"] == _count(enc.subsample_conv_projection)
    assert got["audio.layers"] == _count(enc.conformer)
    assert got["audio.embeddings"] + got["audio.layers"] == _count(enc)
    assert got["projector"] == _count(vision_embed) + _count(audio_embed)


def test_vision_tower_equals_timms_arithmetic(tmp_path):
    """Shapes of timm's modules (RmsNorm2d: one scale per channel; no conv biases but the stem's; LayerScale2d:
    one per output channel), block by block as _gen_mobilenet_v5's arch_def lists them."""
    stem = 3 * 64 * 3 * 3 + 64 + 64  # biased 3×3 conv 3 -> 64, its norm = 1,856
    er0 = 64 * 256 * 9 + 256 + 256 * 128 + 128  # er_k3_e4_c128 from 64: 3×3 to 256, norm, 1×1 to 128, norm
    er = 128 * 512 * 9 + 512 + 512 * 128 + 128
    stage0 = er0 + 2 * er  # = 1,492,608
    # uir_a{a}_k{k}_e{e}_c{c}: a×a depthwise + norm, 1×1 expansion + norm, k×k depthwise + norm, 1×1 + norm, scale
    u10 = 128 * 9 + 128 + 128 * 768 + 768 + 768 * 25 + 768 + 768 * 256 + 256 + 256
    u1a5 = 256 * 25 + 256 + 256 * 1024 + 1024 + 1024 * 256 + 256 + 256
    u1a3 = 256 * 9 + 256 + 256 * 1024 + 1024 + 1024 * 256 + 256 + 256
    stage1 = u10 + 2 * u1a5 + 2 * u1a3  # = 2,439,168
    u20 = 256 * 25 + 256 + 256 * 1536 + 1536 + 1536 * 25 + 1536 + 1536 * 640 + 640 + 640
    u2a5 = 640 * 25 + 640 + 640 * 2560 + 2560 + 2560 * 640 + 640 + 640
    u2e1 = 640 * 640 + 640 + 640 * 640 + 640 + 640
    u2e2 = 640 * 1280 + 1280 + 1280 * 640 + 640 + 640
    # mqa_k3_h12_v2_d64_c640: norm, q 640 -> 12·64, k and v: 3×3 depthwise + norm, 640 -> 64; out 768 -> 640; scale
    mqa2 = 640 + 640 * 768 + 2 * (640 * 9 + 640 + 640 * 64) + 768 * 640 + 640
    stage2 = u20 + 7 * u2a5 + u2e1 + 14 * (mqa2 + u2e2)  # = 63,407,744
    u30 = 640 * 25 + 640 + 640 * 3840 + 3840 + 3840 * 25 + 3840 + 3840 * 1280 + 1280 + 1280
    mqa3 = 1280 + 1280 * 1536 + 2 * 1280 * 96 + 1536 * 1280 + 1280  # mqa_k3_h16_d96_c1280: kv stride 1, no down conv
    u3e2 = 1280 * 2560 + 2560 + 2560 * 1280 + 1280 + 1280
    stage3 = u30 + 19 * (mqa3 + u3e2)  # = 211,540,480
    # msfa: the last two stages' outputs concatenated (640 + 1280), 1×1 to 3840 + norm, 1×1 to 2048 + norm, norm
    msfa = 1920 * 3840 + 3840 + 3840 * 2048 + 2048 + 2048
    expected = {"vision.embeddings": stem, "vision.layers": stage0 + stage1 + stage2 + stage3, "vision.head": msfa}
    assert expected == TIMM_300M
    got = dict(_spec(tmp_path).tower_params)
    assert {k: got[k] for k in expected} == expected


def test_the_wrapper_counts_every_tower(tmp_path):
    """Gemma3nForConditionalGeneration = the language model + the towers (its LM head is the token table)."""
    cfg = default_config("gemma3n", str(tmp_path))
    spec = spec_from_config(cfg, "gemma3n")
    enc, vision_embed, audio_embed = _modules()
    lm = param_report(spec_from_config(cfg["text_config"], "lm")).total
    rep = param_report(spec)
    assert spec.towers_not_counted == ()
    assert rep.towers == {"vision": sum(TIMM_300M.values()), "audio": _count(enc),
                          "projector": _count(vision_embed) + _count(audio_embed)}  # fmt: skip
    assert rep.total == lm + sum(rep.towers.values())


@pytest.mark.parametrize("vision", [{"architecture": "mobilenetv5_base"}, {"model_args": {"depth": 3}}])
def test_an_unknown_vision_tower_is_named_not_guessed(vision, tmp_path):
    cfg = default_config("gemma3n", str(tmp_path))
    cfg["vision_config"] = dict(cfg["vision_config"], **vision)
    spec = spec_from_config(cfg, "gemma3n")
    assert spec.towers_not_counted == ("audio_config", "vision_config") and spec.tower_params == ()
    assert param_report(spec).total == param_report(spec_from_config(cfg["text_config"], "lm")).total


def test_timm_builds_the_same_encoder(tmp_path):
    timm = pytest.importorskip("timm")
    with torch.device("meta"):
        model = timm.create_model("mobilenetv5_300m_enc", pretrained=False, num_classes=0)
    parts = {"vision.embeddings": model.conv_stem, "vision.layers": model.blocks, "vision.head": model.msfa}
    assert {k: _count(m) for k, m in parts.items()} == TIMM_300M


def _flops_by_child(model, *inputs) -> dict[str, int]:
    """FlopCounterMode's totals per top-level child module; a container the forward iterates (a ModuleList, a
    Sequential looped over) is never called itself, so its total is that of its called items."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    top = type(model).__name__
    by_key = {tuple(k.split(".")[1:]): sum(v.values()) for k, v in counter.get_flop_counts().items()
              if k.split(".")[0] == top}  # fmt: skip
    out = {k[0]: n for k, n in by_key.items() if len(k) == 1}
    for k, n in by_key.items():
        if len(k) == 2 and k[0] not in out:
            out[k[0] + "[]"] = out.get(k[0] + "[]", 0) + n
    return {k.removesuffix("[]"): n for k, n in out.items()}


AUDIO_FLOP_VARIANTS = [
    ({}, 1.0),  # the defaults on one second (97 mel frames)
    ({}, 30.0),  # the 30 s clip Gemma 3n's processor cuts audio into
    (dict(sscp_conv_stride_size=[[3, 2], [2, 2]], sscp_conv_kernel_size=[[5, 3], [3, 3]]), 2.0),
    (dict(conf_attention_chunk_size=8, conf_attention_context_left=5, conf_attention_context_right=3,
          conf_num_hidden_layers=2), 1.5),
]  # fmt: skip


@pytest.mark.parametrize("audio,seconds", AUDIO_FLOP_VARIANTS, ids=["1s", "30s", "subsampling", "context"])
def test_audio_flops_equal_flop_counter(audio, seconds, tmp_path):
    """The audio encoder on meta (its masks take no data-dependent branch) under FlopCounterMode; the frame count
    is what Gemma3nAudioFeatureExtractor yields for that many seconds of 16 kHz audio."""
    import numpy as np
    from transformers import Gemma3nAudioFeatureExtractor

    from llmath.ops.towers_gemma3n import encoder_flops, mel_frames

    wave = np.zeros(round(seconds * 16_000), dtype=np.float32)
    frames = Gemma3nAudioFeatureExtractor()(wave, sampling_rate=16_000, return_tensors="np")["input_features"].shape[1]
    assert mel_frames(seconds) == frames
    enc = _modules(**audio)[0]
    with torch.device("meta"):
        mel, mask = torch.zeros(1, frames, 128), torch.zeros(1, frames, dtype=torch.bool)
    hf = _flops_by_child(enc, mel, mask)
    cfg = default_config("gemma3n", str(tmp_path))
    cfg["audio_config"] = dict(cfg["audio_config"], **audio)
    got = encoder_flops(cfg, seconds=seconds)
    assert got is not None
    assert {"audio.embeddings": got["audio.embeddings"], "audio.layers": got["audio.layers"]} == {
        "audio.embeddings": hf["subsample_conv_projection"], "audio.layers": hf["conformer"]}  # fmt: skip


# FlopCounterMode on timm 1.0.31's mobilenetv5_300m_enc (meta, one 768 × 768 image), per child, where timm imported
TIMM_300M_FLOPS = {"vision.embeddings": 509_607_936, "vision.layers": 800_760_692_736, "vision.head": 70_212_648_960}


def test_vision_flops_equal_timms_arithmetic(tmp_path):
    """The stem, the fusion adapter and the attention products written out; the blocks' total is timm's count."""
    from llmath.ops.towers_gemma3n import encoder_flops

    stem = 2 * 384 * 384 * 64 * 3 * 9  # stride-2 3×3 conv, 768 -> 384 per side
    # msfa at 48 × 48 (stage 2's side; stage 3's 24 × 24 output is upsampled): 1920 -> 3840 -> 2048, 1×1 convs
    head = 2 * 48 * 48 * (1920 * 3840 + 3840 * 2048)
    # attention products (scores and values), stage 2: 14 blocks, 12 heads of 64, 48² queries, 24² keys (kv stride
    # 2); stage 3: 19 blocks, 16 heads of 96, 24² queries and keys; FlopCounterMode's bmm total is their sum
    attn = 14 * 2 * 2 * 12 * 48 * 48 * 24 * 24 * 64 + 19 * 2 * 2 * 16 * 24 * 24 * 24 * 24 * 96
    assert attn == 95_806_291_968
    assert (stem, head) == (TIMM_300M_FLOPS["vision.embeddings"], TIMM_300M_FLOPS["vision.head"])
    got = encoder_flops(default_config("gemma3n", str(tmp_path)))
    assert got is not None and {k: got[k] for k in TIMM_300M_FLOPS} == TIMM_300M_FLOPS


@pytest.mark.parametrize("image", [768, 512, 700, 333])
def test_timm_flops_equal(image, tmp_path):
    """Other sides too: strides round up ("same" padding), and the fusion adapter runs at stage 2's side."""
    from llmath.ops.towers_gemma3n import encoder_flops

    timm = pytest.importorskip("timm")
    with torch.device("meta"):
        model = timm.create_model("mobilenetv5_300m_enc", pretrained=False, num_classes=0).eval()
        pixels = torch.zeros(1, 3, image, image)
    hf = _flops_by_child(model, pixels)
    got = encoder_flops(default_config("gemma3n", str(tmp_path)), image=image)
    assert got is not None
    assert {k: got[k] for k in TIMM_300M_FLOPS} == {
        "vision.embeddings": hf["conv_stem"], "vision.layers": hf["blocks"], "vision.head": hf["msfa"]}  # fmt: skip
    if image == 768:
        assert hf == {"conv_stem": TIMM_300M_FLOPS["vision.embeddings"], "blocks": TIMM_300M_FLOPS["vision.layers"],
                      "msfa": TIMM_300M_FLOPS["vision.head"]}  # fmt: skip


@pytest.mark.parametrize("kw,msg", [(dict(seconds=0.01), "no mel frame"), (dict(seconds=float("nan")), "seconds="),
                                    (dict(image=8), "image=8"), (dict(image=768.5), "image=")])  # fmt: skip
def test_encoder_flops_refuse_bad_input(kw, msg, tmp_path):
    from llmath.errors import WorkloadError
    from llmath.ops.towers_gemma3n import encoder_flops

    with pytest.raises(WorkloadError, match=msg):
        encoder_flops(default_config("gemma3n", str(tmp_path)), **kw)
