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

import numpy as np

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


def crossing_time(kind: str, n: int, per_domain: int, message_bytes, up, out):
    """Seconds for one collective of ``n`` ranks spread over scale-up domains, ``per_domain`` of them in each,
    every GPU with its own scale-out NIC (an HGX/DGX node: eight GPUs, eight NICs):

    * ring collectives (all-reduce, all-gather, reduce-scatter): NCCL builds one ring per NIC and splits the
      buffer over them, so the per_domain NICs of a domain carry its inter-domain hops together (NVIDIA/nccl
      issue #601, sjeaugey: with NVLink inside the node "we can use NVLink to split the operations in N parts
      then balance the traffic onto the N NICs"; issue #1277: a two-node HGX reaching 360 GB/s bus
      bandwidth): bus bandwidth = min(scale-up, per_domain × scale-out);
    * all-to-all: of a rank's message, the (n − per_domain)/n bound for other domains leaves on its own NIC
      while the (per_domain − 1)/n for its domain goes over the scale-up fabric, in parallel;
    * a point-to-point send: one NIC. Latency: the scale-out link's, once."""
    if kind == "p2p" or per_domain <= 1:
        return collective_time(kind, n, message_bytes, out.bytes_per_s, out.latency_s)
    if kind == "all_to_all":
        off, local = Fraction(n - per_domain, n), Fraction(per_domain - 1, n)
        t = np.maximum(float(off) * message_bytes / out.bytes_per_s, float(local) * message_bytes / up.bytes_per_s)
        return out.latency_s + t
    bw = min(up.bytes_per_s, per_domain * out.bytes_per_s)
    return collective_time(kind, n, message_bytes, bw, out.latency_s)


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

    def per_domain(self, domain: int) -> int:
        """Ranks of the group in the scale-up domain it has fewest in (its GPUs spread evenly over the span):
        that domain's NICs carry its share of the traffic."""
        last = self.first + self.span - 1
        fewest = min(domain - self.first % domain, last % domain + 1, self.span)
        return max(1, fewest * self.n // self.span)
