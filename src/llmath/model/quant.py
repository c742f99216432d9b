"""What a checkpoint's ``quantization_config`` (or ModelOpt ``hf_quant_config.json``) says, as a Precision.

Each reader turns one ``quant_method`` into: the default weight format, per-module formats (modules the
config lists as not converted stay in 16 bit), the activations' GEMM-input format (W8A8: fp8; W4A4:
nvfp4) and the KV-cache format where the config states them. Sources of each schema:

* ``fp8`` (transformers FineGrainedFP8Config; Qwen3-FP8, DeepSeek-V3): ``weight_block_size`` [128, 128] ->
  fp8-block, else per-tensor fp8; ``activation_scheme`` dynamic -> fp8 GEMM inputs.
* ``compressed-tensors`` (https://github.com/neuralmagic/compressed-tensors): ``config_groups`` weights /
  input_activations (num_bits, type, strategy, group_size), ``ignore``, ``kv_cache_scheme``; targets
  Linear, so the LM head and router are quantised unless ignored.
* ``awq`` (AutoAWQ), ``gptq`` (AutoGPTQ/GPTQModel): bits, group_size (−1: per channel), zero points.
* ``bitsandbytes``: load_in_4bit (nf4 / fp4, double quant) or load_in_8bit, ``llm_int8_skip_modules``.
* ``mxfp4`` (gpt-oss, transformers Mxfp4Config): MoE experts in MXFP4, ``modules_to_not_convert``.
* ``fbgemm_fp8``: per-channel fp8 weights, dynamic per-token fp8 activations.
* ``torchao``: the ``quant_type`` names that state a format (Int4WeightOnly, Int8WeightOnly,
  Int8DynamicActivationInt8Weight, Float8WeightOnly, Float8DynamicActivationFloat8Weight).
* ModelOpt (``hf_quant_config.json`` or quant_method ``modelopt``): ``quant_algo`` FP8 / NVFP4 /
  W4A16_AWQ / W4A8_AWQ, ``kv_cache_quant_algo``, ``exclude_modules``.

Module names in ignore lists map to llmath modules by :func:`module_of`; an entry naming one layer
(``model.layers.30.self_attn*``) leaves that module quantised in the other layers and is noted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llmath.errors import ConfigError
from llmath.model.dtypes import MODULES, Precision
from llmath.model.sidecar_check import check_quant

LINEAR_MODULES = ("attention", "ffn", "experts", "shared_experts", "router", "lm_head")
_RULES = (  # (module, substrings) in order: the first match wins; a wrapper's towers before the layers' names
    ("projector", ("embed_vision", "embed_audio", "multi_modal_projector", "mm_projector", "visual.merger")),
    ("vision", ("vision_tower", "vision_model", "visual.", "image_encoder", "vision_encoder")),
    ("audio", ("audio_tower", "audio_model", "audio_encoder")),
    ("lm_head", ("lm_head", "embed_out")),
    ("embedding", ("embed_tokens", "wte", "word_embeddings", "tok_embeddings", "token_embd", "embed_in", "wpe")),
    ("norm", ("norm", "ln_", "layernorm")),
    ("router", ("shared_expert_gate", "gate_inp", "router", "block_sparse_moe.gate", "mlp.gate.", "mlp.gate$")),
    ("shared_experts", ("shared_expert", "shexp")),
    ("experts", ("experts", "_exps")),
    ("attention", ("attn", "attention", "q_proj", "k_proj", "v_proj", "o_proj", "query_key_value")),
    ("ffn", ("mlp", "ffn", "feed_forward", "fc1", "fc2", "dense_h_to_4h", "dense_4h_to_h")),
)


def module_of(name: str) -> str | None:
    """The llmath module a checkpoint tensor or module name belongs to (None: unknown)."""
    n = name.lower().removeprefix("re:").replace("\\", "").rstrip("*") + "$"
    n = n.replace("$$", "$")
    if n in ("output.weight$", "output$"):  # GGUF's LM head
        return "lm_head"
    for module, keys in _RULES:
        if any(k in n for k in keys):
            return module
    return None


# a checkpoint's projection names -> llmath's operators (llmath.ops: attention's projections)
PROJECTION_OPS = {
    "q_a_proj": "attn.q_a_proj", "q_b_proj": "attn.q_b_proj", "kv_a_proj_with_mqa": "attn.kv_a_proj",
    "kv_b_proj": "attn.kv_b_proj", "q_proj": "attn.q_proj", "k_proj": "attn.k_proj", "v_proj": "attn.v_proj",
    "o_proj": "attn.o_proj",
}  # fmt: skip


def projection_op(name: str) -> str | None:
    """The llmath operator a module name's last part names (``...self_attn.kv_b_proj`` -> ``attn.kv_b_proj``)."""
    return PROJECTION_OPS.get(str(name).rstrip("*").rsplit(".", 1)[-1])


def layer_index(name: str) -> int | None:
    m = re.search(r"(?:layers?|blk|h)\.(\d+)\.", name)
    return int(m.group(1)) if m else None


@dataclass
class Reading:
    """A quantisation config read: Precision fields, where each came from, and notes."""

    weights: str = "bf16"
    modules: dict[str, str] = field(default_factory=dict)
    act_quant: str | None = None
    activations: str | None = None
    kv: str | None = None
    group_size: int = 128
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # entries naming one layer's module (model.layers.30.self_attn*): module -> (layer indices, where listed,
    # the entries); resolved against the model's layers by :func:`llmath.model.checkpoint.from_config`
    layers: dict[str, tuple[set[int], str, list[str]]] = field(default_factory=dict)
    projections: dict[str, str] = field(default_factory=dict)  # operator -> format (Precision.projections)

    def precision(self, base: Precision | None = None) -> Precision:
        base = base or Precision()
        act = self.activations or base.activations
        return Precision(
            weights=self.weights,
            activations=act,
            kv=self.kv or base.kv,
            group_size=self.group_size,
            modules=self.modules,
            act_quant=self.act_quant,
            sources=self.sources,
            projections=self.projections,
        )


def _keep16(r: Reading, names, where: str, base16: str = "bf16") -> None:
    for n in names or ():
        m = module_of(str(n))
        if m is None:
            r.notes.append(f"{where}: {n!r} names no module llmath models; ignored")
        elif (i := layer_index(str(n))) is not None:
            idx, _, names = r.layers.setdefault(m, (set(), where, []))
            idx.add(i)
            names.append(str(n))
        else:
            r.modules[m] = base16
            r.sources[m] = where


def _all_linear(r: Reading, fmt: str, where: str) -> None:
    for m in LINEAR_MODULES:
        r.modules.setdefault(m, fmt)
        r.sources.setdefault(m, where)


def _fp8(q, r: Reading) -> None:
    block = q.get("weight_block_size")
    r.weights = "fp8-block" if block else "fp8"
    if block and list(block) != [128, 128]:
        r.notes.append(f"weight_block_size {block}: bytes counted with 128x128 block scales")
    if q.get("activation_scheme", "dynamic") in ("dynamic", "static"):
        r.act_quant = "fp8"
    _keep16(r, q.get("modules_to_not_convert"), "quantization_config.modules_to_not_convert")


def _ct_format(spec: Mapping | None, role: str) -> str | None:
    """A compressed-tensors quantisation args block -> a format name (None: not quantised)."""
    if not spec:
        return None
    bits, typ = spec.get("num_bits"), spec.get("type", "int")
    strategy, group = spec.get("strategy"), spec.get("group_size")
    if typ == "float" and bits == 8:
        if role != "weights":
            return "fp8"
        return {"block": "fp8-block", "channel": "fp8-channel"}.get(str(strategy), "fp8")
    if typ == "float" and bits == 4:
        return "nvfp4" if (group in (16, None)) else "mxfp4"
    if typ == "int" and bits == 8:
        return "int8" if (role != "weights" or strategy == "group") else "int8-channel"
    if typ == "int" and bits == 4 and role == "weights":
        return "int4" if spec.get("symmetric", True) else "awq"
    raise ConfigError(f"compressed-tensors {role}: {bits}-bit {typ} is not a format llmath models; pass --weights")


def _compressed_tensors(q, r: Reading) -> None:
    groups = q.get("config_groups") or {}
    if not groups:
        raise ConfigError("compressed-tensors quantization_config has no config_groups; pass --weights")
    g = next(iter(groups.values()))
    if len(groups) > 1:
        r.notes.append(f"compressed-tensors: {len(groups)} config groups; the first one's formats are used")
    w = _ct_format(g.get("weights"), "weights") or "bf16"
    r.weights = w
    if (g.get("weights") or {}).get("group_size"):
        r.group_size = int(g["weights"]["group_size"])
    r.act_quant = _ct_format(g.get("input_activations"), "activations")
    where = "quantization_config.config_groups"
    _keep16(r, q.get("ignore"), "quantization_config.ignore")
    _all_linear(r, w, where)
    kvs = q.get("kv_cache_scheme")
    if kvs:
        r.kv = _ct_format(kvs, "kv")
        r.sources["kv"] = "quantization_config.kv_cache_scheme"


def _int_group(q, r: Reading, fmt: str) -> None:
    g = int(q.get("group_size", 128) or 128)
    if g <= 0:  # per channel: one scale per output row
        r.group_size = 1 << 20
        r.notes.append("group_size -1 (per channel): scales per row counted as negligible")
    else:
        r.group_size = g
    r.weights = fmt
    _keep16(r, q.get("modules_to_not_convert"), "quantization_config.modules_to_not_convert")


def _awq(q, r: Reading) -> None:
    if int(q.get("bits") or q.get("w_bit") or 4) != 4:
        raise ConfigError(f"awq bits={q.get('bits')!r}: AWQ checkpoints are 4-bit; pass --weights")
    _int_group(q, r, "awq" if q.get("zero_point", True) else "int4")


def _gptq(q, r: Reading) -> None:
    bits = int(q.get("bits") or 4)
    if bits not in (4, 8):
        raise ConfigError(f"gptq bits={bits}: llmath models 4- and 8-bit GPTQ; pass --weights")
    _int_group(q, r, "gptq" if bits == 4 else "gptq-int8")


def _bnb(q, r: Reading) -> None:
    if q.get("load_in_4bit") or q.get("_load_in_4bit"):
        kind = q.get("bnb_4bit_quant_type", "fp4")
        r.weights = ("nf4-dq" if q.get("bnb_4bit_use_double_quant") else "nf4") if kind == "nf4" else "fp4-bnb"
        compute = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(q.get("bnb_4bit_compute_dtype"))
        if compute:
            r.activations = compute
            r.sources["activations"] = "quantization_config.bnb_4bit_compute_dtype"
    elif q.get("load_in_8bit") or q.get("_load_in_8bit"):
        r.weights = "int8-bnb"
    else:
        raise ConfigError("bitsandbytes quantization_config loads neither 4 nor 8 bit; pass --weights")
    _keep16(r, q.get("llm_int8_skip_modules"), "quantization_config.llm_int8_skip_modules")


def _mxfp4(q, r: Reading) -> None:
    r.weights = "mxfp4"  # transformers' Mxfp4 integration converts the MoE experts only
    for m in ("attention", "ffn", "shared_experts"):
        r.modules.setdefault(m, "bf16")
        r.sources.setdefault(m, "quantization_config (mxfp4 converts MoE experts only)")
    _keep16(r, q.get("modules_to_not_convert"), "quantization_config.modules_to_not_convert")


def _fbgemm(q, r: Reading) -> None:
    r.weights, r.act_quant = "fp8-channel", "fp8"
    _keep16(r, q.get("modules_to_not_convert"), "quantization_config.modules_to_not_convert")


TORCHAO = {  # quant_type -> (weights, GEMM-input activations)
    "int4weightonlyconfig": ("int4", None),
    "int4_weight_only": ("int4", None),
    "int8weightonlyconfig": ("int8-channel", None),
    "int8_weight_only": ("int8-channel", None),
    "int8dynamicactivationint8weightconfig": ("int8-channel", "int8"),
    "int8_dynamic_activation_int8_weight": ("int8-channel", "int8"),
    "float8weightonlyconfig": ("fp8-channel", None),
    "float8dynamicactivationfloat8weightconfig": ("fp8-channel", "fp8"),
    "float8_dynamic_activation_float8_weight": ("fp8-channel", "fp8"),
}


def _torchao(q, r: Reading) -> None:
    qt = q.get("quant_type")
    kwargs = q.get("quant_type_kwargs") or {}
    if isinstance(qt, Mapping):  # {"default": {"_type": "Int4WeightOnlyConfig", "_data": {...}}}
        inner = qt.get("default", next(iter(qt.values()), {}))
        qt, kwargs = inner.get("_type"), inner.get("_data") or {}
    hit = TORCHAO.get(str(qt).lower())
    if hit is None:
        raise ConfigError(f"torchao quant_type {qt!r} states no format llmath models; pass --weights")
    r.weights, r.act_quant = hit
    if kwargs.get("group_size"):
        r.group_size = int(kwargs["group_size"])
    _keep16(r, q.get("modules_to_not_convert"), "quantization_config.modules_to_not_convert")


MODELOPT = {
    "fp8": ("fp8", "fp8"),
    "nvfp4": ("nvfp4", "nvfp4"),
    "w4a16_awq": ("int4", None),
    "w4a8_awq": ("int4", "fp8"),
}


def read_modelopt(q: Mapping[str, Any], where: str = "hf_quant_config.json") -> Reading:
    """ModelOpt's ``quantization`` block (``quant_algo``, ``kv_cache_quant_algo``, ``exclude_modules``)."""
    r = Reading()
    algo = str(q.get("quant_algo") or "").lower()
    if algo not in MODELOPT:
        raise ConfigError(
            f"{where}: quant_algo {q.get('quant_algo')!r} is not one llmath reads "
            f"({', '.join(a.upper() for a in MODELOPT)}); pass --weights"
        )
    r.weights, r.act_quant = MODELOPT[algo]
    if q.get("group_size") and algo.startswith("w4"):
        r.group_size = int(q["group_size"])
    r.sources["weights"] = f"{where} quant_algo"
    _keep16(r, q.get("exclude_modules"), f"{where} exclude_modules")
    kv = str(q.get("kv_cache_quant_algo") or "").lower()
    if kv in ("fp8", "nvfp4", "int8"):
        r.kv = kv
        r.sources["kv"] = f"{where} kv_cache_quant_algo"
    return r


READERS = {
    "fp8": _fp8,
    "compressed-tensors": _compressed_tensors,
    "awq": _awq,
    "gptq": _gptq,
    "bitsandbytes": _bnb,
    "mxfp4": _mxfp4,
    "fbgemm_fp8": _fbgemm,
    "torchao": _torchao,
}


def read_quantization_config(q: Mapping[str, Any]) -> Reading:
    """A config.json ``quantization_config`` -> :class:`Reading` (ConfigError for what it cannot read)."""
    if not isinstance(q, Mapping):
        raise ConfigError(f"quantization_config must be a JSON object, got {type(q).__name__}")
    method = str(q.get("quant_method") or "").lower().replace("_", "-") if q.get("quant_method") else ""
    method = {"fbgemm-fp8": "fbgemm_fp8", "compressed_tensors": "compressed-tensors"}.get(method, method)
    if method == "modelopt":
        return read_modelopt(q.get("quantization", q), "quantization_config")
    reader = READERS.get(method)
    if reader is None:
        raise ConfigError(
            f"quantization_config quant_method={q.get('quant_method')!r} is not one llmath reads "
            f"({', '.join(READERS)}, modelopt); pass --weights/--activations to state the formats"
        )
    r = Reading()
    reader(q, r)
    r.sources.setdefault("weights", f"quantization_config ({method})")
    if r.act_quant:
        r.sources.setdefault("act_quant", f"quantization_config ({method})")
    return r


def checkpoint_reading(
    cfg: Mapping[str, Any], sidecar: Mapping[str, Any] | None = None, where: str = "."
) -> Reading | None:
    """The formats a checkpoint states: ``hf_quant_config.json`` (ModelOpt) wins, then ``quantization_config``
    (each checked first: :func:`llmath.model.sidecar_check.check_quant`; ``where``: the checkpoint's folder)."""
    if sidecar is not None:
        check_quant(sidecar, f"{where}/hf_quant_config.json")
        return read_modelopt(sidecar.get("quantization", sidecar))
    q = cfg.get("quantization_config") if isinstance(cfg, Mapping) else None
    if q is None and isinstance(cfg, Mapping) and isinstance(cfg.get("text_config"), Mapping):
        q = cfg["text_config"].get("quantization_config")
    if q is not None:
        check_quant(q, f"{where}/config.json quantization_config")
    r = read_quantization_config(q) if q else None
    if r is not None and isinstance(cfg, Mapping) and cfg.get("expert_dtype") == "fp4":
        _fp4_experts(r)
    return r


def _fp4_experts(r: Reading) -> None:
    """DeepSeek-V4's ``expert_dtype: "fp4"``: the routed experts are stored MXFP4 (e2m1 values, one ue8m0 scale
    per 32) beside the fp8 block-scaled rest. vLLM's deepseek_v4 model keys its expert kernels off this field
    (vllm/model_executor/models/deepseek_v4.py); the released DeepSeek-V4-Pro safetensors hold 786,381,668,352
    packed int8 bytes of experts and 1/32 as many e8m0 scales (62 layers x 384 experts x 3 x 7168 x 3072 / 2)."""
    r.modules["experts"] = "mxfp4"
    r.sources["experts"] = "config.json expert_dtype fp4 (MXFP4 routed experts)"


def base_precision(cfg: Mapping[str, Any]) -> Precision:
    """The unquantised precision a config states (torch_dtype / dtype: bf16, fp16, fp32; default bf16)."""
    d = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").lower()
    fmt = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(d, "bf16")
    return Precision.uniform(fmt) if fmt != "fp32" else Precision()


__all__ = ["MODULES", "Reading", "checkpoint_reading", "module_of", "read_modelopt", "read_quantization_config"]
