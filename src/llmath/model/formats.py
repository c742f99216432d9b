"""Number formats of weights, activations and KV cache: bits per element and scale layout, as data.

``data/formats.json`` lists every format with its block layout and source. Bytes per element follow
from the layout: a fixed block of ``block`` elements stored in ``block_bytes`` bytes (q4_0: 18 bytes per
32 weights = 4.5 bits; nvfp4: 9 bytes per 16), or, for grouped integer formats, ``bits/8`` plus
``group_bits`` of scale (and zero) per group of ``group_size`` elements (awq at group 128:
0.5 + 20/8/128 bytes). Per-tensor and per-channel scales are not counted (stated in each layout).

The compute format of a GEMM (:func:`compute_format`) is what the tensor cores execute: weights whose
format has a ``compute`` (fp8, int8, fp4) run in it when the activations are in the same format (W8A8,
W4A4); weight-only formats (int4, awq, gptq, nf4, GGUF) are dequantised and run in the activations'
format (W4A16); a wider operand wins otherwise (fp8 weights with bf16 activations: W8A16 in bf16).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from llmath.errors import WorkloadError

ROLES = ("weights", "activations", "kv")
# tensor-core formats by width: a GEMM of two operands runs at the wider one's
WIDTH = {"fp4": 4, "fp8": 8, "int8": 8, "bf16": 16, "fp16": 16, "fp32": 32}


@dataclass(frozen=True)
class Format:
    name: str
    family: str  # float, fp8, int, fp4, bnb, gguf
    bits: int
    compute: str | None  # tensor-core format of W×A GEMMs, or None: dequantised to the activations' format
    uses: tuple[str, ...]
    layout: str
    source: str
    block: int | None = None  # fixed layouts: elements per block ...
    block_bytes: int | None = None  # ... and its bytes
    group_bits: int | None = None  # grouped formats: scale (+ zero) bits per group of Precision.group_size

    def bytes_per_element(self, group_size: int = 128, scale_bytes: float | None = None) -> float:
        """Bytes per stored element; grouped formats use ``group_size`` (and ``scale_bytes`` for the scale)."""
        if self.block is not None and self.block_bytes is not None:
            return self.block_bytes / self.block
        g = self.group_bits or 0
        gbits = g if scale_bytes is None else g - 16 + 8 * scale_bytes
        return self.bits / 8 + gbits / 8 / group_size

    @property
    def quantised(self) -> bool:
        """Below 16 bits: a checkpoint in this format keeps embedding, LM head, router and norms in 16 bit."""
        return self.bits < 16

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "bits": self.bits,
            "bytes_per_element": self.bytes_per_element(),
            "compute": self.compute,
            "layout": self.layout,
            "source": self.source,
        }


@cache
def _data() -> dict[str, Any]:
    return json.loads((resources.files("llmath") / "data" / "formats.json").read_text())


@cache
def formats() -> dict[str, Format]:
    out = {}
    for name, d in _data()["formats"].items():
        out[name] = Format(name=name, **{**d, "uses": tuple(d["uses"])})
    return out


@cache
def gguf_mixes() -> dict[str, dict[str, str]]:
    """llama.cpp file types (q4_k_m, ...): base type and the tensors quantised higher (see formats.json).
    Cached (as :func:`formats`): read it, do not change it."""
    return {k: v for k, v in _data()["gguf_mixes"].items() if not k.startswith("_")}


ALIASES = {
    "float32": "fp32",
    "f32": "fp32",
    "float16": "fp16",
    "f16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8",
    "e4m3": "fp8",
    "float8_e4m3fn": "fp8",
    "fp8-tensor": "fp8",
    "w4a16": "int4",
    "int4-awq": "awq",
    "int4-gptq": "gptq",
    "bnb-nf4": "nf4",
    "bnb-int8": "int8-bnb",
}


def names(role: str | None = None) -> list[str]:
    """Format names usable for ``role`` (weights, activations, kv); weights also take the GGUF mixes."""
    out = [n for n, f in formats().items() if role is None or role in f.uses]
    if role in (None, "weights"):
        out += [m for m in gguf_mixes() if m not in out]
    return out


def canonical(name: str, role: str = "weights") -> str:
    """The canonical format name for ``role`` (case-insensitive, aliases resolved), or a WorkloadError."""
    v = str(name).strip().lower()
    v = ALIASES.get(v, v)
    if role == "weights" and v in gguf_mixes():
        return v
    f = formats().get(v)
    if f is None or role not in f.uses:
        allowed = names(role)
        raise WorkloadError(
            f"{role} format {name!r} is not a known precision for {role}; use one of {', '.join(allowed)} "
            "(see docs/formats.md)"
        )
    return v


def get(name: str) -> Format:
    """A format by canonical name (a GGUF mix gives its base type)."""
    mix = gguf_mixes().get(name)
    return formats()[mix["base"] if mix else name]


def bytes_per_element(name: str, group_size: int = 128, scale_bytes: float | None = None) -> float:
    return get(name).bytes_per_element(group_size, scale_bytes)


def compute_format(weights: str | None, activations: str) -> str:
    """The tensor-core format a GEMM of ``weights`` (None: no weight operand) × ``activations`` runs in."""
    ca = get(activations).compute or "bf16"
    if weights is None:
        return ca
    cw = get(weights).compute
    if cw is None or cw == ca:  # weight-only formats dequantise to the activations' format (W4A16)
        return ca
    return cw if WIDTH[cw] > WIDTH[ca] else ca
