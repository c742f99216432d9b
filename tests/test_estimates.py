"""The closed-form rules of thumb (12·L·d² parameters, 24·L·d² + 4·L·d·N FLOPs per token, the 6d crossover) and the
figures they are usually quoted with, reproduced exactly (arithmetic in comments), and where they err."""

import pytest

from llmath import params
from llmath.estimates import crossover, per_token_flops, prefill_vs_loop
from llmath.model import registry


def test_original_transformer_per_layer_and_total():
    rep = params("transformer-base")
    # encoder layer: 4*512*(512+1) + 2*512*2048 + 512 + 2048 + 2*512*2 = 3,152,384
    assert rep.per_layer["encoder"] == 4 * 512 * 513 + 2 * 512 * 2048 + 512 + 2048 + 2 * 512 * 2 == 3_152_384
    # decoder layer: 4*512*513*2 + 2*512*2048 + 512 + 2048 + 2*512*3 = 4,204,032
    assert rep.per_layer["decoder"] == 4 * 512 * 513 * 2 + 2 * 512 * 2048 + 512 + 2048 + 2 * 512 * 3 == 4_204_032
    # (3,152,384 + 4,204,032) * 6 + 37,000 * 512 = 63,082,496: the figure often quoted "without embeddings" is
    # exactly the model's count, because the output projection *is* the shared embedding matrix.
    assert rep.total == (3_152_384 + 4_204_032) * 6 + 37_000 * 512 == 63_082_496


def test_transformer_layers_equal_torch_nn_transformer():
    torch = pytest.importorskip("torch")
    enc = torch.nn.TransformerEncoderLayer(512, 8, 2048)
    dec = torch.nn.TransformerDecoderLayer(512, 8, 2048)
    rep = params("transformer-base")
    assert rep.per_layer["encoder"] == sum(p.numel() for p in enc.parameters())
    assert rep.per_layer["decoder"] == sum(p.numel() for p in dec.parameters())


@pytest.mark.parametrize(
    "name,d,L,est12,est13",
    [
        # the LLaMA estimate table: 12*L*d^2 and 12*L*d^2 + 13*L*d
        ("llama-7b", 4096, 32, 6_442_450_944, 6_444_154_880),
        ("llama-13b", 5120, 40, 12_582_912_000, 12_585_574_400),
        ("llama-30b", 6656, 60, 31_897_681_920, 31_902_873_600),
        ("llama-65b", 8192, 80, 64_424_509_440, 64_433_029_120),
    ],
)
def test_llama_parameter_estimates(name, d, L, est12, est13):
    rep = params(name)
    assert rep.estimates["12Ld2"] == 12 * L * d * d == est12
    assert rep.estimates["12Ld2+13Ld"] == 12 * L * d * d + 13 * L * d == est13


@pytest.mark.parametrize(
    "name,actual",
    # the released checkpoints' parameter counts
    [("llama-7b", 6_738_415_616), ("llama-13b", 13_015_864_320), ("llama-30b", 32_528_943_616)],
)
def test_llama_released_counts(name, actual):
    assert params(name).total == actual


def test_llama_30b_full_estimate_and_its_common_typo():
    # the full estimate is often written "+ 13*60*6566 + 32000*6656 = 32,115,865,600" for LLaMA-30B. 6566 is a typo for
    # d = 6656: the printed sum is what d = 6656 gives (5,191,680 + 212,992,000 added), not the typo
    # (which would give 32,115,795,400).
    assert 31_897_681_920 + 13 * 60 * 6566 + 32000 * 6656 == 32_115_795_400
    est = params("llama-30b").estimates["12Ld2+13Ld+Vd"]
    assert est == 31_897_681_920 + 13 * 60 * 6656 + 32000 * 6656 == 32_115_865_600
    # and the estimate is 1.27% below the real count 32,528,943,616 (SwiGLU F=17920, two V*d matrices)
    assert round((est - 32_528_943_616) / 32_528_943_616, 4) == -0.0127


def test_per_token_flops_rule_mha():
    # LLaMA-7B (MHA, d=4096, L=32, F=11008). Per token, layers only, attending N positions:
    # projections 2*(4*d*d + 3*d*F)*L = 2*(67,108,864 + 135,266,304)*32 = 12,951,945,216, attention 4*L*d*N.
    r = per_token_flops(registry.spec("llama-7b"), 2048)
    assert r["exact_layers"] == 2 * (4 * 4096 * 4096 + 3 * 4096 * 11008) * 32 + 4 * 32 * 4096 * 2048
    assert r["estimate"] == r["seed"] == 24 * 32 * 4096**2 + 4 * 32 * 4096 * 2048


def test_crossover_gqa_is_far_from_6d():
    # Llama-3-8B: GQA (K=8 of N=32) and F=14336. Projection FLOPs per token per layer:
    # 2*(2*d*d + 2*d*K*H + 3*d*F) = 2*(33,554,432 + 8,388,608 + 176,160,768) = 436,207,616
    # attention per position per layer: 4*N*H = 4*4096 = 16,384  -> N* = 26,624 (6d = 24,576)
    x = crossover(registry.spec("llama-3-8b"))
    assert x["exact"] == 436_207_616 // 16_384 == 26_624
    assert x["six_d"] == 24_576


def test_batch_prefill_vs_token_loop():
    # attention-product FLOPs of LLaMA-7B over a 512-token prompt: eager runs all 512*512 pairs,
    # the token loop sum_{i=1..512} i = 512*513/2 pairs; 4*N*H*L FLOPs per pair = 4*4096*32.
    r = prefill_vs_loop(registry.spec("llama-7b"), 512)
    assert r["attention_eager"] == 4 * 4096 * 32 * 512 * 512
    assert r["attention_loop"] == 4 * 4096 * 32 * 512 * 513 // 2
    # and batch flash prefill == token loop, all matmuls of the layers included
    assert r["batch_flash"] == r["loop"]
