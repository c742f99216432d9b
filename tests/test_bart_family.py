"""BART's descendants (model/families_encdec.py), each built from its transformers 5.23 config class's defaults
(two layers per stack), written with ``to_json_file`` and read back: parameters by component, the matmul
FLOPs of the encoder pass, a decoder prefill and a decode step (as ``generate`` runs them), and the bytes of
``EncoderDecoderCache``, equal to transformers on the meta device."""

from __future__ import annotations

import pytest
from helpers import hf_groups, llmath_groups, matmul_flops, saved_config

from llmath.analysis import kv_cache_bytes
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario
from llmath.ops.params import param_report

TYPES = ["mbart", "plbart", "mvp", "blenderbot-small", "blenderbot", "pegasus", "marian"]
B, P, T = 2, 11, 3


def _defaults(mt: str, tmp_path, **kw) -> dict:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return saved_config(CONFIG_MAPPING[mt](encoder_layers=2, decoder_layers=2, **kw), tmp_path / f"{mt}.json")


@pytest.mark.parametrize("mt", TYPES)
def test_params_flops_and_cache_equal_transformers(mt, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    cfg = _defaults(mt, tmp_path)
    spec = spec_from_config(cfg, mt)
    model = oracle.build_meta(oracle.hf_config(cfg))
    hf = hf_groups(model)  # named_parameters: a tied head once
    assert llmath_groups(param_report(spec)) == hf
    f = oracle.seq2seq_flops(model, B, P, T)
    assert matmul_flops(spec, "encoder", Scenario(B, P)) == f["encoder"]
    # seq2seq heads compute logits at every decoder position (no logits_to_keep)
    assert matmul_flops(spec, "prefill", Scenario(B, T, 0, logits="all", src=P)) == f["prefill"]
    assert matmul_flops(spec, "decode", Scenario(B, 1, T, src=P)) == f["decode"]
    assert (kv_cache_bytes(spec, B, T, Precision()), kv_cache_bytes(spec, B, 0, Precision(), src=P)) == f["cache_bytes"]


def test_position_tables_by_hand(tmp_path):
    pytest.importorskip("transformers")
    # blenderbot-small: 512 learned rows per stack, no offset; mbart: 1024 + 2 rows (the +2 offset of BART)
    small, mbart = (spec_from_config(_defaults(mt, tmp_path), mt) for mt in ("blenderbot-small", "mbart"))
    assert param_report(small).by_component["embedding.position"] == 2 * 512 * 512
    assert param_report(mbart).by_component["embedding.position"] == 2 * (1024 + 2) * 1024


def test_unmodelled_options_are_refused(tmp_path):
    pytest.importorskip("transformers")
    with pytest.raises(ConfigError, match="use_prompt"):
        spec_from_config(_defaults("mvp", tmp_path, use_prompt=True), "mvp")
    with pytest.raises(ConfigError, match="decoder_vocab_size"):
        spec_from_config(_defaults("marian", tmp_path, decoder_vocab_size=1000), "marian")
