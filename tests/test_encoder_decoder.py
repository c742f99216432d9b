"""Encoder-decoder stages proven against transformers on the meta device.

For T5, Flan-T5 (gated FFN), BART and the original Transformer (built in transformers as Marian, the
same architecture: post-LN, sinusoidal positions, shared embeddings, ReLU FFN, no final stack norms), with
two layers per stack, the matmul FLOPs that ``FlopCounterMode`` counts for the encoder pass, a decoder
prefill and one decode step equal llmath's ``eager`` operator lists, and the bytes of transformers'
``EncoderDecoderCache`` equal llmath's KV cache (self-attention: the decoder positions; cross-attention:
the source positions, fixed). The decode step runs as ``generate`` runs it: ``encoder_outputs`` and
``past_key_values`` passed in, so the cross-attention K/V come from the cache (``is_updated``).
"""

import pytest
from helpers import registry_config

from llmath import Workload
from llmath.analysis import kv_cache_bytes
from llmath.errors import WorkloadError
from llmath.model import registry
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.stages import cross_kv_elements_per_source

B, P, T = 2, 11, 3  # batch, source tokens, decoder prefill tokens
LAYER_KEYS = ("num_layers", "num_decoder_layers", "encoder_layers", "decoder_layers", "num_hidden_layers")


def _mm(spec, stage, sc, attention="eager"):
    return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, attention), sc, spec))


def _two_layers(cfg: dict) -> dict:
    return {k: (2 if k in LAYER_KEYS else v) for k, v in cfg.items()}


def _marian_transformer_base() -> dict:
    """transformer-base (d 512, 8 heads, FFN 2048 ReLU, vocab 37,000 shared) written as a MarianConfig."""
    c = registry_config("transformer-base")
    return dict(
        model_type="marian", vocab_size=c["vocab_size"], decoder_vocab_size=c["vocab_size"], d_model=c["d_model"],
        encoder_attention_heads=c["num_heads"], decoder_attention_heads=c["num_heads"],
        encoder_ffn_dim=c["d_ff"], decoder_ffn_dim=c["d_ff"], activation_function="relu",
        encoder_layers=2, decoder_layers=2, share_encoder_decoder_embeddings=True, max_position_embeddings=512,
        pad_token_id=0, decoder_start_token_id=0,
    )  # fmt: skip


CASES = ["t5-base", "flan-t5-base", "bart-large", "transformer-base"]


@pytest.fixture(scope="module", params=CASES, ids=str)
def built(request):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    name = request.param
    spec = spec_from_config(_two_layers(registry_config(name)), name)
    hf_cfg = _marian_transformer_base() if name == "transformer-base" else _two_layers(registry_config(name))
    model = oracle.build_meta(oracle.hf_config(hf_cfg))
    return name, spec, model, oracle.seq2seq_flops(model, B, P, T)


def test_encoder_prefill_decode_flops_equal_transformers(built):
    name, spec, _, hf = built
    assert _mm(spec, "encoder", Scenario(B, P)) == hf["encoder"]
    # transformers' seq2seq heads compute logits at every decoder position (no logits_to_keep): "all"
    assert _mm(spec, "prefill", Scenario(B, T, 0, logits="all", src=P)) == hf["prefill"]
    assert _mm(spec, "decode", Scenario(B, 1, T, src=P)) == hf["decode"]


def test_cache_bytes_equal_encoder_decoder_cache(built):
    _, spec, _, hf = built
    self_b, cross_b = hf["cache_bytes"]  # bf16: 2 bytes per element, after the prefill
    p = Precision()
    assert kv_cache_bytes(spec, B, T, p) == self_b
    assert kv_cache_bytes(spec, B, 0, p, src=P) == cross_b
    assert kv_cache_bytes(spec, B, T, p, src=P) == self_b + cross_b
    # per source position: K and V of every decoder layer, 2 layers x 2 x heads x head width
    assert cross_kv_elements_per_source(spec) == 2 * 2 * spec.n_kv_heads * spec.head_dim


def test_flash_and_eager_agree_where_no_mask_applies():
    """An encoder's and a cross-attention's pairs are the whole rectangle: flash runs the same FLOPs as
    eager there; only the decoder's causal self-attention in a prefill differs (T(T+1)/2 vs T² pairs)."""
    spec = registry.spec("transformer-base")
    sc = Scenario(1, 100)
    assert _mm(spec, "encoder", sc, "flash") == _mm(spec, "encoder", sc, "eager")
    d = Scenario(1, 1, 40, src=100)
    assert _mm(spec, "decode", d, "flash") == _mm(spec, "decode", d, "eager")
    pre = Scenario(1, 10, 0, src=100)
    # 4*N*H*L per pair = 4*512*6; eager 10*10 pairs, flash 10*11/2
    assert _mm(spec, "prefill", pre, "eager") - _mm(spec, "prefill", pre, "flash") == 4 * 512 * 6 * (100 - 55)


def test_transformer_base_stage_arithmetic():
    """The original Transformer by hand (d 512, F 2048, V 37,000, 6 + 6 layers): B = 1, P = 100 source
    tokens, one decode step at decoder context 9 (attends 10 positions)."""
    spec = registry.spec("transformer-base")
    d, F, V, L = 512, 2048, 37_000, 6
    # encoder: per layer 4 projections 2*P*d*d, scores and context 2*P*P*d each, FFN 2*2*P*d*F
    enc = L * (4 * 2 * 100 * d * d + 2 * 2 * 100 * 100 * d + 2 * 2 * 100 * d * F)
    assert _mm(spec, "encoder", Scenario(1, 100)) == enc
    # decode: self q,k,v,o + cross q,o (4 + 2 projections of one token), self attention over 10 positions,
    # cross attention over the 100 cached source positions, FFN; LM head 2*d*V; cross K/V not recomputed
    dec = L * (6 * 2 * d * d + 2 * 2 * 10 * d + 2 * 2 * 100 * d + 2 * 2 * d * F) + 2 * d * V
    assert _mm(spec, "decode", Scenario(1, 1, 9, src=100)) == dec
    # the decoder prefill of the start token also projects the 100 encoder outputs to cross K/V once
    pre = L * (6 * 2 * d * d + 2 * 2 * 1 * d + 2 * 2 * 100 * d + 2 * 2 * d * F + 2 * 2 * 100 * d * d) + 2 * d * V
    assert _mm(spec, "prefill", Scenario(1, 1, 0, src=100)) == pre


def test_encoder_stage_is_refused_for_decoder_only_models():
    with pytest.raises(WorkloadError, match="decoder-only"):
        build_ops(registry.spec("llama-3-8b"), "encoder")


def test_analyze_runs_the_encoder_once_and_caches_cross_kv():
    import llmath

    a = llmath.analyze("transformer-base", "h100-sxm", workload=Workload(batch=4, prompt=100, gen=50))
    kv = a.kv_cache
    # bf16 K and V of 6 decoder layers x 512 wide: 2 * 6 * 512 * 2 B = 12,288 B per position
    assert kv["bytes_per_token"] == kv["cross_bytes_per_source_token"] == 12_288
    assert kv["cross_bytes"] == 4 * 100 * 12_288  # fixed: B x P source positions
    assert kv["bytes"] == 4 * 1 * 12_288 + 4 * 100 * 12_288  # the start token + the cross cache
    assert kv["peak_bytes"] == 4 * 50 * 12_288 + 4 * 100 * 12_288  # 1 + 49 fed tokens at the end
    g, enc, pre = a.generation, a.encoder, a.prefill
    assert enc is not None and enc.time_s is not None and pre.time_s is not None
    assert g["encoder_s"] == enc.time_s and g["ttft_s"] == enc.time_s + pre.time_s
    # the first decode step of the generation is the decode stage reported (context 1, 100 source positions)
    assert g["tpot_first_s"] == pytest.approx(a.decode.time_s, rel=1e-12)
    d = a.to_dict(with_ops=False)
    assert d["encoder"]["flops"]["matmul"] == _mm(registry.spec("transformer-base"), "encoder", Scenario(4, 100))
    assert d["workload"]["decoder_prompt"] == 1 and "prefill" in d and "decode" in d


def test_encoder_intensity_table_on_transformer_base():
    """The FLOPS/MOPS prefill table of the encoder's operators (docs/estimates.md), B = 1, S = 128, M = 512, 8 heads
    of D = 64, in bf16 (2 B per element, 2 FLOPs per multiply-add, so the table's multiply-adds per element carry
    over)."""
    spec = registry.spec("transformer-base")
    from llmath.pass_report import stage_report

    rep = stage_report(spec, "encoder", Scenario(1, 128), "eager", Precision())
    i = {r.name.split(".")[-1]: r.intensity for r in rep.ops if r.name.startswith("encoder.self_attn")}
    S, M, H = 128, 512, 8
    # Q x K: the table's MOPS 2BSM + BS^2H (read Q and K, write the S x S scores per head), FLOPs BS^2M
    assert i["scores"] == pytest.approx(S * S * M / (2 * S * M + S * S * H), rel=1e-12)
    # W_Q with its bias: FLOPs 2*S*M*M + S*M (bias add), bytes 2*(M*M + M + 2*S*M); the table's
    # 1/(2/M + 1/BS) drops the bias
    assert i["q_proj"] == pytest.approx((2 * S * M * M + S * M) / (2 * (M * M + M + 2 * S * M)), rel=1e-12)


def test_estimates_on_transformer_base_count_per_stack():
    """`llmath estimates transformer-base`: L = the 6 decoder layers per generated token, the encoder once."""
    from llmath.estimates import estimates_report

    rep = estimates_report(registry.spec("transformer-base"), [1], prompt=100, gen=64, batch=1)
    d, F = 512, 2048
    assert rep["L"] == 6 and rep["encoder"]["L"] == 6
    # encoder once over 100 source tokens: 6 x (4 projections + 2 products over 100 x 100 pairs + FFN)
    assert rep["encoder"]["matmul"] == 6 * (4 * 2 * 100 * d * d + 2 * 2 * 100 * 100 * d + 2 * 2 * 100 * d * F)
    # a generated token attending 1 position: self q,k,v,o and cross q,o (2*6*d^2), FFN 2*2*d*F, self
    # attention 4*d*1, cross attention over the 100 source positions 4*d*100; no encoder layer
    assert rep["per_token"][0]["exact_layers"] == 6 * (2 * 6 * d * d + 2 * 2 * d * F + 4 * d + 4 * d * 100)


def test_sweep_agrees_with_analyze_on_encoder_decoder():
    import numpy as np

    import llmath
    from llmath.sweep import grid

    g = grid("bart-large", "h100-sxm", np.array([1, 8]), np.array([200, 200]), np.array([30, 30]))
    for i, b in enumerate((1, 8)):
        a = llmath.analyze("bart-large", "h100-sxm", workload=Workload(batch=b, prompt=200, gen=30))
        assert g["ttft_s"][i] == pytest.approx(a.generation["ttft_s"], rel=1e-9)
        assert g["e2e_s"][i] == pytest.approx(a.generation["e2e_s"], rel=1e-9)
        assert g["kv_peak_bytes"][i] == a.kv_cache["peak_bytes"]


def test_serving_device_needs_the_source_length():
    """An encoder-decoder model's iteration cost depends on the source every request's decoder cross-attends:
    a device built without it is an error, not a silently different number (serving: test_encoder_decoder_parallel)."""
    from llmath.deploy.step import Device
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency

    hw = get("h100-sxm")
    with pytest.raises(WorkloadError, match="encoder-decoder"):
        Device(registry.spec("t5-base"), hw, Precision(), efficiency("expected", hw))
