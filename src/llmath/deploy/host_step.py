"""The host's work per engine step: scheduling, input preparation, sampling bookkeeping and responses.

Besides launching kernels (charged per kernel by the roofline, and per launch for an eager pass), an engine's
executor loop does work on the CPU for every step, and much of it is a Python loop over the step's scheduled
requests: TensorRT-LLM's PyTorch backend (``PyExecutor``) schedules them, builds each one's inputs
(``_prepare_tp_inputs``), adds each sampled token to its request (``TorchSampler.update_requests``) and sends
each one's response (``_handle_responses``). So the host's time per step is taken as

    host(n) = base + n · per_request,

n being the requests the step carries (decoding sequences and prefill chunks). How it combines with the GPU's
time ``gpu`` of the same step depends on the engine's scheduler:

* with an overlap scheduler (TensorRT-LLM's, on by default), step n + 1's GPU work is launched before the host
  processes step n's results, so a step lasts ``max(gpu, host(n))``: the host is hidden until it is the longer;
* without one (``disable_overlap_scheduler: true``), the two run one after the other: ``gpu + host(n)``.

The terms are the engine's ``overheads`` ``host_step_s`` and ``host_step_per_request_s``
(:class:`llmath.deploy.overheads.Overheads`, ``data/engines.json`` with their sources); both 0: no host term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from llmath.errors import WorkloadError

if TYPE_CHECKING:
    from llmath.deploy.engine_config import EngineConfig
    from llmath.hardware.roofline import Efficiency


@dataclass(frozen=True)
class HostStep:
    """An engine's host time per step (module doc): ``base_s`` + n × ``per_request_s``, hidden behind the GPU's
    time (``overlap``) or added to it."""

    base_s: float = 0.0
    per_request_s: float = 0.0
    overlap: bool = True

    def __post_init__(self) -> None:
        for name in ("base_s", "per_request_s"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and 0 <= v < 1):
                raise WorkloadError(f"host step {name}={v!r} must be seconds in [0, 1); check the engine's preset")

    @property
    def active(self) -> bool:
        return bool(self.base_s or self.per_request_s)

    def host_s(self, n_requests) -> np.ndarray:
        """The host's seconds for a step carrying ``n_requests`` requests (array; 0 for a step of none)."""
        n = np.asarray(n_requests, dtype=float)
        return np.where(n > 0, self.base_s + n * self.per_request_s, 0.0)

    def step_s(self, gpu_s, n_requests) -> np.ndarray:
        """The step's seconds given its GPU time ``gpu_s``: ``max(gpu, host)`` with the overlap scheduler,
        ``gpu + host`` without it."""
        gpu, host = np.asarray(gpu_s, dtype=float), self.host_s(n_requests)
        return np.maximum(gpu, host) if self.overlap else gpu + host


def engine_host_step(eng: EngineConfig, eff: Efficiency) -> HostStep | None:
    """``eng``'s host time per step (its ``overheads`` terms, its ``overlap_scheduler``), or None where it has
    none or under ``ideal`` efficiency (no engine overheads there: :func:`llmath.deploy.serving.active_overheads`)."""
    ov = eng.overheads
    host = HostStep(ov.host_step_s, ov.host_step_per_request_s, eng.overlap_scheduler)
    return host if host.active and eff.name != "ideal" else None
