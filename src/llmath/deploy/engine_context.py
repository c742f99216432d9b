"""Each engine's default maximum model length, derived from the model's config as the engine derives it.

An engine caps a request's prompt + output at a length it reads from the config when none is given; each reads
the config its own way (the rule each engine uses is named in ``data/engines.json``, ``context_rule``, with its
source). The rules read ``ModelSpec.length_config`` (:mod:`llmath.model.length_config`):

* ``vllm`` (``vllm/config/model.py``, ``_get_and_verify_max_len``): the smallest of its length keys
  (``model_max_length``, where set, wins); unless the model type is Gemma 3's, a RoPE scaling type other than
  su / longrope / llama3 multiplies it by ``factor``, a yarn one multiplies ``original_max_position_embeddings``
  instead; longrope defaults to the config's top-level ``original_max_position_embeddings``. No key: 2048.
  (A tokenizer's ``model_max_length`` and ``--disable-sliding-window`` also cap it: not modelled.)
* ``sglang`` (``python/sglang/srt/utils/hf_transformers_utils.py``, ``get_context_length``): the first of
  ``max_sequence_length``, ``seq_length``, ``max_seq_len``, ``model_max_length``, ``max_position_embeddings``,
  times ``rope_scaling.factor`` unless rope_scaling holds ``original_max_position_embeddings`` or its type is
  llama3. No key: 2048.
* ``trtllm`` (``tensorrt_llm/_torch/models/modeling_utils.py``, ``DecoderModelForCausalLM.infer_max_seq_len``):
  ``max_position_embeddings`` (2048 without it), times ``factor`` (rounded up) for a RoPE scaling type other
  than su / longrope / llama3 / yarn.
* ``llama.cpp`` (``n_ctx_train``): the GGUF's ``<arch>.context_length``, which llmath reads as
  ``max_position_embeddings`` (:mod:`llmath.model.gguf`).

A spec without a length key (built without a config) keeps its ``max_positions``; a model without a position
table and without any key has no limit (None).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from llmath.deploy import engines
from llmath.model.spec import ModelSpec

DEFAULT_LENGTH = 2048  # each engine's length when the config names none (vLLM, SGLang, TensorRT-LLM)
SGLANG_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")
VLLM_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)  # fmt: skip


@dataclass(frozen=True)
class ContextLimit:
    """An engine's default maximum model length ``tokens`` and how it was derived (``how``, for messages)."""

    engine: str
    tokens: int
    how: str


def _key(cfg: dict, key: str) -> str:
    return f"{key} {_num(cfg[key])}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def vllm_rule(cfg: dict) -> tuple[float, str]:
    """vLLM's derived max model length (see the module's docstring) and its derivation."""
    present = [k for k in VLLM_KEYS if k in cfg]
    key = "model_max_length" if "model_max_length" in cfg else min(present, key=lambda k: cfg[k], default=None)
    length, how = (cfg[key], _key(cfg, key)) if key else (DEFAULT_LENGTH, f"the default {DEFAULT_LENGTH}")
    kind, factor = cfg.get("rope.type"), cfg.get("rope.factor")
    if "gemma3" in str(cfg.get("model_type", "")) or kind in (None, "su", "longrope", "llama3", "default"):
        if kind == "longrope" and "original_max_position_embeddings" in cfg:
            return cfg["original_max_position_embeddings"], _key(cfg, "original_max_position_embeddings")
        return length, how
    if kind == "yarn" and "rope.original_max_position_embeddings" in cfg:
        length, how = cfg["rope.original_max_position_embeddings"], _key(cfg, "rope.original_max_position_embeddings")
        how = how.replace("rope.", "")
    if factor is None:
        return length, how
    return length * factor, f"{how} × {kind} factor {_num(factor)}"


def sglang_rule(cfg: dict) -> tuple[float, str]:
    """SGLang's default context length (see the module's docstring) and its derivation."""
    key = next((k for k in SGLANG_KEYS if k in cfg), None)
    length, how = (cfg[key], _key(cfg, key)) if key else (DEFAULT_LENGTH, f"the default {DEFAULT_LENGTH}")
    factor = cfg.get("rope.factor")
    if factor is None or "rope.original_max_position_embeddings" in cfg or cfg.get("rope.type") == "llama3":
        return length, how
    return int(factor * length), f"{how} × {cfg.get('rope.type')} factor {_num(factor)}"


def trtllm_rule(cfg: dict) -> tuple[float, str]:
    """TensorRT-LLM's (PyTorch backend) inferred max_seq_len (see the module's docstring) and its derivation."""
    key = "max_position_embeddings"
    length, how = (cfg[key], _key(cfg, key)) if key in cfg else (DEFAULT_LENGTH, f"the default {DEFAULT_LENGTH}")
    kind, factor = cfg.get("rope.type"), cfg.get("rope.factor")
    if factor is None or factor == 1 or kind in ("su", "longrope", "llama3", "yarn"):
        return length, how
    return math.ceil(length * factor), f"{how} × {kind} factor {_num(factor)}"


def gguf_rule(cfg: dict) -> tuple[float, str]:
    """llama.cpp's n_ctx_train: the GGUF's context_length (read as max_position_embeddings)."""
    key = "max_position_embeddings"
    return (cfg[key], f"context_length {_num(cfg[key])}") if key in cfg else (math.inf, "no context_length")


RULES: dict[str, Callable[[dict], tuple[float, str]]] = {
    "vllm": vllm_rule, "sglang": sglang_rule, "trtllm": trtllm_rule, "gguf": gguf_rule,
}  # fmt: skip


def context_limit(spec: ModelSpec, engine: str) -> ContextLimit | None:
    """``engine``'s default maximum model length for ``spec`` (its rule: ``context_rule`` in
    ``data/engines.json``); None where the model has no length limit (no position table, no length key)."""
    rule = engines.info(engine)["context_rule"]
    name = engines.info(engine).get("display_name", engine).split(" (")[0]
    cfg = dict(spec.length_config)
    if not any(k in cfg for k in VLLM_KEYS):
        if not spec.max_positions:
            return None
        cfg["max_position_embeddings"] = spec.max_positions
    tokens, how = RULES[rule["rule"]](cfg)
    if not math.isfinite(tokens):
        return None
    return ContextLimit(name, int(tokens), how)
