"""Towers of BLIP-2 (and InstructBLIP), Idefics2 and InternVL beyond their default configs (which
tests/test_multimodal.py proves): each option that changes a module's shape, and the defaults llmath fills in
for keys a hub file leaves out, against transformers 5.23 on the meta device."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath.model.hf import spec_from_config
from llmath.model.towers_wrappers import BLIP_VISION, DEFAULTS, IDEFICS2_VISION, PERCEIVER, QFORMER, _pair

pytest.importorskip("torch")
pytest.importorskip("transformers")
from test_multimodal import _build, _hf_towers, _llmath_towers  # noqa: E402

OPTIONS = [
    ("blip-2", {"vision_config": {"qkv_bias": False, "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
                                  "num_attention_heads": 4},
                "qformer_config": {"cross_attention_frequency": 3, "num_hidden_layers": 4,
                                   "use_qformer_text_input": True},
                "num_query_tokens": 8}),
    ("instructblip", {"qformer_config": {"num_hidden_layers": 3, "max_position_embeddings": 64, "vocab_size": 100}}),
    ("idefics2", {"perceiver_config": {"resampler_n_latents": 16, "resampler_depth": 2, "resampler_n_heads": 8,
                                       "resampler_head_dim": 32, "num_key_value_heads": 2},
                  "vision_config": {"num_hidden_layers": 2, "image_size": 96, "patch_size": 16}}),
    ("internvl", {"vision_config": {"num_hidden_layers": 2, "norm_type": "rms_norm", "use_qk_norm": True,
                                    "attention_bias": True, "use_mask_token": True, "use_mean_pooling": False,
                                    "image_size": [224, 336], "patch_size": 14},
                  "downsample_ratio": 0.25}),
    ("internvl", {"vision_config": {"num_hidden_layers": 2, "use_absolute_position_embeddings": False}}),
    ("lfm2_vl", {"vision_config": {"num_hidden_layers": 2, "vision_use_head": False, "num_patches": 64},
                 "projector_use_layernorm": False, "projector_bias": False, "downsample_factor": 3,
                 "projector_hidden_size": 512}),
]  # fmt: skip


def _merge(cfg: dict, extra: dict) -> dict:
    return {k: dict(cfg[k], **v) if isinstance(v, dict) else v for k, v in extra.items()}


@pytest.mark.parametrize("mt,extra", OPTIONS, ids=[f"{m}:{','.join(e)}" for m, e in OPTIONS])
def test_tower_options_equal_transformers(mt, extra, tmp_path):
    cfg = default_config(mt, str(tmp_path))
    cfg.update(_merge(cfg, extra))
    spec = spec_from_config(cfg, mt)
    assert spec.towers_not_counted == () and _llmath_towers(spec) == _hf_towers(_build(cfg))


def _norm(d: dict, keys) -> dict:
    """The defaults at ``keys``, a size pair (InternVL's image and patch sizes) written as a 2-tuple."""
    return {k: _pair(d[k]) if k in ("image_size", "patch_size") else d[k] for k in keys}


def test_defaults_are_the_config_classes():
    """The values llmath fills in for keys a hub file leaves out are the config classes' own defaults."""
    from transformers import Blip2QFormerConfig, Blip2VisionConfig, InternVLVisionConfig, Siglip2VisionConfig
    from transformers.models.idefics2.configuration_idefics2 import Idefics2PerceiverConfig, Idefics2VisionConfig
    from transformers.models.qianfan_ocr.configuration_qianfan_ocr import QianfanOCRVisionConfig

    from llmath.model.towers import VISION_DEFAULTS

    for ours, cls in ((BLIP_VISION, Blip2VisionConfig), (QFORMER, Blip2QFormerConfig),
                      (IDEFICS2_VISION, Idefics2VisionConfig), (PERCEIVER, Idefics2PerceiverConfig),
                      (DEFAULTS["internvl_vision"], InternVLVisionConfig),
                      (DEFAULTS["qianfan_ocr_vision"], QianfanOCRVisionConfig),
                      (VISION_DEFAULTS["siglip2_vision_model"], Siglip2VisionConfig)):  # fmt: skip
        assert _norm(cls().to_dict(), ours) == _norm(ours, ours), cls.__name__


def test_a_hub_file_without_the_tower_keys_reads_the_defaults(tmp_path):
    """A sub-config holding only its model_type: llmath fills the class defaults, as transformers does."""
    cfg = default_config("internvl", str(tmp_path))
    cfg["vision_config"] = {"model_type": "internvl_vision"}
    assert _llmath_towers(spec_from_config(cfg, "internvl")) == _hf_towers(_build(cfg))
    cfg = default_config("blip-2", str(tmp_path))
    cfg["vision_config"], cfg["qformer_config"] = {}, {}
    assert _llmath_towers(spec_from_config(cfg, "blip-2")) == _hf_towers(_build(cfg))


# Dots 3 Note: a small vision tower whose layers override their widths and expert counts, attention biases,
# the legacy spellings a released file may use (pyramid_num_routed, embed_dim, whisper_config ...)
_DOTS_V = {"hidden_size": 64, "adapter_in_dim": 64, "num_attention_heads": 4, "intermediate_size": 96,
           "moe_intermediate_size": 32, "num_local_experts": 4, "adapter_out_dim": 5120}  # fmt: skip
_DOTS_A = {"hidden_size": 64, "adapter_input_size": 64, "num_attention_heads": 4, "intermediate_size": 96,
           "num_hidden_layers": 2, "downsample_hidden_size": 8, "feature_size": 20}  # fmt: skip
DOTS3 = [
    {"vision_config": dict(_DOTS_V, num_hidden_layers=3, mlp_layer_types=["dense", "sparse", "sparse"],
                           per_layer_config={"0": {"intermediate_size": 48},
                                             "2": {"num_local_experts": 6, "moe_intermediate_size": 16}},
                           attention_bias=True),
     "audio_config": dict(_DOTS_A, attention_bias=False)},
    {"vision_config": dict(_DOTS_V, num_hidden_layers=2, mlp_layer_types=["dense", "dense"], mlp_bias=True),
     "audio_config": _DOTS_A},
    {"vision_config": {"embed_dim": 64, "adapter_in_dim": 64, "num_heads": 4, "use_bias": True,
                       "num_hidden_layers": 3, "pyramid_num_routed": [-1, 4, 8], "moe_intermediate_size": 32},
     "audio_config": {"whisper_config": {"d_model": 64, "encoder_layers": 1, "encoder_attention_heads": 4,
                                         "encoder_ffn_dim": 32, "num_mel_bins": 16},
                      "whisper_adapter_in_dim": 64, "downsample_hidden_size": 8}},
]  # fmt: skip


def _replace_towers(mt: str, towers: dict, tmp_path) -> dict:
    cfg = default_config(mt, str(tmp_path))
    cfg.update({k: dict(v, model_type=cfg[k]["model_type"]) for k, v in towers.items()})
    return cfg


@pytest.mark.parametrize("towers", DOTS3, ids=["per-layer-overrides", "mlp-bias", "legacy-keys"])
def test_dots3_note_towers_equal_transformers(towers, tmp_path):
    cfg = _replace_towers("dots3_note", towers, tmp_path)
    spec = spec_from_config(cfg, "dots3_note")
    assert spec.towers_not_counted == () and _llmath_towers(spec) == _hf_towers(_build(cfg))


def test_dots3_note_unmodelled_layer_override_names_both_towers(tmp_path):
    """A per-layer override of a key the count does not follow (here the layer's width) is not guessed."""
    vision = dict(_DOTS_V, num_hidden_layers=2, mlp_layer_types=["dense", "dense"],
                  per_layer_config={"1": {"num_attention_heads": 2}})  # fmt: skip
    cfg = _replace_towers("dots3_note", {"vision_config": vision}, tmp_path)
    spec = spec_from_config(cfg, "dots3_note")
    assert spec.towers_not_counted == ("audio_config", "vision_config") and spec.tower_params == ()


EMU3 = [{}, {"channel_multiplier": [1, 2], "attn_resolutions": [0, 1], "base_channels": 64, "hidden_size": 64,
             "double_latent": True, "temporal_downsample_factor": 2, "num_res_blocks": 1, "codebook_size": 64,
             "embed_dim": 8, "latent_channels": 6}]  # fmt: skip


@pytest.mark.parametrize("vq", EMU3, ids=["default", "small-double-latent"])
def test_emu3_vq_vae_equals_transformers(vq, tmp_path):
    """Emu3's wrapper with its VQ-VAE (the default one, and one with attention at every resolution, a width
    change inside a resolution, a doubled latent); an empty vocabulary map lets transformers build the model
    (only image generation reads it)."""
    cfg = default_config("emu3", str(tmp_path))
    cfg["vq_config"] = dict(cfg["vq_config"], **vq)
    cfg["vocabulary_map"] = {}
    spec = spec_from_config(cfg, "emu3")
    assert spec.towers_not_counted == () and _llmath_towers(spec) == _hf_towers(_build(cfg))


def test_emu3_vq_defaults_are_the_config_class():
    from transformers.models.emu3.configuration_emu3 import Emu3VQVAEConfig

    from llmath.model.towers_emu3 import DEFAULTS as VQ

    theirs = Emu3VQVAEConfig().to_dict()
    assert {k: theirs[k] for k in VQ["emu3_vqgan"]} == VQ["emu3_vqgan"]
