"""A.X K2's gated RMSNorm (transformers ``modeling_axk2.py`` AXK2GatedRMSNorm, Megatron's GatedNormWrapper):
y = RMSNorm(x), then y · sigmoid(fc2(SiLU(fc1(y)))) with fc1 D -> r and fc2 r -> D, no bias. It wraps the norm
before attention in every layer and the norm before the MoE in MoE layers (AXK2DecoderLayer); the letter r
is :attr:`~llmath.model.spec.ModelSpec.norm_gate_rank`."""

from __future__ import annotations

from llmath.ops.core import ACT_FLOPS, Builder, Site


def norm_gate(b: Builder, name: str, count: int, lk: str) -> None:
    """The gate after the norm ``name`` of ``count`` layers of kind ``lk`` (nothing when the spec has none)."""
    s = b.spec
    r, D = s.norm_gate_rank, s.d_model
    if not r or not count:
        return
    site = Site(b, count, lk, f"{name}.gate", "norm", dict(D=D, r=r))
    site.linear("fc1", "BTD,Dr->BTr", D, r, bias=False, pkey="norm.gate.fc1", sym_out="r")
    site.vector("act", "BTr->BTr", ACT_FLOPS, r, "BT", "r")
    site.linear("fc2", "BTr,rD->BTD", r, D, bias=False, pkey="norm.gate.fc2", sym_in="r", sym_out="D")
    site.vector("sigmoid_mul", "BTD,BTD->BTD", ACT_FLOPS + 1, D, "BT", "D")
