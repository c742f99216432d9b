"""BART's family and Whisper as ``*ForCausalLM``: the decoder alone (BartForCausalLM, PegasusForCausalLM, ...,
WhisperForCausalLM wrap the decoder stack, whose layers keep their cross-attention). transformers saves such a
file with ``is_encoder_decoder: false`` and names the class in ``architectures``; llmath reads it as TrOCR's
decoder: an encoder-decoder whose encoder is another model, cross-attending ``src`` positions. Before, it counted
the whole encoder-decoder (BART's defaults: 406.3M instead of 254.1M). Expected values: transformers'
AutoModelForCausalLM on the meta device, given ``encoder_hidden_states``."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config
from helpers import decoder_alone_costs, hf_groups, llmath_groups

from llmath.analysis import kv_cache_bytes
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402

TYPES = ["bart", "mbart", "plbart", "mvp", "blenderbot", "blenderbot-small", "pegasus", "marian", "whisper"]


def _decoder_alone(mt, tmp_path, **over):
    cfg = dict(default_config(mt, str(tmp_path)), is_encoder_decoder=False, **over)
    for k in ("decoder_layers", "encoder_layers"):
        cfg[k] = 2  # fast on meta; the encoder's count must not matter
    return cfg


def _causal_lm(cfg):
    import transformers

    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(oracle.hf_config(cfg))


@pytest.mark.parametrize("mt", TYPES)
def test_params_are_the_decoders(mt, tmp_path):
    cfg = _decoder_alone(mt, tmp_path)
    spec, model = spec_from_config(cfg, mt), _causal_lm(cfg)
    rep = param_report(spec, "eager")
    assert rep.total == oracle.count_params(model)
    assert llmath_groups(rep) == hf_groups(model)
    assert spec.encoder is not None and spec.encoder.external and build_ops(spec, "encoder", "eager") == ()


SMALL = dict(d_model=64, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
             max_position_embeddings=64, max_target_positions=64)  # fmt: skip


@pytest.mark.parametrize("mt", ["bart", "pegasus", "whisper"])
def test_flops_and_cache_over_an_external_encoders_positions(mt, tmp_path):
    """On the CPU with small widths: BART's and Pegasus' decoders call .item() preparing their masks, which meta
    cannot run.
    WhisperForCausalLM takes the encoder's output as ``encoder_outputs``, the others as ``encoder_hidden_states``."""
    cfg = _decoder_alone(mt, tmp_path, **{k: v for k, v in SMALL.items() if k in default_config(mt, str(tmp_path))})
    spec = spec_from_config(cfg, mt)
    import transformers

    # eager attention: FlopCounterMode counts no products inside the CPU SDPA kernel
    model = transformers.AutoModelForCausalLM.from_config(oracle.hf_config(cfg), attn_implementation="eager").eval()
    B, src, T = 2, 11, 3
    enc = torch.zeros(B, src, spec.d_model)
    ids = torch.zeros(B, T, dtype=torch.long)
    key = "encoder_outputs" if mt == "whisper" else "encoder_hidden_states"
    hf_prefill, hf_decode, hf_cache = decoder_alone_costs(model, enc, ids, key, itemsize=4)

    def mm(stage, sc):
        return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, "eager"), sc, spec))

    assert mm("prefill", Scenario(B, T, 0, logits="all", src=src)) == hf_prefill
    assert mm("decode", Scenario(B, 1, T, src=src)) == hf_decode
    # float32 on the CPU: 4 bytes per element
    assert kv_cache_bytes(spec, B, T, Precision.uniform("fp32"), src=src, layout="transformers") == hf_cache


def test_the_architectures_field_alone_marks_it(tmp_path):
    """A file naming BartForCausalLM reads as the decoder alone even without is_encoder_decoder."""
    cfg = dict(default_config("bart", str(tmp_path)), architectures=["BartForCausalLM"])
    cfg.pop("is_encoder_decoder", None)
    whole = dict(default_config("bart", str(tmp_path)), architectures=["BartForConditionalGeneration"])
    assert param_report(spec_from_config(cfg, "bart")).total < param_report(spec_from_config(whole, "bart")).total
    assert spec_from_config(cfg, "bart").encoder.external
