"""Precisions of weights (per module), activations and KV cache, and their bytes per element.

Formats and their layouts live in :mod:`llmath.model.formats` (``data/formats.json``). Convention: bytes
are counted per element stored. Integer formats below 16 bits are group-quantised: each group of
``group_size`` elements carries one scale of ``scale_bytes`` (fp16 by default, as GPTQ/AWQ store them;
AWQ/GPTQ add a 4-bit zero), so int4 with groups of 128 costs 0.5 + 2/128 = 0.515625 bytes per element.

**Per module.** Weights have a default format (``weights``) and per-module overrides (``modules``) for
the modules of :data:`MODULES`. A quantised default (below 16 bits) leaves the embedding, the LM head,
the MoE router and the norms in 16 bit (``base16``: the activations' 16-bit format, else bf16), as
AWQ/GPTQ/FP8/NVFP4 checkpoints do: AutoAWQ and GPTQ quantise only the linear layers inside the decoder
blocks (https://github.com/casper-hansen/AutoAWQ, ``modules_to_not_convert``; transformers' GPTQ
integration skips ``lm_head``), and FP8/MXFP4 checkpoints list ``lm_head`` and the router among the
modules not converted (e.g. openai/gpt-oss-120b config.json). A GGUF type (llama.cpp ftype) instead
follows llama.cpp's rules: token embedding in the base type, output in q6_k (q8_0 stays q8_0), router
and norms in f32 (src/llama-quant.cpp). ``module_bytes`` carries bytes per element measured from a
checkpoint's tensor headers; they win over the formats.

**Compute.** A GEMM runs in :func:`~llmath.model.formats.compute_format` of its weights' format and
the activations' GEMM-input format (``act_quant``, else ``activations``): W4A16 dequantises to bf16,
W8A8 fp8 runs in fp8, W4A4 nvfp4 in fp4. Attention products run in the KV format × activations. What a
device really executes (fallbacks where it lacks a format) is decided in :mod:`llmath.hardware.execution`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmath.errors import WorkloadError
from llmath.model import formats as fmt

BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}  # the original six (kept)
GROUPED = ("int8", "int4")
DTYPES = tuple(BITS)
# the language model's modules, then a wrapper's towers (model/towers.py components)
MODULES = ("embedding", "attention", "ffn", "experts", "shared_experts", "router", "lm_head", "norm", "vision",
           "projector", "audio")  # fmt: skip
KEEP_16BIT = ("embedding", "lm_head", "router", "norm")
MAX_GROUP = 1 << 20


def check_dtype(value: str, what: str = "dtype") -> str:
    if not isinstance(value, str):
        raise WorkloadError(f"{what}={value!r} must be a format name, e.g. bf16, fp8, int4, nvfp4, q4_k_m")
    role = "kv" if what.startswith("kv") else "activations" if what.startswith("activ") else "weights"
    return fmt.canonical(value, role)


def _pairs(value, what: str, check) -> tuple[tuple[str, Any], ...]:
    items = value.items() if isinstance(value, dict) else value
    out = []
    for k, v in items:
        if k not in MODULES:
            raise WorkloadError(f"{what}: module {k!r} is not one of {', '.join(MODULES)}")
        out.append((k, check(v)))
    return tuple(sorted(out))


def _positive(v) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0 or v != v or v == float("inf"):
        raise WorkloadError(f"module bytes per element {v!r} must be a positive finite number")
    return float(v)


@dataclass(frozen=True)
class Precision:
    """Weights (default + per module), activations and KV-cache formats (``--dtype`` sets all three)."""

    weights: str = "bf16"
    activations: str = "bf16"
    kv: str = "bf16"
    group_size: int = 128
    scale_bytes: int = 2
    modules: Any = ()  # {module: format} or pairs; stored as sorted pairs
    module_bytes: Any = ()  # {module: bytes per element} (llama.cpp mix rules); wins over the formats
    measured_bytes: Any = ()  # {module or "total": bytes} read from tensor headers (safetensors, GGUF)
    act_quant: str | None = None  # activations' format at GEMM inputs (W8A8: fp8), if not ``activations``
    sources: Any = ()  # {what: where it came from}, for the report
    # the Mamba / Gated DeltaNet SSM state's format (vLLM ``--mamba-ssm-cache-dtype``); None: the config's
    # ``mamba_ssm_cache_dtype`` (ModelSpec.ssm_state_dtype), else the KV cache's (llmath.ops.ssm_state)
    ssm: str | None = None
    # {operator name: format} for the projections a checkpoint keeps in another format than their module's (ModelOpt's
    # exclude_modules naming ``self_attn.q_a_proj`` in every layer): the module's bytes per element weigh them by their
    # parameters (:func:`llmath.ops.params.weight_bytes_per_element`); its GEMMs keep the module's format
    projections: Any = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", check_dtype(self.weights, "weights dtype"))
        object.__setattr__(self, "activations", check_dtype(self.activations, "activations dtype"))
        object.__setattr__(self, "kv", check_dtype(self.kv, "kv dtype"))
        if self.act_quant is not None:
            object.__setattr__(self, "act_quant", check_dtype(self.act_quant, "activations dtype"))
        if self.ssm is not None:
            object.__setattr__(self, "ssm", check_dtype(self.ssm, "kv (SSM state) dtype"))
        g = self.group_size
        if isinstance(g, bool) or not isinstance(g, int) or not 0 < g <= MAX_GROUP:
            raise WorkloadError(f"group_size={g!r} must be a positive integer <= {MAX_GROUP:,} (e.g. 128)")
        object.__setattr__(self, "modules", _pairs(self.modules, "modules", lambda v: fmt.canonical(v, "weights")))
        object.__setattr__(self, "module_bytes", _pairs(self.module_bytes, "module_bytes", _positive))
        meas = self.measured_bytes.items() if isinstance(self.measured_bytes, dict) else self.measured_bytes
        for k, v in meas:
            if k not in MODULES + ("total",):
                raise WorkloadError(f"measured_bytes: {k!r} is not a module or 'total'")
            _positive(v)
        object.__setattr__(self, "measured_bytes", tuple(sorted((k, int(v)) for k, v in meas)))
        proj = self.projections.items() if isinstance(self.projections, dict) else self.projections
        object.__setattr__(self, "projections", tuple(sorted((str(k), check_dtype(v)) for k, v in proj)))
        src = self.sources.items() if isinstance(self.sources, dict) else self.sources
        object.__setattr__(self, "sources", tuple(sorted((str(k), str(v)) for k, v in src)))

    @classmethod
    def uniform(cls, dtype: str, **kw) -> Precision:
        return cls(weights=dtype, activations=dtype, kv=dtype, **kw)

    def __hash__(self) -> int:  # keys the roofline's caches, looked up per serving iteration: hashed once
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f) for f in self.__dataclass_fields__))
            object.__setattr__(self, "_hash", h)
        return h

    def bytes_per_element(self, dtype: str) -> float:
        return fmt.bytes_per_element(dtype, self.group_size, self.scale_bytes)

    @property
    def base16(self) -> str:
        """The 16-bit format unquantised modules keep: the activations' if 16-bit, else bf16."""
        return self.activations if self.activations in ("bf16", "fp16") else "bf16"

    def weight_format(self, module: str) -> str:
        """The weight format of ``module`` (see the module docstring for the 16-bit rule)."""
        own = dict(self.modules).get(module)
        if own is not None:
            return own
        w = self.weights
        if module not in KEEP_16BIT or not fmt.get(w).quantised:
            return w
        mix = fmt.gguf_mixes().get(w)
        if mix is not None:  # llama.cpp: token_embd in the base type, output q6_k, router/norms f32
            base = mix["base"]
            return {"embedding": base, "lm_head": base if base == "q8_0" else "q6_k"}.get(module, "fp32")
        return self.base16

    def weight_source(self, module: str) -> str:
        """Where ``module``'s weight format came from: its own entry, the 16-bit rule, or the default's."""
        src = dict(self.sources)
        if module in src:
            return src[module]
        if module not in dict(self.modules) and module in KEEP_16BIT and fmt.get(self.weights).quantised:
            return "llama.cpp rules" if self.weights in fmt.gguf_mixes() else "kept 16-bit"
        return src.get("weights", "default")

    def module_weight_bytes(self, module: str) -> float:
        """Bytes per weight element of ``module`` from ``module_bytes`` or its format (headers' measured bytes
        need the parameter count: :func:`llmath.ops.params.weight_bytes_per_element`)."""
        b = dict(self.module_bytes).get(module)
        return b if b is not None else self.bytes_per_element(self.weight_format(module))

    def module_compute(self, module: str | None) -> str:
        """The format a GEMM of ``module`` runs in (None: attention products, KV × activations)."""
        a = self.act_quant or self.activations
        if module is None:
            return fmt.compute_format(self.kv, a)
        return fmt.compute_format(self.weight_format(module), a)

    @property
    def weight_bytes(self) -> float:
        """Bytes per element of the default weight format (modules may differ: :meth:`module_weight_bytes`)."""
        return self.bytes_per_element(self.weights)

    @property
    def act_bytes(self) -> float:
        return self.bytes_per_element(self.activations)

    @property
    def kv_bytes(self) -> float:
        return self.bytes_per_element(self.kv)

    @property
    def per_class(self) -> dict[str, float]:
        """Bytes per element of each byte class of an operator (weights: the default format; per module:
        :meth:`module_weight_bytes`)."""
        return {
            "weight": self.weight_bytes,
            "act_in": self.act_bytes,
            "act_out": self.act_bytes,
            "kv_read": self.kv_bytes,
            "kv_write": self.kv_bytes,
        }

    @property
    def compute(self) -> str:
        """The format the default weights' GEMMs run in (activations' format for weight-only formats)."""
        return fmt.compute_format(self.weights, self.act_quant or self.activations)

    def override(self, **flags) -> Precision:
        """This precision with the given flags (``weights``, ``activations``, ``kv``, ``ssm``, ``group_size``) replacing
        it; an explicit ``weights`` replaces every module's format and measured bytes too."""
        from dataclasses import replace

        given = {k: v for k, v in flags.items() if v is not None}
        if not given:
            return self
        src = dict(self.sources)
        for k in ("weights", "activations", "kv", "ssm"):
            if k in given:
                src[k] = "flag"
        if "weights" in given:
            given.update(modules=(), module_bytes=(), measured_bytes=(), act_quant=None, projections=())
            src = {k: v for k, v in src.items() if k not in MODULES}
        if "activations" in given:
            given["act_quant"] = None
        return replace(self, **given, sources=src)

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k) for k in ("weights", "activations", "kv", "act_quant", "group_size")},
            "modules": {m: self.weight_format(m) for m in MODULES},
            "module_bytes_per_element": {m: self.module_weight_bytes(m) for m in MODULES},
            "measured_bytes": dict(self.measured_bytes),
            "module_sources": {m: self.weight_source(m) for m in MODULES},
            "sources": dict(self.sources),
        }
