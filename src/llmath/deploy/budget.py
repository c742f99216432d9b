"""A cost bound before any work: the size of what a request would compute, checked against a stated limit.

The unit is one **layer evaluation**: one decoder layer's operators costed once for one stage of one
candidate deployment. A request computes about ``layers × stages × candidates`` of them, where:

* ``layers``: the model's decoder (and encoder) layers — each spec holds one entry per layer, so a
  config's layer count is bounded too (``MAX_LAYERS`` in :mod:`llmath.model.config_check`);
* ``stages``: prefill and decode (2);
* ``candidates``: 1 for ``analyze`` and ``serve``; for ``plan`` the layouts its search visits, counted
  from the GPU count's divisors before any layout is built (an upper bound of what the search keeps):
  TP ≤ 8 within a scale-up box, PP ≤ the layer count, attention-DP × EP for MoE models, each weight format
  (twice with speculative decoding: every candidate, aggregated layout and disaggregated pair alike, is searched
  with and without it), and with ``disagg``
  every (prefill, decode) pair of single-stage layouts.

``MAX_LAYER_EVALUATIONS`` (2·10^6) is set against the pruned search's measured cost (:mod:`.plan_search`
evaluates a small part of these candidates). DeepSeek-V3 with ``disagg`` and three formats, CPU seconds of
the whole ``llmath plan`` on a shared 2-core machine (load 1–2): 72 GPUs (an NVL72 rack; 635,376 counted) 1.0 s,
144 (896,700) 0.9 s, 512 (274,866) 1.0 s, 576 (1,495,110) 1.3 s, 4,096 (389,058) 1.4 s, 8,008 (1,987,746) 1.3 s,
13,640 (1,996,164) 1.5 s, 65,496 (999,546) 2.0 s; above the limit the count and the cost grow together: 720
GPUs (3,137,352) 1.8 s, 2,520 (7,509,954) 5.0 s, the highly composite 55,440 (26,484,492) 74 s.
:func:`check_plan` refuses a larger request in one line, naming the count and how to shrink it (fewer GPUs,
pinned degrees, fewer formats, no ``disagg``), before any layout is built, so memory and minutes are never
spent on it.

A computation that is admitted can still be abandoned: a caller sets :data:`ABANDON` (context-local) to a
check that says whether its client has gone; long searches call :func:`poll` between candidates, which runs
that check at most every ``POLL_S`` seconds and raises :class:`~llmath.errors.Abandoned` when it says so.

A plan fills the caches keyed by its layouts' per-rank tables (``SEARCH_CACHES``; each an ``lru_cache`` of
stated ``maxsize``): a long-lived process such as the page calls :func:`release_search_caches` when no
computation is running, so its memory returns to that of one request instead of growing to every cache's
``maxsize``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from importlib import import_module

from llmath.errors import Abandoned, UsageError
from llmath.model.spec import ModelSpec

MAX_LAYER_EVALUATIONS = 2 * 10**6
STAGES = 2
MAX_TP = 8  # the planner's TP stays within one scale-up box (deploy/plan.py)
POLL_S = 0.05  # seconds between two runs of the abandon check
ABANDON: ContextVar[Callable[[], bool] | None] = ContextVar("llmath_abandon", default=None)
_LAST_POLL: ContextVar[float] = ContextVar("llmath_last_poll", default=0.0)


SEARCH_CACHES = (  # the modules whose lru_caches hold per-layout tables or what is computed from them
    "llmath.ops.table",
    "llmath.deploy.cost",
    "llmath.deploy.shard",
    "llmath.deploy.step",
    "llmath.hardware.roofline",
    "llmath.hardware.decode",
    "llmath.hardware.fitted_ops",
    "llmath.hardware.fitted_columns",
    "llmath.hardware.execution",
)


def search_caches() -> list:
    """The ``lru_cache`` functions defined in the ``SEARCH_CACHES`` modules."""
    mods = [import_module(m) for m in SEARCH_CACHES]
    return [f for m in mods for f in vars(m).values() if hasattr(f, "cache_clear") and f.__module__ == m.__name__]


def release_search_caches() -> None:
    """Empty every cache :func:`search_caches` lists (the next request recomputes what it needs)."""
    for f in search_caches():
        f.cache_clear()


def poll() -> None:
    """Raise :class:`~llmath.errors.Abandoned` when the context's :data:`ABANDON` check says the caller has
    gone (checked at most every ``POLL_S`` seconds; nothing when no check is set)."""
    check = ABANDON.get()
    if check is None:
        return
    now = time.monotonic()
    if now - _LAST_POLL.get() < POLL_S:
        return
    _LAST_POLL.set(now)
    if check():
        raise Abandoned("the caller went away; the computation was abandoned")


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def plan_layouts(spec: ModelSpec, gpus: int, pins: dict[str, int | None]) -> tuple[int, int, int]:
    """(layouts, single-stage layouts, single-stage single-replica layouts) the planner's search may visit
    on ``gpus`` GPUs with ``pins``: an upper bound counted from divisors (O(divisors²), no layout built)."""
    divs = _divisors(gpus)
    tps = [d for d in divs if d <= MAX_TP] if pins.get("tp") is None else [pins["tp"] or 1]
    pps = [d for d in divs if d <= spec.n_layers] if pins.get("pp") is None else [pins["pp"] or 1]
    moe = spec.moe is not None
    total = single = single_dp1 = 0
    for tp in tps:
        for pp in pps:
            dps = [d for d in divs if tp * pp * d <= gpus] if moe else [1]
            dps = dps if pins.get("dp") is None or not moe else [pins["dp"] or 1]
            for dp in dps:
                eps = 1 if pins.get("ep") is not None or not moe else len({1, tp * dp})
                n = eps if tp * pp * dp <= gpus else 0
                total += n
                single += n if pp == 1 else 0
                single_dp1 += n if pp == 1 and dp == 1 else 0
    return total, single, single_dp1


def plan_evaluations(spec: ModelSpec, gpus: int, pins: dict[str, int | None], formats: int, disagg: bool) -> int:
    """Layer evaluations of a plan: layers × stages × (layouts + with ``disagg`` the pairs) × formats."""
    total, single, single_dp1 = plan_layouts(spec, gpus, pins)
    candidates = (total + (single_dp1 * single if disagg else 0)) * max(formats, 1)
    return spec.n_layers * STAGES * candidates


def check_plan(spec: ModelSpec, gpus: int, pins: dict[str, int | None], formats: int, disagg: bool) -> int:
    """The plan's layer evaluations, or a :class:`~llmath.errors.UsageError` when they exceed the limit."""
    n = plan_evaluations(spec, gpus, pins, formats, disagg)
    if n > MAX_LAYER_EVALUATIONS:
        raise UsageError(
            f"plan of {spec.name} on {gpus:,} GPUs would evaluate {n:,} layer-stages (layers × stages × "
            f"candidate layouts{' and pairs' if disagg else ''} × formats), over the limit of "
            f"{MAX_LAYER_EVALUATIONS:,}: give fewer --gpus, pin --tp/--pp/--dp/--ep, fewer --weights formats"
            + (" or drop --disagg" if disagg else "")
        )
    return n
