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
and the same terms print as formulas with the numbers substituted (``--explain``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Literal

import numpy as np

from llmath.model.spec import ModelSpec
from llmath.ops.bigbird_sizes import bigbird_monomial, bigbird_text
from llmath.ops.kernel import Kernel
from llmath.ops.routing import experts_hit
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


# ---- monomials -------------------------------------------------------------------------------------

MONO_TEXT = {"1": "1", "B": "B", "BP": "B·[S0>0]", "BT": "B·T", "BL": "B·L", "X": "B·src", "XE": "B·T·src",
             "I": "[src>0]", "BTI": "B·T·[src>0]"}  # fmt: skip
MONO_TEXT |= {"L": "B·(S0+T)", "LL": "B·(S0+T)²"}  # BLT reruns every byte each pass (ops/blt.py)


def mono_text(m: str) -> str:
    if m in MONO_TEXT:
        return MONO_TEXT[m]
    if m[0] == "b":  # BigBird's block-sparse encoder (ops/bigbird_sizes.py)
        return bigbird_text(m)
    if m.startswith("z"):  # compressed entries (ops/compressed.py)
        kind, m_, *cap = m.split(":")
        n = f"⌊(S0+T)/{m_}⌋" if not cap else f"min(⌊(S0+T)/{m_}⌋, {cap[0]})"
        return {"zK": f"B·{n}", "zE": f"B·T·{n}", "zP": f"B·Σᵢ{n.replace('T', 'i')}",
                "zN": f"B·(⌊(S0+T)/{m_}⌋ − ⌊S0/{m_}⌋)", "zM": f"B·((S0+T) mod {m_})",
                "zO": f"B·[S0+T ≥ {m_}]"}[kind]  # fmt: skip
    kind, w = m.split(":")
    label = "" if w == "full" else f"[chunk={w[1:]}]" if w.startswith("c") else f"[W={w}]"
    return {"K": f"B·S{label}", "P": f"B·pairs{label}", "E": f"B·T·S{label}", "H": f"B·held{label}",
            "U": "experts hit", "C": f"B·chunks[Q={w}]", "Q": f"B·chunks²[Q={w}]",
            "X": f"B·pairs in chunks[Q={w}]", "F": f"B·⌊T/{w}⌋", "R": f"B·(T mod {w})",
            "Z": f"B·Σ blocks[c={w}]", "N": f"B·⌊(S0+T)/{w}⌋",
            "Y": f"B·selected pairs[budget/c={w}]"}[kind]  # fmt: skip


def wkey(w: int | None) -> str:
    return "full" if w is None else str(w)


def _is_int(*xs: object) -> bool:
    return all(type(x) is int or isinstance(x, np.integer) for x in xs)


def _min(a: Value, b: Value) -> Value:
    return min(a, b) if _is_int(a, b) else np.minimum(a, b)


def _clip0(a: Value, hi: Value) -> Value:
    return max(0, min(a, hi)) if _is_int(a, hi) else np.clip(a, 0, hi)


def causal_pairs(T: Value, S0: Value, w: int | None) -> Value:
    """Σ_{i=1..T} min(S0 + i, w): the (query, key) pairs a causal kernel computes per sequence."""
    if w is None:
        if _is_int(T, S0):
            return T * S0 + T * (T + 1) // 2
        return T * S0 + T * (T + 1) / 2
    m = _clip0(w - S0, T)  # queries whose reach is below the window
    if _is_int(T, S0, m):
        return m * S0 + m * (m + 1) // 2 + (T - m) * w
    return m * S0 + m * (m + 1) / 2 + (T - m) * w


def _chunk_prefix(n: Value, c: int) -> Value:
    """Σ_{p=1..n} ((p − 1) mod c) + 1 = q·c(c+1)/2 + r(r+1)/2 with n = q·c + r."""
    q, r = n // c, n % c
    if _is_int(q, r):
        return q * (c * (c + 1) // 2) + r * (r + 1) // 2
    return q * (c * (c + 1) / 2) + r * (r + 1) / 2


def chunk_pairs(T: Value, S0: Value, c: int) -> Value:
    """Chunked attention (Llama-4): query p (1-based) attends the keys of its own c-aligned chunk up to
    itself, ((p − 1) mod c) + 1 of them; pairs = Σ over the T new queries."""
    return _chunk_prefix(S0 + T, c) - _chunk_prefix(S0, c)


def chunk_keys(T: Value, S0: Value, c: int) -> Value:
    """Keys a chunked step reads per sequence: from the start of the first new query's chunk, S0 mod c + T."""
    return S0 % c + T


def with_prefix(T: Value, S0: Value, n: int) -> tuple[Value, Value]:
    """(T, S0) of a model that prepends ``n`` positions to every sequence (CPM-Ant's prompt tokens,
    :attr:`ModelSpec.prefix_positions`): a pass from an empty cache (S0 = 0) runs them with its T new tokens;
    a later pass finds them cached (S0 + n). Logits are never computed for them."""
    if _is_int(S0):
        return (T + n, S0) if S0 == 0 else (T, S0 + n)
    first = np.asarray(S0) == 0
    return T + n * first, S0 + n * ~first


def visible_keys(T: Value, S0: Value, w: int | None) -> Value:
    """Keys a step can see per sequence: S0 + T, or min(S0, w − 1) + T with a window."""
    return S0 + T if w is None else _min(S0, w - 1) + T


def held_positions(T: Value, S0: Value, w: int | None) -> Value:
    """KV positions held after the step per sequence (a windowed layer keeps w)."""
    return S0 + T if w is None else _min(S0 + T, w)


def chunks(T: Value, q: int) -> Value:
    """Chunks of ``q`` positions that T new tokens fill (the last one padded): ceil(T / q)."""
    return -(-T // q)


def scan_chunk_pairs(T: Value, q: int) -> Value:
    """Σ over the chunks of q(q+1)/2: the causal (query, key) pairs inside chunks of ``q`` positions."""
    full, r = T // q, T % q
    if _is_int(T):
        return full * (q * (q + 1) // 2) + r * (r + 1) // 2
    return full * (q * (q + 1) / 2) + r * (r + 1) / 2


def _entries_prefix(n: Value, m: int) -> Value:
    """Σ_{j=1..n} ⌊j/m⌋ = m·q(q − 1)/2 + q·(r + 1) with n = q·m + r."""
    q, r = n // m, n % m
    return m * q * (q - 1) // 2 + q * (r + 1) if _is_int(q, r) else m * q * (q - 1) / 2 + q * (r + 1)


def compressed_pairs(T: Value, S0: Value, m: int, cap: int | None = None) -> Value:
    """Σ_{i=1..T} min(⌊(S0 + i)/m⌋, cap): (query, compressed entry) pairs when query i sees the entries of the
    windows of ``m`` positions closed by then (at most ``cap`` of them: a top-k)."""
    if cap is None:
        return _entries_prefix(S0 + T, m) - _entries_prefix(S0, m)
    edge = cap * m - 1  # positions up to here see fewer than cap entries

    def capped(n: Value) -> Value:
        low = _min(n, edge)
        return _entries_prefix(low, m) + cap * (n - low)

    return capped(S0 + T) - capped(S0)


def compressed_monomial(kind: str, m: int, cap: int | None, B: Value, T: Value, S0: Value) -> Value:
    """Compressed-cache monomials (ops/compressed.py): entries visible after the step ``zK`` (capped at a top-k
    ``cap``), the eager rectangle ``zE`` (T × entries), causal pairs ``zP``, entries the step emits ``zN``,
    positions waiting in the compressor's buffer ``zM``, and whether a window has closed ``zO`` (per B)."""
    n = (S0 + T) // m
    if kind == "zK":
        return B * (n if cap is None else _min(n, cap))
    if kind == "zE":
        return B * T * n
    if kind == "zP":
        return B * compressed_pairs(T, S0, m, cap)
    if kind == "zN":
        return B * (n - S0 // m)
    if kind == "zM":
        return B * ((S0 + T) % m)
    if kind == "zO":
        return B * (S0 + T >= m) if isinstance(S0 + T, np.ndarray) else (B if S0 + T >= m else 0)
    raise AssertionError(kind)  # pragma: no cover - ops/compressed.py emits the kinds above


def _block_prefix(n: Value, c: int) -> Value:
    """Σ_{v=1..n} ⌊v/c⌋ = c·q(q−1)/2 + q·(r+1) with n = q·c + r."""
    q, r = n // c, n % c
    return c * q * (q - 1) // 2 + q * (r + 1)


def qsa_blocks(T: Value, S0: Value, c: int) -> Value:
    """Σ over the T new queries of the complete blocks of ``c`` keys each sees (query i sees S0 + i keys):
    the blocks a QSA indexer scores per sequence (ops/qsa.py)."""
    return _block_prefix(S0 + T, c) - _block_prefix(S0, c)


def _selected_prefix(n: Value, budget: int, c: int) -> Value:
    """Σ_{v=1..n} sel(v): a query seeing v keys attends all of them while v < budget + c (at most
    budget/c complete blocks), else budget + (v mod c) (the best blocks and the incomplete tail)."""
    lim = budget + c - 1

    def mods(m: Value) -> Value:  # Σ_{v=1..m} (v mod c)
        q, r = m // c, m % c
        return q * (c * (c - 1) // 2) + r * (r + 1) // 2

    upto = _min(n, lim)
    over = n - upto
    return upto * (upto + 1) // 2 + over * budget + mods(n) - mods(upto)


def qsa_pairs(T: Value, S0: Value, budget: int, c: int) -> Value:
    """(query, key) pairs of QSA's sparse attention per sequence over the T new queries."""
    return _selected_prefix(S0 + T, budget, c) - _selected_prefix(S0, budget, c)


def _compressed(m: str, B: Value, T: Value, S0: Value) -> Value:
    kind, rate, *cap = m.split(":")
    return compressed_monomial(kind, int(rate), int(cap[0]) if cap else None, B, T, S0)


@lru_cache(maxsize=1024)
def _parse_mono(m: str) -> tuple[str, int | None, bool]:
    """(kind, window or chunk size, whether it is a chunk)."""
    kind, w = m.split(":")
    if w.startswith("c"):
        return kind, int(w[1:]), True
    return kind, None if w == "full" else int(w), False


def _has_source(src: Value) -> Value:
    """1 where a scenario has source positions (src > 0), else 0."""
    return int(src > 0) if _is_int(src) else (np.asarray(src) > 0).astype(float)


@dataclass(frozen=True)
class Scenario:
    """B sequences of T new tokens after S0 cached positions; logits for the last or all positions.

    ``src``: encoder-decoder models only, the source positions the decoder cross-attends (0 otherwise).
    """

    B: Value
    T: Value
    S0: Value = 0
    logits: Literal["last", "all"] = "last"
    src: Value = 0

    def monomials(self, monos: Iterable[str], spec: ModelSpec, moe_tokens: int = 1) -> dict[str, Value]:
        """Values of the monomials. ``moe_tokens``: tokens an MoE layer routes per token of this scenario
        (1 on one device; the attention-DP degree when a rank's MoE layer serves every replica's tokens)."""
        B, T, S0 = self.B, self.T, self.S0
        if spec.prefix_positions:
            T, S0 = with_prefix(T, S0, spec.prefix_positions)
        out: dict[str, Value] = {}
        plain: dict[str, Value] = {"1": 1, "B": B, "BT": B * T}
        for m in monos:
            v: Value
            if m in plain:
                v = plain[m]
            elif m == "BL":
                v = B if self.logits == "last" else B * self.T  # never the prefix positions
            elif m == "BP":  # sequences continuing a cached prefix (a mixer reads its state once)
                v = B * (S0 > 0) if isinstance(S0, np.ndarray) else (B if S0 > 0 else 0)
            elif m in ("I", "BTI"):  # work that runs only with a source (Mllama's cross layers with images)
                v = _has_source(self.src) * (1 if m == "I" else B * self.T)
            elif m in ("X", "XE"):
                v = B * self.src * (1 if m == "X" else T)
            elif m in ("L", "LL"):  # BLT: every byte again each pass, no cache (ops/blt.py)
                v = B * (S0 + T) ** len(m)
            elif m == "U:moe":
                moe = spec.moe
                if moe is None:  # pragma: no cover - only MoE layers emit U:moe
                    raise AssertionError(m)
                hit = experts_hit(B * T * moe_tokens, moe.n_experts, moe.top_k)
                v = float(hit) if np.ndim(hit) == 0 else hit
            elif m[0] in "bz":  # BigBird's encoder (ops/bigbird_sizes.py), compressed entries (ops/compressed.py)
                v = bigbird_monomial(m, B, T) if m[0] == "b" else _compressed(m, B, T, S0)
            elif m[0] in "YZN":  # QSA (ops/qsa.py): "Z:c" blocks scored, "Y:budget/c" pairs, "N:c" blocks held
                a, _, c = m[2:].partition("/")
                if m[0] == "Y":
                    v = B * qsa_pairs(T, S0, int(a), int(c))
                else:
                    v = B * (qsa_blocks(T, S0, int(a)) if m[0] == "Z" else (S0 + T) // int(a))
            else:
                kind, win, chunk = _parse_mono(m)
                if chunk and win is not None and kind in ("K", "P"):
                    v = B * (chunk_keys(T, S0, win) if kind == "K" else chunk_pairs(T, S0, win))
                elif kind == "K":
                    v = B * visible_keys(T, S0, win)
                elif kind == "P":
                    v = B * causal_pairs(T, S0, win)
                elif kind == "E":
                    v = B * T * visible_keys(T, S0, win)
                elif kind == "H":
                    v = B * held_positions(T, S0, win)
                elif kind in ("C", "Q", "X") and win is not None:  # chunked scans (ops/mixers.py)
                    n = chunks(T, win)
                    v = B * (n if kind == "C" else n * n if kind == "Q" else scan_chunk_pairs(T, win))
                elif kind in ("F", "R") and win is not None:  # whole chunks / the tokens after them (ops/recurrent.py)
                    v = B * (T // win if kind == "F" else T % win)
                else:  # pragma: no cover - op builders only emit the kinds above
                    raise AssertionError(m)
            out[m] = v
        return out


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
