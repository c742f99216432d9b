"""DeepSeek multi-head latent attention's widths (:attr:`ModelSpec.mla`, :attr:`ModelSpec.window_mla`)."""

from __future__ import annotations

from dataclasses import dataclass

from llmath.errors import SpecError
from llmath.model.spec_hyper import _positive


@dataclass(frozen=True)
class MLASpec:
    """DeepSeek multi-head latent attention widths (per head unless named rank)."""

    q_lora_rank: int | None  # None: a plain q_proj D -> N*(nope+rope)
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    # DeepSeek Sparse Attention (DeepSeek-V3.2): the lightning indexer's heads and width, and the positions
    # each query attends (0: dense MLA)
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    # A.X K2: no q_b_proj; q_gate_proj maps [norm(query latent), query latent] (2·L) to N·(H+R+J), the query
    # and a per-channel sigmoid gate on the attention output before o_proj
    q_gate: bool = False
    heads: int = 0  # query heads of the layers using these widths (0: the model's n_heads)
    k_rope_norm: bool = False  # Dots 3 Note: an RMSNorm (R weights) over the shared rotary key before RoPE

    def validate(self, name: str) -> None:
        if self.heads < 0:
            raise SpecError(f"{name!r}: mla.heads={self.heads} must be >= 0 (0: the model's n_heads)")
        if (self.index_topk or self.q_gate) and self.q_lora_rank is None:
            what = "a sparse-attention indexer" if self.index_topk else "mla.q_gate"
            raise SpecError(f"{name!r}: {what} needs mla.q_lora_rank (it reads the query latent)")
        if self.q_lora_rank is not None:
            _positive(name, "mla.q_lora_rank", self.q_lora_rank)
        for f in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            _positive(name, f"mla.{f}", getattr(self, f))
