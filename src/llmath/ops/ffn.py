"""Dense feed-forward blocks (MLP and gated) and residual adds.

An FFN kind is a row of :data:`KINDS`: the operators it runs between the input and the down projection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llmath.ops.core import ACT_FLOPS, Builder, Site
from llmath.ops.launches import launched
from llmath.ops.split import Split

# how a block's (up / gate, activation, down) split across tensor-parallel ranks: a dense FFN's are column-,
# channel- and row-parallel (vLLM MergedColumnParallelLinear, RowParallelLinear); routed experts' spread over
# the expert-parallel groups first (vLLM FusedMoE)
DENSE_SPLITS = (Split.COLUMN, Split.SHARE, Split.ROW)
EXPERT_SPLITS = (Split.EXPERTS_COLUMN, Split.EXPERTS, Split.EXPERTS_ROW)


@dataclass(frozen=True)
class Ffn:
    """One FFN block being built: hidden ``width`` under ``letter``, run by ``mult`` × ``rows`` tokens."""

    site: Site
    width: int
    letter: str
    rows: str
    mult: int
    bias: bool
    pkey: str
    weight_read: str | None  # monomial of the weight bytes read (experts hit), None: all, once
    io: tuple[int, str]  # the width the block reads and writes, and its letter: (d_model, "D") but in a latent
    splits: tuple[str, str, str] = DENSE_SPLITS  # (up / gate, activation, down): ops/split.py

    def linear(self, name: str, din: int, dout: int, sig: str, si: str, so: str, split: str) -> None:
        """``X[.., din] @ W[din, dout]`` for ``mult`` × rows tokens; parameters under ``pkey.name``."""
        bias, mult, rows = self.bias, self.mult, self.rows
        params = [(f"{self.pkey}.{name}.weight", din * dout)] + ([(f"{self.pkey}.{name}.bias", dout)] if bias else [])
        nw = din * dout + (dout if bias else 0)
        wr = [(nw, self.weight_read, f"{nw}")] if self.weight_read else [(nw, "1", f"{si}·{so}")]
        self.site.op(
            name, "matmul", sig, params=params,
            flops=[(2 * din * dout * mult, rows, f"{mult}·2·{si}·{so}" if mult > 1 else f"2·{si}·{so}")],
            vflops=[(dout * mult, rows, so)] if bias else [],
            weight=wr,
            act_in=[(din * mult, rows, si)],
            act_out=[(dout * mult, rows, so)], split=split,
        )  # fmt: skip

    def up(self, name: str) -> None:
        F, (d, D) = self.letter, self.io
        self.linear(name, d, self.width, f"BT{D},{D}{F}->BT{F}", D, F, self.splits[0])


def gated(f: Ffn) -> None:
    """Gate and up projections, then act(gate) · up (ACT_FLOPS + 1 per element)."""
    F, n = f.letter, f.width * f.mult
    f.up("gate")
    f.up("up")
    launched(f.site.b, "up_with_gate")
    f.site.op(
        "act", "vector", f"BT{F}->BT{F}", vflops=[((ACT_FLOPS + 1) * n, f.rows, f"5·{F}")],
        act_in=[(2 * n, f.rows, f"2·{F}")], act_out=[(n, f.rows, F)], split=f.splits[1],
    )  # fmt: skip


def mlp(f: Ffn) -> None:
    """Up projection, then the activation (with its learned scalars, e.g. xIELU's alpha_p and alpha_n)."""
    F, n = f.letter, f.site.spec.activation_params
    f.up("up")
    extra = dict(params=[(f"{f.pkey}.act", n)], weight=[(n, "1", f"{n}")]) if n else {}
    f.site.vector("act", f"BT{F}->BT{F}", ACT_FLOPS, f.width * f.mult, f.rows, F, split=f.splits[1], **extra)


def sub_norm(f: Ffn) -> None:
    """BitNet: a norm over the hidden width before the down projection."""
    if f.site.spec.sub_norms:
        f.site.norm("sub_norm", f.width, pkey="norm.layers", sym=f.letter)


KINDS: dict[str, Callable[[Ffn], None]] = {"gated": gated, "mlp": mlp}


def ffn_block(
    b: Builder,
    width: int,
    count: int,
    lk: str,
    prefix: str,
    pkey: str,
    component: str,
    rows: str = "BT",
    bias: bool | None = None,
    weight_read: str | None = None,
    letter: str = "F",
    mult: int = 1,
    io: tuple[int, str] | None = None,
    experts: bool = False,
) -> None:
    """A dense or gated FFN of hidden ``width``, run by ``mult`` × rows tokens (top-k for experts), reading and
    writing ``io`` = (width, letter): the model width D unless given (a latent MoE's L); ``experts``: routed
    experts (their split traits: :data:`EXPERT_SPLITS`)."""
    s = b.spec
    d, D = io or (s.d_model, "D")
    site = Site(b, count, lk, prefix, component, {D: d, letter: width})
    splits = EXPERT_SPLITS if experts else DENSE_SPLITS
    f = Ffn(site, width, letter, rows, mult, s.ffn_bias if bias is None else bias, pkey, weight_read, (d, D), splits)
    KINDS[s.ffn](f)
    sub_norm(f)
    f.linear("down", width, d, f"BT{letter},{letter}{D}->BT{D}", letter, D, splits[2])
    if experts:
        launched(b, "expert_down_with_reduce")


def residual(b: Builder, name: str, count: int, lk: str, inputs: int = 2) -> None:
    """The residual add of ``inputs`` width-D streams: ``inputs − 1`` FLOPs per element; Doge
    (:attr:`ModelSpec.residual_scale`, modeling_doge.py ``input_residual`` / ``post_attention_residual``)
    first multiplies the skip stream by a learned vector of width D: one FLOP more per element."""
    D, scaled = b.spec.d_model, b.spec.residual_scale
    site = Site(b, count, lk, "", "residual", dict(D=D))
    if b.spec.residual_affine:  # ZAYA: (x + b1)·s1 + (skip + b2)·s2, four learned vectors: 5 FLOPs per element
        site.op(name, "vector", "BTD,BTD->BTD", vflops=[(5 * D, "BT", "5·D")], params=[("residual.affine", 4 * D)],
                weight=[(4 * D, "1", "4·D")], act_in=[(2 * D, "BT", "2·D")], act_out=[(D, "BT", "D")])  # fmt: skip
        return
    site.op(
        name, "vector", "BTD,BTD->BTD", vflops=[((inputs - 1 + scaled) * D, "BT", f"{inputs - 1 + scaled}·D")],
        params=[("residual.scale", D)] if scaled else [], weight=[(D, "1", "D")] if scaled else [],
        act_in=[(inputs * D, "BT", f"{inputs}·D")], act_out=[(D, "BT", "D")],
    )  # fmt: skip
    if b.spec.norm == "rms":
        launched(b, "residual_in_rmsnorm")
