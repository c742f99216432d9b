"""Whisper: an audio encoder-decoder, proven against transformers on the meta device.

The encoder's input is 2·P mel frames, turned into P positions by two convolutions (``ops/frontend.py``);
the config is WhisperConfig's defaults written with ``to_json_file`` (two layers per stack), run as
``generate`` runs it (``oracle.seq2seq_flops``: ``input_features`` of 2·1500 frames, a decoder prefill that
caches the cross-attention K/V, one decode step).
"""

from __future__ import annotations

import pytest
from helpers import hf_groups, llmath_groups, matmul_flops, run_cli, saved_config

import llmath
from llmath import Workload
from llmath.analysis import kv_cache_bytes
from llmath.deploy import make_layout
from llmath.deploy.cost import rank_memory_parts
from llmath.deploy.layout import ParallelConfig
from llmath.errors import WorkloadError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.model.registry import resolve
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

B, P, T = 2, 1500, 3  # batch, encoder positions (Whisper's 30 s window), decoder prefill tokens


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from llmath.measure import oracle

    path = tmp_path_factory.mktemp("whisper") / "config.json"
    cfg = saved_config(transformers.WhisperConfig(encoder_layers=2, decoder_layers=2), path)
    spec = spec_from_config(cfg, "whisper-defaults")
    model = oracle.build_meta(oracle.hf_config(cfg))
    return spec, model, oracle.seq2seq_flops(model, B, P, T)


def test_params_by_component_equal_transformers(built):
    spec, model, _ = built
    hf = hf_groups(model)  # named_parameters: a tied head once
    assert llmath_groups(param_report(spec)) == hf
    assert "frontend" in hf  # the two convolutions are counted, under their own component


def test_stage_flops_equal_transformers(built):
    spec, _, hf = built
    assert matmul_flops(spec, "encoder", Scenario(B, P)) == hf["encoder"]  # convolutions included
    assert matmul_flops(spec, "prefill", Scenario(B, T, 0, logits="all", src=P)) == hf["prefill"]
    assert matmul_flops(spec, "decode", Scenario(B, 1, T, src=P)) == hf["decode"]


def test_cache_bytes_equal_encoder_decoder_cache(built):
    spec, _, hf = built
    self_b, cross_b = hf["cache_bytes"]
    assert kv_cache_bytes(spec, B, T, Precision()) == self_b
    assert kv_cache_bytes(spec, B, 0, Precision(), src=P) == cross_b


def test_large_v3_frontend_by_hand_and_published_size():
    spec = resolve("whisper-large-v3")
    sc = Scenario(1, 1500)
    # conv1: 3000 frames x 2·(3·128)·1280; conv2: 1500 positions x 2·(3·1280)·1280 (kernel 3, stride 2)
    conv1 = 3000 * 2 * 3 * 128 * 1280
    conv2 = 1500 * 2 * 3 * 1280 * 1280
    got = {c.op.name: c.values.get("flops", 0) for c in evaluate(build_ops(spec, "encoder", "flash"), sc, spec)}
    assert got["encoder.conv1"] == conv1 and got["encoder.conv2"] == conv2
    # Radford et al. 2022 (arXiv:2212.04356) Table 1: large = 1550M parameters
    assert abs(param_report(spec).total / 1_550_000_000 - 1) < 0.005


def test_tp2_rank_params_follow_vllm_by_hand():
    # whisper-large-v3 at TP = 2 under vLLM's whisper.py: conv1, conv2, both position tables and the decoder's
    # token table (plain nn.Embedding) whole on every rank; q/k/v, fc1 column-parallel (biases split), out_proj
    # and fc2 row-parallel (bias whole); LayerNorms (weight + bias) whole. d 1280, F 5120, V 51866, 32 + 32 layers.
    d, F, V = 1280, 5120, 51866
    whole = (128 * 3 * d + d) + (d * 3 * d + d) + 1500 * d + 448 * d + V * d
    attn = 4 * d * d // 2 + 2 * d // 2 + d  # q, k, v, o weights halved; q and v biases halved; o bias whole
    ffn = d * F // 2 + F // 2 + F * d // 2 + d
    enc_layer, dec_layer = attn + ffn + 2 * 2 * d, 2 * attn + ffn + 3 * 2 * d
    expected = whole + 32 * enc_layer + 32 * dec_layer + 2 * 2 * d  # + both final LayerNorms
    spec = resolve("whisper-large-v3")
    ((_, ops, _, _),) = rank_memory_parts(spec, "flash", make_layout(spec, ParallelConfig(tp=2)))
    assert sum(n * op.count for op in ops for _, n in op.params) == expected


def test_source_is_the_fixed_window(capsys):
    with pytest.raises(WorkloadError, match="1500"):
        llmath.analyze("whisper-large-v3", "h100-sxm", workload=Workload(prompt=512))
    code, out, err = run_cli(capsys, "analyze", "whisper-large-v3", "--prompt", "512")
    assert code == 2 and "1500" in err and len(err.strip().splitlines()) == 1  # a usage error: exit 2
    a = llmath.analyze("whisper-large-v3", "h100-sxm", workload=Workload(prompt=1500, gen=64))
    assert not [n for n in a.warnings if "exceeds" in n]  # 1500 source positions are not decoder positions
    assert a.generation["ttft_s"] > a.generation["encoder_s"] > 0


def test_page_runs_whisper_on_its_window():
    from llmath.web import api

    # the page's prompt slider moves in powers of two; Whisper's source is its 1500-position window whatever
    # the slider says, and the view reports the length used (the page's encoder note prints it)
    d = api.analyze_view({"model": "whisper-large-v3", "prompt": "512"})
    assert d["workload"]["prompt"] == 1500 and d["encoder_s"] > 0
