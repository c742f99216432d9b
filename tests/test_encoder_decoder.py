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

from llmath.analysis import cross_kv_elements_per_source, kv_cache_bytes
from llmath.errors import WorkloadError
from llmath.model import registry
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate

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
