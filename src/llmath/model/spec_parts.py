"""The model spec composed by concern: what the layers above ``ops/`` read of a model, in one place.

:class:`~llmath.model.spec.ModelSpec` stores its fields as the adapters write them; ``spec.parts``
(:func:`compose`) groups them by concern, as ``deploy/`` reads them:

* ``attention``: query and K/V heads, head width, the full-attention layers' own K/V heads, MLA, the q/k norm
  and each layer's window;
* ``ffn``: the dense FFN widths, the MoE and which layers run it, the MoE beside a dense FFN, parallel blocks;
* ``mixers``: the non-attention mixer and what each layer runs (attention, a mixer kind, both, a shared block);
* ``embeddings``: the vocabulary, the width and a tied LM head;
* ``stack``: the decoder's layers and the encoder of an encoder-decoder model;
* ``family``: the optional parts one family owns (the Byte Latent Transformer's stacks, DeepSeek-V4's compressed
  attention, Zamba2's shared block, ...). The layers above never read one by name: they ask the traits the parts
  declare (:mod:`llmath.model.traits`).

Each part is a frozen view built once per spec; the numbers are the spec's own fields, never derived a second way.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmath.model.spec import MixerSpec, ModelSpec
    from llmath.model.spec_encoder import EncoderSpec
    from llmath.model.spec_mla import MLASpec
    from llmath.model.spec_moe import MoESpec

# the per-concern optional parts (owned by the concerns above, not by one family)
CONCERN_PARTS = frozenset({"mla", "window_mla", "moe", "mixer", "encoder"})


@dataclass(frozen=True)
class AttentionPart:
    heads: int  # N
    kv_heads: int  # K
    head_dim: int  # H
    full_kv_heads: int | None  # the full-attention layers' own K/V heads (Gemma 4); None: K
    mla: MLASpec | None
    qk_norm: str  # ModelSpec.qk_norm: 'head' is one norm shared by the heads
    windows: tuple[int | None, ...]  # each layer's window (None: full attention)


@dataclass(frozen=True)
class FeedForwardPart:
    dense_widths: frozenset[int]  # the non-zero dense FFN widths of the layers that are not MoE layers
    moe: MoESpec | None
    moe_layers: tuple[bool, ...]
    beside_moe: bool  # a dense FFN runs beside the MoE, outputs summed (Gemma 4)
    parallel_block: bool  # attention and FFN read one normed input and are summed before one reduction


@dataclass(frozen=True)
class MixerPart:
    mixer: MixerSpec | None
    layer_kinds: tuple[str, ...]  # ModelSpec.layer_mixers: "attention", a mixer kind, "attention+<kind>", ...

    @cached_property
    def components(self) -> frozenset[str]:
        """What the layers run, each ``+``-joined kind split (``shared+mamba2`` -> shared, mamba2); once per part
        (a planner asks per layout)."""
        return frozenset(p for k in self.layer_kinds for p in k.split("+"))


@dataclass(frozen=True)
class EmbeddingPart:
    vocab_size: int  # V
    d_model: int  # D
    tied: bool  # the LM head reads the embedding table


@dataclass(frozen=True)
class StackPart:
    layers: int  # the decoder's (or decoder-only model's) layers
    d_model: int
    encoder: EncoderSpec | None

    @property
    def pipeline_layers(self) -> int:
        """The layers of the shortest stack, the most pipeline stages it allows."""
        return min(self.layers, self.encoder.n_layers) if self.encoder is not None else self.layers


@dataclass(frozen=True)
class SpecParts:
    attention: AttentionPart
    ffn: FeedForwardPart
    mixers: MixerPart
    embeddings: EmbeddingPart
    stack: StackPart
    family: tuple[object, ...]  # the family parts the spec carries (module doc)


def family_parts(spec: ModelSpec) -> tuple[tuple[str, object], ...]:
    """(field, part) of each optional part of ``spec`` that one family owns (a composite's own spec aside:
    MusicGen's text encoder, a model of its own)."""
    return tuple(
        (f.name, v)
        for f in fields(spec)
        if f.name not in CONCERN_PARTS and is_dataclass(v := getattr(spec, f.name)) and not hasattr(v, "parts")
    )


def compose(spec: ModelSpec) -> SpecParts:
    """``spec``'s fields grouped by concern (module doc)."""
    dense = frozenset(spec.ffn_width(i) for i, m in enumerate(spec.layer_moe) if not m and spec.ffn_width(i))
    return SpecParts(
        attention=AttentionPart(
            spec.n_heads,
            spec.n_kv_heads,
            spec.head_dim,
            spec.full_kv_heads,
            spec.mla,
            spec.qk_norm,
            spec.layer_windows,
        ),  # fmt: skip
        ffn=FeedForwardPart(dense, spec.moe, spec.layer_moe, spec.moe_beside_ffn, spec.parallel_block),
        mixers=MixerPart(spec.mixer, spec.layer_mixers),
        embeddings=EmbeddingPart(spec.vocab_size, spec.d_model, spec.tie_embeddings),
        stack=StackPart(spec.n_layers, spec.d_model, spec.encoder),
        family=tuple(v for _, v in family_parts(spec)),
    )


__all__ = [
    "AttentionPart", "EmbeddingPart", "FeedForwardPart", "MixerPart", "SpecParts", "StackPart", "compose",
    "family_parts",
]  # fmt: skip
