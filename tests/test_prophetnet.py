"""ProphetNet (model/families_prophetnet.py, ops/prophet.py) against transformers 5.23.

Parameters (total and by component), the encoder pass's and a decoder prefill's matmul FLOPs and the bytes of
``EncoderDecoderCache`` equal transformers on the meta device, from ProphetNetConfig's defaults (12 + 12
layers, written with ``to_json_file`` and read back). The decode step cannot run on meta: its n-stream
attention checks the position ids' values (``ProphetNetNgramSelfAttention.get_predict_relative_pos_embeddings``
calls ``torch_compilable_check(position_ids[0][0] == key_sequence_length - 1)``, a ``Tensor.item()``), so all
three stages are also proven on small CPU models (random weights, eager attention), for 1, 2 and 3 streams.
ProphetNetForCausalLM (the decoder alone) is proven the same way. Transformers' forward is llmath's
``eager`` execution (every predicting stream); the default (``flash``) computes what ``generate`` reads:
the tests below say where and why they differ.
"""

from __future__ import annotations

import json

import pytest
from helpers import hf_groups, llmath_groups, matmul_flops, run_cli, saved_config

from llmath import Workload
from llmath.analysis import kv_cache_bytes
from llmath.deploy.layout import ParallelConfig
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario
from llmath.ops.params import param_report
from llmath.ops.stages import training_flops

B, P, T = 2, 11, 3  # batch, source tokens, decoder prefill tokens
TINY = dict(
    hidden_size=64, num_encoder_attention_heads=4, num_decoder_attention_heads=4, encoder_ffn_dim=96,
    decoder_ffn_dim=96, vocab_size=300, max_position_embeddings=40, num_encoder_layers=2, num_decoder_layers=2,
)  # fmt: skip


def _config(tmp_path, **kw) -> dict:
    transformers = pytest.importorskip("transformers")
    return saved_config(transformers.ProphetNetConfig(**kw), tmp_path / "config.json")


@pytest.fixture(scope="module")
def defaults(tmp_path_factory):
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg = _config(tmp_path_factory.mktemp("prophetnet"))
    return cfg, spec_from_config(cfg, "prophetnet-defaults"), oracle.build_meta(oracle.hf_config(cfg))


def test_params_by_component_equal_transformers(defaults):
    from llmath.measure import oracle

    _, spec, model = defaults
    rep = param_report(spec, "eager")
    assert rep.total == oracle.count_params(model)  # one shared token table, the LM head tied to it
    assert llmath_groups(rep) == hf_groups(model)
    assert param_report(spec).total == rep.total  # served: the same weights (all ngram stream embeddings kept)


def test_encoder_prefill_and_cache_equal_transformers_on_meta(defaults):
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from llmath.measure import oracle

    _, spec, model = defaults

    def counted(fn):
        with torch.no_grad(), FlopCounterMode(display=False) as c:
            out = fn()
        return c.get_total_flops(), out

    ids = torch.zeros(B, P, dtype=torch.long, device="meta")
    f_enc, enc = counted(lambda: model.get_encoder()(input_ids=ids))
    dec = torch.zeros(B, T, dtype=torch.long, device="meta")
    f_pre, out = counted(lambda: model(encoder_outputs=enc, decoder_input_ids=dec, use_cache=True))
    assert matmul_flops(spec, "encoder", Scenario(B, P)) == f_enc
    # transformers' head computes logits for every stream at every decoder position (no logits_to_keep)
    assert matmul_flops(spec, "prefill", Scenario(B, T, 0, logits="all", src=P)) == f_pre
    past = out.past_key_values
    assert kv_cache_bytes(spec, B, T, Precision()) == oracle.cache_bytes(past.self_attention_cache)
    assert kv_cache_bytes(spec, B, 0, Precision(), src=P) == oracle.cache_bytes(past.cross_attention_cache)


def _tiny_cpu(cfg: dict):
    import torch
    import transformers

    from llmath.measure import oracle

    torch.manual_seed(0)
    with torch.device("cpu"):
        model = transformers.AutoModelForSeq2SeqLM.from_config(oracle.hf_config(cfg), attn_implementation="eager")
    return model.eval()


STREAMS = [dict(ngram=1), dict(ngram=2), dict(ngram=3, num_buckets=16, relative_max_distance=64)]


@pytest.mark.parametrize("extra", STREAMS)
def test_all_stages_equal_transformers_on_cpu(extra, tmp_path):
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg = _config(tmp_path, **TINY, **extra)
    spec, model = spec_from_config(cfg, "tiny"), _tiny_cpu(cfg)
    assert llmath_groups(param_report(spec, "eager")) == hf_groups(model)
    f = oracle.seq2seq_flops(model, B, P, T)  # encoder, prefill, decode step with the cross K/V cached
    assert matmul_flops(spec, "encoder", Scenario(B, P)) == f["encoder"]
    assert matmul_flops(spec, "prefill", Scenario(B, T, 0, logits="all", src=P)) == f["prefill"]
    assert matmul_flops(spec, "decode", Scenario(B, 1, T, src=P)) == f["decode"]
    assert (kv_cache_bytes(spec, B, T, Precision()), kv_cache_bytes(spec, B, 0, Precision(), src=P)) == f["cache_bytes"]


def _logits(model, ids, dec, steps: int = 0):
    """The ``logits`` (the first predicting stream's) of a prefill of ``dec``, then of ``steps`` decode steps."""
    import torch

    with torch.no_grad():
        out = model(input_ids=ids, decoder_input_ids=dec, use_cache=True)
        got = [out.logits]
        for _ in range(steps):
            nxt = out.logits[:, -1:].argmax(-1)
            out = model(input_ids=ids, decoder_input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
            got.append(out.logits)
    return got


def test_which_streams_inference_needs(tmp_path):
    """Why flash runs one predicting stream in a decode step but all of them in a prefill. ``generate`` reads
    ``logits`` (the first stream's; ``logits_ngram`` only feeds the training loss). The same weights with
    ngram = 1 (stream 0's input is the last row of ``ngram_embeddings``: transformers indexes
    ``ngram_embeddings[ngram - 1]`` with ngram = 0) give the same logits from a one-token decoder prompt and in
    every decode step (T = 1), but not after a prefill of 3 tokens: there transformers' relative-position gather
    mixes the streams' rows (ops/prophet.py)."""
    torch = pytest.importorskip("torch")
    two = _tiny_cpu(_config(tmp_path, **TINY, ngram=2))
    one = _tiny_cpu(_config(tmp_path, **TINY, ngram=1))
    state = two.state_dict()
    state["prophetnet.decoder.ngram_embeddings.weight"] = state["prophetnet.decoder.ngram_embeddings.weight"][-1:]
    one.load_state_dict(state)
    ids, dec = torch.randint(3, 300, (B, P)), torch.randint(3, 300, (B, T))
    for a, b in zip(_logits(two, ids, dec[:, :1], steps=3), _logits(one, ids, dec[:, :1], steps=3), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    a, b = _logits(two, ids, dec)[0], _logits(one, ids, dec)[0]
    assert not torch.allclose(a, b, atol=1e-5)


def test_decode_step_flash_drops_the_unread_streams_by_hand(defaults):
    _, spec, _ = defaults
    # defaults: L = 12 decoder layers, D = 1024, N = 16 heads of H = 64, F = 4096, V = 30522, U = 32 buckets,
    # ngram = 2. A decode step at context S: eager (transformers) runs 1 + 2 rows per layer, flash 1 + 1; per row
    # and layer: q, k, v, o and cross q, o (6·2·D²), the relative projection (2·D·U·N) and the FFN (2·2·D·F);
    # per predicting stream and layer: scores and context over S + 1 main keys and its own (2·2·N·H·(S + 2)),
    # and the cross-attention's over the P sources (2·2·N·H·P); per predicting stream, the LM head (2·D·V).
    L, D, N, H, F, V, U, S = 12, 1024, 16, 64, 4096, 30522, 32, 7
    row = 6 * 2 * D * D + 2 * D * U * N + 2 * 2 * D * F
    stream = L * (row + 2 * 2 * N * H * (S + 2) + 2 * 2 * N * H * P) + 2 * D * V
    sc = Scenario(B, 1, S, src=P)
    assert matmul_flops(spec, "decode", sc, "eager") - matmul_flops(spec, "decode", sc, "flash") == B * stream


def test_prefill_runs_every_stream_and_one_head(defaults):
    _, spec, _ = defaults
    # a flash prefill keeps both streams in the layers (the gather mixes them when T > 1) but computes the
    # logits of the first stream only: eager - flash = the second stream's logits at every position (2·D·V
    # per row, logits="all") plus eager's full score rectangles against flash's causal pairs: per layer and
    # stream (main + 2 predicting) the main keys 4·N·H·(T·T - T(T+1)/2), the predicting streams' own keys
    # 4·N·H·(T·T - T) (flash: the diagonal only)
    L, D, N, H, V, T_ = 12, 1024, 16, 64, 30522, 5
    sc = Scenario(1, T_, 0, logits="all", src=P)
    causal = T_ * T_ - T_ * (T_ + 1) // 2
    expected = T_ * 2 * D * V + L * 4 * N * H * (3 * causal + 2 * (T_ * T_ - T_))
    assert matmul_flops(spec, "prefill", sc, "eager") - matmul_flops(spec, "prefill", sc, "flash") == expected


def test_training_runs_every_stream(defaults):
    _, spec, _ = defaults
    # a training forward computes the logits of both ngram = 2 streams (the loss reads both): the served
    # prefill's plus the second stream's 16 rows of logits (2·D·V each)
    D, V = 1024, 30522
    tr = training_flops(spec, 1, 16)["forward_matmul"]
    served = matmul_flops(spec, "encoder", Scenario(1, 16), "flash") + matmul_flops(
        spec, "prefill", Scenario(1, 16, 0, logits="all", src=16), "flash"
    )
    assert tr - served == 16 * 2 * D * V


def test_analyze_stage_by_stage_cli_and_json(defaults, tmp_path, capsys):
    cfg, _, _ = defaults
    path = tmp_path / "prophetnet.json"
    path.write_text(json.dumps(cfg))
    code, out, err = run_cli(capsys, "analyze", str(path), "--prompt", "64", "--gen", "8", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["encoder"]["flops"]["matmul"] > 0 and d["prefill"]["flops"]["matmul"] > 0
    assert d["decode"]["flops"]["matmul"] > 0 and d["encoder_s"] > 0
    # cross cache: 12 layers × K and V × 64 sources × D = 1024 × 2 bytes (bf16), batch 1
    assert d["kv_cache"]["cross_bytes"] == 12 * 2 * 64 * 1024 * 2
    code, out, _ = run_cli(capsys, "analyze", str(path), "--prompt", "64", "--gen", "8")
    assert code == 0 and "encoder" in out and "decode step 0" in out
    code, out, _ = run_cli(capsys, "ops", str(path), "--stage", "decode", "--attention", "eager", "--prompt", "64")
    assert code == 0 and "decoder.self_attn.streams" in out and "relative" in out


@pytest.mark.parametrize("cross", [True, False])
def test_causal_lm_params_equal_transformers(cross, tmp_path):
    """ProphetNetForCausalLM, the decoder alone (``architectures`` names it): its token table, and the
    cross-attention weights it allocates (``add_cross_attention``) but never runs without an encoder."""
    torch = pytest.importorskip("torch")
    import transformers

    from llmath.measure import oracle

    cfg = dict(_config(tmp_path, add_cross_attention=cross), architectures=["ProphetNetForCausalLM"])
    spec = spec_from_config(cfg, "causal")
    assert not spec.is_encoder_decoder
    with torch.device("meta"):
        model = transformers.ProphetNetForCausalLM(oracle.hf_config(cfg))
    assert param_report(spec, "eager").total == oracle.count_params(model)
    assert llmath_groups(param_report(spec, "eager")) == hf_groups(model)


@pytest.mark.parametrize("extra", STREAMS)
def test_causal_lm_stages_equal_transformers_on_cpu(extra, tmp_path):
    """Its prefill (logits of every stream at every position: transformers' head has no logits_to_keep), the
    DynamicCache and a decode step, on small CPU models (the decode step cannot run on meta, as above)."""
    torch = pytest.importorskip("torch")
    import transformers

    from llmath.measure import oracle

    cfg = dict(_config(tmp_path, **TINY, **extra), is_encoder_decoder=False)  # as ProphetNetForCausalLM saves it
    spec = spec_from_config(cfg, "causal-tiny")
    torch.manual_seed(0)
    model = transformers.ProphetNetForCausalLM(oracle.hf_config(cfg)).eval()
    f_pre, out = oracle.forward_flops(model, B, T)
    assert matmul_flops(spec, "prefill", Scenario(B, T)) == f_pre
    past = oracle.past_of(out)
    assert kv_cache_bytes(spec, B, T, Precision()) == oracle.cache_bytes(past)
    f_dec, _ = oracle.forward_flops(model, B, 1, past=past)
    assert matmul_flops(spec, "decode", Scenario(B, 1, T)) == f_dec


def test_causal_lm_analyze_runs(tmp_path, capsys):
    path = tmp_path / "causal.json"
    path.write_text(json.dumps(dict(_config(tmp_path), architectures=["ProphetNetForCausalLM"])))
    code, out, err = run_cli(capsys, "analyze", str(path), "--prompt", "32", "--gen", "4", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert "encoder" not in d and d["decode"]["flops"]["matmul"] > 0
    # main-stream K/V only: 12 layers × K and V × D = 1024 × 2 bytes per position
    assert d["kv_cache"]["bytes_per_token"] == 12 * 2 * 1024 * 2


@pytest.mark.parametrize("causal", [False, True])
def test_one_gpu_layout_and_sweep_agree_with_analyze(causal, tmp_path):
    import numpy as np

    import llmath
    from llmath.deploy import make_layout
    from llmath.deploy.cost import rank_memory_parts
    from llmath.errors import LayoutError
    from llmath.sweep import grid

    cfg = dict(_config(tmp_path), **({"architectures": ["ProphetNetForCausalLM"]} if causal else {}))
    path = tmp_path / "model.json"
    path.write_text(json.dumps(cfg))
    spec = spec_from_config(cfg, "layout")
    # one GPU: every layer's operators placed on it (the decoder alone labels its layers as decoder-only
    # models do), so its weights are the model's
    ((_, ops, _, _),) = rank_memory_parts(spec, "flash", make_layout(spec))
    assert sum(n * op.count for op in ops for _, n in op.params) == param_report(spec).total
    g = grid(str(path), "h100-sxm", np.array([1, 4]), np.array([64, 64]), np.array([8, 8]))
    for i, b in enumerate((1, 4)):
        a = llmath.analyze(str(path), "h100-sxm", workload=Workload(batch=b, prompt=64, gen=8))
        assert g["ttft_s"][i] == pytest.approx(a.generation["ttft_s"], rel=1e-9)
        assert g["kv_peak_bytes"][i] == a.kv_cache["peak_bytes"]
    with pytest.raises(LayoutError, match="tp=1 and pp=1"):
        make_layout(spec, ParallelConfig(tp=2)) and rank_memory_parts(
            spec, "flash", make_layout(spec, ParallelConfig(tp=2))
        )


def test_xlm_prophetnet_is_gone_from_transformers_5_23(tmp_path):
    pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    assert "prophetnet" in CONFIG_MAPPING_NAMES and "xlm-prophetnet" not in CONFIG_MAPPING_NAMES
    cfg = dict(_config(tmp_path), model_type="xlm-prophetnet")
    with pytest.raises(ConfigError, match="not supported"):
        spec_from_config(cfg, "xlm")


def test_unmodelled_options_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="tie_word_embeddings"):
        spec_from_config(_config(tmp_path, tie_word_embeddings=False), "untied")
    with pytest.raises(ConfigError, match="encoder_ffn_dim"):
        spec_from_config(_config(tmp_path, encoder_ffn_dim=2048), "widths")
    with pytest.raises(ConfigError, match="ProphetNetForCausalLM"):
        spec_from_config(_config(tmp_path, add_cross_attention=False), "no-cross")
