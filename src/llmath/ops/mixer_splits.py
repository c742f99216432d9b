"""How the operators of each mixer kind split across tensor-parallel ranks (ops/split.py traits), as vLLM shards
each mixer (the files and the per-kind rules: :mod:`llmath.deploy.shard_mixers`).

A mixer kind's operators are declared by steps several kinds share (the conv, the scan, the gated norm), so the
kind sets their traits here, beside their declarations, once its block is built: the in-projections are
column-parallel, the out-projection row-parallel, the low-rank gate down-projections and RWKV's token shifts
replicated, Mamba's and Mamba-2's mixed projections and scans named rules, everything else the rank's share of
heads or channels.
"""

from __future__ import annotations

from llmath.ops.split import Split

ROW = frozenset({"mixer.x_proj", "mixer.out_proj", "mixer.output", "ffn.value"})
COLUMN = frozenset({
    "mixer.in_proj", "mixer.qkv_proj", "mixer.b_proj", "mixer.f_b_proj", "mixer.g_b_proj", "mixer.output_gate",
    "mixer.key_value_receptance", "mixer.qkvo", "mixer.if_gates", "ffn.key", "mixer.f_proj", "mixer.g_proj",
})  # fmt: skip
# KDA's low-rank gate down projections (ReplicatedLinear); RWKV's token shifts and channel-mix receptance and gate
REPLICATED = frozenset(
    {"mixer.f_a_proj", "mixer.g_a_proj", "mixer.time_shift", "ffn.time_shift", "ffn.receptance", "ffn.gate"}
)
MAMBA2 = {
    "mixer.in_proj": Split.MAMBA2_IN_PROJ,
    "mixer.in_scale": Split.MAMBA2_IN_PROJ,
    "mixer.conv": Split.MAMBA2_CONV,
    "mixer.scan": Split.MAMBA2_SCAN,
}


def mixer_split(kind: str, name: str, declared: str) -> str:
    """The split of the operator ``name`` of a ``kind`` mixer layer (``declared``: what its step declared)."""
    if not (name.startswith("mixer.") or (kind == "rwkv" and name.startswith("ffn."))) or name == "mixer.inner_norms":
        return declared  # the layer's norms and residual adds
    if name in ROW:
        return Split.ROW
    if name == "mixer.dt_proj" or (name in COLUMN and kind != "mamba2"):
        return Split.COLUMN
    if name in REPLICATED:
        return Split.REPLICATED
    if kind == "mamba":
        return Split.MAMBA_SCAN if name == "mixer.scan" else Split.SHARE
    if kind == "mamba2":
        return MAMBA2.get(name, Split.SHARE)
    if name == "mixer.norm" and kind in ("gated_delta", "kda"):  # per rank over I/T; its weight (P) whole
        return Split.GATED_NORM
    return Split.SHARE


__all__ = ["mixer_split"]
