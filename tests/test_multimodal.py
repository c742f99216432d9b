"""Multimodal wrappers: every tower counted exactly (vision encoder, projector) as transformers 5.23 builds
it on the meta device, while the stages analyse the language model and say so."""

from __future__ import annotations

import re

import pytest
from causal_lm_types import default_config

from llmath.analysis import analyze
from llmath.model.hf import spec_from_config
from llmath.model.towers import PROJECTORS, WHOLE
from llmath.model.towers_vl import PATCH_ONLY
from llmath.ops.params import param_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath import Workload
from llmath.measure import oracle  # noqa: E402

VISION = r"(vision_tower|vision_model|vision_embed_tokens|image_tower|video_tower|vision_encoder|visual)\."
AUDIO = r"audio_tower\."
# Qwen-VL's patch mergers live inside the vision module (model.visual.merger): they are the projector
PROJECTOR = (
    r"(multi_modal_projector|connector|vision_projection|visual_projection|visual\.merger|visual\.deepstack_merger_list)\."
    r"|image_newline$|img_temporal_embedding\.|language_projection\.|aligner\.|^model\.projector\.|vision_model\.merger\."
    r"|embed_vision\.|mm_projector\."
)
QFORMER = r"^(model\.)?(qformer\.|query_tokens$)"  # BLIP-2's querying transformer
VQVAE = r"vqmodel\."  # Emu3's VQ-VAE image tokenizer


def _build(cfg: dict):
    """The wrapper's full model (ForConditionalGeneration) on meta."""
    import torch
    import transformers

    config = oracle.hf_config(cfg)
    with torch.device("meta"):
        for auto in (transformers.AutoModelForImageTextToText, transformers.AutoModelForMultimodalLM):
            try:
                return auto.from_config(config, experts_implementation="batched_mm")  # eager MoE on meta
            except TypeError:
                return auto.from_config(config)
            except ValueError:
                pass
        return transformers.AutoModelForCausalLM.from_config(config)


def _hf_towers(model) -> dict[str, int]:
    out = {"vision": 0, "audio": 0, "qformer": 0, "vqvae": 0, "projector": 0, "language": 0}
    for n, p in model.named_parameters():
        part = "projector" if re.search(PROJECTOR, n) else "vision" if re.search(VISION, n) else "language"
        part = "audio" if re.search(AUDIO, n) else "qformer" if re.search(QFORMER, n) else part
        part = "vqvae" if re.search(VQVAE, n) else part
        out[part] += p.numel()
    return {k: v for k, v in out.items() if v or k in ("projector", "language")}


def _llmath_towers(spec) -> dict[str, int]:
    rep = param_report(spec)
    return {"projector": 0, **rep.towers, "language": rep.total - sum(rep.towers.values())}


# Phi-4-multimodal's towers share one module (embed_tokens_extend): tests/test_cpmant_phi4mm.py splits them;
# Emu3's model needs a vocabulary map to be built: tests/test_towers.py gives it one; Gemma 3n's vision tower is
# timm's, which is not installed: tests/test_gemma3n_towers.py proves it
NOT_HERE = {"phi4_multimodal", "emu3", "gemma3n"}


@pytest.mark.parametrize("mt", sorted((set(PROJECTORS) | set(PATCH_ONLY) | set(WHOLE)) - NOT_HERE))
def test_wrapper_towers_equal_transformers(mt, tmp_path):
    cfg = default_config(mt, str(tmp_path))
    spec = spec_from_config(cfg, mt)
    model = _build(cfg)
    assert _llmath_towers(spec) == _hf_towers(model)
    assert param_report(spec).total == oracle.count_params(model)
    assert spec.towers_not_counted == ()


KIMI_K25_VISION = {
    "_attn_implementation": "flash_attention_2",
    "init_pos_emb_height": 64,
    "init_pos_emb_time": 4,
    "init_pos_emb_width": 64,
    "merge_kernel_size": [2, 2],
    "merge_type": "sd2_tpool",
    "mm_hidden_size": 1152,
    "mm_projector_type": "patchmerger",
    "patch_size": 14,
    "pos_emb_type": "divided_fixed",
    "projector_hidden_act": "gelu",
    "projector_ln_eps": 1e-05,
    "text_hidden_size": 7168,
    "video_attn_type": "spatial_temporal",
    "vt_hidden_size": 1152,
    "vt_intermediate_size": 4304,
    "vt_num_attention_heads": 16,
    "vt_num_hidden_layers": 27,
}


# Hub-style files: SigLIP without its pooling head (google/gemma-3-4b-it's vision_config says
# "vision_use_head": false), a vision_config that leaves the config class's defaults out, the features of
# several CLIP layers concatenated (vision_feature_layer as a list), a projector without biases.
HUB_STYLE = [
    ("gemma3", {"vision_config": {"model_type": "siglip_vision_model", "vision_use_head": False,
                                  "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 4,
                                  "num_attention_heads": 16, "image_size": 896, "patch_size": 14}}),
    ("llava", {"vision_config": {"model_type": "clip_vision_model"}}),
    ("llava", {"vision_feature_layer": [-2, -5], "multimodal_projector_bias": False}),
    ("paligemma", {"projection_dim": 1024}),
    ("mistral3", {"multimodal_projector_bias": True, "spatial_merge_size": 3}),
    ("idefics3", {"scale_factor": 3}),
    ("git", {"num_image_with_embedding": 6}),  # GIT-VATEX-style video: one learned vector per frame
    # Gemma 4's vision tower: google/gemma-4-26B-A4B's widths (hub config cached by aiconfigurator), fewer layers,
    # grouped K/V heads and clipped linears (clamp bounds: buffers, not parameters)
    *[(mt, {"vision_config": {"model_type": "gemma4_vision", "hidden_size": 1152, "intermediate_size": 4304,
                              "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": kv,
                              "head_dim": 72, "use_clipped_linears": clip, "standardize": True}})
      for mt in ("gemma4",) for kv, clip in ((16, False), (4, True))],
    # moonshotai/Kimi-K2.5's vision_config as the hub file has it (cached by aiconfigurator): hub spellings
    # (vt_hidden_size, init_pos_emb_height, ...) and no model_type
    ("kimi_k25", {"vision_config": KIMI_K25_VISION}),
    ("minimax_m3_vl", {"projector_hidden_size": 1024, "vision_config": {"model_type": "minimax_m3_vl_vision",
                                                                         "num_hidden_layers": 2}}),
]  # fmt: skip


@pytest.mark.parametrize("mt,extra", HUB_STYLE, ids=[f"{m}:{','.join(e)}" for m, e in HUB_STYLE])
def test_wrapper_options_equal_transformers(mt, extra, tmp_path):
    cfg = dict(default_config(mt, str(tmp_path)), **extra)
    assert _llmath_towers(spec_from_config(cfg, mt)) == _hf_towers(_build(cfg))


def test_stages_are_the_language_model_and_say_so(tmp_path):
    cfg = default_config("paligemma", str(tmp_path))
    spec = spec_from_config(cfg, "paligemma")
    lm = spec_from_config(cfg["text_config"], "paligemma")
    a, b = (
        analyze(spec, workload=Workload(batch=1, prompt=8, gen=2)),
        analyze(lm, workload=Workload(batch=1, prompt=8, gen=2)),
    )
    assert a.prefill.flops == b.prefill.flops and a.decode.flops == b.decode.flops
    d = a.to_dict()
    assert d["components_not_in_stages"] == ["vision", "projector"]
    assert d["params"]["towers"] == {k: v for k, v in _hf_towers(_build(cfg)).items() if k != "language"}
    # the weights in memory include the towers; active per token is the language model's
    assert a.memory.weights_bytes == b.memory.weights_bytes * a.params.total / b.params.total
    assert a.params.active_per_token == b.params.active_per_token
    assert any("language model (text_config) only" in w for w in a.warnings)


def test_an_unknown_tower_is_named_not_guessed(tmp_path):
    cfg = dict(default_config("llava", str(tmp_path)))
    cfg["vision_config"] = {"model_type": "some_new_vision", "hidden_size": 8}
    spec = spec_from_config(cfg, "x")
    assert spec.towers_not_counted == ("vision_config",) and param_report(spec).towers == {}


def test_models_are_grouped_by_family():
    """`llmath models` lists the registry by family: versions of one family together, families sorted."""
    from llmath.model import registry

    groups = registry.by_family()
    assert list(groups) == sorted(groups)
    assert sum(len(v) for v in groups.values()) == len(registry.names())
    assert {"gemma-2b", "gemma-2-9b", "gemma-3-1b-pt"} <= set(groups["gemma"])
    assert {"mixtral-8x7b", "mistral-7b-v0.1"} <= set(groups["mistral"])
    assert {"deepseek-v2-lite", "deepseek-v3"} <= set(groups["deepseek"])


def _lm_flops(spec, stage, S0, T, B=2):
    from llmath.ops import Scenario, build_ops, evaluate

    ops = build_ops(spec, stage, "eager")
    return sum(c.values.get("flops", 0) for c in evaluate(ops, Scenario(B, T, S0), spec))


@pytest.mark.parametrize("mt", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"])
def test_qwen_vl_language_model_runs_as_llmath_counts(mt, tmp_path):
    """Text-only prefill and decode of the wrapper (its language model, multimodal rotary positions): the
    matmul FLOPs FlopCounterMode counts and the cache bytes equal llmath's stages of the text_config."""
    from llmath.analysis import kv_cache_bytes
    from llmath.model.dtypes import Precision

    cfg = default_config(mt, str(tmp_path))
    text = {k: v for k, v in cfg["text_config"].items() if k != "layer_types"}
    cfg["text_config"] = dict(text, num_hidden_layers=2)
    cfg["vision_config"] = dict(cfg["vision_config"], depth=1, deepstack_visual_indexes=[], fullatt_block_indexes=[0])
    spec = spec_from_config(cfg, mt)
    model = _build(cfg)
    hf_prefill, out = oracle.forward_flops(model, 2, 9)
    assert _lm_flops(spec, "prefill", 0, 9) == hf_prefill
    assert kv_cache_bytes(spec, 2, 9, Precision(), layout="transformers") == oracle.cache_bytes(out.past_key_values)
    hf_decode, _ = oracle.forward_flops(model, 2, 1, past=out.past_key_values, seen=9)
    assert _lm_flops(spec, "decode", 9, 1) == hf_decode


def test_bundled_qwen_vl_reports_its_towers_in_json(capsys):
    """The bundled Qwen2.5-VL-7B (a flat hub file: the language model's keys at the top level) says in JSON
    which towers it carries and that the stages leave them out; its language model is Qwen2.5-7B's
    (the Qwen2.5-VL report, arXiv:2502.13923, builds the 7B on Qwen2.5-7B), whose count test_oracle_params
    proves against transformers."""
    import json

    from helpers import run_cli

    from llmath.model import registry

    code, out, _ = run_cli(capsys, "analyze", "qwen2.5-vl-7b-instruct", "--json")
    d = json.loads(out)
    assert code == 0 and d["components_not_in_stages"] == ["vision", "projector"]
    lm = param_report(registry.spec("qwen2.5-7b")).total
    assert d["params"]["total"] - sum(d["params"]["towers"].values()) == lm
    assert registry.family("qwen2.5-vl-7b-instruct") == "qwen"
