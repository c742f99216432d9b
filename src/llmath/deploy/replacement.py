"""When a request sent in reply to a finished one is taken in: the passes already scheduled
(``replacement_lag``) and the front end's time o_req (docs/serving.md, "The front-end time: one convention",
"vLLM's batch queue", "The overlap loops of TensorRT-LLM and SGLang")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from llmath.deploy.engine_config import EngineConfig


def queued_passes(eng: EngineConfig) -> int:
    """Passes already queued behind the one in flight when a request reaches the scheduler: ``replacement_lag``
    − 1 where the engine takes requests in only at a pass's top, once the oldest pass's outputs are out, and
    keeps that many more passes scheduled (``lag_from_arrival``: vLLM's batch queue with async scheduling,
    TensorRT-LLM's and SGLang's overlap loops), else
    none (the lag counts from the send, overlapping the front end)."""
    return eng.replacement_lag - 1 if eng.lag_from_arrival else 0


def joined_passes(eng: EngineConfig, o_req, tau):
    """Passes of τ from a follow-up's send to the pass that takes it in: the ``replacement_lag`` passes already
    scheduled, or the ⌈o_req / τ⌉ passes its front end outlasts, plus those queued behind them where the lag
    counts from its arrival (:func:`queued_passes`)."""
    behind = np.maximum(np.ceil(o_req / tau - 1e-9), 1.0)
    return np.maximum(float(eng.replacement_lag), behind + queued_passes(eng))


def staggered_wait(eng: EngineConfig, o_req, mean, second_moment):
    """An out-of-step follow-up's wait from its arrival, o_req after its send, to the pass that takes it in, over
    passes of mean τ̄ and second moment E[τ²]: within the ``replacement_lag`` passes already scheduled, for them
    (lag·τ̄ − o_req); later, for the end of the pass in flight (its length-biased mean residual E[τ²] / 2τ̄) and
    the passes queued behind it (:func:`queued_passes`)."""
    return np.maximum(eng.replacement_lag * mean - o_req, queued_passes(eng) * mean + second_moment / (2 * mean))
