"""Inkling's per-layer structure (:class:`InklingSpec`), a part of :class:`llmath.model.spec.ModelSpec`
(re-exported there)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from llmath.errors import SpecError
from llmath.model.spec_hyper import _positive


@dataclass(frozen=True)
class InklingSpec:
    """Inkling / Inkling-2 (Thinking Machines; transformers ``modeling_inkling.py`` and ``modeling_inkling2.py``,
    5.23): the per-layer structure :mod:`llmath.ops.inkling` builds instead of the generic decoder layer.

    Every layer: attention whose K and V pass a short causal conv of width ``conv`` (depthwise, plus the
    input), a relative-position bias ``r_proj`` D -> N·``d_rel`` mixed by a d_rel × R profile bank (R: the
    window on sliding layers, ``rel_extent`` on full ones), and short convs after the attention and after
    the FFN over D channels. The full-attention layers use :attr:`ModelSpec.n_heads`, ``n_kv_heads`` and
    ``head_dim``; the sliding ones ``window_heads``, ``window_kv_heads`` and ``window_head_dim``.
    ``shared_sink`` (Inkling): the router scores the shared experts too (E + S rows), and router and dense
    FFN carry a learned scalar; per-head q/k RMSNorms with weights; logits divided by the µP multiplier.
    ``gated`` (Inkling-2): a sigmoid output gate D -> N·H, a per-head sink logit D -> N, learned scales on
    the L2-clipped queries (N·H) and relative states (N·d_rel), no q/k norm weights. ``dynamic_conv``
    (Inkling-2): the full layers' K/V convs add per-token taps ``weight_proj`` D -> K·C to static ones
    (C × K·H), from their own normed inputs (three input norms). ``block_size`` > 0 (Inkling-2): block
    attention residuals: each layer's attention input (3 queries on full layers) and FFN input, and the
    final norm's, attend the block states (one per ``block_size`` layers) and the running state.
    """

    # parallel trait (model/traits.py): what no tensor- or pipeline-parallel rule covers
    no_tp_pp: ClassVar[str] = "Inkling's layers (two head sets, K/V and output convs, relative bias)"

    window_heads: int
    window_kv_heads: int
    window_head_dim: int
    d_rel: int
    rel_extent: int
    conv: int
    shared_sink: bool = False
    gated: bool = False
    dynamic_conv: bool = False
    block_size: int = 0

    def validate(self, name: str) -> None:
        for f in ("window_heads", "window_kv_heads", "window_head_dim", "d_rel", "rel_extent", "conv"):
            _positive(name, f"inkling.{f}", getattr(self, f))
        if self.window_heads % self.window_kv_heads:
            raise SpecError(
                f"{name!r}: inkling.window_heads={self.window_heads} is not a multiple of "
                f"inkling.window_kv_heads={self.window_kv_heads}"
            )
        if self.block_size < 0:
            raise SpecError(f"{name!r}: inkling.block_size={self.block_size} must be >= 0 (0: plain residuals)")
