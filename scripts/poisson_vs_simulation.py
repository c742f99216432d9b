"""Poisson arrivals: the closed form (``serve(rate=…)``'s :func:`llmath.deploy.prompt_queue.poisson_state`) against
the iteration simulation (:func:`llmath.deploy.simulate.simulate`, ``arrival="poisson"``) on the same device and
engine preset, at shares of the largest rate the deployment serves (docs/serving.md, "Arrival protocols").

Usage: python scripts/poisson_vs_simulation.py [--models llama-3.1-8b,qwen3-30b-a3b] [--engines vllm,trtllm,sglang]
       [--prompts 1024,4096] [--gen 256] [--loads 0.1,0.25,0.5,0.75,0.9] [--requests 1500] [--seed 0]
Prints one markdown row a case: the rate, closed form and simulation TTFT / TPOT, the signed errors. Each case
simulates about ``--requests`` arrivals (at most 40,000 iterations: seconds to tens of seconds each).
"""

from __future__ import annotations

import argparse

import numpy as np

from llmath.deploy import engines
from llmath.deploy.prompt_queue import poisson_state
from llmath.deploy.serving import Requests, rate_to_concurrency, steady_state
from llmath.deploy.serving_memory import memory
from llmath.deploy.simulate import simulate
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

MAX_ITERATIONS = 40_000


def one_model(model: str, engine: str, prompt: int, gen: int, loads: list[float], requests: int, seed: int):
    """Rows (model, engine, prompt, load, rate, closed TTFT, closed TPOT, simulated TTFT, simulated TPOT)."""
    hw = get("h100-sxm")
    dev = Device(resolve(model), hw, Precision(), efficiency("expected", hw))
    eng = engines.preset(engine, hw)
    req = Requests(prompt, gen)
    bmax = memory(dev, eng, req).max_resident
    grid = np.unique(np.concatenate([np.geomspace(1, bmax, 64), [bmax]]))
    top = float(steady_state(dev, eng, req, grid, bmax).requests_s.max())
    step = float(dev.iteration(1, prompt).time_s)  # the shortest iteration: sizes the run
    for load in loads:
        rate = load * top
        try:
            ss = poisson_state(dev, eng, req, rate_to_concurrency(dev, eng, req, rate, bmax), rate, bmax)
        except WorkloadError as e:  # the closed form finds the queue unbounded at this rate
            print(f"| {model} | {engine} | {prompt} | {load:.0%} | {rate:.3g} | refused: {e} |||||")
            continue
        iterations = int(min(MAX_ITERATIONS, max(3000, requests / (2 * rate * step))))
        sim = simulate(dev, eng, req, 1, bmax, iterations=iterations, arrival="poisson", rate=rate, seed=seed)
        yield model, engine, prompt, load, rate, float(ss.ttft_s[0]), float(ss.tpot_s[0]), sim.ttft_s, sim.tpot_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama-3.1-8b,qwen3-30b-a3b")
    ap.add_argument("--engines", default="vllm,trtllm,sglang")
    ap.add_argument("--prompts", default="1024,4096")
    ap.add_argument("--gen", type=int, default=256)
    ap.add_argument("--loads", default="0.1,0.25,0.5,0.75,0.9")
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    loads = [float(x) for x in a.loads.split(",")]
    print("| model | engine | P | load | rate /s | TTFT closed / sim (ms) | TPOT closed / sim (ms) | TTFT | TPOT |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        for engine in a.engines.split(","):
            for prompt in (int(x) for x in a.prompts.split(",")):
                for row in one_model(model, engine, prompt, a.gen, loads, a.requests, a.seed):
                    print(markdown_row(*row), flush=True)


def markdown_row(m: str, e: str, p: int, load: float, rate: float, t: float, o: float, st: float, so: float) -> str:
    ttft = f"{t * 1e3:.1f} / {st * 1e3:.1f}"
    tpot = f"{o * 1e3:.2f} / {so * 1e3:.2f}"
    return f"| {m} | {e} | {p} | {load:.0%} | {rate:.3g} | {ttft} | {tpot} | {t / st - 1:+.1%} | {o / so - 1:+.1%} |"


if __name__ == "__main__":
    main()
