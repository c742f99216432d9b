"""The config keys an engine reads to derive its default maximum model length, kept on the spec as
``ModelSpec.length_config`` (sorted ``(key, value)`` pairs): every top-level length key any engine reads, and
the RoPE scaling entries (``rope_scaling``, or transformers v5's ``rope_parameters``) as ``rope.type``,
``rope.factor`` and ``rope.original_max_position_embeddings``. The engines' rules live in
:mod:`llmath.deploy.engine_context`."""

from __future__ import annotations

from collections.abc import Mapping

# vllm/config/model.py (_get_and_verify_max_len, possible_keys) and SGLang's CONTEXT_LENGTH_KEYS together
LENGTH_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
    "original_max_position_embeddings",  # vLLM: a longrope model's default length
)  # fmt: skip
ROPE_KEYS = ("factor", "original_max_position_embeddings")


def length_config(cfg: Mapping) -> tuple[tuple[str, int | float | str], ...]:
    """``cfg``'s length keys and RoPE scaling entries, as the spec holds them (see the module's docstring)."""
    out: dict[str, int | float | str] = {k: cfg[k] for k in LENGTH_KEYS if isinstance(cfg.get(k), (int, float))}
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(rope, Mapping):
        kind = rope.get("rope_type", rope.get("type"))
        if isinstance(kind, str):
            out["rope.type"] = kind
        out |= {f"rope.{k}": rope[k] for k in ROPE_KEYS if isinstance(rope.get(k), (int, float))}
    if isinstance(cfg.get("model_type"), str):
        out["model_type"] = cfg["model_type"]
    return tuple(sorted(out.items()))
