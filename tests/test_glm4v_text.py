"""GLM-4.1V's language model (``glm4v_text``, the ``text_config`` of a ``glm4v`` wrapper) is a GLM-4 family row
(model/families.py): its parameters equal what transformers builds on the meta device."""

from __future__ import annotations

import pytest

from llmath.model.hf import spec_from_config
from llmath.ops.params import param_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
import torch  # noqa: E402
from transformers import Glm4vConfig  # noqa: E402
from transformers.models.glm4v.modeling_glm4v import Glm4vForConditionalGeneration  # noqa: E402


def _language_model_params(cfg: Glm4vConfig) -> int:
    """The wrapper's language model and LM head, as transformers builds them (the vision tower left out, as
    llmath lists it uncounted)."""
    with torch.device("meta"):
        model = Glm4vForConditionalGeneration(cfg)
    parts = (model.model.language_model, model.lm_head)
    return sum(p.numel() for part in parts for p in part.parameters())


def test_glm4v_defaults_equal_transformers():
    cfg = Glm4vConfig()  # the config class's defaults: GLM-4.1V-9B's language model (40 layers of 4096)
    spec = spec_from_config(cfg.to_dict())
    assert (spec.model_type, spec.wrapper, spec.towers_not_counted) == ("glm4v_text", "glm4v", ("vision_config",))
    assert param_report(spec).total == _language_model_params(cfg)


def test_qkv_bias_whatever_attention_bias_says():
    # Glm4vTextAttention builds q/k/v with bias=True and o_proj without, ignoring attention_bias (GLM-4's own
    # row reads it): a config that sets it false still has the 3 biases per layer
    text = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=1000, attention_bias=False)  # fmt: skip
    cfg = Glm4vConfig(text_config=text)
    spec = spec_from_config(cfg.to_dict())
    assert (spec.q_bias, spec.k_bias, spec.v_bias, spec.o_bias) == (True, True, True, False)
    assert param_report(spec).total == _language_model_params(cfg)
