"""Precisions of weights, activations and KV cache, and their bytes per element.

Convention: bytes are counted per element stored. Integer formats below 16 bits are group-quantised:
each group of ``group_size`` elements carries one scale of ``scale_bytes`` (fp16 by default, as GPTQ/AWQ
store them), so int4 with groups of 128 costs 0.5 + 2/128 = 0.515625 bytes per element. fp8 uses
per-tensor scales, which are negligible and not counted. Matmuls run in the activations' dtype
(W4A16 computes in bf16 after dequantisation; W8A8 int8 computes in int8).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmath.errors import WorkloadError

BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
GROUPED = ("int8", "int4")
DTYPES = tuple(BITS)
MAX_GROUP = 1 << 20


def check_dtype(value: str, what: str = "dtype") -> str:
    v = value.lower() if isinstance(value, str) else None
    if v not in BITS:
        raise WorkloadError(f"{what}={value!r} is not a known precision; use one of {', '.join(DTYPES)}")
    return v


@dataclass(frozen=True)
class Precision:
    """Weights, activations and KV-cache dtypes (``--dtype`` sets all three)."""

    weights: str = "bf16"
    activations: str = "bf16"
    kv: str = "bf16"
    group_size: int = 128
    scale_bytes: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", check_dtype(self.weights, "weights dtype"))
        object.__setattr__(self, "activations", check_dtype(self.activations, "activations dtype"))
        object.__setattr__(self, "kv", check_dtype(self.kv, "kv dtype"))
        g = self.group_size
        if isinstance(g, bool) or not isinstance(g, int) or not 0 < g <= MAX_GROUP:
            raise WorkloadError(f"group_size={g!r} must be a positive integer <= {MAX_GROUP:,} (e.g. 128)")

    @classmethod
    def uniform(cls, dtype: str, **kw) -> Precision:
        return cls(weights=dtype, activations=dtype, kv=dtype, **kw)

    def bytes_per_element(self, dtype: str) -> float:
        b = BITS[dtype] / 8
        if dtype in GROUPED:
            b += self.scale_bytes / self.group_size
        return b

    @property
    def weight_bytes(self) -> float:
        return self.bytes_per_element(self.weights)

    @property
    def act_bytes(self) -> float:
        return self.bytes_per_element(self.activations)

    @property
    def kv_bytes(self) -> float:
        return self.bytes_per_element(self.kv)

    @property
    def per_class(self) -> dict[str, float]:
        """Bytes per element of each byte class of an operator (see :mod:`llmath.ops`)."""
        w, a, kv = self.weight_bytes, self.act_bytes, self.kv_bytes
        return {"weight": w, "act_in": a, "act_out": a, "kv_read": kv, "kv_write": kv}

    @property
    def compute(self) -> str:
        """The dtype the matmuls run in (that of the activations)."""
        return self.activations
