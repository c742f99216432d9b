"""The bundled accelerator registry (data/hardware.json): hygiene, sources, spot values, topology checks.

Spot values are asserted against the published figure named in the comment, never against llmath output.
"""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest

from llmath.errors import HardwareError
from llmath.hardware import KINDS, aliases, from_dict, get, load_file, names

DATA = json.loads((resources.files("llmath") / "data" / "hardware.json").read_text())
ENTRIES = DATA["accelerators"]


def test_every_entry_and_alias_loads():
    for n in names():
        h = get(n)
        assert h.name == n and h.arch and h.kind in KINDS, n
    for alias, target in aliases().items():
        assert get(alias).name == target


def test_names_are_lowercase_unique_and_aliases_do_not_shadow():
    ns = [a["name"] for a in ENTRIES]
    assert len(ns) == len(set(ns))
    for n in ns + list(aliases()):
        assert n == n.lower() and " " not in n, n
    assert not set(aliases()) & set(ns)


def _covered(sources: dict, key: str, *alternatives: str) -> bool:
    return any(sources.get(k) for k in (key, *alternatives))


@pytest.mark.parametrize("a", ENTRIES, ids=[a["name"] for a in ENTRIES])
def test_every_number_has_a_source(a):
    src = a["sources"]
    assert a["source"].startswith("http")
    assert _covered(src, "memory_bytes"), "memory_bytes"
    assert _covered(src, "memory_bandwidth_bytes_per_s"), "memory_bandwidth_bytes_per_s"
    for dtype in a["peak_flops_per_s"]:
        assert _covered(src, dtype, "peak_flops_per_s"), dtype
    if a.get("tdp_w") is not None:
        assert _covered(src, "tdp_w"), "tdp_w"
    if a.get("reported_memory_bytes") is not None:
        assert _covered(src, "reported_memory_bytes"), "reported_memory_bytes"
    links = a["topology"]
    assert "scale_up" in links
    assert _covered(src, "topology") or all(src.get(f"topology.{k}") for k in links), "topology"
    assert set(a["sparse_halved"]) <= set(a["peak_flops_per_s"])
    assert a["notes"]


def test_topology_is_per_direction_and_plausible():
    for n in names():
        t = get(n).topology
        up = t["scale_up"]
        assert isinstance(up.domain, int) and up.domain >= 1
        # no scale-up link in the registry exceeds NVLink 5 (1.8 TB/s bidirectional = 900 GB/s per direction)
        assert 0 < up.bytes_per_s <= 900e9, n
        if "pcie" in t:
            # PCIe x16 per direction: 16 GB/s per generation step from Gen3 (PCI-SIG)
            assert t["pcie"].bytes_per_s <= 16e9 * 2 ** (t["pcie"].gen - 3), n


def test_spot_values_against_published_figures():
    # DGX B200 datasheet: FP8 72 PFLOPS (with sparsity) for 8 GPUs -> 72/8/2 = 4.5 PFLOPS dense per GPU
    assert get("b200").peak("fp8") == pytest.approx(72e15 / 8 / 2)
    # AMD MI355X product page: 288 GB HBM3E, 8 TB/s peak memory bandwidth
    assert get("mi355x").memory_bandwidth_bytes_per_s == 8e12 and get("mi355x").memory_bytes == 288e9
    # Apple newsroom (June 2023): M2 Ultra, 76-core GPU, 800GB/s memory bandwidth, up to 192GB
    m2u = get("apple-m2-ultra-76c")
    assert m2u.memory_bandwidth_bytes_per_s == 800e9 and m2u.memory_bytes == 192e9
    # Apple (Mac Pro page): M2 Ultra 76-core GPU "up to 27.2 teraflops"; the derived figure must agree to 0.1%
    assert m2u.peak("fp16") == pytest.approx(27.2e12, rel=1e-3)
    # Apple newsroom (Oct 2021): M1 Max 32-core GPU "10.4 teraflops", 400GB/s
    assert get("apple-m1-max-32c").peak("fp32") == pytest.approx(10.4e12, rel=1e-2)
    assert get("apple-m1-max").memory_bandwidth_bytes_per_s == 400e9
    # Apple Mac Studio tech specs (2025): M4 Max 32-core GPU 410GB/s, 40-core GPU 546GB/s
    assert get("apple-m4-max-32c").memory_bandwidth_bytes_per_s == 410e9
    assert get("apple-m4-max-40c").memory_bandwidth_bytes_per_s == 546e9
    # GB300 NVL72 page: FP4 1,080 PFLOPS dense per 72 GPUs -> 15 PFLOPS per GPU
    assert get("gb300").peak("fp4") == pytest.approx(1080e15 / 72)
    # RTX Blackwell whitepaper: RTX 5090 32 GB GDDR7 at 1,792 GB/s
    assert get("rtx-5090").memory_bandwidth_bytes_per_s == 1792e9 and get("rtx-5090").memory_bytes == 32e9
    # H100 datasheet: NVLink 900 GB/s (bidirectional) -> 450 GB/s per direction; 8 GPUs per HGX H100;
    # DGX H100: one 400 Gb/s ConnectX-7 per GPU -> 400e9 / 8 = 50e9 bytes/s per direction
    t = get("h100-sxm").topology
    assert (t["scale_up"].kind, t["scale_up"].domain, t["scale_up"].bytes_per_s) == ("nvlink4", 8, 900e9 / 2)
    assert t["scale_out"].bytes_per_s == 400e9 / 8
    # GB200 NVL72: 72 GPUs in one NVLink domain, 130 TB/s total -> 1.8 TB/s bidirectional per GPU
    assert get("gb200").topology["scale_up"].domain == 72
    assert get("gb200").topology["scale_up"].bytes_per_s == pytest.approx(130e12 / 72 / 2, rel=0.02)
    # MI300X page: 7 Infinity Fabric links x 128 GB/s (bidirectional) -> 7 * 64 GB/s per direction
    assert get("mi300x").topology["scale_up"].bytes_per_s == 7 * 64e9


def test_sparse_halved_entry_is_half_the_vendor_sparse_figure():
    # NVIDIA H200 product page, H200 NVL column: BF16 Tensor Core 1,671 TFLOPS "with sparsity"
    h = get("h200-nvl")
    assert "bf16" in h.sparse_halved and h.peak("bf16") == pytest.approx(1671e12 / 2)
    # GB300 NVL72 page: FP8/FP6 Tensor Core 720 PFLOPS with sparsity per 72 GPUs -> 720/72/2 = 5 PFLOPS
    g = get("gb300")
    assert "fp8" in g.sparse_halved and g.peak("fp8") == pytest.approx(720e15 / 72 / 2)


def test_old_apple_names_still_work():
    assert get("apple-m2-ultra").name == "apple-m2-ultra-76c"
    assert get("apple-m3-max").name == "apple-m3-max-40c"


BASE = {"name": "x", "memory_bytes": 1e9, "memory_bandwidth_bytes_per_s": 1e11, "peak_flops_per_s": {"bf16": 1e12}}


@pytest.mark.parametrize(
    ("topology", "match"),
    [
        ({"scale_up": {"kind": "nvlink4", "domain": 0, "bytes_per_s": 1e9}}, r"'x'.*topology\.scale_up\.domain=0"),
        ({"scale_up": {"kind": "nvlink4", "domain": 2.5, "bytes_per_s": 1e9}}, r"domain=2\.5 must be a positive int"),
        ({"scale_up": {"kind": "nvlink4", "domain": True, "bytes_per_s": 1e9}}, r"domain=True"),
        ({"scale_up": {"kind": "nvlink4", "domain": 8, "bytes_per_s": -1}}, r"scale_up\.bytes_per_s=-1 must be"),
        ({"scale_up": {"kind": "nvlink4", "domain": 8, "bytes_per_s": math.inf}}, r"bytes_per_s=inf .*finite"),
        ({"scale_up": {"domain": 8, "bytes_per_s": 1e9}}, r"scale_up\.kind=None"),
        ({"scale_out": {"kind": "ib", "bytes_per_s": 1e9, "latency_s": 0}}, r"scale_out\.latency_s=0"),
        ({"pcie": {"gen": 0, "bytes_per_s": 1e9}}, r"pcie\.gen=0"),
        ({"scale_up": {"kind": "nvlink4", "bytes_per_s": 1e9, "speed": 3}}, r"scale_up\.speed=3 is not a topology"),
        ({"nvlink": {"kind": "nvlink4", "bytes_per_s": 1e9}}, r"topology\.nvlink is not a topology link"),
        ({"scale_up": 5}, r"topology\.scale_up\.=5 must be a table"),
        ([1], r"topology=\[1\] must be a table"),
    ],
)
def test_bad_topology_is_a_clear_error(topology, match):
    with pytest.raises(HardwareError, match=match):
        from_dict({**BASE, "topology": topology})


@pytest.mark.parametrize(("field", "value"), [("tdp_w", -5), ("tdp_w", math.nan), ("kind", "fpga"), ("arch", 3)])
def test_bad_tdp_or_kind_is_a_clear_error(field, value):
    with pytest.raises(HardwareError, match=f"'x': {field}="):
        from_dict({**BASE, field: value})


def test_reported_memory_is_the_drivers_mib_and_optional():
    # nvidia-smi on a B200: 183359MiB (Modal's GPU Glossary, "What is nvidia-smi?") = 183,359 × 2^20 bytes
    assert get("b200").reported_memory_bytes == 183_359 * 2**20
    assert get("h100-sxm").reported_memory_bytes is None  # not stated: engines keep the label
    # what an engine takes its share of: the driver's figure only when it reads the driver and one is stated
    assert get("b200").capacity(from_driver=True) == 183_359 * 2**20
    assert get("b200").capacity() == 180e9  # NVIDIA's label (DGX B200 datasheet: 1,440 GB over 8 GPUs)
    assert get("h100-sxm").capacity(from_driver=True) == 80e9
    with pytest.raises(HardwareError, match="'x': reported_memory_bytes=-1.0 must be a finite number"):
        from_dict({**BASE, "reported_memory_bytes": -1.0})


def test_custom_file_topology_is_optional_and_round_trips(tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(BASE))
    assert load_file(plain).topology == {}
    toml = tmp_path / "box.toml"
    toml.write_text(
        'memory_bytes = 8e10\nmemory_bandwidth_bytes_per_s = 3.35e12\ntdp_w = 700\narch = "hopper"\nkind = "gpu"\n'
        "[peak_flops_per_s]\nbf16 = 9.895e14\n"
        '[topology.scale_up]\nkind = "nvlink4"\ndomain = 8\nbytes_per_s = 4.5e11\nlatency_s = 3e-6\n'
        "[topology.pcie]\ngen = 5\nbytes_per_s = 6.4e10\n"
    )
    h = load_file(toml)
    d = h.to_dict()
    assert d["arch"] == "hopper" and d["kind"] == "gpu" and d["tdp_w"] == 700
    assert d["topology"]["scale_up"] == {"kind": "nvlink4", "bytes_per_s": 4.5e11, "domain": 8, "latency_s": 3e-6}
    assert d["topology"]["pcie"]["kind"] == "pcie" and d["topology"]["pcie"]["gen"] == 5
    # what to_dict writes, from_dict reads back to the same links
    assert from_dict({**d, "name": "again"}).topology == h.topology
