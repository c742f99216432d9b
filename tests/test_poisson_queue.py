"""Poisson arrivals (``--rate``): the prompt queue's chain (:mod:`llmath.deploy.prompt_queue`) against a textbook
queue and against the iteration simulation running the same scheduler, and the refusal of an unbounded queue."""

import numpy as np
import pytest
from helpers import run_cli
from power_iteration import power_queue_law, power_stationary

from llmath import Workload
from llmath.deploy import engines, prompt_queue
from llmath.deploy.prompt_queue import Lattice, _decoders_law, _slot_wait, poisson_state, queue_law, stationary
from llmath.deploy.service import serve
from llmath.deploy.serving import Decoding, Requests, _budget, rate_to_concurrency, steady_state
from llmath.deploy.serving_memory import memory
from llmath.deploy.simulate import simulate
from llmath.deploy.step import Device
from llmath.errors import RateError, WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100 = get("h100-sxm")


@pytest.mark.parametrize("mu", [0.3, 0.7, 0.9])
def test_one_prompt_an_iteration_is_the_slotted_md1_queue(mu):
    # Q' = max(Q − 1, 0) + A, A ~ Poisson(μ): taking expectations, P(Q > 0) = μ; taking them of Q'² =
    # ((Q − 1)⁺)² + 2A(Q − 1)⁺ + A² gives 0 = −2E[Q](1 − μ) + 2μ − μ², so E[Q] = μ(2 − μ) / (2(1 − μ))
    # (0.3: 0.36429, 0.7: 1.51667, 0.9: 4.95)
    pi, cut = stationary(Lattice(1, 1.0, 1.0, 1.0, True), np.full(600, mu), 600)
    assert cut < 1e-12
    assert pi @ np.arange(600) == pytest.approx(mu * (2 - mu) / (2 * (1 - mu)), rel=1e-6)
    assert pi[0] == pytest.approx(1 - mu, rel=1e-6)  # empty after admission: no arrival into an empty queue


def test_the_slotted_md1_queue_at_999_thousandths_of_its_capacity():
    # the same chain at μ = 0.999, where a power iteration needs far more than 20,000 passes: the
    # direct solve over 40,000 states (the tail falls by about e^(−2(1 − μ)/μ) a state, so the last ones hold
    # ~e^(−80)) gives E[Q] = 0.999·1.001/(2·0.001) = 499.9995, P(Q = 0) = 1 − μ = 0.001 and, balancing state 0
    # (π0 = (π0 + π1)·e^(−μ)), P(Q = 1) = (1 − μ)(e^μ − 1) = 0.001·1.715564 = 0.001715564
    mu, n = 0.999, 40_000
    pi, cut = stationary(Lattice(1, 1.0, 1.0, 1.0, True), np.full(n, mu), n)
    assert cut < 1e-12
    assert pi @ np.arange(n) == pytest.approx(mu * (2 - mu) / (2 * (1 - mu)), rel=1e-6)
    assert pi[0] == pytest.approx(1 - mu, rel=1e-9)
    assert pi[1] == pytest.approx((1 - mu) * np.expm1(mu), rel=1e-9)


def test_a_budget_of_a_fractional_number_of_units_keeps_its_mean():
    # 2.5 units served a full iteration (⌊2.5⌋ or ⌈2.5⌉ with probability ½ each), 1 unit a prompt: the
    # queue is stable below 2.5 arrivals an iteration, and the served units per iteration equal the arrivals
    mu = 2.0
    pi, cut = stationary(Lattice(1, 2.5, 2.5, 1.0, False), np.full(800, mu), 800)
    q = np.arange(800)
    served = pi @ np.where(q > 2, 2.5, q)  # above ⌊cap⌋ a full iteration serves 2.5 on average
    assert cut < 1e-9 and served == pytest.approx(mu, rel=1e-6)


def test_the_wait_for_a_running_slot_is_erlang_c_halved_for_fixed_lengths():
    # decode iterations of a fixed θ (no slowdown with the count): the count is M/M/c's below the cap, so the
    # wait is Erlang C's. c = 4 slots, λ = 3/s, a lifetime 100 · 0.01 s = 1 s (A = 3 Erlangs):
    # C(4, 3) = (3⁴/4!·4/(4 − 3)) / (1 + 3 + 9/2 + 27/6 + 3⁴/4!·4) = 13.5 / 26.5 = 0.509434, W = C/(4·1 − 3) s;
    # every request decodes 100 iterations (G = 101): Allen–Cunneen's (1 + 0)/2 of it, 0.254717 s
    p = _decoders_law(np.array([0.01, 0.01]), np.array([0.0, 4.0]), 3.0, 100.0, 4)
    running, wait = _slot_wait(p, 0.01, 4, 3.0, 100.0, Requests(1, 101))
    assert wait == pytest.approx(0.5 * 13.5 / 26.5, rel=1e-9)
    assert running[-1] == pytest.approx(13.5 / 26.5, rel=1e-9)  # all four busy: Erlang C's probability
    assert running.sum() == pytest.approx(1.0)
    with pytest.raises(WorkloadError, match=r"exceeds what this deployment sustains \(4 requests/s with 4 decoding"):
        _slot_wait(p, 0.01, 4, 4.5, 100.0, Requests(1, 101))


def _case(model: str, engine: str, prompt: int, gen: int):
    dev = Device(resolve(model), H100, Precision(), efficiency("expected", H100))
    eng = engines.preset(engine, H100)
    req = Requests(prompt, gen)
    bmax = memory(dev, eng, req).max_resident
    grid = np.unique(np.concatenate([np.geomspace(1, bmax, 64), [bmax]]))
    top = float(steady_state(dev, eng, req, grid, bmax).requests_s.max())  # the largest rate served
    return dev, eng, req, bmax, top


def _closed_form(dev, eng, req, bmax, rate):
    return poisson_state(dev, eng, req, rate_to_concurrency(dev, eng, req, rate, bmax), rate, bmax)


def _mean_field_decoders(dev, eng, req, bmax, rate) -> float:
    c = rate_to_concurrency(dev, eng, req, rate, bmax)
    return float(steady_state(dev, eng, req, [c], bmax).decode_batch[0])


# (prompt, gen, share of the largest rate): long prompts put r = 33 and 129 units in a prompt, the band about
# 700 and 1,400 units wide; at 16,384 tokens and 90% the coarser lattice (r = 64) is kept
EQUAL_CASES = [(1024, 256, 0.1), (1024, 256, 0.5), (1024, 256, 0.9), (4096, 64, 0.5), (4096, 64, 0.9),
               (16384, 64, 0.5), (16384, 64, 0.9)]  # fmt: skip


@pytest.mark.parametrize("prompt,gen,load", EQUAL_CASES)
def test_the_direct_solve_equals_the_power_iteration(prompt, gen, load, monkeypatch):
    # the reference power iteration of the same chain (tests/power_iteration.py): on the same lattice and states,
    # the same law to 1e-6, then TTFT and TPOT to 1e-6 with each one's choice of lattice and truncation
    dev, eng, req, bmax, top = _case("llama-3.1-8b", "vllm", prompt, gen)
    rate = load * top
    K, chunked = _budget(eng, req)
    d = _mean_field_decoders(dev, eng, req, bmax, rate)
    law = queue_law(Decoding(dev), eng, req, rate, d, K, chunked)
    n = len(law.pi)
    old, _ = power_stationary(law.lat, rate * law.tau, n)
    assert np.abs(law.pi - old).sum() < 1e-6
    held = old > 1e-6  # the states that hold the mass: each to 1e-6
    np.testing.assert_allclose(law.pi[held], old[held], rtol=1e-6)
    direct = _closed_form(dev, eng, req, bmax, rate)
    monkeypatch.setattr(prompt_queue, "queue_law", power_queue_law)
    iterated = _closed_form(dev, eng, req, bmax, rate)
    assert direct.ttft_s[0] == pytest.approx(iterated.ttft_s[0], rel=1e-6)
    assert direct.tpot_s[0] == pytest.approx(iterated.tpot_s[0], rel=1e-6)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_near_the_largest_rate_the_answer_is_finite_and_grows(engine):
    # 90%, 99%, 99.9% of the largest rate the deployment serves: finite TTFT and TPOT, the wait growing
    # toward saturation; just past it, the one-line refusal naming the rate
    dev, eng, req, bmax, top = _case("llama-3.1-8b", engine, 1024, 256)
    ttft = []
    for load in (0.9, 0.99, 0.999):
        ss = _closed_form(dev, eng, req, bmax, load * top)
        assert np.isfinite(ss.ttft_s[0]) and np.isfinite(ss.tpot_s[0])
        ttft.append(float(ss.ttft_s[0]))
    assert ttft[0] < ttft[1] < ttft[2]
    with pytest.raises(WorkloadError, match=r"exceeds what this deployment sustains \([0-9.]+ requests/s"):
        _closed_form(dev, eng, req, bmax, 1.0001 * top)


def test_a_rate_above_the_largest_is_refused_naming_it(capsys):
    # the queue would grow without bound: a one-line error with the largest rate, never a growing TTFT
    with pytest.raises(WorkloadError, match=r"exceeds what this deployment sustains \([0-9.]+ requests/s"):
        serve("llama-3.2-1b", "h100-sxm", workload=Workload(prompt=1024, gen=256, rate=1e6))
    code, _, err = run_cli(capsys, "analyze", "llama-3.2-1b", "-H", "h100-sxm", "--rate", "1e6", "--json")
    assert code == 2 and "exceeds what this deployment sustains" in err and "Traceback" not in err


def test_a_refusal_over_attention_dp_replicas_states_the_whole_deployment():
    # each of D replicas takes 1/D of the requests, so the deployment sustains D times one replica's rate; the
    # refusal names the rate the user gave (not 1/D of it) and D times the replica's limit
    from llmath.deploy.layout import ParallelConfig

    with pytest.raises(RateError) as one:
        serve("llama-3.2-1b", "h100-sxm", workload=Workload(prompt=1024, gen=256, rate=1e6))
    with pytest.raises(RateError) as two:
        two_replicas = ParallelConfig(dp=2)
        serve("llama-3.2-1b", "h100-sxm", workload=Workload(prompt=1024, gen=256, rate=1e6), parallel=two_replicas)
    assert two.value.rate == 1e6 and two.value.sustained == pytest.approx(2 * one.value.sustained, rel=1e-9)
    assert "request rate 1e+06/s" in str(two.value) and "2 attention-DP replicas" in str(two.value)


def test_a_rate_the_prompt_budget_cannot_serve_is_refused_by_the_chain():
    # the prompt tokens arriving during a full-budget iteration outnumber its budget: the chain has no law
    dev, eng, req, bmax, _ = _case("llama-3.1-8b", "vllm", 1024, 256)
    law = queue_law(Decoding(dev), eng, req, 1.0, 0.0, 8192.0, True)
    tau_full = float(law.tau[-1])
    beyond = 1.01 * 8192 / (1024 * tau_full)  # the budget's 8192 tokens a full iteration, 1024 a prompt
    with pytest.raises(WorkloadError, match=r"exceeds what this deployment's prompt budget serves \([0-9.]+ req"):
        queue_law(Decoding(dev), eng, req, beyond, 0.0, 8192.0, True)


def test_rates_below_one_request_in_flight_are_answered():
    # Little's law gives under one request in flight at 0.1/s (a 4k prompt, 256 tokens out: e2e about 2 s):
    # the answer is one request alone, its prefill and its decode steps, not a refusal of the concurrency
    rep = serve("llama-3.1-8b", "h100-sxm", workload=Workload(prompt=4096, gen=256, rate=0.1))
    alone = serve("llama-3.1-8b", "h100-sxm", workload=Workload(prompt=4096, gen=256, concurrency=1))
    assert np.isfinite(rep.metrics["ttft_s"]) and rep.metrics["concurrency_per_replica"] < 1
    assert rep.metrics["ttft_s"] == pytest.approx(alone.metrics["ttft_s"], rel=0.03)  # +1.3%: others, rarely
    assert rep.metrics["tpot_s"] == pytest.approx(alone.metrics["tpot_s"], rel=0.03)


# Llama-3.1-8B on one H100, 1,024-token prompts and 256 out, each engine's preset (vLLM: mixed prefill,
# 8,192-token chunked budget; TensorRT-LLM: mixed, prompts whole; SGLang: prefill-first), at a share of the
# largest rate the deployment serves. Measured closed form against the simulation (signed TTFT, TPOT,
# throughput). TPOT is bounded at 6% for SGLang at 75% (measured −5.2%: the decoders' count spreads wider in
# the simulation than the symmetric queue's law, docs/serving.md "Arrival protocols"), 3% elsewhere.
LOADS = [
    ("vllm", 0.5, 0.03),  # +3.6%, −2.4%, −2.6%
    ("vllm", 0.75, 0.03),  # +1.1%, −0.9%, −0.1%
    ("trtllm", 0.5, 0.03),  # +1.3%, −1.6%, −1.3%
    ("trtllm", 0.75, 0.03),  # +2.7%, −2.5%, +1.8%
    ("sglang", 0.5, 0.03),  # +2.8%, −1.3%, −1.7%
    ("sglang", 0.75, 0.06),  # +2.3%, −5.2%, −1.0%
]


@pytest.mark.parametrize("engine,load,tpot_bound", LOADS)
def test_poisson_agrees_with_the_simulation(engine, load, tpot_bound):
    dev, eng, req, bmax, top = _case("llama-3.1-8b", engine, 1024, 256)
    rate = load * top
    ss = _closed_form(dev, eng, req, bmax, rate)
    # about 1,500 requests arrive (the statistics take the middle third of them)
    iterations = int(750 / (rate * float(dev.iteration(1, 1024).time_s)))
    sim = simulate(dev, eng, req, 1, bmax, iterations=iterations, arrival="poisson", rate=rate)
    assert ss.ttft_s[0] == pytest.approx(sim.ttft_s, rel=0.05)
    assert ss.tpot_s[0] == pytest.approx(sim.tpot_s, rel=tpot_bound)
    # throughput: λ·E[G] exactly (every request served); the simulation's over its second half
    assert ss.throughput_tok_s[0] == pytest.approx(sim.throughput_tok_s, rel=0.05)


def test_a_vanishing_rate_is_one_request_into_an_idle_engine():
    # at 10⁻³⁰ requests/s (μ = λ·τ ~ 10⁻³² arrivals an iteration, so 1 − P(A = 0) rounds to 0 in floating point)
    # every request still finds the engine idle: the same finite TTFT as at 10⁻⁹/s, not NaN
    tiny, rare = (
        serve("llama-3.1-8b", "h100-sxm", workload=Workload(prompt=512, gen=128, rate=r)) for r in (1e-30, 1e-9)
    )
    assert np.isfinite(tiny.metrics["ttft_s"]) and np.isfinite(tiny.metrics["concurrency_per_replica"])
    assert tiny.metrics["ttft_s"] == pytest.approx(rare.metrics["ttft_s"], rel=1e-6)


def test_a_prompt_many_budgets_long_keeps_the_band_bounded(monkeypatch):
    # a 100,000-token prompt against vLLM's 8,192-token budget: r = 782 units a prompt, the arrivals reaching
    # thousands of units up (4,096 states would need 23 million numbers); every band the chain builds holds at
    # most 8·2²⁰ numbers (64 MiB)
    from llmath.deploy import banded_chain

    sizes = []
    init = banded_chain.Band.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        sizes.append(self.store.size)

    monkeypatch.setattr(banded_chain.Band, "__init__", recording)
    rep = serve("llama-3.1-8b", "h100-sxm", workload=Workload(prompt=100_000, gen=64, rate=0.05))
    assert np.isfinite(rep.metrics["ttft_s"]) and sizes
    assert max(sizes) <= 8 * 2**20  # 64 MiB of float64
