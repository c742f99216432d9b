"""What :func:`llmath.deploy.service.serve` returns: a served scenario's report, and the scalar metrics of one point of
a :class:`llmath.deploy.serving.SteadyState` grid scaled to its replicas."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from llmath.deploy.serving import SteadyState
    from llmath.deploy.serving_memory import Memory


@dataclass
class ServingReport:
    model: str
    hardware: str
    engine: dict[str, Any]
    workload: dict[str, Any]
    gpus: int
    replicas: int
    memory: Memory
    metrics: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    layout: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "model": self.model,
            "hardware": self.hardware,
            "mode": "continuous_batching",
            "engine": self.engine,
            "workload": self.workload,
            "gpus": self.gpus,
            "replicas": self.replicas,
            "layout": self.layout,
            "memory": asdict(self.memory),
            "notes": self.notes,
        }
        d.update(self.metrics)
        return d


def metrics_at(ss: SteadyState, i: int, gpus: int, replicas: int) -> dict[str, Any]:
    """The scalar metrics of grid point ``i``, scaled to ``replicas`` data-parallel copies on ``gpus`` GPUs."""
    thr = float(ss.throughput_tok_s[i]) * replicas
    return {
        "ttft_s": float(ss.ttft_s[i]),
        "tpot_s": float(ss.tpot_s[i]),
        "itl_p50_s": float(ss.itl_p50_s[i]),
        "itl_p90_s": float(ss.itl_p90_s[i]),
        "itl_p99_s": float(ss.itl_p99_s[i]),
        "e2e_s": float(ss.e2e_s[i]),
        "throughput_tok_s": thr,
        "throughput_tok_s_per_gpu": thr / gpus,
        "tok_s_per_user": 1.0 / float(ss.tpot_s[i]) if ss.tpot_s[i] > 0 else 0.0,
        "requests_s": float(ss.requests_s[i]) * replicas,
        "concurrency_per_replica": float(ss.concurrency[i]),
        "running_per_replica": float(ss.resident[i]),
        "queued_per_replica": float(ss.concurrency[i] - ss.resident[i]),
        "decode_batch": float(ss.decode_batch[i]),
        "prefill_tokens_per_iteration": float(ss.prefill_tokens_per_iter[i]),
        "mixed_iteration_fraction": float(ss.mixed_fraction[i]),
        "decode_step_s": float(ss.step_decode_s[i]),
        "mixed_step_s": float(ss.step_mixed_s[i]),
        "overheads_s": {"ttft": _at(ss.overhead_ttft_s, i), "tpot": _at(ss.overhead_tpot_s, i)},
    }


def without_decode(ss: SteadyState) -> SteadyState:
    """``ss`` for requests of one output token: no decode step, so TPOT and the inter-token latencies are 0, as
    the benchmark clients report them (vLLM ``bench serve`` takes TPOT only from outputs longer than one token
    and averages none as 0: vllm/benchmarks/serve.py ``calculate_metrics``, ``np.mean(tpots or 0)``)."""
    zero = np.zeros_like(np.asarray(ss.tpot_s, dtype=float))
    return replace(ss, tpot_s=zero, itl_p50_s=zero, itl_p90_s=zero, itl_p99_s=zero, overhead_tpot_s=0.0)


def _at(x, i: int) -> float:
    return float(np.asarray(x).reshape(-1)[i]) if np.ndim(x) else float(x)
