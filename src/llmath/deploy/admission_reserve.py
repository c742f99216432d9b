"""The KV a running request holds back from admission: its tokens in the pool and a reserve for its output to come.

An engine that allocates KV on demand may still admit a new request only when the pool keeps room for the
running requests' remaining output. SGLang does (sglang 0.5.9, ``managers/schedule_policy.py``):
``PrefillAdder.rem_total_tokens`` is the pool's free tokens less ``rem_total_token_offset``, the sum over the
running requests of ``_get_running_request_total_token_offset`` = min(max_new_tokens − tokens out,
``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``) × ``new_token_ratio``; a prompt is refused (``NO_TOKEN``) when it does
not fit what is left, on both admission paths (``add_one_req``, and ``add_one_req_ignore_eos`` with
``ignore_eos`` and the radix cache off, whose further check walks the running requests in order of tokens left,
counting each one's whole remaining output and freeing its tokens as it finishes). ``managers/scheduler.py`` lowers
``new_token_ratio`` after every decode step from 0.7 (``SGLANG_INIT_NEW_TOKEN_RATIO``) to 0.7 × 0.14 = 0.098
(``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR``) over 600 steps (``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS``) and raises it only
when it retracts requests, so a closed loop that runs thousands of steps without a retraction admits at 0.098.

In the steady state the requests' ages are spread over their lifetimes: a request with G outputs has r tokens left
for r = G − 1 … 1, one decode step each, so it holds back on average ratio × mean over r of min(r, clip) tokens
beside its KV: ratio × G/2 where G − 1 ≤ clip, else ratio × (clip(clip + 1)/2 + (G − 1 − clip)·clip)/(G − 1)
(≈ ratio × (clip − clip²/2G)). A pool admits its requests at their KV plus that reserve (:func:`admitted_positions`,
used by :func:`llmath.deploy.serving_memory.memory`). The new request's own check (its prompt, and on ``add_one_req``
its clipped output too) is met once by the last one admitted, so it moves the count by at most one request and is
not counted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from llmath.errors import WorkloadError

if TYPE_CHECKING:
    from llmath.deploy.engine_config import EngineConfig
    from llmath.deploy.serving import Requests


def check_reserve(ratio: float, clip: int) -> None:
    """A one-line error for a reserve setting outside its range."""
    if not (0 <= ratio <= 1 and isinstance(clip, int | np.integer) and clip >= 0):
        raise WorkloadError(
            f"new_token_reserve={ratio!r} must be a fraction in [0, 1] and new_token_reserve_clip={clip!r} "
            "a whole number of tokens >= 0 (0: no clip)"
        )


def reserved_tokens(g: np.ndarray, ratio: float, clip: int) -> np.ndarray:
    """Tokens each output length in ``g`` holds back on average over its decode steps: ratio × the mean of
    min(tokens left, ``clip``) over tokens left = G − 1 … 1 (``clip`` 0: no clip)."""
    n = np.maximum(np.asarray(g, dtype=float) - 1, 0.0)
    c = np.minimum(n, clip) if clip else n
    total = c * (c + 1) / 2 + (n - c) * c  # Σ_{r=1}^{n} min(r, c)
    return ratio * np.divide(total, n, out=np.zeros_like(n), where=n > 0)


def admitted_positions(eng: EngineConfig, req: Requests) -> float:
    """Positions of KV admission counts per resident request, weighted by the requests' lifetimes as
    :meth:`~llmath.deploy.serving.Requests.kv_positions`: their KV (final or mean) plus the engine's new-token
    reserve (``EngineConfig.new_token_reserve``; 0: none)."""
    held = req.kv_positions(eng.kv_admission == "reserve")
    if not eng.new_token_reserve:
        return held
    reserved = reserved_tokens(req.lengths[0], eng.new_token_reserve, eng.new_token_reserve_clip)
    return held + req.lifetime_mean(reserved)


def disaggregated(eng: EngineConfig) -> EngineConfig:
    """``eng`` as a disaggregated pool's server admits: without the new-token reserve. SGLang's decode server takes
    its requests through ``DecodePreallocQueue`` (``disaggregation/decode.py``, sglang 0.5.9), which allocates
    each request's KV before the transfer against the pool less ``SGLANG_NUM_RESERVED_DECODE_TOKENS`` per request,
    not through ``PrefillAdder``; its prefill server releases a request once its KV is sent."""
    return replace(eng, new_token_reserve=0.0) if eng.new_token_reserve else eng
