"""The closed loop when the engine's running-request cap binds (C clients > B places): the closed form of
:mod:`llmath.deploy.closed_loop` against the iteration simulation of :mod:`llmath.deploy.simulate`.

The simulation is an independent implementation of the protocol: it runs it literally, iteration by
iteration (C clients started together, each sending its next request when its previous one completes; the
requests beyond the cap wait in the engine's queue, first come first served, and a freed place takes the
queue's head), and shares with the closed form only the iteration cost model (:meth:`Device.iteration`) and
the engine's overhead terms."""

import numpy as np
import pytest

from llmath.deploy import engines
from llmath.deploy.closed_loop import lockstep_state
from llmath.deploy.drifting_loop import drifting_state
from llmath.deploy.serving import Requests
from llmath.deploy.simulate import simulate
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100 = get("h100-sxm")
CAP = 8  # the engine's running-request cap (max_num_seqs / max running requests)

# (engine, prompt, output, token budget, chunked): TensorRT-LLM-like mixed batches of whole prompts (one per
# iteration beside the decoders), vLLM-like chunked mixed batches (eight short prompts in one iteration; a long
# prompt chunked over four), SGLang-like prefill-first batches; short and long prompts and outputs
ENGINES = [
    ("trtllm", 2048, 512, 3600, False),
    ("trtllm", 4096, 256, 5600, False),
    ("vllm", 1024, 128, 8192, True),
    ("vllm", 8192, 256, 2048, True),
    ("sglang", 1024, 128, 8192, True),
    ("sglang", 4096, 256, 8192, True),
]


def _pair(engine: str, prompt: int, gen: int, budget: int, chunked: bool, conc: int, prompts_per_client: int = 3):
    dev = Device(resolve("llama-3.1-8b"), H100, Precision(), efficiency("expected", H100))
    eng = engines.preset(engine, H100, max_num_batched_tokens=budget, chunked_prefill=chunked)
    req = Requests(prompt, gen)
    ss = lockstep_state(dev, eng, req, [conc], CAP, prompts_per_client=prompts_per_client)
    sim = simulate(dev, eng, req, conc, CAP, iterations=200_000, arrival="closed",
                   prompts_per_client=prompts_per_client)  # fmt: skip
    return ss, sim


@pytest.mark.parametrize("engine,prompt,gen,budget,chunked", ENGINES)
@pytest.mark.parametrize("conc", [2 * CAP, 4 * CAP])
def test_a_deep_queue_agrees_with_the_simulation_within_2_percent(engine, prompt, gen, budget, chunked, conc):
    # C = 2B and 4B: the C − B requests not running were all sent before any running one ends, so a freed place
    # is taken the next iteration and each place repeats its burst every cycle; a request queues (C/B − 1)
    # cycles on average (Little's law), C/B − 1 = 1 and 3 here (2B through the admission recurrence, 4B
    # through the deep queue's cycles)
    ss, sim = _pair(engine, prompt, gen, budget, chunked, conc)
    assert ss.resident[0] == CAP
    assert ss.ttft_s[0] == pytest.approx(sim.ttft_s, rel=0.02)
    assert ss.tpot_s[0] == pytest.approx(sim.tpot_s, rel=0.02)
    # the wait is mostly the queue, cycles of G − 1 decode steps and a prompt: at 4B clients the first 32
    # requests wait Σ ⌊r / 8⌋ / 32 = 8·(0 + 1 + 2 + 3) / 32 = 1.5 cycles on average and the later ones 3, so with
    # three prompts per client (1.5 + 2·3) / 3 = 2.5 cycles
    if conc == 4 * CAP:
        # (the mean TPOT also weighs the first wave's, which decodes through fewer prefills: 2.4, not 2.5)
        assert ss.ttft_s[0] > 2.4 * (gen - 1) * ss.tpot_s[0]


@pytest.mark.parametrize("prompts_per_client", [1, 10])
def test_the_first_wave_behind_the_cap_and_a_long_run_agree_with_the_simulation(prompts_per_client):
    # 16 clients, 8 places, 8k prompts chunked over four iterations: the 8 queued first requests are admitted as
    # the first wave ends, its requests decoding through their prefills (one prompt alone: offline-like)
    ss, sim = _pair("vllm", 8192, 256, 2048, True, 2 * CAP, prompts_per_client)
    assert ss.ttft_s[0] == pytest.approx(sim.ttft_s, rel=0.02)
    assert ss.tpot_s[0] == pytest.approx(sim.tpot_s, rel=0.02)


# the same schedulers with shorter outputs (a cycle of 64-128 decode steps), so that a sweep over every
# concurrency stays quick; the long chunked prompt's burst (32 iterations) is then half the cycle
SWEEP = [(e, p, min(g // 4, 128), k, c) for e, p, g, k, c in ENGINES]


@pytest.mark.parametrize("engine,prompt,gen,budget,chunked", SWEEP)
def test_from_cap_plus_one_to_three_caps_the_closed_form_agrees_with_the_simulation(
    engine, prompt, gen, budget, chunked
):
    # every concurrency from B + 1 to 3B, three prompts per client: between B and 3B the groups of requests
    # that end together split apart from cycle to cycle (eight that end together at 9 clients become 1 + 7,
    # then 1 + 1 + 6, ...), which the admission recurrence follows request by request; at 3B the queue holds
    # a taker for every place that frees. The simulation runs the scheduler iteration by iteration and is
    # the independent reference
    for conc in range(CAP + 1, 3 * CAP + 1):
        ss, sim = _pair(engine, prompt, gen, budget, chunked, conc)
        assert ss.resident[0] == CAP
        assert ss.ttft_s[0] == pytest.approx(sim.ttft_s, rel=0.02), conc
        assert ss.tpot_s[0] == pytest.approx(sim.tpot_s, rel=0.02), conc
        assert ss.e2e_s[0] == pytest.approx(sim.e2e_s, rel=0.02), conc


H200 = get("h200")


@pytest.mark.parametrize(
    "engine,prompt,gen,budget,chunked",
    [("vllm", 2048, 128, 8192, True), ("trtllm", 1024, 128, 2048, False), ("sglang", 2048, 128, 8192, True)],
)
def test_a_moe_model_with_ten_prompts_per_client_agrees_between_the_cap_and_three_caps(
    engine, prompt, gen, budget, chunked
):
    # another model, device and cap (Qwen3-30B-A3B on one H200, 6 places) and the benchmark recipe's ten prompts
    # per client, where the split of the groups that end together lasts most of the run
    cap = 6
    dev = Device(resolve("qwen3-30b-a3b"), H200, Precision(), efficiency("expected", H200))
    eng = engines.preset(engine, H200, max_num_batched_tokens=budget, chunked_prefill=chunked)
    req = Requests(prompt, gen)
    concs = [cap + 1, cap + cap // 2, 2 * cap + 1, 3 * cap - 1]
    ss = lockstep_state(dev, eng, req, concs, cap, prompts_per_client=10)
    for i, conc in enumerate(concs):
        sim = simulate(dev, eng, req, conc, cap, iterations=200_000, arrival="closed", prompts_per_client=10)
        assert ss.ttft_s[i] == pytest.approx(sim.ttft_s, rel=0.02), conc
        assert ss.tpot_s[i] == pytest.approx(sim.tpot_s, rel=0.02), conc


@pytest.mark.parametrize("engine,prompt,gen,budget,chunked", ENGINES)
def test_offline_throughput_is_the_requests_over_the_time_the_last_one_ends(engine, prompt, gen, budget, chunked):
    # offline: C requests queued at once and none after them; the throughput is their tokens over the time the
    # last one ends (as the simulation counts it), whether C fills the places or not: at 12 clients on 8 places
    # the second group is half full, so the engine does not run B requests per cycle
    dev = Device(resolve("llama-3.1-8b"), H100, Precision(), efficiency("expected", H100))
    eng = engines.preset(engine, H100, max_num_batched_tokens=budget, chunked_prefill=chunked)
    req = Requests(prompt, gen)
    concs = [4, CAP, CAP + CAP // 2, 2 * CAP, 5 * CAP]
    ss = lockstep_state(dev, eng, req, concs, CAP, replace=False)
    for i, conc in enumerate(concs):
        sim = simulate(dev, eng, req, conc, CAP, iterations=200_000, arrival="offline")
        assert ss.throughput_tok_s[i] == pytest.approx(sim.throughput_tok_s, rel=0.02), conc
        assert ss.ttft_s[i] == pytest.approx(sim.ttft_s, rel=0.02), conc


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_output_lengths_that_vary_queue_for_a_place_within_the_stated_bound(engine):
    # out of step after the first wave (nine output lengths from 102 to 128, the simulation's evenly mixed
    # sequence, ten prompts per client): a request queues (C − B)/B lifetimes in a place net of its transit
    # (Little's law); just above the cap the simulation's requests wait less than that (docs/serving.md, "When
    # the running-request cap binds": +10.1% and +10.3% at 9 clients, +5.2% and +5.6% at 12, +2.1% and +2.3% at 16)
    dev = Device(resolve("llama-3.1-8b"), H100, Precision(), efficiency("expected", H100))
    eng = engines.preset(engine, H100, max_num_batched_tokens=8192, chunked_prefill=True)
    req = Requests(1024, 1, gen_dist=tuple((int(g), 1.0) for g in np.linspace(102, 128, 9).round()))
    for conc, bound in ((CAP + 1, 0.12), (CAP + CAP // 2, 0.07), (2 * CAP, 0.03)):
        ss = drifting_state(dev, eng, req, [conc], CAP, 10)
        sim = simulate(dev, eng, req, conc, CAP, iterations=200_000, arrival="closed", prompts_per_client=10)
        assert sim.ttft_s < ss.ttft_s[0] < (1 + bound) * sim.ttft_s, conc
        assert ss.tpot_s[0] == pytest.approx(sim.tpot_s, rel=0.02), conc
