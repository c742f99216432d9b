"""Notes a report carries about the model itself (not the workload's numbers): a context past the trained
length, a multimodal wrapper whose towers the stages leave out. Each note is also a Python warning."""

from __future__ import annotations

import warnings

from llmath.model.families_musicgen import codebook_notes
from llmath.model.spec import ModelSpec


def context_message(spec: ModelSpec, end: int) -> str | None:
    """Why ``end`` positions (0 … end − 1) pass the trained table, or None. A decode step at context S attends
    S + 1 positions (S cached and its own new token at position S: README conventions), so context S =
    max_position_embeddings needs the position one past the table's last, and context S − 1 is the last step
    that fits."""
    top = spec.max_positions
    if not (top and end > top):
        return None
    return (
        f"{spec.name}: position {end - 1} is past the model's position table (max_position_embeddings={top}:"
        f" positions 0 to {top - 1}); a decode step at context S puts its new token at position S, so the last"
        f" step that fits is --context {top - 1} (with --prompt P --gen G: P + G − 1 ≤ {top}); past it the"
        " figures extrapolate the architecture beyond what it was trained for"
    )


def context_notes(spec: ModelSpec, end: int) -> list[str]:
    msg = context_message(spec, end)
    if msg is None:
        return []
    warnings.warn(msg, stacklevel=4)
    return [msg]


def wrapper_notes(spec: ModelSpec) -> list[str]:
    """What a report leaves out of a wrapper or an encoder's decoder, and the layers its stages skip."""
    return _wrapper_notes(spec) + _skipped_layer_notes(spec) + codebook_notes(spec)


def _skipped_layer_notes(spec: ModelSpec) -> list[str]:
    n = spec.layer_mixers.count("xattn")
    if not n:
        return []
    return [
        f"{spec.name}: the stages are a text-only request: its {n} image cross-attention layers (in params and "
        "weight memory) are skipped, as transformers and serving engines skip them without an image"
    ]


def _wrapper_notes(spec: ModelSpec) -> list[str]:
    if spec.encoder is not None and spec.encoder.external:
        return [
            f"{spec.name}: the decoder of an encoder-decoder whose encoder is {spec.encoder.external}: its "
            "parameters and pass are not counted; prompt = the encoder output positions the decoder cross-attends"
        ]
    if not spec.wrapper:
        return []
    counted = sorted({k.split(".")[0] for k, _ in spec.tower_params})
    # GIT is its own wrapper: its language model is the top-level config, beside vision_config
    lm = "the text decoder" if spec.wrapper == spec.model_type else "text_config"
    if not spec.towers_not_counted:
        return [
            f"{spec.name}: a {spec.wrapper} wrapper; params and weight memory include its {' and '.join(counted)}; "
            f"the prefill and decode stages are its language model ({lm}) only"
        ]
    towers = ", ".join(spec.towers_not_counted)
    return [
        f"{spec.name}: a {spec.wrapper} wrapper; params, stages and memory are its language model "
        f"({lm}) only: {towers} not counted"
    ]
