"""Dense decoders with an unusual feature (model/families_dense.py, ops/variants.py): the bundled flagship
configs against their published parameter counts, and the operators' formulas against arithmetic written
out here. (transformers on the meta device proves the eager FLOPs, parameters and cache bytes of each
model_type in test_oracle_causal_lm.py.)"""

from dataclasses import replace

import pytest
from helpers import decoder_alone_costs, registry_config

from llmath import Workload
from llmath.errors import ConfigError
from llmath.model import registry
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

# name, published total, relative tolerance (the figure's rounding), source
PUBLISHED = [
    # MPT-7B model card (huggingface.co/mosaicml/mpt-7b): n_parameters 6.7B; 32·(4·4096² + 2·4096·16384
    # + 2·4096) + 50432·4096 + 4096 = 6,649,286,656
    ("mpt-7b-instruct", 6.7e9, 0.01),
    # BioGPT paper (arXiv:2210.10341): 347M
    ("biogpt", 347e6, 0.002),
    # BioGPT paper: BioGPT-Large 1.5B (1,571,188,800: the paper rounds it to 1.5B, not 1.6B)
    ("biogpt-large", 1.5e9, 0.05),
]


@pytest.mark.parametrize("name,published,tol", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_flagship_totals_match_published(name, published, tol):
    total = param_report(registry.spec(name)).total
    assert abs(total - published) / published < tol


def test_gpt_neox_japanese_untied_is_the_published_2_7b():
    """The hub file has no tie_word_embeddings, so transformers 5.23 ties embed_out to embed_in; the released
    checkpoint stores embed_out separately, and untied the count is the 2.7B of its name:
    32·(4·2560² + 2·2560·10240 + 4·2560) + 2·32000·2560 + 2560 (last-layer bias) + 2·2560 = 2,680,757,760."""
    tied = param_report(registry.spec("gpt-neox-japanese-2.7b")).total
    cfg = dict(registry_config("gpt-neox-japanese-2.7b"), tie_word_embeddings=False)
    untied = param_report(spec_from_config(cfg)).total
    assert untied == 2_680_757_760 and untied - tied == 32000 * 2560
    assert abs(untied - 2.7e9) / 2.7e9 < 0.01


def _op(spec, stage, attention, name, cls, sc):
    return sum(c.values.get(cls, 0) for c in evaluate(build_ops(spec, stage, attention), sc, spec) if c.op.name == name)


def _small(model_type, **extra):
    base = dict(
        model_type=model_type, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        intermediate_size=128, vocab_size=100, max_position_embeddings=64,
    )  # fmt: skip
    return spec_from_config(dict(base, **extra))


def test_alibi_eager_adds_a_bias_to_every_score_flash_computes_it_per_pair():
    """MPT, 2 layers, N = 4 heads, B = 1, prefill of T = 8. Eager adds the bias to the whole T × S
    rectangle: 2 layers · 4 heads · 8 · 8 = 512 FLOPs. Flash computes m·(j − i) and adds it for the causal
    pairs only: 2 FLOPs · 2 layers · 4 heads · (8·9/2 = 36 pairs) = 576."""
    spec = spec_from_config(dict(model_type="mpt", d_model=64, n_heads=4, n_layers=2, vocab_size=100))
    sc = Scenario(1, 8, 0)
    assert _op(spec, "prefill", "eager", "attn.alibi", "vflops", sc) == 512
    assert _op(spec, "prefill", "flash", "attn.alibi", "vflops", sc) == 576
    llama = _small("llama")
    assert not [op for op in build_ops(llama, "prefill", "eager") if op.name == "attn.alibi"]


def test_differential_attention_eager_computes_the_scores_twice_flash_once():
    """DiffLlama, 2 layers, N = 4 heads of H = 16, B = 1, decode at S = 7 (8 visible keys, one query).
    transformers' eager runs two attention calls over the same Q, K: scores 2 calls · 2·N·H = 256 and context
    2 calls · 2·N·H = 256 FLOPs per score entry, · 8 entries · 2 layers = 4096 each. The serving default
    (flash) fuses one call with the value width doubled: (2·N·H + 2·N·2H) = 384 per pair · 8 · 2 = 6144,
    1.5 × a plain attention's 4·N·H = 256 per pair (4096), where eager is 2 × plain eager."""
    diff = _small("diffllama")
    plain = replace(diff, diff_attention=False)
    sc = Scenario(1, 1, 7)
    assert _op(diff, "decode", "eager", "attn.scores", "flops", sc) == 4096
    assert _op(diff, "decode", "eager", "attn.context", "flops", sc) == 4096
    assert _op(plain, "decode", "eager", "attn.scores", "flops", sc) == 2048
    assert _op(diff, "decode", "flash", "attn.flash", "flops", sc) == 6144
    assert _op(plain, "decode", "flash", "attn.flash", "flops", sc) == 4096


def test_differential_attention_lambda_vectors_and_default_execution():
    """Each layer learns λ_q1, λ_k1, λ_q2, λ_k2 of width H = 16: 4·16·2 layers = 128 parameters; the
    analysis default (build_ops' flash) is the fused serving form."""
    diff = _small("diffllama")
    assert param_report(diff).by_component["attention.lambda"] == 128
    assert any(op.name == "attn.flash" for op in build_ops(diff, "decode"))


def test_gpt_neox_japanese_bias_on_the_last_layer_only():
    """One bias of width D = 64 (the last layer's attention output), whatever the depth."""
    for layers in (2, 5):
        spec = _small("gpt_neox_japanese", num_hidden_layers=layers, intermediate_multiple_size=4)
        rep = param_report(spec)
        assert rep.by_component["attention.o.bias"] == 64
        assert spec.d_ff == 4 * 64


def test_git_text_decoder_equals_transformers(tmp_path):
    """GIT (a wrapper: its towers are proven in test_multimodal.py): the text decoder's eager prefill and
    decode FLOPs and cache bytes equal transformers' GitForCausalLM run on text alone, and the analysis
    says the image encoder is outside the stages."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from causal_lm_types import default_config
    from test_oracle_causal_lm import _flops_and_cache_equal

    from llmath.analysis import analyze

    cfg = default_config("git", str(tmp_path))
    spec = spec_from_config(cfg, "git")
    _flops_and_cache_equal(cfg, spec)
    a = analyze(spec, workload=Workload(batch=1, prompt=8, gen=2))
    assert a.to_dict()["components_not_in_stages"] == ["vision", "projector"]
    assert any("language model (the text decoder) only" in w for w in a.warnings)


def test_trocr_decoder_over_image_positions_equals_transformers(tmp_path):
    """TrOCR is the decoder of an encoder-decoder (causal_lm_types files it there): its prefill and decode
    cross-attend the image encoder's ``src`` output positions, whose width (cross_attention_hidden_size =
    768 here, the decoder is 1024 wide) the cross K/V read. transformers' TrOCRForCausalLM given
    ``encoder_hidden_states`` on meta: matmul FLOPs of a T = 3 prefill (logits at every position, as its
    forward computes them) and of one decode step, and the bytes of its self- and cross-attention caches."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from causal_lm_types import default_config

    from llmath.analysis import kv_cache_bytes
    from llmath.measure import oracle
    from llmath.model.dtypes import Precision

    cfg = dict(default_config("trocr", str(tmp_path)), decoder_layers=2, cross_attention_hidden_size=768)
    spec = spec_from_config(cfg, "trocr")
    model = oracle.build_meta(oracle.hf_config(cfg))
    B, src, T = 2, 11, 3
    enc = torch.zeros(B, src, 768, device="meta")
    ids = torch.zeros(B, T, dtype=torch.long, device="meta")

    hf_prefill, hf_decode, hf_cache = decoder_alone_costs(model, enc, ids)

    def mm(stage, sc):
        return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, "eager"), sc, spec))

    assert mm("prefill", Scenario(B, T, 0, logits="all", src=src)) == hf_prefill
    assert mm("decode", Scenario(B, 1, T, src=src)) == hf_decode
    assert kv_cache_bytes(spec, B, T, Precision(), src=src, layout="transformers") == hf_cache
    assert build_ops(spec, "encoder", "eager") == ()  # the image encoder is another model


def test_trocr_analysis_says_the_encoder_is_another_model(tmp_path):
    """The analysis has no encoder stage, and says why: prompt = the image positions cross-attended."""
    from causal_lm_types import default_config

    from llmath.analysis import analyze

    spec = spec_from_config(default_config("trocr", str(tmp_path)), "trocr")
    d = analyze(spec, workload=Workload(batch=1, prompt=577, gen=4)).to_dict()
    assert "encoder" not in d
    assert any("whose encoder is the image encoder of a VisionEncoderDecoderModel" in w for w in d["warnings"])


def test_doge_eager_reprojects_every_cached_key_serving_only_the_new_one():
    """Doge's dt_proj (K·H -> K) in a decode step after S0 = 20 cached tokens, 2 layers, K = 4 KV heads of
    H = 16, B = 1. transformers (eager) projects the values the cache returns, all 21 positions:
    2 layers · 2·4·16·4 · 21 = 21,504 FLOPs. dt depends only on its own position's values, so llmath's
    serving default (flash) projects the new token only: 2 · 512 · 1 = 1,024."""
    spec, sc = _small("doge"), Scenario(1, 1, 20)
    assert _op(spec, "decode", "eager", "attn.dt_proj", "flops", sc) == 21_504
    assert _op(spec, "decode", "flash", "attn.dt_proj", "flops", sc) == 1_024


def test_doge_parameters_beyond_llama():
    """Per layer: dt_proj 64·4 (K·H·K, no bias), A 4, two residual scales of 64 and per-head q/k norms 2·16
    on top of the Llama-like layer; 2 layers: 2·(256 + 4 + 128 + 32) = 840 more than the same config as Llama."""
    doge = param_report(_small("doge")).total
    llama = param_report(_small("llama", tie_word_embeddings=False)).total
    assert doge - llama == 840


def test_doge_moe_is_refused_not_miscounted():
    with pytest.raises(ConfigError, match="is_moe"):
        _small("doge", is_moe=True)


def test_modernbert_decoder_first_layer_has_no_attention_norm_and_a_head_transform():
    """2 layers of width 64, bias-free LayerNorms: 2·2 − 1 = 3 layer norms (64 each) = 192; the head's
    dense 64·64 = 4096 and its norm 64. Window: local_attention 16 // 2 = 8 on layer 1 (layer 0 global)."""
    spec = _small("modernbert-decoder", local_attention=16)
    by = param_report(spec).by_component
    assert by["norm.layers"] == 192 and by["lm_head.dense"] == 4096 and by["norm.head"] == 64
    assert spec.layer_windows == (None, 8)
