"""Adapter rows of Gemma 4's draft models, ``gemma4_assistant`` and ``gemma4_unified_assistant`` (transformers
5.23 ``configuration_gemma4_assistant.py`` / ``configuration_gemma4_unified_assistant.py``): a ``text_config``
(a Gemma 4 / Gemma 4 unified language model) whose every layer reads the target's K/V, plus the wrapper's
``backbone_hidden_size`` and ordered-embedding head. The spec is the language model's with an
:class:`~llmath.model.spec_assistant.AssistantSpec`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from llmath.errors import ConfigError
from llmath.model.spec import ModelSpec
from llmath.model.spec_assistant import AssistantSpec

# the config classes' defaults of backbone_hidden_size (the target's width)
_BACKBONE = {"gemma4_assistant": 1536, "gemma4_unified_assistant": 3840}
# what Gemma4AssistantConfig.validate_architecture requires of its text_config (value it must have)
_REQUIRED = {
    "hidden_size_per_layer_input": 0,
    "vocab_size_per_layer_input": 0,
    "enable_moe_block": False,
    "use_double_wide_mlp": False,
}


def _text(cfg: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        raise ConfigError(f"{model_type}: text_config (the assistant's language model) is missing")
    text = dict(text)
    if model_type == "gemma4_assistant":
        for key, want in _REQUIRED.items():
            if key in text and text[key] not in (want, None):
                raise ConfigError(
                    f"{model_type}: text_config.{key}={text[key]!r} must be {want!r} in an assistant "
                    "(Gemma4AssistantConfig.validate_architecture); fix the config.json"
                )
    n = text.get("num_hidden_layers")
    shared = text.get("num_kv_shared_layers") or n  # the config class sets it to num_hidden_layers when unset
    if shared != n:
        raise ConfigError(
            f"{model_type}: text_config.num_kv_shared_layers={shared!r} must equal num_hidden_layers={n!r}: every "
            "assistant layer reads the target's K/V"
        )
    return dict(text, num_kv_shared_layers=0, hidden_size_per_layer_input=0)


def assistant_spec(
    cfg: Mapping[str, Any], get: Callable[..., int], *, name: str, model_type: str, source: str, tie_embeddings: bool
) -> ModelSpec:
    """The assistant's language model read as its own type, every layer on the target's K/V; the LM head
    tied by default (both config classes) and without the target's final soft-capping (the assistant's
    forward applies ``lm_head`` to the normed state directly)."""
    from llmath.model.hf import spec_from_config  # the adapter table imports this module

    lm = spec_from_config(_text(cfg, model_type), name, source)
    ordered = bool(cfg.get("use_ordered_embeddings"))
    head = AssistantSpec(
        backbone_d=get("backbone_hidden_size", _BACKBONE[model_type]),
        centroids=get("num_centroids", 2048) if ordered else 0,
        centroid_top_k=get("centroid_intermediate_top_k", 32) if ordered else 0,
    )
    tie = cfg.get("tie_word_embeddings")
    return replace(
        lm, name=name, model_type=model_type, source=source, assistant=head, final_softcap=None,
        layer_kv_shared=(True,) * lm.n_layers, tie_embeddings=True if tie is None else bool(tie),
    )  # fmt: skip


ADAPTERS: dict[str, dict[str, Any]] = {
    "gemma4_assistant": {"build": assistant_spec},
    "gemma4_unified_assistant": {"build": assistant_spec},
}
