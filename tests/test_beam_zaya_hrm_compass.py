"""Beam, ZAYA, HRM-Text and Cohere Compass beyond tests/test_oracle_causal_lm.py (which proves their parameters,
eager FLOPs and cache against transformers): what their readers refuse, the recurrence carried as data, and
the Compass wrapper's language model run as its stages count."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath import Workload
from llmath.errors import ConfigError, LayoutError
from llmath.model.hf import spec_from_config
from llmath.ops.params import param_report


def test_beam_matches_its_checkpoint_name(tmp_path):
    """BeamConfig's defaults are reflection/Beam-1.0-501B-A23B's (its auto_docstring checkpoint): 501B total,
    23B active per token, as the name says (rounded to the billion)."""
    rep = param_report(spec_from_config(default_config("beam", str(tmp_path)), "beam"))
    assert round(rep.total / 1e9) == 501 and round(rep.active_per_token / 1e9) == 23


def test_beam_without_windows_or_with_full_layer_rope_is_refused(tmp_path):
    cfg = default_config("beam", str(tmp_path))
    with pytest.raises(ConfigError, match="sliding_window=None"):
        spec_from_config(dict(cfg, sliding_window=None), "beam")
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 1e4}, "sliding_attention": None}
    with pytest.raises(ConfigError, match="open an issue"):
        spec_from_config(dict(cfg, rope_parameters=rope), "beam")


def test_zaya_reads_its_layer_types_and_refuses_others(tmp_path):
    cfg = default_config("zaya", str(tmp_path))
    spec = spec_from_config(dict(cfg, sliding_window=4, layer_types=["hybrid", "hybrid_sliding"] * 20), "zaya")
    assert spec.layer_windows[:2] == (None, 4) and spec.cca_kernels == (2, 2) and spec.rotary_dim == 64  # 128 / 2
    with pytest.raises(ConfigError, match="layer_types names \\['mamba'\\]"):
        spec_from_config(dict(cfg, layer_types=["mamba"] * 40), "zaya")


def test_hrm_recurrence_is_data_and_the_layers_are_runs(tmp_path):
    """HRM-Text's defaults: 16 layers per stack, H_cycles 2, L_cycles 3, so 16·2·(3+1) = 128 layer runs per
    forward (its config's inflated num_hidden_layers) over 2·16 = 32 distinct layers. A legacy file giving
    the per-stack count as num_hidden_layers reads the same."""
    cfg = default_config("hrm_text", str(tmp_path))
    spec = spec_from_config(cfg, "hrm_text")
    assert spec.recurrence == (2, 3) and spec.n_layers == 128
    legacy = {k: v for k, v in cfg.items() if k != "num_layers_per_stack"}
    legacy["num_hidden_layers"] = 16
    assert spec_from_config(legacy, "hrm_text") == spec
    assert param_report(spec).layer_counts[next(k for k in param_report(spec).layer_counts if "weights" in k)] == 32
    with pytest.raises(ConfigError, match="H_cycles=0"):
        spec_from_config(dict(cfg, H_cycles=0), "hrm_text")


def test_hrm_and_zaya_refuse_a_parallel_layout(tmp_path):
    from llmath.analysis import analyze
    from llmath.deploy.layout import ParallelConfig

    for mt, match, par in (
        ("hrm_text", "weight-shared stacks", ParallelConfig(pp=2)),
        ("zaya", "no sharding rule", ParallelConfig(tp=2)),
    ):
        spec = spec_from_config(default_config(mt, str(tmp_path)), mt)
        with pytest.raises(LayoutError, match=match):
            analyze(spec, workload=Workload(batch=1, prompt=8, gen=2), parallel=par)


def test_compass_wrapper_language_model_runs_as_llmath_counts(tmp_path):
    """Text-only prefill and decode of CohereCompassForConditionalGeneration (North-Micro-Vision's tower, its
    language model cut to the first four layers: three sliding, one full without positions): the matmul FLOPs
    FlopCounterMode counts and the cache bytes equal llmath's stages of the text_config."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from test_multimodal import _build

    from llmath.analysis import kv_cache_bytes
    from llmath.measure import oracle
    from llmath.model.dtypes import Precision
    from llmath.ops import Scenario, build_ops, evaluate

    cfg = default_config("cohere_compass", str(tmp_path))
    text = dict(cfg["text_config"], num_hidden_layers=4, sliding_window=4)
    cfg = dict(cfg, text_config=dict(text, layer_types=text["layer_types"][:4]))
    cfg["vision_config"] = dict(cfg["vision_config"], depth=1, deepstack_visual_indexes=[])
    spec = spec_from_config(cfg, "cohere_compass")
    model = _build(cfg)

    def flops(stage, S0, T):
        return sum(
            c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, "eager"), Scenario(2, T, S0), spec)
        )

    from transformers import DynamicCache

    past = DynamicCache(config=model.config.get_text_config())  # generate() passes one in (see oracle.py)
    hf_prefill, _ = oracle.forward_flops(model, 2, 9, past=past, seen=0)
    assert flops("prefill", 0, 9) == hf_prefill
    assert kv_cache_bytes(spec, 2, 9, Precision(), layout="transformers") == oracle.cache_bytes(past)
    hf_decode, _ = oracle.forward_flops(model, 2, 1, past=past, seen=9)
    assert flops("decode", 9, 1) == hf_decode


def test_compass_full_layers_rotate_only_when_rope_parameters_say_so(tmp_path):
    """North-Micro's rope_parameters map full_attention to null: those layers have no rotary operator (as
    CohereCompassTextModel passes them no position embeddings); a rotary entry for them brings it back."""
    from llmath.ops import build_ops

    cfg = default_config("cohere_compass_text", str(tmp_path))

    def rotary_layers(c):
        spec = spec_from_config(c, "cohere_compass_text")
        return sum(op.count for op in build_ops(spec, "prefill", "eager") if op.name.endswith("rotary"))

    assert rotary_layers(cfg) == 21  # the 28 layers less the 7 full ones (3, 7, ..., 27)
    rope = dict(cfg["rope_parameters"], full_attention={"rope_type": "default", "rope_theta": 1e4})
    assert rotary_layers(dict(cfg, rope_parameters=rope)) == 28
    assert rotary_layers(dict(cfg, layer_types=["full_attention"] * 28)) == 0
    with pytest.raises(ConfigError, match="sliding_window is null"):
        spec_from_config(dict(cfg, sliding_window=None), "cohere_compass_text")
