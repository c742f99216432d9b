"""The encoder stack of an encoder-decoder model (:attr:`ModelSpec.encoder`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EncoderSpec:
    """The encoder stack of an encoder-decoder model (parameter counts only).

    It shares attention and FFN widths with the decoder; decoder layers then carry cross-attention.
    """

    n_layers: int
    norms_per_layer: int = 2
    final_norm: bool = True
    embedding_norm: bool = False
    own_position_table: bool = False  # BART: encoder and decoder each have a learned table
    # TrOCR: the encoder is another model (a VisionEncoderDecoderModel's image encoder, not in this config): no
    # encoder pass here, the decoder owns the token table, cross-attention K/V read ``d_model``-wide outputs
    external: str = ""
    d_model: int = 0  # width of the encoder output the cross-attention K/V project (0: the decoder's)
    # Whisper: the source is audio, not tokens. Two convolutions of kernel 3 (the second of stride 2) turn the
    # 2·P frames of ``in_features`` mel bins into P positions, to which a fixed table of ``source_positions``
    # rows is added; the encoder has no token table (the decoder owns it), and the source is always that
    # window: P = ``source_positions`` (Whisper: 30 s = 1500 positions = 3000 frames).
    frontend: str = ""  # "" (token embedding) or "conv" (Whisper's)
    in_features: int = 0
    source_positions: int = 0
    # BigBird-Pegasus: block-sparse self-attention in blocks of ``block_size`` with ``random_blocks`` random
    # blocks per query block (ops/bigbird_sizes.py); 0: full attention
    block_size: int = 0
    random_blocks: int = 0
