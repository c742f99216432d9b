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
    from transformers import Blip2QFormerConfig, Blip2VisionConfig, InternVLVisionConfig
    from transformers.models.idefics2.configuration_idefics2 import Idefics2PerceiverConfig, Idefics2VisionConfig

    for ours, cls in ((BLIP_VISION, Blip2VisionConfig), (QFORMER, Blip2QFormerConfig),
                      (IDEFICS2_VISION, Idefics2VisionConfig), (PERCEIVER, Idefics2PerceiverConfig),
                      (DEFAULTS["internvl_vision"], InternVLVisionConfig)):  # fmt: skip
        assert _norm(cls().to_dict(), ours) == _norm(ours, ours), cls.__name__


def test_a_hub_file_without_the_tower_keys_reads_the_defaults(tmp_path):
    """A sub-config holding only its model_type: llmath fills the class defaults, as transformers does."""
    cfg = default_config("internvl", str(tmp_path))
    cfg["vision_config"] = {"model_type": "internvl_vision"}
    assert _llmath_towers(spec_from_config(cfg, "internvl")) == _hf_towers(_build(cfg))
    cfg = default_config("blip-2", str(tmp_path))
    cfg["vision_config"], cfg["qformer_config"] = {}, {}
    assert _llmath_towers(spec_from_config(cfg, "blip-2")) == _hf_towers(_build(cfg))
