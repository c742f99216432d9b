"""The operators of one forward pass: the single source of every figure llmath prints.

Conventions (stated once, here):

* **FLOPs** are 2 per multiply-add. ``flops`` of an operator are its matmul FLOPs (weight GEMMs and the
  attention products); ``vflops`` are its vector FLOPs, at these per-element costs: RMSNorm 4 (3 without
  weight), LayerNorm 7 (5 without affine), activation 4 (+1 for the gate product), residual add 1 per
  element per extra input, rotary 3 per rotated element, softmax 5 per score (scale, max, exp, sum,
  divide), soft-capping 3, bias add 1, embedding scale 1, router softmax/top-k 5 per expert logit.
* **Bytes** are compulsory traffic, in elements per operand class, turned into bytes by a
  :class:`~llmath.model.dtypes.Precision`: weights read, activations read (``act_in``), activations written
  (``act_out``), KV cache read and written. Each operator reads its inputs once and writes its output
  once (no re-reads across tiles). K/V projections write their output into the cache; attention reads
  every visible K/V position once from the cache (the new tokens' included).
* **Stages.** A pass runs ``T`` new tokens for each of ``B`` sequences after ``S0`` cached positions.
  Prefill: ``T = P`` (``S0`` = an optional cached prefix). Decode step at context ``S``: ``T = 1``,
  ``S0 = S``: the new token attends ``S + 1`` positions. Logits are computed for the last position
  only (``logits="last"``) or every position (``"all"``, training).
* **Encoder-decoder stages** (``src`` = the ``P`` source positions): ``encoder`` runs ``T = P`` source
  tokens with bidirectional attention (all T × T pairs, no cache). The decoder ``prefill`` runs the ``T``
  target tokens it starts from (one start token in translation / T5 generation) with causal self-attention
  and cross-attention over the ``src`` encoder positions; it projects the encoder output to the
  cross-attention K/V once and caches them (``B·src`` rows). A ``decode`` step reads that cross cache
  (fixed at ``src`` per layer) beside its growing self-attention cache. Monomials ``X`` = B·src and
  ``XE`` = B·T·src.
* **Attention execution.** ``eager`` is what transformers' eager implementation executes: the full
  T × (visible keys) score rectangle, masked entries included, written, softmaxed and read; MLA
  re-expands the latent cache with ``kv_b_proj`` for every visible position each step. ``flash`` is what
  optimised serving kernels execute: fused, no score traffic, only the causal (and window) pairs; MLA
  prefill decompresses the new tokens and decode runs absorbed in the latent space (vLLM/SGLang).
* **Causal pairs.** Query i (1-based, after S0) attends min(S0 + i, W) keys; pairs = Σ over the T new
  queries. Eager materialises T × (min(S0, W − 1) + T) scores, as transformers' sliding cache keeps W − 1.
* **MoE.** Each token runs its top-k routed experts plus the shared ones; the router is a matmul. Expert
  weights read = the distinct experts B·T tokens hit under the routing convention of :mod:`llmath.ops.routing`
  (uniform by default: E·(1 − (1 − k/E)^(B·T)), an expectation, so MoE weight bytes are floats).

Each operator's costs are sums of coefficient × monomial terms, where the coefficient depends on the
model only and the monomial on the scenario (``BT`` = B·T tokens, ``P:w`` = B × causal pairs for window
``w``, ...). A model compiles once into a table of coefficients; a scenario is then a few dot products,
and the same terms print as formulas with the numbers substituted (``--explain``). A monomial's value and text:
:mod:`llmath.ops.scenario`, from the closed-form counts of :mod:`llmath.ops.pair_counts`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from llmath.model.spec import ModelSpec
from llmath.ops.kernel import Kernel
from llmath.ops.split import Split

Attention = Literal["eager", "flash"]
Stage = Literal["prefill", "decode", "encoder", "vision"]
ATTENTIONS = ("eager", "flash")

NORM_FLOPS = {"rms": 4, "layer": 7, "layer_noparam": 5, "rms_noparam": 3}
ACT_FLOPS = 4
SOFTMAX_FLOPS = 5
SOFTCAP_FLOPS = 3
ROTARY_FLOPS = 3
ROUTER_FLOPS = 5

CLASSES = ("flops", "vflops", "weight", "act_in", "act_out", "kv_read", "kv_write")

# A size or a total: a Python int (float for expectations) for one scenario, a numpy array for a sweep.
Value = int | float | np.ndarray

TermSpec = tuple[int, str, str]  # (coefficient, monomial, coefficient over the model's letters)


@dataclass(frozen=True)
class Term:
    """``coef`` × monomial. ``sym`` writes the coefficient over the model's letters (e.g. ``2·D·N·H``)."""

    coef: int | float  # an int for one device; a rank's share of an operator may be a fraction (deploy/shard)
    mono: str
    sym: str


@dataclass(frozen=True)
class Op:
    """One operator, run ``count`` times per pass (layers), costs per run as terms."""

    name: str
    component: str  # coarse class for reports: attention, ffn, moe, embedding, norm, lm_head, ...
    kind: Literal["matmul", "vector", "memory"]
    signature: str
    sizes: tuple[tuple[str, int], ...]
    count: int
    params: tuple[tuple[str, int], ...] = ()  # (component key, parameter elements) per run
    costs: tuple[tuple[str, tuple[Term, ...]], ...] = ()
    layer_kind: str = ""  # which layer group it belongs to ('' = not a layer op)
    window: int | None = None  # attention window of its layer (None: full or not an attention op)
    split: str = Split.NONE  # how it splits across tensor-parallel ranks (ops/split.py), declared with it
    first_stage: bool = False  # a non-layer op that runs before the first layer (pipeline stage 0, not the last)
    kernel: str = Kernel.NONE  # the fused kernel it runs (ops/kernel.py), declared with it
    launches: float = 1.0  # kernels a serving engine launches for one run (ops/launches.py), declared with it

    def terms(self, cls: str) -> tuple[Term, ...]:
        for c, t in self.costs:
            if c == cls:
                return t
        return ()

    @cached_property  # read per table an operator joins (frozen: cached in the instance's __dict__)
    def n_params(self) -> int:
        return sum(n for _, n in self.params)

    @cached_property
    def module(self) -> str:
        """The checkpoint module owning the op's weights (the unit a quantisation format applies to):
        embedding, attention, ffn, experts, shared_experts, router, lm_head or norm."""
        if self.component == "moe":
            n = self.name
            if n.startswith("moe.experts"):
                return "experts"
            if n.startswith("moe.shared") and not n.startswith("moe.shared_gate"):
                return "shared_experts"
            return "router"  # the router and the shared-expert gate (a D×1 gate)
        return self.component


def wkey(w: int | None) -> str:
    return "full" if w is None else str(w)


# ---- builders ---------------------------------------------------------------------------------------


@dataclass
class Builder:
    spec: ModelSpec
    attention: Attention
    stage: Stage
    ops: list[Op] = field(default_factory=list)
    window: int | None = None  # window of the layer group being built
    own_indexer: bool = True  # the layer group runs its own DSA indexer (False: reuses an earlier top-k)
    kv_shared: bool = False  # the layer group reuses an earlier layer's K/V (Gemma 3n / 4): no K/V projection
    sparse: bool = False  # the layer group's FFN gate goes through Gemma 3n's gaussian top-k
    d_ff: int = 0  # the layer group's dense FFN width (0: the spec's d_ff)

    def add(
        self, name, component, kind, signature, sizes, count, params=(), layer_kind="", split="", kernel="", **costs
    ):
        """One operator; ``split`` (ops/split.py): norms and residual adds default to replicated; ``kernel``:
        ops/kernel.py."""
        if not split and component in ("norm", "residual"):
            split = Split.REPLICATED
        cs = []
        for cls in CLASSES:
            terms = costs.get(cls)
            if terms:
                cs.append((cls, tuple(Term(int(c), m, s) for c, m, s in terms if c)))
        params = tuple((k, int(n)) for k, n in params if n)
        window = self.window if layer_kind else None
        op = Op(name, component, kind, signature, tuple(sizes.items()), count, params, tuple(c for c in cs if c[1]),
                layer_kind, window, split, kernel=kernel)  # fmt: skip
        self.ops.append(op)

    # a linear layer X[.., din] @ W[din, dout] (+ b) per token of monomial `rows`
    def linear(
        self,
        name,
        component,
        sig,
        sizes,
        din,
        dout,
        *,
        bias,
        count,
        pkey,
        layer_kind="",
        rows="BT",
        sym_in="D",
        sym_out="",
        act_in=True,
        out="act_out",
        weight_read=None,
        split="",
    ):
        sym_out = sym_out or sig.split("->")[1]
        params = [(f"{pkey}.weight", din * dout)]
        if bias:
            params.append((f"{pkey}.bias", dout))
        wsym = f"{sym_in}·{sym_out}"
        wread = weight_read if weight_read is not None else [(din * dout + (dout if bias else 0), "1", wsym)]
        self.add(
            name,
            component,
            "matmul",
            sig,
            sizes,
            count,
            params,
            layer_kind,
            split,
            flops=[(2 * din * dout, rows, f"2·{wsym}")],
            vflops=[(dout, rows, sym_out)] if bias else [],
            weight=wread,
            act_in=[(din, rows, sym_in)] if act_in else [],
            **{out: [(dout, rows, sym_out)]},
        )

    def norm(self, name, width, *, count, pkey, layer_kind="", rows="BT", sym="D", component="norm", split=""):
        s = self.spec
        per = 0 if s.norm in ("layer_noparam", "rms_noparam") else (2 if s.norm == "layer" and s.norm_bias else 1)
        self.add(
            name,
            component,
            "vector",
            f"BT{sym}->BT{sym}",
            {sym: width},
            count,
            [(pkey, per * width)],
            layer_kind,
            split,
            vflops=[(NORM_FLOPS[s.norm] * width, rows, f"{NORM_FLOPS[s.norm]}·{sym}")],
            weight=[(per * width, "1", f"{per}·{sym}")],
            act_in=[(width, rows, sym)],
            act_out=[(width, rows, sym)],
        )


@dataclass(frozen=True)
class Window:
    """The monomials of one attention window: visible keys ``K``, causal pairs ``P``, score entries ``E``."""

    K: str
    P: str
    E: str

    @classmethod
    def of(cls, w: int | None) -> Window:
        wk = wkey(w)
        return cls(f"K:{wk}", f"P:{wk}", f"E:{wk}")

    @classmethod
    def chunk(cls, c: int) -> Window:
        """A chunked layer's flash monomials: keys from the chunk start, pairs within the chunk."""
        return cls(f"K:c{c}", f"P:c{c}", f"E:{c}")

    @classmethod
    def bidirectional(cls) -> Window:
        """An encoder: every query attends every key, so the pairs are the whole T × T rectangle."""
        return cls("K:full", "E:full", "E:full")

    @classmethod
    def cross(cls) -> Window:
        """Cross-attention: the T queries attend the ``src`` cached encoder positions, no mask."""
        return cls("X", "XE", "XE")


@dataclass(frozen=True)
class Site:
    """Where a block's operators land: the builder, runs per pass (``count``), layer kind, name prefix,
    component and the sizes bound to the letters of their signatures.

    A family module declares each operator once through a site: name, signature, sizes, parameters and
    costs, each cost a list of ``(coefficient, monomial, formula)`` terms that ``--explain`` prints.
    """

    b: Builder
    count: int
    lk: str
    prefix: str
    component: str
    sizes: dict[str, int]
    split: str = Split.NONE  # the split of its operators that declare none (ops/split.py)

    @property
    def spec(self) -> ModelSpec:
        return self.b.spec

    def name(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def op(
        self,
        name: str,
        kind: str,
        sig: str,
        *,
        sizes: dict[str, int] | None = None,
        params: Iterable[tuple[str, int]] = (),
        component: str | None = None,
        split: str = Split.NONE,
        kernel: str = Kernel.NONE,
        **costs: list[TermSpec],
    ) -> None:
        """One operator of this site (``sizes``, ``component`` default to the site's; ``split``: ops/split.py;
        ``kernel``: ops/kernel.py)."""
        sz, comp, split = self.sizes if sizes is None else sizes, component or self.component, split or self.split
        self.b.add(self.name(name), comp, kind, sig, sz, self.count, params, self.lk, split, kernel, **costs)

    def vector(self, name: str, sig: str, per: int, width: int, rows: str, sym: str, **extra) -> None:
        """An elementwise operator: ``per`` FLOPs per element of ``width`` per ``rows``; reads and writes it once."""
        self.op(
            name,
            "vector",
            sig,
            vflops=[(per * width, rows, f"{per}·{sym}")],
            act_in=[(width, rows, sym)],
            act_out=[(width, rows, sym)],
            **extra,
        )

    def linear(self, name: str, sig: str, din: int, dout: int, *, bias: bool, pkey: str, **kw) -> None:
        """A linear layer of this site (see :meth:`Builder.linear`; ``sizes=`` overrides the site's)."""
        sizes, kw["split"] = kw.pop("sizes", self.sizes), kw.get("split") or self.split
        self.b.linear(
            self.name(name), self.component, sig, sizes, din, dout, bias=bias, count=self.count, pkey=pkey,
            layer_kind=self.lk, **kw,
        )  # fmt: skip

    def norm(
        self, name: str, width: int, *, pkey: str, sym: str = "D", component: str = "norm", split: str = Split.NONE
    ) -> None:
        self.b.norm(
            self.name(name), width, count=self.count, pkey=pkey, layer_kind=self.lk, sym=sym, component=component,
            split=split or self.split,
        )  # fmt: skip
