"""DeepSeek-V4's attention widths (a :class:`~llmath.model.spec.ModelSpec` field; ops/compressed.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmath.errors import SpecError

if TYPE_CHECKING:
    from llmath.model.spec import ModelSpec


@dataclass(frozen=True)
class CompressedSpec:
    """DeepSeek-V4's attention (transformers 5.23 modeling_deepseek_v4.py; DeepSeek-V4 report section 2.3).

    Shared-KV MQA (one head of :attr:`ModelSpec.head_dim` read as key and value) over a sliding window of
    the layer's last positions, a low-rank query (D -> ``q_lora_rank`` -> N·H), a grouped low-rank output
    (``o_groups`` groups of N·H/g channels, each to ``o_lora_rank``, then g·``o_lora_rank`` -> D) and a
    learned sink per head. :attr:`ModelSpec.layer_compress` adds, per layer, a compressor that pools every
    ``rate`` positions into one more cached entry of width H: ``csa`` (compressed sparse attention, rate
    ``csa_rate``: overlapping windows, projections 2·H wide, plus a lightning indexer of ``index_heads``
    heads of width ``index_head_dim`` that keeps ``index_topk`` entries per query) or ``hca`` (heavily
    compressed attention, rate ``hca_rate``, no indexer)."""

    q_lora_rank: int
    o_groups: int
    o_lora_rank: int
    csa_rate: int
    hca_rate: int
    index_heads: int
    index_head_dim: int
    index_topk: int

    def tp_problem(self, spec: ModelSpec, tp: int) -> str | None:
        """vLLM's ``DeepseekV4Attention`` shards ``wo_a`` (a ``ColumnParallelLinear`` over the output groups) G/T
        groups per rank, so T | G (docs/parallel.md)."""
        if self.o_groups % tp:
            return f"tp={tp} must divide the {self.o_groups} output groups (vLLM DeepseekV4Attention wo_a)"
        return None

    def validate(self, name: str) -> None:
        for f in self.__dataclass_fields__:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise SpecError(f"{name!r}: compressed.{f}={v!r} must be a positive integer")
