"""MoE routing conventions (llmath.ops.routing): experts hit and the busiest expert-parallel rank."""

from statistics import NormalDist

import numpy as np
import pytest

from llmath.hardware.efficiency_fit import moe_cost
from llmath.ops import experts_hit as ops_experts_hit
from llmath.ops.routing import ROUTING, busiest_rank_factor, expert_loads, experts_hit


def test_default_is_uniform_and_ops_use_it():
    assert ROUTING == "uniform"
    # 10 tokens top-2 of 8, each token's 2 picks distinct: 8·(1 − (1 − 2/8)^10) = 8·(1 − 0.0563135) = 7.5495
    assert experts_hit(10, 8, 2) == pytest.approx(8 * (1 - 0.75**10))
    assert ops_experts_hit(10, 8, 2) == pytest.approx(7.54949, rel=1e-5)


def test_balanced_spreads_evenly():
    # min(E, T·k): 3 tokens × top-2 = 6 of 8; 5 tokens × 2 = 10 > 8
    assert experts_hit(np.array([3, 5]), 8, 2, "balanced").tolist() == [6.0, 8.0]


def test_power_law_loads_sum_to_routed_tokens():
    for T, E, k in ((1, 256, 8), (37, 256, 8), (4, 8, 2), (3000, 128, 4)):
        n = expert_loads(T, E, k)
        assert n.sum() == T * k and (n >= 0).all() and (np.diff(n) <= 0).all()


def test_power_law_one_token_hits_top_k():
    # 1 token, top-8 of 256: T·k = 8 ≤ E, loads ∝ x on [0.01, 2] (mean (2 − 0.01)/ln 200 ≈ 0.376 at α ≈ 1): the
    # largest rounds to 2/(256·0.376)·8 ≈ 0.17 → 0, so the whole deficit of 8 goes one token each to the 8
    # most loaded experts: 8 hit
    assert experts_hit(1, 256, 8, "power_law") == 8.0


def test_power_law_hits_fewer_experts_than_balanced_at_mid_sizes():
    # 32 tokens × top-8 of 256 = 256 routed: balanced hits all 256, uniform 256·(1 − (248/256)^32) = 162.0;
    # the power law leaves every expert whose scaled load rounds below 1 cold
    pl = float(experts_hit(32, 256, 8, "power_law"))
    assert pl < 256 * (1 - (248 / 256) ** 32) < 256


def test_power_law_hits_against_kernel_rows():
    # aiconfigurator-core 0.12.0 h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet, bfloat16, moe_torch_flow_cutlass,
    # hidden 4096, inter 14336, top-2 of 8, tp = ep = 1: rows 31941 / 31943 (balanced, 1 / 4 tokens:
    # 0.190752 / 0.663093 ms) and 68904 / 68906 (power_law_1.01: 0.189146 / 0.417690 ms). Weight-bound: balanced
    # goes from 2 experts (1 token) to min(8, 8) = 8, (0.663093 − 0.190752) / 6 = 0.078724 ms per expert, so the
    # power-law row streamed 2 + (0.417690 − 0.189146) / 0.078724 = 2 + 2.903 = 4.9 experts (one random draw)
    implied = 2 + (0.417690 - 0.189146) / ((0.663093 - 0.190752) / 6)
    assert abs(float(experts_hit(4, 8, 2, "power_law")) - implied) <= 1.0
    assert experts_hit(4, 8, 2, "balanced") == 8.0


def test_large_counts_interpolate_between_exact_ones():
    t = np.array([1024, 5000, 100_000])
    h = experts_hit(t, 256, 8, "power_law")
    assert (np.diff(h) >= 0).all() and h[-1] <= 256
    assert np.isfinite(experts_hit(1e9, 256, 8, "power_law"))


def test_busiest_rank_factor():
    assert busiest_rank_factor(1024, 256, 8, 1, "power_law") == 1.0
    # 1 token top-8 of 256 on 8 ranks: loads 8 ones and 248 zeros (mean 1/32, std √(1/32 − 1/1024) = 0.17399);
    # 32 experts a rank, mean rank load 1; busiest = 1 + z8·√32·0.17399 with z8 = Φ⁻¹((8 − 0.375)/8.25)
    z8 = NormalDist().inv_cdf(7.625 / 8.25)
    expect = 1 + z8 * 32**0.5 * (1 / 32 - 1 / 1024) ** 0.5
    assert busiest_rank_factor(1, 256, 8, 8, "power_law") == pytest.approx(expect, rel=1e-9)


def test_unknown_routing_is_refused():
    with pytest.raises(ValueError, match="routing 'zipf' is not one of uniform, power_law, balanced"):
        experts_hit(4, 8, 2, "zipf")


def test_moe_cost_routing_argument():
    # balanced: 4 tokens × top-2 = 8 of 8 experts hit; weights 8 · 3·4096·14336 bf16 bytes + 8 routed
    # activations × (2·4096 + 2·14336) × 2 bytes
    b = moe_cost(4, 4096, 14336, 2, 8, "bf16", "balanced")[2]
    assert b == pytest.approx(8 * 3 * 4096 * 14336 * 2 + 8 * (2 * 4096 + 2 * 14336) * 2)
    # default: the independent picks of the shipped fits, 8·(1 − (7/8)^8)
    d = moe_cost(4, 4096, 14336, 2, 8, "bf16")[2]
    assert d == pytest.approx(8 * (1 - (7 / 8) ** 8) * 3 * 4096 * 14336 * 2 + 8 * (2 * 4096 + 2 * 14336) * 2)


def test_busiest_rank_uniform_binomial():
    # 1000 tokens × top-8 on 8 ranks: each rank's load binomial, mean 8000/8 = 1000, sd √(8000·1/8·7/8) = 29.58;
    # busiest = (1000 + z8·29.58)/1000 = 1 + z8·√(7/8000), z8 = Φ⁻¹((8 − 0.375)/8.25)
    z8 = NormalDist().inv_cdf(7.625 / 8.25)
    assert busiest_rank_factor(1000, 256, 8, 8) == pytest.approx(1 + z8 * (7 / 8000) ** 0.5)
    # never more than every pick on one rank: 1 token × top-1 on 64 ranks → at most 64
    assert busiest_rank_factor(1, 64, 1, 64) <= 64
    assert busiest_rank_factor(np.array([0.0, 5.0]), 256, 8, 8)[0] == 1.0
    assert busiest_rank_factor(5, 256, 8, 8, "balanced") == 1.0
