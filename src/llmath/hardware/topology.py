"""How a device's GPUs talk to each other: a scale-up domain and a scale-out network, per GPU.

The schema (``topology`` in ``data/hardware.json``, and :attr:`Hardware.topology` where the registry
carries it)::

    {"scale_up":  {"kind": "nvlink", "domain": 8, "bytes_per_s": 450e9, "latency_s": 1e-5},
     "scale_out": {"kind": "infiniband", "bytes_per_s": 50e9, "latency_s": 2e-5},
     "pcie":      {"gen": 5, "bytes_per_s": 64e9}}

``bytes_per_s`` is per GPU and per direction (what NCCL's bus bandwidth is compared with);
``domain`` is how many GPUs share the scale-up fabric (an NVLink/NVSwitch box, an NVL72 rack, an
Infinity Fabric node). :func:`topology` reads that field when the device has one (the registry parses it
into :class:`llmath.hardware.registry.Link` objects; every bundled device carries one, sourced in
docs/hardware.md). A device without it (a custom file, ``--peak-tflops`` flags) gets one derived
one from the older ``interconnect_bytes_per_s`` figures, which datasheets give *bidirectional* (H100
SXM "NVLink 900 GB/s" = 450 GB/s each way): they are halved here. The derived scale-up domain is 8 GPUs
for NVLink / Infinity Fabric / ICI boxes (HGX/DGX and MI300X platforms hold 8) and 1 otherwise (PCIe
cards talk over the host); the derived scale-out bandwidth is half the PCIe figure (a NIC per GPU
cannot exceed the GPU's own host link). Latencies default to :data:`DEFAULT_LATENCY_S` where the data
give none. All of this is written into the result's ``topology.derived`` so a reader sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from llmath.errors import HardwareError

SCALE_UP_KINDS = ("nvlink", "nvlink_bridge", "infinity_fabric", "ici", "rdma_ethernet")
DEFAULT_DOMAIN = {"nvlink": 8, "infinity_fabric": 8, "ici": 8, "rdma_ethernet": 8, "nvlink_bridge": 2}
# Per-collective latency where the data give none: NCCL's own latency model (src/graph/tuning.cc, NVIDIA/nccl
# commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2: baseLat + per-step hwLat, in µs, LL protocol as small messages
# use) for an all-reduce over one 8-GPU NVLink box, ring: 6.6 + 2·(8 − 1)·0.6 = 15.0 µs (tree: 6.8 + 2·7·0.6 =
# 15.2); over two such boxes, tree (the faster): 6.8 + 2·(7·0.6 + log2(2)·5.0) = 25.2 µs (ring: 6.6 + 26·1.0 +
# 4·2.7 = 43.4, with its 1 µs network post overhead per step). The fitted intercepts of measured NCCL all-reduces
# (data/efficiency_fit.json, aiconfigurator-core nccl_perf tables) at 8 GPUs: H100 17.9, H200 18.5, A100 24.3,
# B200 27.1 µs; at 2 GPUs 7.0-12.6 µs (NCCL's model: 6.6 + 2·0.6 = 7.8). docs/parallel.md, "Latency".
DEFAULT_LATENCY_S = {"scale_up": 15.0e-6, "scale_out": 25.2e-6}


@dataclass(frozen=True)
class Link:
    kind: str
    bytes_per_s: float  # per GPU, per direction
    latency_s: float


@dataclass(frozen=True)
class Topology:
    scale_up: Link
    domain: int  # GPUs in one scale-up domain
    scale_out: Link
    derived: tuple[str, ...] = ()  # what was assumed rather than read from the data

    def link(self, span: int) -> Link:
        """The link a group of ``span`` consecutive GPUs is limited by: scale-up if it fits one domain."""
        return self.scale_up if span <= self.domain else self.scale_out

    def to_dict(self) -> dict[str, Any]:
        return {
            "scale_up": {"kind": self.scale_up.kind, "domain": self.domain, "bytes_per_s": self.scale_up.bytes_per_s,
                         "latency_s": self.scale_up.latency_s},
            "scale_out": {"kind": self.scale_out.kind, "bytes_per_s": self.scale_out.bytes_per_s,
                          "latency_s": self.scale_out.latency_s},
            "derived": list(self.derived),
        }  # fmt: skip


def _positive(v: Any, what: str, hw_name: str) -> float:
    if not isinstance(v, int | float) or isinstance(v, bool) or not v > 0:
        raise HardwareError(f"hardware {hw_name!r}: topology {what}={v!r} must be a positive number")
    return float(v)


def _from_field(t: dict[str, Any], name: str) -> Topology:
    notes = []
    up, out = t.get("scale_up") or {}, t.get("scale_out") or {}
    if not up and not out:
        pcie = t.get("pcie") or {}
        if not pcie:
            raise HardwareError(f"hardware {name!r}: topology needs 'scale_up', 'scale_out' or 'pcie'")
        up = {"kind": "pcie", "domain": 1, "bytes_per_s": pcie.get("bytes_per_s")}
        notes.append("no scale-up or scale-out link in the data: GPUs talk over PCIe")
    if up:
        domain = int(_positive(up.get("domain", 1), "scale_up.domain", name))
        bw_up = _positive(up.get("bytes_per_s"), "scale_up.bytes_per_s", name)
    else:
        domain, bw_up = 1, 0.0
    if out:
        bw_out = _positive(out.get("bytes_per_s"), "scale_out.bytes_per_s", name)
    else:
        bw_out = bw_up
        notes.append("no scale_out in the data: scale-out taken as the scale-up bandwidth")
    lat_up = up.get("latency_s")
    lat_out = out.get("latency_s")
    if lat_up is None or lat_out is None:
        notes.append(f"collective latency {DEFAULT_LATENCY_S} s assumed where the data give none")
    return Topology(
        Link(str(up.get("kind", "none")), bw_up or bw_out, float(lat_up or DEFAULT_LATENCY_S["scale_up"])),
        domain,
        Link(str(out.get("kind", up.get("kind", "none"))), bw_out, float(lat_out or DEFAULT_LATENCY_S["scale_out"])),
        tuple(notes),
    )


def _derived(hw) -> Topology:
    ic = dict(getattr(hw, "interconnect_bytes_per_s", {}) or {})
    notes = ["derived from interconnect_bytes_per_s (bidirectional datasheet figures, halved per direction)"]
    lat = DEFAULT_LATENCY_S
    pcie = ic.get("pcie") or ic.get("pcie_host")
    out_bw = pcie / 2 if pcie else None
    up_kind = next((k for k in SCALE_UP_KINDS if ic.get(k)), None)
    if up_kind is not None:
        domain = DEFAULT_DOMAIN[up_kind]
        up = Link(up_kind, ic[up_kind] / 2, lat["scale_up"])
        notes.append(f"scale-up domain {domain} GPUs assumed for {up_kind}")
    elif out_bw:
        domain, up = 1, Link("pcie", out_bw, lat["scale_out"])
        notes.append("no scale-up fabric: GPUs talk over PCIe (domain 1)")
    else:
        raise HardwareError(
            f"hardware {hw.name!r} lists no interconnect: multi-device layouts need a 'topology' "
            "(scale_up/scale_out bytes_per_s) or 'interconnect_bytes_per_s' in its hardware file"
        )
    if out_bw is None:
        out_bw = up.bytes_per_s
        notes.append("no PCIe figure: scale-out taken as the scale-up bandwidth")
    else:
        notes.append("scale-out = half the PCIe figure (a NIC per GPU behind its PCIe link)")
    notes.append(f"collective latency {lat} s assumed")
    return Topology(up, domain, Link("network", out_bw, lat["scale_out"]), tuple(notes))


@lru_cache(maxsize=256)
def topology(hw) -> Topology:
    """The device's :class:`Topology`: its ``topology`` field, or one derived from its interconnect figures.
    One object per device (hardware is hashed by identity): the collectives' rules are read once per topology
    object (:func:`llmath.deploy.cost.comm_costs`)."""
    t = getattr(hw, "topology", None)
    if isinstance(t, Topology):
        return t
    if t:  # the registry's Link objects (hardware.registry.Link) or plain tables from a file
        return _from_field({k: v.to_dict() if hasattr(v, "to_dict") else dict(v) for k, v in t.items()}, hw.name)
    return _derived(hw)
