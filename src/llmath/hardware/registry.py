"""Accelerator specs as data: dense peak FLOP/s per dtype, memory bandwidth and capacity, interconnect.

The bundled table is ``data/hardware.json`` (every value with its source; vendor sparse figures halved
and listed in ``sparse_halved``). Units inside the code are SI base units: FLOP/s, bytes/s, bytes.
A user's own accelerator comes from a JSON or TOML file with the same keys, or from flags
(:func:`custom`). Asking for a dtype the hardware lacks raises :class:`HardwareError`.

``topology`` (optional) describes how devices talk: ``scale_up`` (the link inside one scale-up domain:
NVLink/NVSwitch, NVL72, Infinity Fabric, ICI, or PCIe where there is none; ``domain`` = devices in it),
``scale_out`` (the per-device NIC of the reference system) and ``pcie`` (the host link). Every
``bytes_per_s`` there is **per device, per direction** — the unit NCCL's bus bandwidth is measured in
(vendors usually quote bidirectional totals, twice this).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from llmath.errors import ConfigError, HardwareError, UnknownNameError
from llmath.model.config_check import check_values, file_kind, local_paths, parse_json, read_text_file
from llmath.model.registry import closest
from llmath.validation import float_rule

MAX_RATE = 1e21  # FLOP/s, bytes/s or bytes: a zetta-scale ceiling far above any device; keeps products finite
MIN_RATE = 1e3  # FLOP/s, bytes/s or bytes: a floor far below any device; keeps times finite (1 / 1e-300 is not)
MIN_FLAG = 1e-6  # --peak-tflops / --bandwidth-gbs / --memory-gb: at least 10^-6 of their units (MIN_RATE above)
MAX_FLAG = 1e9  # --peak-tflops / --bandwidth-gbs / --memory-gb: at most 10^9 of their units
MAX_HARDWARE_FILE = 1 << 20


@dataclass(frozen=True, eq=False)  # hashed by identity (it holds dicts); registry entries are cached
class Hardware:
    name: str
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: dict[str, float]
    vector_flops_per_s: float | None = None
    interconnect_bytes_per_s: dict[str, float] = field(default_factory=dict)
    display_name: str = ""
    vendor: str = ""
    sparse_halved: tuple[str, ...] = ()
    source: str = ""
    notes: str = ""
    measured: dict[str, Any] = field(default_factory=dict)  # calibration profiles: what was measured, how
    arch: str = ""  # e.g. "hopper", "cdna3", "apple-m3"
    kind: str = ""  # one of KINDS ("" = not stated)
    tdp_w: float | None = None
    topology: dict[str, Link] = field(default_factory=dict)  # "scale_up" / "scale_out" / "pcie"
    reported_memory_bytes: float | None = None  # what the driver reports (nvidia-smi's total), where stated

    def __post_init__(self) -> None:
        for f in ("memory_bytes", "memory_bandwidth_bytes_per_s", "vector_flops_per_s", "reported_memory_bytes"):
            v = getattr(self, f)
            optional = f in ("vector_flops_per_s", "reported_memory_bytes")
            if (v is not None or not optional) and float_rule(v, MIN_RATE, MAX_RATE):
                raise HardwareError(f"hardware {self.name!r}: {f}={v!r} must be a finite number in [1e3, 1e21]")
        if not isinstance(self.peak_flops_per_s, dict) or not self.peak_flops_per_s:
            raise HardwareError(f"hardware {self.name!r}: peak_flops_per_s must map at least one dtype to FLOP/s")
        for k, v in self.peak_flops_per_s.items():
            if float_rule(v, MIN_RATE, MAX_RATE):
                raise HardwareError(
                    f"hardware {self.name!r}: peak_flops_per_s[{k!r}]={v!r} must be a finite number in [1e3, 1e21]"
                )
        if self.tdp_w is not None and not _positive(self.tdp_w):
            raise HardwareError(f"hardware {self.name!r}: tdp_w={self.tdp_w!r} must be a positive number or absent")
        if not isinstance(self.arch, str):
            raise HardwareError(f"hardware {self.name!r}: arch={self.arch!r} must be a name such as 'hopper'")
        if self.kind and self.kind not in KINDS:
            raise HardwareError(f"hardware {self.name!r}: kind={self.kind!r} must be one of {', '.join(KINDS)}")

    def peak(self, dtype: str) -> float:
        """Dense matmul peak for ``dtype``; a dtype the hardware lacks is an error, not a fallback."""
        v = self.peak_flops_per_s.get(dtype)
        if v is None:
            have = ", ".join(sorted(self.peak_flops_per_s))
            raise HardwareError(
                f"hardware {self.name!r} has no {dtype} peak (it lists: {have}); pick one of those with "
                "--dtype/--activations, or give --peak-tflops for a custom device"
            )
        return float(v)

    def capacity(self, from_driver: bool = False) -> float:
        """Memory bytes an engine takes its share of: the driver's figure where ``from_driver`` and stated,
        else the vendor's label."""
        reported = self.reported_memory_bytes if from_driver else None
        return float(reported if reported is not None else self.memory_bytes)

    @property
    def vector_peak(self) -> float:
        """Peak for vector ops: the published vector/fp32 figure; else the slowest listed peak."""
        if self.vector_flops_per_s:
            return float(self.vector_flops_per_s)
        if "fp32" in self.peak_flops_per_s:
            return float(self.peak_flops_per_s["fp32"])
        return float(min(self.peak_flops_per_s.values()))

    def to_dict(self) -> dict[str, Any]:
        names = ("name", "display_name", "memory_bytes", "memory_bandwidth_bytes_per_s")
        out: dict[str, Any] = {k: getattr(self, k) for k in names}
        out.update(peak_flops_per_s=dict(self.peak_flops_per_s), vector_flops_per_s=self.vector_peak)
        out.update({k: getattr(self, k) for k in ("source", "arch", "kind", "tdp_w")})
        return dict(out, topology={k: v.to_dict() for k, v in self.topology.items()})


KINDS = ("gpu", "cpu", "tpu", "npu", "soc")
TOPOLOGY_LINKS = ("scale_up", "scale_out", "pcie")


def _positive(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


@dataclass(frozen=True)
class Link:
    """One link of a device's topology; ``bytes_per_s`` is per device, per direction."""

    kind: str
    bytes_per_s: float
    domain: int = 1  # devices in one scale-up domain (scale_up only)
    latency_s: float | None = None  # small-message latency, where sourced
    gen: int | None = None  # PCIe generation (pcie only)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "bytes_per_s": self.bytes_per_s, "domain": self.domain}
        for k in ("latency_s", "gen"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d


def _link(name: str, which: str, d: Any) -> Link:
    """Parse and check one topology link; a bad value is a :class:`HardwareError` naming device and field."""

    def bad(field_: str, v: Any, rule: str) -> HardwareError:
        return HardwareError(f"hardware {name!r}: topology.{which}.{field_}={v!r} {rule}; fix the hardware entry")

    if not isinstance(d, dict):
        raise bad("", d, "must be a table with kind and bytes_per_s")
    extra = sorted(set(d) - {"kind", "bytes_per_s", "domain", "latency_s", "gen"})
    if extra:
        raise bad(extra[0], d[extra[0]], "is not a topology field (kind, bytes_per_s, domain, latency_s, gen)")
    kind = d.get("kind", "pcie" if which == "pcie" else None)
    if not isinstance(kind, str) or not kind:
        raise bad("kind", kind, "must be a non-empty name such as nvlink4, infinity_fabric, pcie")
    if not _positive(d.get("bytes_per_s")):
        raise bad("bytes_per_s", d.get("bytes_per_s"), "must be a positive finite number (per device, per direction)")
    domain = d.get("domain", 1)
    if not isinstance(domain, int) or isinstance(domain, bool) or domain < 1:
        raise bad("domain", domain, "must be a positive integer (devices in one scale-up domain)")
    lat = d.get("latency_s")
    if lat is not None and not _positive(lat):
        raise bad("latency_s", lat, "must be a positive finite number of seconds or absent")
    gen = d.get("gen")
    if gen is not None and (not isinstance(gen, int) or isinstance(gen, bool) or gen < 1):
        raise bad("gen", gen, "must be a positive integer (the PCIe generation) or absent")
    return Link(kind, float(d["bytes_per_s"]), domain, None if lat is None else float(lat), gen)


def _topology(name: str, d: Any) -> dict[str, Link]:
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise HardwareError(f"hardware {name!r}: topology={d!r} must be a table of {', '.join(TOPOLOGY_LINKS)}")
    for k in d:
        if k not in TOPOLOGY_LINKS:
            raise HardwareError(
                f"hardware {name!r}: topology.{k} is not a topology link; use {', '.join(TOPOLOGY_LINKS)}"
            )
    return {k: _link(name, k, v) for k, v in d.items()}


_FIELDS = {
    "name",
    "memory_bytes",
    "memory_bandwidth_bytes_per_s",
    "peak_flops_per_s",
    "vector_flops_per_s",
    "interconnect_bytes_per_s",
    "display_name",
    "vendor",
    "sparse_halved",
    "source",
    "notes",
    "measured",
    "arch",
    "kind",
    "tdp_w",
    "topology",
    "reported_memory_bytes",
}


def from_dict(d: dict[str, Any], where: str = "hardware") -> Hardware:
    missing = [k for k in ("name", "memory_bytes", "memory_bandwidth_bytes_per_s", "peak_flops_per_s") if k not in d]
    if missing:
        raise HardwareError(
            f"{where}: missing {', '.join(missing)}; a hardware file needs name, memory_bytes, "
            "memory_bandwidth_bytes_per_s and peak_flops_per_s (dtype -> FLOP/s)"
        )
    kw = {k: v for k, v in d.items() if k in _FIELDS}
    kw["peak_flops_per_s"] = _rates(d, "peak_flops_per_s", where)
    kw["interconnect_bytes_per_s"] = _rates(d, "interconnect_bytes_per_s", where)
    sparse = d.get("sparse_halved") or ()
    if not isinstance(sparse, list | tuple) or not all(isinstance(x, str) for x in sparse):
        raise HardwareError(f"{where}: sparse_halved={sparse!r} must be a list of dtype names")
    kw["sparse_halved"] = tuple(sparse)
    for k in ("name", "display_name", "vendor", "source", "notes"):
        if k in kw and not isinstance(kw[k], str):
            raise HardwareError(f"{where}: {k}={kw[k]!r} must be a string")
    if "measured" in kw and not isinstance(kw["measured"], dict):
        raise HardwareError(f"{where}: measured={kw['measured']!r} must be an object")
    kw["topology"] = _topology(str(d["name"]), d.get("topology"))
    return Hardware(**kw)


def _rates(d: dict[str, Any], key: str, where: str) -> dict[str, float]:
    """A dtype/link -> rate mapping; every rate a finite positive number (0/null entries are dropped)."""
    m = d.get(key) or {}
    if not isinstance(m, dict):
        raise HardwareError(f"{where}: {key}={m!r} must be an object (name -> rate)")
    out = {}
    for k, v in m.items():
        if v is None or (v == 0 and not isinstance(v, bool)):
            continue
        if float_rule(v, MIN_RATE, MAX_RATE):
            raise HardwareError(f"{where}: {key}[{k!r}]={v!r} must be a finite number in [1e3, 1e21] (0/null: absent)")
        out[k] = float(v)
    return out


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    return json.loads((resources.files("llmath") / "data" / "hardware.json").read_text())


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, Any]]:
    return {a["name"]: a for a in _data()["accelerators"]}


def names() -> list[str]:
    return sorted(_table())


def aliases() -> dict[str, str]:
    """Other names a bundled accelerator answers to (e.g. ``apple-m2-ultra`` -> ``apple-m2-ultra-76c``)."""
    return dict(_data().get("aliases") or {})


def raw(name: str) -> dict[str, Any]:
    return dict(_table()[_registry_name(name)])


def _registry_name(name: str) -> str:
    """The bundled name ``name`` means, whatever its case (``H100-SXM``, ``h100``); else ``name`` unchanged (a
    file path keeps its case)."""
    key = name.strip().lower()
    if key in _table() or key in aliases():
        return aliases().get(key, key)
    return name


@lru_cache(maxsize=256)
def get(name: str) -> Hardware:
    """A bundled accelerator by name or alias, or a hardware file (JSON/TOML) path."""
    if not isinstance(name, str):
        raise HardwareError(f"hardware={name!r} must be a registry name (see 'llmath hardware') or a file path")
    name = _registry_name(name)
    if name in _table():
        return from_dict(_table()[name], name)
    p = Path(name)
    if local_paths() and (p.suffix in (".json", ".toml") or file_kind(p) != "missing"):
        return load_file(p)
    close = closest(name.lower(), names() + sorted(aliases()))
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise UnknownNameError(
        f"unknown hardware {name!r}{hint}. Run 'llmath hardware' for the {len(_table())} known accelerators, "
        "pass a JSON/TOML file, or give --peak-tflops/--bandwidth-gbs/--memory-gb"
    )


def load_file(path: str | Path) -> Hardware:
    p = Path(path)
    try:
        text = read_text_file(p, "hardware file (JSON or TOML)", MAX_HARDWARE_FILE)
    except ConfigError as e:
        raise HardwareError(str(e)) from None
    try:
        if p.suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # Python 3.10
                import tomli as tomllib
            d = tomllib.loads(text)
            check_values(d, str(p))
        else:
            d = parse_json(text, str(p))
    except ConfigError as e:
        raise HardwareError(str(e)) from None
    except ValueError as e:
        raise HardwareError(f"{p}: cannot parse ({e}); fix the file") from None
    if not isinstance(d, dict):
        raise HardwareError(f"{p}: expected an object with name, memory_bytes, ... at the top level")
    d.setdefault("name", p.stem)
    return from_dict(d, str(p))


def custom(
    peak_tflops: float, bandwidth_gbs: float, memory_gb: float, dtype: str = "bf16", name: str = "custom"
) -> Hardware:
    """A device from flags: one dense peak (TFLOP/s) for ``dtype``, bandwidth (GB/s), memory (GB)."""
    for what, v in (("--peak-tflops", peak_tflops), ("--bandwidth-gbs", bandwidth_gbs), ("--memory-gb", memory_gb)):
        why = float_rule(v, MIN_FLAG, MAX_FLAG)
        if why:
            raise HardwareError(f"{what}={v!r} {why} for a custom device")
    return Hardware(
        name=name,
        memory_bytes=memory_gb * 1e9,
        memory_bandwidth_bytes_per_s=bandwidth_gbs * 1e9,
        peak_flops_per_s={dtype: peak_tflops * 1e12},
        source="user flags",
    )
