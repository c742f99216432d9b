"""MusicGen (model/families_musicgen.py), proven against transformers 5.23 on the meta device.

- the decoder alone (MusicgenForCausalLM, ``musicgen_decoder``) from MusicgenDecoderConfig's defaults, run with
  ``encoder_hidden_states`` of ``src`` conditioning positions (as TrOCR's decoder is proven);
- the composite (MusicgenForConditionalGeneration, ``musicgen``) from MusicgenConfig's defaults (T5, EnCodec
  and decoder sub-configs at their own defaults), run as ``generate`` runs it (``oracle.seq2seq_flops``:
  decoder_input_ids of B·C rows, one per codebook).
Parameters by component, the matmul FLOPs of the encoder pass, a decoder prefill (logits at every position,
as MusicGen's heads compute them) and a decode step, and the bytes of the EncoderDecoderCache.
"""

from __future__ import annotations

import json

import pytest
from helpers import hf_groups, llmath_groups, matmul_flops, run_cli, saved_config

from llmath import Workload
from llmath.analysis import analyze, kv_cache_bytes
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario
from llmath.ops.params import param_report

B, P, T = 2, 11, 3  # batch, conditioning (text) positions, decoder prefill steps


def _defaults(cls_name: str, tmp_path, **kw) -> dict:
    transformers = pytest.importorskip("transformers")
    return saved_config(getattr(transformers, cls_name)(**kw), tmp_path / f"{cls_name}.json")


@pytest.fixture(scope="module")
def composite(tmp_path_factory):
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg = _defaults("MusicgenConfig", tmp_path_factory.mktemp("musicgen"))
    model = oracle.build_meta(oracle.hf_config(cfg))
    return cfg, spec_from_config(cfg, "musicgen-defaults"), model, oracle.seq2seq_flops(model, B, P, T)


def test_decoder_alone_equals_transformers(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from llmath.measure import oracle

    cfg = _defaults("MusicgenDecoderConfig", tmp_path)
    spec = spec_from_config(cfg, "musicgen-decoder")
    model = oracle.build_meta(oracle.hf_config(cfg))
    assert type(model).__name__ == "MusicgenForCausalLM"
    assert llmath_groups(param_report(spec, "eager")) == hf_groups(model)
    C, D = cfg["num_codebooks"], cfg["hidden_size"]
    enc = torch.zeros(B, P, D, device="meta")  # the conditioning, already at the decoder's width
    ids = torch.zeros(B * C, T, dtype=torch.long, device="meta")  # (batch · codebooks, steps)

    def counted(**kw):
        with torch.no_grad(), FlopCounterMode(display=False) as c:
            out = model(encoder_hidden_states=enc, use_cache=True, **kw)
        return c.get_total_flops(), out

    hf_prefill, out = counted(input_ids=ids)
    past = out.past_key_values
    hf_cache = oracle.cache_bytes(past.self_attention_cache) + oracle.cache_bytes(past.cross_attention_cache)
    hf_decode, _ = counted(input_ids=ids[:, :1], past_key_values=past)  # (appends a position to the cache)
    assert matmul_flops(spec, "prefill", Scenario(B, T, 0, logits="all", src=P)) == hf_prefill
    assert matmul_flops(spec, "decode", Scenario(B, 1, T, src=P)) == hf_decode
    assert kv_cache_bytes(spec, B, T, Precision(), src=P) == hf_cache


def test_codebook_tables_and_heads_by_hand(tmp_path):
    spec = spec_from_config(_defaults("MusicgenDecoderConfig", tmp_path), "musicgen-decoder")
    rep = param_report(spec).by_component
    # 4 codebook tables of 2048 + 1 rows (the pad/start code) × 1024; 4 heads of 1024 × 2048, no bias;
    # sinusoidal positions are a buffer, not parameters
    assert rep["embedding.token"] == 4 * 2049 * 1024 == 8_392_704
    assert rep["lm_head.weight"] == 4 * 1024 * 2048 == 8_388_608
    assert "embedding.position" not in rep
    # a step reads one row of each of the 4 tables: the other 4 · 2048 rows are not active per token
    report = param_report(spec)
    assert report.total - report.active_per_token == 4 * 2048 * 1024


def test_composite_params_by_component(composite):
    cfg, spec, model, _ = composite
    rep = param_report(spec, "eager")
    assert llmath_groups(rep) == hf_groups(model)  # EnCodec under "audio" (model/towers_encodec.py)
    assert rep.total == sum(p.numel() for p in model.parameters())
    assert spec.towers_not_counted == ()
    # enc_to_dec_proj: T5's 512 to the decoder's 1024, with bias
    assert rep.by_component["enc_to_dec_proj.weight"] + rep.by_component["enc_to_dec_proj.bias"] == 512 * 1024 + 1024


def test_composite_stages_equal_transformers(composite):
    _, spec, _, hf = composite
    assert matmul_flops(spec, "encoder", Scenario(B, P)) == hf["encoder"]
    assert matmul_flops(spec, "prefill", Scenario(B, T, 0, logits="all", src=P)) == hf["prefill"]
    assert matmul_flops(spec, "decode", Scenario(B, 1, T, src=P)) == hf["decode"]
    self_b, cross_b = hf["cache_bytes"]
    assert kv_cache_bytes(spec, B, T, Precision()) == self_b
    assert kv_cache_bytes(spec, B, 0, Precision(), src=P) == cross_b


def test_projection_runs_every_step_in_eager_once_in_flash(composite):
    from helpers import values_by_op

    _, spec, _, _ = composite
    # transformers re-projects the B·P encoder positions in every decoder forward: 2 · B · P · 512 · 1024
    proj = 2 * B * P * 512 * 1024
    name = "decoder.enc_to_dec_proj"
    assert values_by_op(spec, "decode", "eager", Scenario(B, 1, T, src=P))[name]["flops"] == proj
    assert name not in values_by_op(spec, "decode", "flash", Scenario(B, 1, T, src=P))
    assert values_by_op(spec, "prefill", "flash", Scenario(B, T, 0, src=P))[name]["flops"] == proj


def test_analyze_runs_stage_by_stage(composite, capsys):
    _, spec, _, _ = composite
    d = analyze(spec, workload=Workload(batch=2, prompt=16, gen=8)).to_dict()
    assert d["encoder"]["flops"]["matmul"] > 0 and d["kv_cache"]["cross_bytes"] > 0
    assert d["params"]["towers"] == {"audio": 14_851_810}  # EncodecConfig's defaults, on meta: test above
    assert d["components_not_in_stages"] == ["audio"]
    assert any("2·B" in w for w in d["warnings"])  # classifier-free guidance: stated, not silently doubled


def test_cli_analyze_a_composite_config(composite, tmp_path, capsys):
    cfg = composite[0]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, err = run_cli(capsys, "analyze", str(path), "--prompt", "16", "--gen", "8", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["params"]["total"] == param_report(composite[1]).total and d["encoder_s"] > 0
    code, out, err = run_cli(capsys, "analyze", str(path), "--prompt", "16", "--gen", "8")
    assert code == 0 and "EnCodec" in out + err and "guidance" in out + err


def test_unmodelled_activation_is_refused(tmp_path):
    cfg = _defaults("MusicgenDecoderConfig", tmp_path, activation_function="relu")
    with pytest.raises(ConfigError, match="activation_function"):
        spec_from_config(cfg, "musicgen-decoder")


# ---- MusicGen-Melody: the conditioning is a self-attention prefix of PC positions ----------------------------
PC = 7  # conditioning positions (chroma frames + text tokens, already projected to the decoder's width)


def _melody_passes(model, C: int, D: int):
    """(prefill FLOPs, self-attention cache bytes after it, decode FLOPs) of ``model`` given a PC-position
    conditioning prefix and T audio steps of C codes, then one step, as generate() runs them."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from llmath.measure import oracle

    enc = torch.zeros(B, PC, D, device="meta")
    ids = torch.zeros(B * C, T, dtype=torch.long, device="meta")
    names = (
        ("input_ids", "encoder_hidden_states")
        if hasattr(model, "lm_heads")
        else ("decoder_input_ids", "encoder_hidden_states")
    )

    def counted(**kw):
        with torch.no_grad(), FlopCounterMode(display=False) as c:
            out = model(use_cache=True, **kw)
        return c.get_total_flops(), out

    f_pre, out = counted(**{names[0]: ids, names[1]: enc})
    past = out.past_key_values
    cache = oracle.cache_bytes(past.self_attention_cache)  # the cross-attention cache stays empty
    f_dec, _ = counted(**{names[0]: ids[:, :1], "past_key_values": past})  # the prefix only in the first pass
    return f_pre, cache, f_dec


def _assert_decoder_passes(spec, hf) -> None:
    f_pre, cache, f_dec = hf
    # eager: the heads compute logits at all PC + T positions (prefix included), as transformers' do
    assert matmul_flops(spec, "prefill", Scenario(B, PC + T, 0)) == f_pre
    assert matmul_flops(spec, "decode", Scenario(B, 1, PC + T)) == f_dec
    assert kv_cache_bytes(spec, B, PC + T, Precision()) == cache


def test_melody_decoder_alone_equals_transformers(tmp_path):
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg = _defaults("MusicgenMelodyDecoderConfig", tmp_path)
    spec = spec_from_config(cfg, "melody-decoder")
    model = oracle.build_meta(oracle.hf_config(cfg))
    assert type(model).__name__ == "MusicgenMelodyForCausalLM" and not spec.is_encoder_decoder
    assert llmath_groups(param_report(spec, "eager")) == hf_groups(model)
    _assert_decoder_passes(spec, _melody_passes(model, cfg["num_codebooks"], cfg["hidden_size"]))


def test_melody_composite_equals_transformers(tmp_path):
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg = _defaults("MusicgenMelodyConfig", tmp_path)
    spec = spec_from_config(cfg, "melody")
    model = oracle.build_meta(oracle.hf_config(cfg))
    rep = param_report(spec, "eager")
    assert llmath_groups(rep) == hf_groups(model) and rep.total == sum(p.numel() for p in model.parameters())
    # T5's 512 -> 1024 and the 12 chroma bins -> 1024, each with bias
    assert (
        rep.towers["enc_to_dec_proj"] == 512 * 1024 + 1024 and rep.towers["audio_enc_to_dec_proj"] == 12 * 1024 + 1024
    )
    dec = cfg["decoder"]
    _assert_decoder_passes(spec, _melody_passes(model, dec["num_codebooks"], dec["hidden_size"]))
    d = analyze(spec, workload=Workload(batch=1, prompt=235 + 16, gen=8)).to_dict()
    assert d["components_not_in_stages"] == [
        "text_encoder",
        "enc_to_dec_proj",
        "audio_enc_to_dec_proj",
        "audio",
    ]
    assert any("conditioning" in w for w in d["warnings"])


def test_layouts_and_other_text_encoders_are_refused(composite, tmp_path, capsys):
    cfg = composite[0]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, _, err = run_cli(capsys, "analyze", str(path), "--prompt", "16", "--gpus", "2", "--tp", "2")
    assert code != 0 and "codebook" in err and len(err.strip().splitlines()) == 1
    bart = {"model_type": "bart", "d_model": 1024, "encoder_layers": 2, "decoder_layers": 2, "vocab_size": 100}
    with pytest.raises(ConfigError, match="text encoder is T5"):
        spec_from_config(dict(cfg, text_encoder=dict(cfg["text_encoder"], **bart)), "musicgen")


def test_encodec_counted_for_another_layout_and_named_when_not_weight_normed(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from llmath.model.towers_encodec import encodec_params

    # stereo, 4 ratios of 64 filters, two residual blocks per scale without conv shortcuts, compress 4
    kw = dict(upsampling_ratios=[8, 5, 4, 4], num_filters=64, audio_channels=2, num_residual_layers=2,
              use_conv_shortcut=False, compress=4)  # fmt: skip
    path = tmp_path / "encodec.json"
    transformers.EncodecConfig(**kw).to_json_file(path, use_diff=False)
    with torch.device("meta"):
        model = transformers.EncodecModel(transformers.EncodecConfig(**kw))
    assert encodec_params(json.loads(path.read_text())) == sum(p.numel() for p in model.parameters())
    cfg = _defaults("MusicgenConfig", tmp_path)
    cfg["audio_encoder"]["norm_type"] = "time_group_norm"
    assert spec_from_config(cfg, "musicgen").towers_not_counted == ("audio_encoder",)
