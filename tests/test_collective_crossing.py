"""Collectives whose group spans several scale-up domains: NCCL's rings over every NIC of a node."""

from __future__ import annotations

import pytest

from llmath import Workload
from llmath.deploy.collectives import Collective, collective_time, crossing_time
from llmath.deploy.layout import ParallelConfig
from llmath.hardware.topology import Link

UP = Link("nvlink", 450e9, 15e-6)  # H100 NVLink 900 GB/s bidirectional, halved
OUT = Link("ib", 50e9, 25e-6)  # one 400 Gb/s NIC per GPU, per direction
S = 64e6  # bytes


def test_ring_collectives_use_every_nic_of_the_domain():
    # 16 ranks, 8 per node: 8 rings share the buffer, bus bandwidth min(450, 8 x 50) = 400 GB/s
    # all-reduce: 25 us + 2·15/16 · 64e6 / 400e9 = 25 us + 300 us
    assert crossing_time("all_reduce", 16, 8, S, UP, OUT) == pytest.approx(25e-6 + 2 * 15 / 16 * S / 400e9)
    # all-gather: (n−1)/n of the gathered output
    assert crossing_time("all_gather", 16, 8, S, UP, OUT) == pytest.approx(25e-6 + 15 / 16 * S / 400e9)
    # one rank per node: one NIC carries the ring, as a plain scale-out collective
    assert crossing_time("all_reduce", 2, 1, S, UP, OUT) == collective_time("all_reduce", 2, S, 50e9, 25e-6)


def test_all_to_all_sends_only_the_other_domains_share_over_the_network():
    # 16 ranks, 8 per node: 8/16 of the message leaves on the rank's NIC (64e6/2/50e9 = 640 us), 7/16 goes
    # over NVLink (64e6·7/16/450e9 = 62 us) at the same time
    assert crossing_time("all_to_all", 16, 8, S, UP, OUT) == pytest.approx(25e-6 + S / 2 / 50e9)


def test_point_to_point_uses_one_nic():
    assert crossing_time("p2p", 2, 8, S, UP, OUT) == pytest.approx(25e-6 + S / 50e9)


def test_ranks_per_domain_of_a_span():
    tp16 = Collective("a", "all_reduce", 16, 16, 1, (), "tp")
    assert tp16.per_domain(8) == 8 and not tp16.within(8)
    # 4 ranks strided over 16 GPUs (an EP group across two nodes): 2 in each
    assert Collective("b", "all_to_all", 4, 16, 1, (), "ep").per_domain(8) == 2
    # a span starting mid-domain: 24 ranks on GPUs 4..27 hold 4, 8, 8 and 4 GPUs of four domains of 8
    assert Collective("c", "all_reduce", 24, 24, 1, (), "tp", first=4).per_domain(8) == 4


def test_tp16_all_reduce_on_two_h100_boxes_is_nic_bound():
    import llmath

    a = llmath.analyze("llama-3.1-70b", "h100-sxm", workload=Workload(batch=8), parallel=ParallelConfig(gpus=16, tp=16))
    ar = a.comm["decode"]["attn.all_reduce"]["time_s"]
    # B·D = 8 · 8192 activations × 2 bytes, 80 layers; 25.2 us NCCL scale-out latency each
    one = 8 * 8192 * 2
    assert ar == pytest.approx(80 * (25.2e-6 + 2 * 15 / 16 * one / 400e9), rel=1e-6)
