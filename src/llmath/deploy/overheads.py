"""Per-request and per-iteration serving overheads of an engine: explicit terms added to the roofline's times.

The roofline times the kernels of a pass (with a per-kernel launch overhead). An engine also spends time outside
the kernels, on the critical path unless it overlaps that work with the GPU:

* ``per_request_s``: once per request, before its first token: admission and scheduling, tokenisation, the
  first detokenisation.
* ``per_iteration_s``: every decode iteration with CUDA graphs: the scheduler step, input preparation, the
  graph launch, and the sampling and bookkeeping not hidden behind the GPU.
* ``per_iteration_eager_s``: the same for an iteration not replayed from a graph (every prefill pass; decode
  steps with ``cuda_graphs=False``).
* ``per_token_s``: per sequence per decode iteration: sampling and incremental detokenisation that scale with
  the batch.
* ``per_prompt_token_s``: per prompt token, once per request before its prefill: tokenisation of the prompt
  text (servers that take text; engines benchmarked with token ids skip it).
* ``eager_host_per_kernel_s``: per kernel of a pass the engine launches from Python op by op (not replayed
  from a CUDA graph): the host's dispatch and launch work. Not added to the GPU time: such a pass takes the
  longer of the two (:func:`llmath.hardware.roofline.eager_host_s`, applied by :class:`llmath.deploy.Device`).
* ``piecewise_host_per_layer_s``: per attention call of a pass that prefills and replays piecewise CUDA graphs
  (vLLM): the eager attention call and the graph replay around it. Such a pass takes the longer of its GPU time
  and this × its attention calls (:func:`llmath.hardware.roofline.piecewise_host_s`).
* ``moe_prefill_host_per_layer_s``: per routed-expert layer of a pass that prefills, added to the pass's time
  (not overlapped with it): the first-token excess of vLLM's MoE passes that prefill, fitted to the measured rows
  (``docs/serving-runs.md``, "vLLM MoE passes that prefill: a time per routed-expert layer").
* ``host_step_s`` / ``host_step_per_request_s``: the host's work per step, a constant and a part per request the
  step carries (scheduling, input preparation, sampling bookkeeping, responses): not added, the step lasts the
  longer of its GPU time and that time under an overlap scheduler, the sum without one
  (:mod:`llmath.deploy.host_step`, applied by :class:`llmath.deploy.Device`).
* ``front_end_s``: once per request sent to the engine's server (continuous-batching serving, not a static
  batch): its HTTP handling, hand-off to the scheduler and first streamed chunk. 0 in every preset: no source
  states it, and the value fitted to measured serving runs is refuted by the held-out published results
  (``docs/serving-runs.md``, "The server's front-end time").

Kernel launches and CUDA-graph replays are *not* terms here: the roofline already charges every kernel its
launch (the fitted per-kernel ``t0`` of CUDA-graph-timed kernels, or the eager ``overhead_s``).

Every term carries its source (engine documentation, source code or published profiling), never a value chosen
from end-to-end benchmark results; a term without a source is 0 (not modelled) and says so. The presets' values
live in ``data/engines.json`` (``overheads`` of each engine). Applied to a static generation (:func:`apply`;
the serving steady state adds the same terms per iteration, :mod:`llmath.deploy.serving`):

    TTFT' = TTFT + per_request + P · per_prompt_token + prefill_iterations · per_iteration_eager
    TPOT' = TPOT + per_iteration(graphs) + B · per_token
    e2e'  = TTFT' + (G − 1) · TPOT',  throughput' = B · G / e2e'
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from llmath.errors import WorkloadError

TERMS = (
    "per_request_s",
    "per_iteration_s",
    "per_iteration_eager_s",
    "per_token_s",
    "per_prompt_token_s",
    "front_end_s",
    "eager_host_per_kernel_s",
    "piecewise_host_per_layer_s",
    "moe_prefill_host_per_layer_s",
    "host_step_s",
    "host_step_per_request_s",
)


@dataclass(frozen=True)
class Overheads:
    """An engine's overhead terms (seconds) and, per term, its source (see the module docstring)."""

    name: str = "none"
    per_request_s: float = 0.0
    per_iteration_s: float = 0.0
    per_iteration_eager_s: float = 0.0
    per_token_s: float = 0.0
    per_prompt_token_s: float = 0.0
    front_end_s: float = 0.0
    eager_host_per_kernel_s: float = 0.0
    piecewise_host_per_layer_s: float = 0.0
    moe_prefill_host_per_layer_s: float = 0.0
    host_step_s: float = 0.0
    host_step_per_request_s: float = 0.0
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for k in TERMS:
            v = getattr(self, k)
            if not (isinstance(v, int | float) and 0 <= v < 1):
                raise WorkloadError(f"engine overhead {k}={v!r} must be seconds in [0, 1); check the preset")
            if v and not self.sources.get(k):
                raise WorkloadError(f"engine overhead {k}={v!r} has no source; every overhead term needs one")

    def iteration_s(self, cuda_graphs: bool) -> float:
        """Per iteration: the graph-replayed term, or the eager one without graphs."""
        return self.per_iteration_s if cuda_graphs else self.per_iteration_eager_s

    def request_s(self, prompt: int) -> float:
        """Once per request of ``prompt`` tokens: ``per_request_s + prompt · per_prompt_token_s``."""
        return self.per_request_s + prompt * self.per_prompt_token_s

    def served_request_s(self, prompt: int) -> float:
        """Once per request sent to a server: :meth:`request_s` + ``front_end_s``."""
        return self.request_s(prompt) + self.front_end_s

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> Overheads:
        """From a preset's ``overheads`` block: ``{term: {"value": seconds, "source": "..."}}`` (a
        ``description`` entry is prose for the reader)."""
        d = {k: v for k, v in d.items() if k != "description"}
        unknown = set(d) - set(TERMS)
        if unknown:
            raise WorkloadError(f"unknown overhead term(s) {sorted(unknown)} in {name!r}; use {', '.join(TERMS)}")
        vals = {k: float(v["value"]) for k, v in d.items()}
        return cls(name, sources={k: str(v.get("source", "")) for k, v in d.items()}, **vals)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        out["sources"] = dict(self.sources)
        return out


def apply(metrics: dict[str, Any], ov: Overheads, batch: int, gen: int, cuda_graphs: bool = True,
          prefill_iterations: int = 1, prompt: int = 0) -> dict[str, Any]:  # fmt: skip
    """``metrics`` (``ttft_s``, ``tpot_s``) of a generation of ``gen`` tokens for ``batch`` sequences with the
    engine's overheads added (the module docstring's formulas; ``prompt`` tokens for the tokenisation term); a
    new dict with an ``overheads_s`` breakdown (``ttft`` and ``tpot`` added, and the terms behind them)."""
    if prefill_iterations < 1:
        raise WorkloadError(f"prefill_iterations={prefill_iterations} must be >= 1")
    it = ov.iteration_s(cuda_graphs)
    ttft_add = ov.request_s(prompt) + prefill_iterations * ov.per_iteration_eager_s
    tpot_add = (it + batch * ov.per_token_s) if gen > 1 else 0.0
    out = dict(metrics)
    out["ttft_s"] = metrics["ttft_s"] + ttft_add
    out["tpot_s"] = metrics["tpot_s"] + tpot_add
    out["e2e_s"] = out["ttft_s"] + (gen - 1) * out["tpot_s"]
    out["throughput_tok_s"] = batch * gen / out["e2e_s"]
    _rescale(metrics, out)
    out["overheads_s"] = breakdown(ov, ttft_add, tpot_add)
    return out


def _rescale(before: dict[str, Any], out: dict[str, Any]) -> None:
    """The rates derived from the times that changed (those of :func:`llmath.analysis` generation metrics)."""
    for key, t in (("throughput_tok_s_per_gpu", "e2e_s"), ("per_sequence_tok_s", "e2e_s"), ("prefill_tok_s", "ttft_s"),
                   ("decode_throughput_tok_s", "tpot_s")):  # fmt: skip
        if before.get(key) is not None and before.get(t) and out[t]:
            out[key] = before[key] * before[t] / out[t]


def breakdown(ov: Overheads, ttft: float, tpot: float) -> dict[str, Any]:
    """The ``overheads_s`` entry of a report: what the engine's terms added to TTFT and TPOT, and the terms."""
    out: dict[str, Any] = {"engine": ov.name, "ttft": float(ttft), "tpot": float(tpot)}
    out["terms"] = {k: getattr(ov, k) for k in TERMS}
    out["sources"] = dict(ov.sources)
    return out
