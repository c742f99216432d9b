"""Collectives as operators: a message size (terms over the scenario's monomials) and a formula for time.

Reference: NCCL tests, ``doc/PERFORMANCE.md`` (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
For a message of S bytes over n ranks, the algorithm bandwidth is ``algbw = S / t`` and the bus bandwidth
``busbw = algbw × factor``, where the factor is the traffic each rank's busiest link carries per byte of
message in a ring: ``2(n−1)/n`` for all-reduce, ``(n−1)/n`` for all-gather and reduce-scatter (S = the
gathered output / the scattered input) and for all-to-all; ``1`` for a point-to-point send. A link of
``bw`` bytes/s per direction therefore moves the collective in ``factor · S / bw``; llmath adds one
latency term per collective (the link's ``latency_s``):

    t = latency + factor(kind, n) · S / bw

Message sizes are in elements of the activations' dtype (hidden states, logits), multiplied by its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from llmath.errors import WorkloadError
from llmath.ops.core import Term

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")


def bus_factor(kind: str, n: int) -> Fraction:
    """Bus bytes per message byte (NCCL PERFORMANCE.md): all-reduce 2(n−1)/n, all-gather / reduce-scatter
    / all-to-all (n−1)/n, point-to-point 1."""
    if kind not in KINDS:
        raise WorkloadError(f"collective kind {kind!r} must be one of {', '.join(KINDS)}")
    if kind == "p2p":
        return Fraction(1)
    if n <= 1:
        return Fraction(0)
    f = Fraction(n - 1, n)
    return 2 * f if kind == "all_reduce" else f


def collective_time(kind: str, n: int, message_bytes, bytes_per_s: float, latency_s: float):
    """Seconds for one collective: latency + bus factor × message bytes / per-direction link bandwidth.

    A group of one rank moves nothing and takes no time (no latency either)."""
    if kind != "p2p" and n <= 1:
        return 0.0 * message_bytes
    return latency_s + float(bus_factor(kind, n)) * message_bytes / bytes_per_s


@dataclass(frozen=True)
class Collective:
    """One collective of a rank's pass, run ``count`` times (layers), over ``n`` ranks spanning ``span``
    consecutive GPUs (which decides scale-up or scale-out); ``message`` = elements per run (the
    all-reduce's buffer, the all-gather's output, the all-to-all's send buffer, the p2p's payload)."""

    name: str
    kind: str
    n: int
    span: int
    count: int
    message: tuple[Term, ...]
    group: str  # which parallel group: tp, ep, expert_tp, pp
    overlap: bool = False  # hidden behind compute (two-batch overlap) when the layout asks for it
    first: int = 0  # first GPU of the span (rank order TP, DP, PP)

    def within(self, domain: int) -> bool:
        """Whether the span lies inside one scale-up domain of ``domain`` GPUs."""
        return self.first // domain == (self.first + self.span - 1) // domain
