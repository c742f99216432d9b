"""The largest request rate a deployment answers under Poisson arrivals, named in a refusal.

Three checks can refuse a rate (each a :class:`~llmath.errors.RateError`): the closed loop's largest
requests/s (:func:`llmath.deploy.serving.rate_to_concurrency`), the prompt budget (a full iteration's budget
loaded to one or more, :func:`llmath.deploy.prompt_queue._budget_load`) and the running slots (the decoders'
law past the engine's cap, ρ ≥ 1, :func:`llmath.deploy.prompt_queue._slot_wait`). The last two limits move with
the rate itself (the decoders and the iteration time the rate brings), so the limit the first refusing check
states may lie above or below the rate where the checks start refusing. The largest answered rate is found
instead by bisection on the checks themselves: the answered rates are those below it (each check's load grows
with the rate), so a refusal states a rate every rate below which is answered.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from llmath.errors import RateError

REL = 1e-3  # the bisection stops when the bracket is this fraction of its top: below the 3 digits printed


def largest_rate(refusal: Callable[[float], RateError | None], first: RateError) -> RateError:
    """``first`` (the refusal of the rate asked) restated with the largest rate ``refusal`` answers
    (``refusal(r)``: the error that refuses ``r``, or None when ``r`` is answered), and the check that refuses
    just above it. The bisection starts below the rate asked and the closed loop's largest requests/s (the
    limit any rate meets, ``refusal(inf)``)."""
    closed = refusal(math.inf)
    top = min(first.rate, closed.sustained if closed is not None else first.rate)
    lo, hi, binding = 0.0, top, first if closed is None or first.rate <= closed.sustained else closed
    while hi - lo > REL * hi:
        mid = 0.5 * (lo + hi)
        err = refusal(mid)
        if err is None:
            lo = mid
        else:
            hi, binding = mid, err
    if lo <= 0.0:
        return first
    return RateError(first.rate, lo, binding.what, binding.detail)


def poisson_refusal(dev, decoding, eng, req, max_resident: int) -> Callable[[float], RateError | None]:
    """The refusal of one replica's Poisson rate ``r`` by the checks :func:`llmath.deploy.service.serve` runs
    (the closed loop's concurrency for ``r``, then the prompt queue at it), or None when ``r`` is answered."""
    from llmath.deploy.prompt_queue import poisson_state
    from llmath.deploy.serving import rate_to_concurrency

    def refusal(r: float) -> RateError | None:
        try:
            c = rate_to_concurrency(dev, eng, req, r, max_resident)
            poisson_state(decoding, eng, req, c, r, max_resident)
        except RateError as e:
            return e
        return None

    return refusal
