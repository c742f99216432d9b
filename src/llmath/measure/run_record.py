"""One measured serving run in llmath's names (:class:`Run`) and the replica layout of each of its pools
(:class:`Layout`), as :mod:`llmath.measure.serving_runs` reads them from a ``serving_runs.csv`` row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmath.deploy.bench_client import BenchClient


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    ep: int
    workers: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


@dataclass(frozen=True)
class Run:
    """One measured run, in llmath's names."""

    id: str
    engine: str
    system: str
    model: str
    source_model: str
    mode: str
    prompt: int
    gen: int
    concurrency: int
    gemm: str
    moe: str
    precision: str
    layout: Layout | None
    prefill: Layout | None
    decode: Layout | None
    ttft_s: float
    tpot_s: float
    assumed: tuple[str, ...] = field(default=())
    range_ratio: float = 1.0  # the client draws each length uniformly from [⌊r·L⌋, L]
    engine_settings: tuple[
        tuple[str, Any], ...
    ] = ()  # what the run's launcher set (collection_harness.launcher_settings)
    speculation: Any = None  # the Speculation its launcher configured (inferencex_harness.INFERENCEX_TRT_MTP), or None
    recipe: str = ""  # a disaggregated row: what its benchmark configuration settles (disagg_recipes.recipe_for)

    def drawn(self, length: int) -> tuple[int, ...]:
        """The lengths the client draws for a stated length L, equally likely: every integer of [⌊r·L⌋, L]
        (:meth:`llmath.deploy.bench_client.BenchClient.lengths`; just L when fixed)."""
        return tuple(g for g, _ in BenchClient("run", self.range_ratio).lengths(length))

    @property
    def lengths(self) -> str:
        return f"{self.prompt}/{self.gen}"
