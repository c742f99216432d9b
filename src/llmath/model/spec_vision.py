"""Llama 3.2 Vision's image encoder as the stages run it (transformers 5.23 modeling_mllama.py
``MllamaVisionModel``), for requests that carry images.

An image is cut into ``tiles`` tiles (the processor pads every image to ``max_num_tiles``; padding tiles are
masked but computed), each ``patches`` = (image_size / patch)² patches plus a class token; each tile's
``patches + 1`` positions are zero-padded to a multiple of 8 (``num_padding_patches``). The local layers and
the gated global layers then attend bidirectionally over all tiles of the image (tiles × padded positions),
and the projector maps each tile's ``patches + 1`` outputs (``vision_output_dim``: the last layer's state
concatenated with the intermediate layers') to the text width. So an image yields tiles · (patches + 1)
vision tokens, the positions the language model's cross-attention layers attend.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmath.errors import SpecError


@dataclass(frozen=True)
class VisionSpec:
    d_model: int
    d_ff: int
    n_heads: int
    n_layers: int  # local layers
    n_global_layers: int
    patch: int
    image_size: int
    channels: int
    tiles: int  # max_num_tiles
    output_dim: int  # vision_output_dim (the projector's input width)

    def validate(self, name: str) -> None:
        sizes = (self.d_model, self.d_ff, self.n_heads, self.patch, self.image_size, self.channels, self.tiles)
        if min(sizes + (self.output_dim,)) <= 0 or min(self.n_layers, self.n_global_layers) < 0:
            raise SpecError(f"{name!r}: the vision encoder's sizes must be positive ({self})")
        if self.d_model % self.n_heads or self.image_size % self.patch:
            raise SpecError(
                f"{name!r}: vision hidden_size={self.d_model} must divide by attention_heads={self.n_heads} and "
                f"image_size={self.image_size} by patch_size={self.patch}"
            )

    @property
    def tile_positions(self) -> int:
        """Positions of one tile: its patches and the class token."""
        return (self.image_size // self.patch) ** 2 + 1

    @property
    def padded_tile(self) -> int:
        """A tile's positions zero-padded to a multiple of 8, as the encoder runs them."""
        return -(-self.tile_positions // 8) * 8

    @property
    def tokens_per_image(self) -> int:
        """Vision tokens an image gives the cross-attention layers: tiles · (patches + 1)."""
        return self.tiles * self.tile_positions

    @property
    def encoder_positions(self) -> int:
        """Positions the encoder attends over per image: tiles · the padded tile."""
        return self.tiles * self.padded_tile
