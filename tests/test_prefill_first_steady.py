"""The desynchronised steady state of a prefill-first engine (SGLang's default: prompt passes run alone, the
decoding requests wait): its closed form (deploy/prefill_first.py) against the iteration simulation, whose
scheduler runs the same policy (deploy/simulate.py: ``if chunks and not eng.mixed_prefill``)."""

import dataclasses

import numpy as np
import pytest

from llmath.deploy import engines, prefill_first
from llmath.deploy.closed_loop import staggered_state
from llmath.deploy.serving import Requests, steady_state
from llmath.deploy.serving_memory import memory
from llmath.deploy.simulate import simulate
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100 = get("h100-sxm")


def _device(model: str, eff: str = "expected") -> Device:
    return Device(resolve(model), H100, Precision(), efficiency(eff, H100))


@pytest.mark.parametrize(
    "model,prompt,gen,conc",
    [
        ("llama-3.2-1b", 1024, 128, 16),  # measured: TTFT +0.2%, TPOT −0.1%, throughput −0.2%
        ("llama-3.1-8b", 1024, 256, 16),  # +5.1%, −0.1%, +0.0%
        ("llama-3.2-1b", 4096, 256, 16),  # +1.6%, −0.3%, +0.5%
        ("llama-3.1-8b", 4096, 256, 16),  # +5.1%, −0.3%, +0.3% (a random arrival's length-biased boundary wait: +17%)
        ("qwen3-30b-a3b", 1024, 256, 32),  # MoE: +3.2%, −0.1%, +0.4%
    ],
)
def test_prefill_first_staggered_clients_agree_with_the_simulation(model, prompt, gen, conc):
    # the bounds of the mixed engines' staggered loop (tests/test_closed_loop.py, docs/serving.md): TPOT and
    # throughput within 2%, TTFT within 10% (the mean field's wait for a pass boundary is the longer one)
    dev, eng, req = _device(model), engines.preset("sglang", H100), Requests(prompt, gen)
    assert eng.mixed_prefill is False  # SGLang's default, sourced in data/engines.json
    top = memory(dev, eng, req).max_resident
    closed = staggered_state(dev, eng, req, [conc], top)
    sim = simulate(dev, eng, req, conc, top, iterations=4000, arrival="staggered", lag=True)
    assert float(closed.ttft_s[0]) == pytest.approx(sim.ttft_s, rel=0.1)
    assert float(closed.tpot_s[0]) == pytest.approx(sim.tpot_s, rel=0.02)
    assert float(closed.throughput_tok_s[0]) == pytest.approx(sim.throughput_tok_s, rel=0.02)
    # the decoding requests wait through the others' prompt passes: a longer TPOT than the same engine mixing
    # the prompts into its decode passes, in the closed form as in the simulation
    mixed = dataclasses.replace(eng, mixed_prefill=True)
    mixed_sim = simulate(dev, mixed, req, conc, top, iterations=4000, arrival="staggered", lag=True)
    assert sim.tpot_s > mixed_sim.tpot_s
    assert float(closed.tpot_s[0]) > float(staggered_state(dev, mixed, req, [conc], top).tpot_s[0])


def test_one_request_alone_runs_its_prompt_pass_then_its_decode_passes():
    # B = 1 (no others' prompts to wait through): E = B·u + S·τ_d = T_p + S·τ_d (n = 1), so
    # TTFT = one prompt pass of P tokens (no decode tokens in it) and TPOT = one decode pass of one sequence;
    # ideal efficiency (no engine overheads) and an unchunked budget above the prompt: I_p = 1
    dev, req = _device("llama-3.2-1b", "ideal"), Requests(1024, 128)
    eng = engines.preset("sglang", H100)
    ss = steady_state(dev, eng, req, np.array([1.0]), 64)
    prompt_pass = float(dev.iteration(0, 0, 1, 1024, 0).time_s)
    decode_pass = float(dev.iteration(1, req.decode_context).time_s)
    assert float(ss.ttft_s[0]) == pytest.approx(prompt_pass, rel=1e-9)
    assert float(ss.tpot_s[0]) == pytest.approx(decode_pass, rel=1e-9)
    assert float(ss.e2e_s[0]) == pytest.approx(prompt_pass + req.decode_steps * decode_pass, rel=1e-9)


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "sglang"])
def test_mixed_engines_keep_their_own_closed_form(engine, monkeypatch):
    # engines that mix prompts into decode passes never reach the prefill-first form (their outputs are the
    # mixed closed form's, unchanged); a prefill-first engine always does
    def refuse(*_args, **_kw):
        raise AssertionError("the prefill-first form was used")

    monkeypatch.setattr(prefill_first, "prefill_first_state", refuse)
    dev, req = _device("llama-3.2-1b"), Requests(1024, 128)
    eng = engines.preset(engine, H100, mixed_prefill=True)
    ss = steady_state(dev, eng, req, np.array([1.0, 16.0]), 64)
    assert np.all(np.isfinite(ss.tpot_s))
    with pytest.raises(AssertionError, match="prefill-first"):
        steady_state(dev, dataclasses.replace(eng, mixed_prefill=False), req, np.array([16.0]), 64)
