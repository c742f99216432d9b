"""Benchmark clients' closed loop as they run it: how they draw each request's lengths and hand requests out.

A client protocol is data (:class:`BenchClient`): the range ratio r of its random dataset (every prompt and
output length an integer drawn uniformly from [⌊r·L⌋, L], L the stated length), whether its C concurrent slots
share one list of C·m requests (a semaphore over tasks created in order: a slot that frees takes the next
request, so the count per slot varies and the run ends when the list is spent) or each client sends m, the
warm-up requests it sends and awaits before the measured ones (so the measured first wave starts together into
an idle, warmed server), and whether it wraps each prompt of random tokens in the model's chat template (what a
speculative draft accepts depends on it: :func:`llmath.measure.disagg_recipes.mtp_speculation`).
:data:`INFERENCEX` is SemiAnalysis InferenceX's ``utils/bench_serving`` client as its plain launch scripts run it,
:data:`SA_BENCH` the srt-slurm ``sa-bench`` client that ran its disaggregated configurations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from llmath.errors import WorkloadError


@dataclass(frozen=True)
class BenchClient:
    """A benchmark client's closed-loop protocol (module docstring)."""

    name: str
    range_ratio: float = 1.0  # lengths uniform integers in [⌊r·L⌋, L]; 1: the stated lengths
    shared_list: bool = False  # C slots take the next of C·m requests in order; False: each client sends m
    warmups_per_slot: float = 0.0  # warm-up requests (× C) sent at C in flight and awaited before the run
    chat_template: bool = False  # each prompt's random tokens sent inside the chat template (--use-chat-template)
    source: str = ""

    def __post_init__(self) -> None:
        if not 0 < self.range_ratio <= 1:
            raise WorkloadError(f"range_ratio={self.range_ratio!r} must be in (0, 1]")

    def span(self, length: int) -> tuple[int, int]:
        """The lengths drawn for a stated length L: [⌊r·L⌋, L] (at least 1)."""
        return max(int(self.range_ratio * length), 1), int(length)

    def draw(self, length: int, n: int, rng: np.random.RandomState) -> np.ndarray:
        """``n`` lengths drawn as the client draws them: ``rng.randint(⌊r·L⌋, L + 1, size=n)``. The clients
        seed numpy's global generator (``np.random.seed(args.seed)``, ``--seed`` 0 by default) and draw the
        prompts' lengths, then the outputs', so ``np.random.RandomState(0)`` drawn in that order repeats a run's
        own lengths."""
        lo, hi = self.span(length)
        return rng.randint(lo, hi + 1, size=n)

    def lengths(self, length: int) -> tuple[tuple[int, float], ...]:
        """The drawn lengths' distribution, every integer of :meth:`span` at equal weight."""
        lo, hi = self.span(length)
        return tuple((g, 1.0) for g in range(lo, hi + 1))


# SemiAnalysis InferenceX: benchmarks/benchmark_lib.sh run_benchmark_serving passes --dataset-name random
# --random-range-ratio (0.8 from its workflows) --num-prompts 10·CONC --max-concurrency CONC --request-rate inf
# --ignore-eos, and from d053ae24e (2026-01-21) --num-warmups 2·CONC; utils/bench_serving/benchmark_serving.py
# sample_random_requests draws input and output lengths with np.random.randint(⌊r·L⌋, L + 1); benchmark() runs
# the warm-ups under a semaphore of CONC and awaits them all (asyncio.gather), then creates one task per request
# in order, each taking the semaphore of CONC (asyncio.Semaphore wakes its waiters first in, first out)
INFERENCEX = BenchClient(
    "inferencex",
    range_ratio=0.8,
    shared_list=True,
    warmups_per_slot=2.0,
    source="https://github.com/SemiAnalysisAI/InferenceX/blob/1cb92d21d649c91ed589d1facb46d23e168b40a7/"
    "utils/bench_serving/benchmark_serving.py (sample_random_requests, benchmark); benchmarks/benchmark_lib.sh "
    "(run_benchmark_serving); warm-ups from d053ae24e (2026-01-21)",
)
# srt-slurm's ``sa-bench`` (ishandhanani/srt-slurm 2ef1b6db215f5ebd2752db6bbfb4c2f9bf624512,
# src/srtctl/benchmarks/scripts/sa-bench/bench.sh and benchmark_serving.py), the client of every disaggregated
# InferenceX run (its launchers check out srt-slurm's ``sa-submission-q1-2026`` and collect the
# ``results_concurrency_*`` files this script writes; runners/launch_b200-dgxc-slurm.sh at 8fe499ff and
# 26d415b3): per concurrency C, ``--num-warmups 2·C`` then ``--num-prompts 10·C`` at ``--max-concurrency C
# --request-rate inf``, ``--dataset-name random --random-range-ratio 0.8 --ignore-eos --use-chat-template``; its
# benchmark() awaits the warm-ups and runs the measured requests under one semaphore of C, and
# sample_random_requests draws each length with np.random.randint(⌊0.8·L⌋, L + 1) (the prompt's random tokens
# L minus the template's own tokens, then wrapped in the template)
SA_BENCH = BenchClient(
    "sa-bench",
    range_ratio=0.8,
    shared_list=True,
    warmups_per_slot=2.0,
    chat_template=True,
    source="https://github.com/ishandhanani/srt-slurm/blob/2ef1b6db215f5ebd2752db6bbfb4c2f9bf624512/"
    "src/srtctl/benchmarks/scripts/sa-bench/bench.sh (and benchmark_serving.py beside it)",
)
# InferenceX's MTP launch scripts run the same client with ``--use-chat-template`` (benchmarks/dsr1_fp8_b200_trt_mtp.sh
# and dsr1_fp4_b200_trt_mtp.sh at 5d517074c / 0aae52d4c, and the first sweep's dsr1_*_trt_mtp_slurm.sh at bf3456727)
INFERENCEX_MTP = replace(
    INFERENCEX,
    name="inferencex-mtp",
    chat_template=True,
    source="https://github.com/SemiAnalysisAI/InferenceX/blob/5d517074c/benchmarks/dsr1_fp8_b200_trt_mtp.sh "
    "(run_benchmark_serving ... --use-chat-template)",
)
