"""Spec part of MiniMax-M3's block-sparse attention (transformers 5.23 ``models/minimax_m3_vl``); operators:
:mod:`llmath.ops.block_sparse`."""

from __future__ import annotations

from dataclasses import dataclass

from llmath.errors import SpecError
from llmath.model.spec_hyper import _positive


@dataclass(frozen=True)
class BlockIndexSpec:
    """MiniMax-M3's block-sparse attention (transformers ``modeling_minimax_m3_vl.py`` MiniMaxM3VLIndexer): on
    the layers :attr:`ModelSpec.layer_indexer` marks, a lightning indexer (q_proj D -> I·X, k_proj D -> X
    cached per position, RMSNorms over X, rotary) scores the keys, max-pools the scores over blocks of
    ``block`` keys, and each query attends, per indexer head (one per KV head), its ``topk_blocks`` best blocks
    (the ``local_blocks`` ending at its own always among them). The other layers attend densely."""

    heads: int  # I
    head_dim: int  # X
    block: int
    topk_blocks: int
    local_blocks: int = 1

    def validate(self, name: str, n_heads: int) -> None:
        for f in ("heads", "head_dim", "block", "topk_blocks"):
            _positive(name, f"block_index.{f}", getattr(self, f))
        if not 0 <= self.local_blocks <= self.topk_blocks or n_heads % self.heads:
            raise SpecError(
                f"{name!r}: block_index.local_blocks={self.local_blocks} must be in [0, topk_blocks] and "
                f"block_index.heads={self.heads} must divide n_heads={n_heads}"
            )
