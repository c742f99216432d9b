"""The operators of one forward pass: the single source of every figure llmath prints.

Conventions (stated once, here):

* **FLOPs** are 2 per multiply-add. ``flops`` of an operator are its matmul FLOPs (weight GEMMs and the
  attention products); ``vflops`` are its vector FLOPs, at these per-element costs: RMSNorm 4, LayerNorm 7
  (5 without affine), activation 4 (+1 for the gate product), residual add 1 per element per extra input, rotary 3 per
  rotated element, softmax 5 per score (scale, max, exp, sum, divide), soft-capping 3, bias add 1,
  embedding scale 1, router softmax/top-k 5 per expert logit.
* **Bytes** are compulsory traffic, in elements per operand class, turned into bytes by a
  :class:`~llmath.dtypes.Precision`: weights read, activations read (``act_in``), activations written
  (``act_out``), KV cache read and written. Each operator reads its inputs once and writes its output
  once (no re-reads across tiles). K/V projections write their output into the cache; attention reads
  every visible K/V position once from the cache (the new tokens' included).
* **Stages.** A pass runs ``T`` new tokens for each of ``B`` sequences after ``S0`` cached positions.
  Prefill: ``T = P`` (``S0`` = an optional cached prefix). Decode step at context ``S``: ``T = 1``,
  ``S0 = S``: the new token attends ``S + 1`` positions. Logits are computed for the last position
  only (``logits="last"``) or every position (``"all"``, training).
* **Attention execution.** ``eager`` is what transformers' eager implementation executes: the full
  T × (visible keys) score rectangle, masked entries included, written, softmaxed and read; MLA
  re-expands the latent cache with ``kv_b_proj`` for every visible position each step. ``flash`` is what
  optimised serving kernels execute: fused, no score traffic, only the causal (and window) pairs; MLA
  prefill decompresses the new tokens and decode runs absorbed in the latent space (vLLM/SGLang).
* **Causal pairs.** Query i (1-based, after S0) attends min(S0 + i, W) keys; pairs = Σ over the T new
  queries. Eager materialises T × (min(S0, W − 1) + T) scores, as transformers' sliding cache keeps W − 1.
* **MoE.** Each token runs its top-k routed experts plus the shared ones; the router is a matmul. Expert
  weights read = the expected number of distinct experts hit by B·T tokens under uniform routing,
  E·(1 − (1 − k/E)^(B·T)), so MoE weight bytes are expectations (floats).

Each operator's costs are sums of coefficient × monomial terms, where the coefficient depends on the
model only and the monomial on the scenario (``BT`` = B·T tokens, ``P:w`` = B × causal pairs for window
``w``, ...). A model compiles once into a table of coefficients; a scenario is then a few dot products,
and the same terms print as formulas with the numbers substituted (``--explain``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np

from .errors import WorkloadError
from .spec import ModelSpec

Attention = Literal["eager", "flash"]
Stage = Literal["prefill", "decode"]
ATTENTIONS = ("eager", "flash")

NORM_FLOPS = {"rms": 4, "layer": 7, "layer_noparam": 5}
ACT_FLOPS = 4
SOFTMAX_FLOPS = 5
SOFTCAP_FLOPS = 3
ROTARY_FLOPS = 3
ROUTER_FLOPS = 5

CLASSES = ("flops", "vflops", "weight", "act_in", "act_out", "kv_read", "kv_write")


@dataclass(frozen=True)
class Term:
    """``coef`` × monomial. ``sym`` writes the coefficient over the model's letters (e.g. ``2·D·N·H``)."""

    coef: int
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

    def terms(self, cls: str) -> tuple[Term, ...]:
        for c, t in self.costs:
            if c == cls:
                return t
        return ()

    @property
    def n_params(self) -> int:
        return sum(n for _, n in self.params)


# ---- monomials -------------------------------------------------------------------------------------

MONO_TEXT = {"1": "1", "B": "B", "BT": "B·T", "BL": "B·L"}


def _mono_text(m: str) -> str:
    if m in MONO_TEXT:
        return MONO_TEXT[m]
    kind, w = m.split(":")
    w = "" if w == "full" else f"[W={w}]"
    return {"K": f"B·S{w}", "P": f"B·pairs{w}", "E": f"B·T·S{w}", "H": f"B·held{w}", "U": "experts hit"}[kind]


def wkey(w: int | None) -> str:
    return "full" if w is None else str(w)


def _is_int(*xs) -> bool:
    return all(type(x) is int or isinstance(x, np.integer) for x in xs)


def _min(a, b):
    return min(a, b) if _is_int(a, b) else np.minimum(a, b)


def _clip0(a, hi):
    return max(0, min(a, hi)) if _is_int(a, hi) else np.clip(a, 0, hi)


def causal_pairs(T, S0, w: int | None):
    """Σ_{i=1..T} min(S0 + i, w): the (query, key) pairs a causal kernel computes per sequence."""
    if w is None:
        if _is_int(T, S0):
            return T * S0 + T * (T + 1) // 2
        return T * S0 + T * (T + 1) / 2
    m = _clip0(w - S0, T)  # queries whose reach is below the window
    if _is_int(T, S0, m):
        return m * S0 + m * (m + 1) // 2 + (T - m) * w
    return m * S0 + m * (m + 1) / 2 + (T - m) * w


def visible_keys(T, S0, w: int | None):
    """Keys a step can see per sequence: S0 + T, or min(S0, w − 1) + T with a window."""
    return S0 + T if w is None else _min(S0, w - 1) + T


def held_positions(T, S0, w: int | None):
    """KV positions held after the step per sequence (a windowed layer keeps w)."""
    return S0 + T if w is None else _min(S0 + T, w)


def experts_hit(tokens, n_experts: int, top_k: int):
    """Expected distinct experts among ``n_experts`` hit by ``tokens`` tokens routing top-k uniformly."""
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** np.asarray(tokens, dtype=float))


@lru_cache(maxsize=1024)
def _parse_mono(m: str) -> tuple[str, int | None]:
    kind, w = m.split(":")
    return kind, None if w == "full" else int(w)


@dataclass(frozen=True)
class Scenario:
    """B sequences of T new tokens after S0 cached positions; logits for the last or all positions."""

    B: object
    T: object
    S0: object = 0
    logits: Literal["last", "all"] = "last"

    def monomials(self, monos: Iterable[str], spec: ModelSpec) -> dict[str, object]:
        B, T, S0 = self.B, self.T, self.S0
        out: dict[str, object] = {}
        for m in monos:
            if m == "1":
                v = 1
            elif m == "B":
                v = B
            elif m == "BT":
                v = B * T
            elif m == "BL":
                v = B if self.logits == "last" else B * T
            elif m == "U:moe":
                v = experts_hit(B * T, spec.moe.n_experts, spec.moe.top_k)
                if np.ndim(v) == 0:
                    v = float(v)
            else:
                kind, win = _parse_mono(m)
                if kind == "K":
                    v = B * visible_keys(T, S0, win)
                elif kind == "P":
                    v = B * causal_pairs(T, S0, win)
                elif kind == "E":
                    v = B * T * visible_keys(T, S0, win)
                elif kind == "H":
                    v = B * held_positions(T, S0, win)
                else:  # pragma: no cover - op builders only emit the kinds above
                    raise AssertionError(m)
            out[m] = v
        return out


# ---- builders ---------------------------------------------------------------------------------------


@dataclass
class _Builder:
    spec: ModelSpec
    attention: Attention
    stage: Stage
    ops: list[Op] = field(default_factory=list)
    window: int | None = None  # window of the layer group being built

    def add(self, name, component, kind, signature, sizes, count, params=(), layer_kind="", **costs):
        cs = []
        for cls in CLASSES:
            terms = costs.get(cls)
            if terms:
                cs.append((cls, tuple(Term(int(c), m, s) for c, m, s in terms if c)))
        self.ops.append(
            Op(
                name,
                component,
                kind,
                signature,
                tuple(sizes.items()),
                count,
                tuple((k, int(n)) for k, n in params if n),
                tuple(c for c in cs if c[1]),
                layer_kind,
                self.window if layer_kind else None,
            )
        )

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
            flops=[(2 * din * dout, rows, f"2·{wsym}")],
            vflops=[(dout, rows, sym_out)] if bias else [],
            weight=wread,
            act_in=[(din, rows, sym_in)] if act_in else [],
            **{out: [(dout, rows, sym_out)]},
        )

    def norm(self, name, width, *, count, pkey, layer_kind="", rows="BT", sym="D", component="norm"):
        s = self.spec
        per = 0 if s.norm == "layer_noparam" else (2 if s.norm == "layer" and s.norm_bias else 1)
        self.add(
            name,
            component,
            "vector",
            f"BT{sym}->BT{sym}",
            {sym: width},
            count,
            [(pkey, per * width)],
            layer_kind,
            vflops=[(NORM_FLOPS[s.norm] * width, rows, f"{NORM_FLOPS[s.norm]}·{sym}")],
            weight=[(per * width, "1", f"{per}·{sym}")],
            act_in=[(width, rows, sym)],
            act_out=[(width, rows, sym)],
        )


def _layer_groups(spec: ModelSpec) -> list[tuple[int | None, bool, int]]:
    """(window, moe, count) for each distinct kind of decoder layer, in first-seen order."""
    groups: dict[tuple[int | None, bool], int] = {}
    for w, m in zip(spec.layer_windows, spec.layer_moe, strict=True):
        groups[(w, m)] = groups.get((w, m), 0) + 1
    return [(w, m, c) for (w, m), c in groups.items()]


def _attention_block(b: _Builder, w: int | None, count: int, lk: str, prefix: str = "attn", cross: bool = False):
    s = b.spec
    D, N, K, G, H = s.d_model, s.n_heads, s.n_kv_heads, s.group_size, s.head_dim
    wk = wkey(w)
    Kmono, Pmono, Emono = f"K:{wk}", f"P:{wk}", f"E:{wk}"
    pk = "attention.cross" if cross else "attention"
    comp = "attention"
    if s.mla is not None and not cross:
        _mla_block(b, w, count, lk)
        return
    sizes = dict(D=D, N=N, K=K, G=G, H=H)
    b.linear(
        f"{prefix}.q_proj",
        comp,
        "BTD,DNH->BTNH",
        sizes,
        D,
        N * H,
        bias=s.q_bias,
        count=count,
        pkey=f"{pk}.q",
        layer_kind=lk,
        sym_out="N·H",
    )
    kv_out = "act_out" if cross else "kv_write"
    for which, bias in (("k", s.k_bias), ("v", s.v_bias)):
        b.linear(
            f"{prefix}.{which}_proj",
            comp,
            "BTD,DKH->BTKH",
            sizes,
            D,
            K * H,
            bias=bias,
            count=count,
            pkey=f"{pk}.{which}",
            layer_kind=lk,
            sym_out="K·H",
            out=kv_out,
        )
    if s.qk_norm != "none" and not cross:
        qw, kw = (H, H) if s.qk_norm == "head" else (N * H, K * H)
        per = 2 if (s.norm == "layer" and s.norm_bias) else 1
        b.add(
            f"{prefix}.qk_norm",
            "norm",
            "vector",
            "BTNH->BTNH",
            sizes,
            count,
            [("attention.qk_norm", per * (qw + kw))],
            lk,
            vflops=[(NORM_FLOPS[s.norm] * (N + K) * H, "BT", f"{NORM_FLOPS[s.norm]}·(N+K)·H")],
            weight=[(per * (qw + kw), "1", "q,k norm weights")],
            act_in=[((N + K) * H, "BT", "(N+K)·H")],
            act_out=[((N + K) * H, "BT", "(N+K)·H")],
        )
    if s.position == "rotary" and not cross:
        r = s.rotary_dim or H
        b.add(
            f"{prefix}.rotary",
            "attention",
            "vector",
            "BTNR->BTNR",
            dict(N=N, K=K, R=r),
            count,
            (),
            lk,
            vflops=[(ROTARY_FLOPS * (N + K) * r, "BT", "3·(N+K)·R")],
            act_in=[((N + K) * r, "BT", "(N+K)·R")],
            act_out=[((N + K) * r, "BT", "(N+K)·R")],
        )
    if s.attn_sinks:
        b.add(
            f"{prefix}.sinks",
            "attention",
            "vector",
            "N",
            dict(N=N),
            count,
            [("attention.sinks", N)],
            lk,
            weight=[(N, "1", "N")],
        )
    if s.relative_buckets and not cross:
        # T5: only the first layer of a stack owns the table; it is read once per pass.
        b.add(
            f"{prefix}.relative_bias",
            "attention",
            "memory",
            "UN",
            dict(U=s.relative_buckets, N=N),
            1,
            [("attention.relative_bias", s.relative_buckets * N)],
            "",
            weight=[(s.relative_buckets * N, "1", "buckets·N")],
        )
    softcap = SOFTCAP_FLOPS if s.attn_softcap else 0
    if b.attention == "eager":
        if not cross:
            # transformers' DynamicCache appends by concatenation: the cached K/V are read and written
            # again into a new buffer every step (the new tokens' write is the K/V projections').
            b.add(
                f"{prefix}.cache_append",
                comp,
                "memory",
                "BSKH,BTKH->B(S+T)KH",
                sizes,
                count,
                (),
                lk,
                kv_read=[(2 * K * H, Kmono, "2·K·H"), (-2 * K * H, "BT", "2·K·H")],
                kv_write=[(2 * K * H, Kmono, "2·K·H"), (-2 * K * H, "BT", "2·K·H")],
            )
        if G > 1:
            # repeat_kv materialises K and V for every query head before the matmuls
            b.add(
                f"{prefix}.repeat_kv",
                comp,
                "memory",
                "BSKH->BSKGH",
                sizes,
                count,
                (),
                lk,
                kv_read=[(2 * K * H, Kmono, "2·K·H")],
                act_out=[(2 * N * H, Kmono, "2·N·H")],
            )
            kv_in = {"act_in": [(N * H, "BT", "N·H"), (N * H, Kmono, "N·H")]}
            v_in = {"act_in": [(N, Emono, "N"), (N * H, Kmono, "N·H")]}
        else:
            kv_in = {"act_in": [(N * H, "BT", "N·H")], "kv_read": [(K * H, Kmono, "K·H")]}
            v_in = {"act_in": [(N, Emono, "N")], "kv_read": [(K * H, Kmono, "K·H")]}
        b.add(
            f"{prefix}.scores",
            comp,
            "matmul",
            "BTKGH,BSKH->BKGTS",
            sizes,
            count,
            (),
            lk,
            flops=[(2 * N * H, Emono, "2·N·H")],
            act_out=[(N, Emono, "N")],
            **kv_in,
        )
        b.add(
            f"{prefix}.softmax",
            comp,
            "vector",
            "BKGTS->BKGTS",
            sizes,
            count,
            (),
            lk,
            vflops=[((SOFTMAX_FLOPS + softcap) * N, Emono, f"{SOFTMAX_FLOPS + softcap}·N")],
            act_in=[(N, Emono, "N")],
            act_out=[(N, Emono, "N")],
        )
        b.add(
            f"{prefix}.context",
            comp,
            "matmul",
            "BKGTS,BSKH->BTKGH",
            sizes,
            count,
            (),
            lk,
            flops=[(2 * N * H, Emono, "2·N·H")],
            act_out=[(N * H, "BT", "N·H")],
            **v_in,
        )
    else:
        b.add(
            f"{prefix}.flash",
            comp,
            "matmul",
            "BTKGH,BSKH,BSKH->BTKGH",
            sizes,
            count,
            (),
            lk,
            flops=[(4 * N * H, Pmono, "4·N·H")],
            vflops=[((SOFTMAX_FLOPS + softcap) * N, Pmono, f"{SOFTMAX_FLOPS + softcap}·N")],
            act_in=[(N * H, "BT", "N·H")],
            kv_read=[(2 * K * H, Kmono, "2·K·H")],
            act_out=[(N * H, "BT", "N·H")],
        )
    b.linear(
        f"{prefix}.o_proj",
        comp,
        "BTNH,NHD->BTD",
        sizes,
        N * H,
        D,
        bias=s.o_bias,
        count=count,
        pkey=f"{pk}.o",
        layer_kind=lk,
        sym_in="N·H",
        sym_out="D",
    )


def _mla_block(b: _Builder, w: int | None, count: int, lk: str):
    s, m = b.spec, b.spec.mla
    D, N = s.d_model, s.n_heads
    C, R, Hn, Hv = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    Hq = Hn + R
    wk = wkey(w)
    Kmono, Pmono, Emono = f"K:{wk}", f"P:{wk}", f"E:{wk}"
    sizes = dict(D=D, N=N, C=C, R=R, H=Hn, J=Hv)
    comp = "attention"
    if m.q_lora_rank is None:
        b.linear(
            "attn.q_proj",
            comp,
            "BTD,DNQ->BTNQ",
            dict(sizes, Q=Hq),
            D,
            N * Hq,
            bias=False,
            count=count,
            pkey="attention.q",
            layer_kind=lk,
            sym_out="N·(H+R)",
        )
    else:
        Ql = m.q_lora_rank
        b.linear(
            "attn.q_a_proj",
            comp,
            "BTD,DL->BTL",
            dict(sizes, L=Ql),
            D,
            Ql,
            bias=s.q_bias,
            count=count,
            pkey="attention.mla.q_a",
            layer_kind=lk,
            sym_out="L",
        )
        b.norm("attn.q_a_norm", Ql, count=count, pkey="attention.mla.q_a_norm", layer_kind=lk, sym="L")
        b.linear(
            "attn.q_b_proj",
            comp,
            "BTL,LNQ->BTNQ",
            dict(sizes, L=Ql),
            Ql,
            N * Hq,
            bias=False,
            count=count,
            pkey="attention.mla.q_b",
            layer_kind=lk,
            sym_in="L",
            sym_out="N·(H+R)",
        )
    b.linear(
        "attn.kv_a_proj",
        comp,
        "BTD,DC->BTC",
        sizes,
        D,
        C + R,
        bias=s.k_bias,
        count=count,
        pkey="attention.mla.kv_a",
        layer_kind=lk,
        sym_out="(C+R)",
        out="kv_write",
    )
    b.norm("attn.kv_a_norm", C, count=count, pkey="attention.mla.kv_a_norm", layer_kind=lk, sym="C")
    b.add(
        "attn.rotary",
        comp,
        "vector",
        "BTNR->BTNR",
        sizes,
        count,
        (),
        lk,
        vflops=[(ROTARY_FLOPS * (N + 1) * R, "BT", "3·(N+1)·R")],
        act_in=[((N + 1) * R, "BT", "(N+1)·R")],
        act_out=[((N + 1) * R, "BT", "(N+1)·R")],
    )
    absorbed = b.attention == "flash" and b.stage == "decode"
    kvb = C * N * (Hn + Hv)
    if absorbed:
        # W_UK folded into the query, W_UV applied after attention: the cache stays latent.
        b.add(
            "attn.q_absorb",
            comp,
            "matmul",
            "BTNH,CNH->BTNC",
            sizes,
            count,
            [("attention.mla.kv_b.weight", C * N * Hn)],
            lk,
            flops=[(2 * N * Hn * C, "BT", "2·N·H·C")],
            weight=[(C * N * Hn, "1", "C·N·H")],
            act_in=[(N * Hn, "BT", "N·H")],
            act_out=[(N * C, "BT", "N·C")],
        )
        b.add(
            "attn.flash_mla",
            comp,
            "matmul",
            "BTNC,BSC->BTNC",
            sizes,
            count,
            (),
            lk,
            flops=[(2 * N * (2 * C + R), Pmono, "2·N·(2C+R)")],
            vflops=[(SOFTMAX_FLOPS * N, Pmono, "5·N")],
            act_in=[(N * (C + R), "BT", "N·(C+R)")],
            kv_read=[(C + R, Kmono, "(C+R)")],
            act_out=[(N * C, "BT", "N·C")],
        )
        b.add(
            "attn.v_absorb",
            comp,
            "matmul",
            "BTNC,CNJ->BTNJ",
            sizes,
            count,
            [("attention.mla.kv_b.weight", C * N * Hv)],
            lk,
            flops=[(2 * N * C * Hv, "BT", "2·N·C·J")],
            weight=[(C * N * Hv, "1", "C·N·J")],
            act_in=[(N * C, "BT", "N·C")],
            act_out=[(N * Hv, "BT", "N·J")],
        )
    else:
        # Decompress every visible latent position (transformers: each step; serving prefill: same).
        b.add(
            "attn.kv_b_proj",
            comp,
            "matmul",
            "BSC,CNX->BSNX",
            dict(sizes, X=Hn + Hv),
            count,
            [("attention.mla.kv_b.weight", kvb)],
            lk,
            flops=[(2 * kvb, Kmono, "2·C·N·(H+J)")],
            weight=[(kvb, "1", "C·N·(H+J)")],
            kv_read=[(C + R, Kmono, "(C+R)")],
            act_out=[(N * (Hq + Hv), Kmono, "N·(H+R+J)")],
        )
        if b.attention == "eager":
            b.add(
                "attn.scores",
                comp,
                "matmul",
                "BTNQ,BSNQ->BNTS",
                dict(sizes, Q=Hq),
                count,
                (),
                lk,
                flops=[(2 * N * Hq, Emono, "2·N·(H+R)")],
                act_in=[(N * Hq, "BT", "N·(H+R)"), (N * Hq, Kmono, "N·(H+R)")],
                act_out=[(N, Emono, "N")],
            )
            b.add(
                "attn.softmax",
                comp,
                "vector",
                "BNTS->BNTS",
                sizes,
                count,
                (),
                lk,
                vflops=[(SOFTMAX_FLOPS * N, Emono, "5·N")],
                act_in=[(N, Emono, "N")],
                act_out=[(N, Emono, "N")],
            )
            b.add(
                "attn.context",
                comp,
                "matmul",
                "BNTS,BSNJ->BTNJ",
                sizes,
                count,
                (),
                lk,
                flops=[(2 * N * Hv, Emono, "2·N·J")],
                act_in=[(N, Emono, "N"), (N * Hv, Kmono, "N·J")],
                act_out=[(N * Hv, "BT", "N·J")],
            )
        else:
            b.add(
                "attn.flash",
                comp,
                "matmul",
                "BTNQ,BSNQ,BSNJ->BTNJ",
                dict(sizes, Q=Hq),
                count,
                (),
                lk,
                flops=[(2 * N * (Hq + Hv), Pmono, "2·N·(H+R+J)")],
                vflops=[(SOFTMAX_FLOPS * N, Pmono, "5·N")],
                act_in=[(N * Hq, "BT", "N·(H+R)"), (N * (Hq + Hv), Kmono, "N·(H+R+J)")],
                act_out=[(N * Hv, "BT", "N·J")],
            )
    b.linear(
        "attn.o_proj",
        comp,
        "BTNJ,NJD->BTD",
        sizes,
        N * Hv,
        D,
        bias=s.o_bias,
        count=count,
        pkey="attention.o",
        layer_kind=lk,
        sym_in="N·J",
        sym_out="D",
    )


def _ffn(
    b: _Builder,
    width: int,
    count: int,
    lk: str,
    prefix: str,
    pkey: str,
    component: str,
    rows: str = "BT",
    bias: bool | None = None,
    weight_read=None,
    letter: str = "F",
    mult: int = 1,
):
    """A dense or gated FFN of hidden ``width``, run by ``mult`` × rows tokens (top-k for experts)."""
    s = b.spec
    D = s.d_model
    bias = s.ffn_bias if bias is None else bias
    sizes = {"D": D, letter: width}
    wr = None if weight_read is None else (lambda n: [(n, weight_read, f"{n}")])

    def lin(name, din, dout, sig, si, so, pk):
        params = [(f"{pkey}.{pk}.weight", din * dout)] + ([(f"{pkey}.{pk}.bias", dout)] if bias else [])
        nw = din * dout + (dout if bias else 0)
        b.add(
            f"{prefix}.{name}",
            component,
            "matmul",
            sig,
            sizes,
            count,
            params,
            lk,
            flops=[(2 * din * dout * mult, rows, f"{mult}·2·{si}·{so}" if mult > 1 else f"2·{si}·{so}")],
            vflops=[(dout * mult, rows, so)] if bias else [],
            weight=wr(nw) if wr else [(nw, "1", f"{si}·{so}")],
            act_in=[(din * mult, rows, si)],
            act_out=[(dout * mult, rows, so)],
        )

    if s.ffn == "gated":
        lin("gate", D, width, f"BTD,D{letter}->BT{letter}", "D", letter, "gate")
        lin("up", D, width, f"BTD,D{letter}->BT{letter}", "D", letter, "up")
        b.add(
            f"{prefix}.act",
            component,
            "vector",
            f"BT{letter}->BT{letter}",
            sizes,
            count,
            (),
            lk,
            vflops=[((ACT_FLOPS + 1) * width * mult, rows, f"5·{letter}")],
            act_in=[(2 * width * mult, rows, f"2·{letter}")],
            act_out=[(width * mult, rows, letter)],
        )
    else:
        lin("up", D, width, f"BTD,D{letter}->BT{letter}", "D", letter, "up")
        b.add(
            f"{prefix}.act",
            component,
            "vector",
            f"BT{letter}->BT{letter}",
            sizes,
            count,
            (),
            lk,
            vflops=[(ACT_FLOPS * width * mult, rows, f"4·{letter}")],
            act_in=[(width * mult, rows, letter)],
            act_out=[(width * mult, rows, letter)],
        )
    lin("down", width, D, f"BT{letter},{letter}D->BTD", letter, "D", "down")


def _moe_block(b: _Builder, count: int, lk: str):
    s, m = b.spec, b.spec.moe
    D, E, k, F = s.d_model, m.n_experts, m.top_k, m.d_ff_expert
    b.linear(
        "moe.router",
        "moe",
        "BTD,DE->BTE",
        dict(D=D, E=E),
        D,
        E,
        bias=m.router_bias,
        count=count,
        pkey="moe.router",
        layer_kind=lk,
        sym_out="E",
    )
    # DeepSeek-V3's e_score_correction_bias is a buffer in transformers, not a parameter: not counted.
    b.add(
        "moe.topk",
        "moe",
        "vector",
        "BTE->BTk",
        dict(E=E),
        count,
        (),
        lk,
        vflops=[(ROUTER_FLOPS * E, "BT", "5·E")],
        act_in=[(E, "BT", "E")],
        act_out=[(2 * k, "BT", "2·k")],
    )
    # Weight operands of all E experts; bytes: the experts actually hit.
    before = len(b.ops)
    _ffn(b, F, count, lk, "moe.experts", "moe.experts", "moe", bias=m.expert_bias, weight_read="U:moe", mult=k)
    for i in range(before, len(b.ops)):
        op = b.ops[i]
        params = tuple((key, n * E) for key, n in op.params)
        b.ops[i] = Op(
            op.name,
            op.component,
            op.kind,
            op.signature,
            op.sizes + (("E", E), ("k", k)),
            op.count,
            params,
            op.costs,
            op.layer_kind,
            op.window,
        )
    if m.d_ff_shared:
        _ffn(b, m.d_ff_shared, count, lk, "moe.shared", "moe.shared", "moe", bias=False, letter="F")
        if m.shared_gate:
            b.linear(
                "moe.shared_gate",
                "moe",
                "BTD,D1->BT1",
                dict(D=D),
                D,
                1,
                bias=False,
                count=count,
                pkey="moe.shared_gate",
                layer_kind=lk,
                sym_out="1",
            )


def _residual(b: _Builder, name: str, count: int, lk: str, inputs: int = 2):
    D = b.spec.d_model
    b.add(
        name,
        "residual",
        "vector",
        "BTD,BTD->BTD",
        dict(D=D),
        count,
        (),
        lk,
        vflops=[((inputs - 1) * D, "BT", f"{inputs - 1}·D")],
        act_in=[(inputs * D, "BT", f"{inputs}·D")],
        act_out=[(D, "BT", "D")],
    )


def _decoder_layers(b: _Builder):
    s = b.spec
    for w, moe, count in _layer_groups(s):
        lk = f"{'moe' if moe else 'dense'}/{'full' if w is None else f'window {w}'}"
        b.window = w
        norms = s.norms_per_layer
        b.norm("norm.attn_in", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
        if s.parallel_block and norms >= 2:
            b.norm("norm.ffn_in", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
        _attention_block(b, w, count, lk)
        if norms >= 4:
            b.norm("norm.attn_out", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
        if not s.parallel_block:
            _residual(b, "residual.attn", count, lk)
            if norms >= 2:
                b.norm("norm.ffn_in", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
        if moe:
            _moe_block(b, count, lk)
        else:
            _ffn(b, s.d_ff, count, lk, "ffn", "ffn", "ffn")
        if norms >= 4:
            b.norm("norm.ffn_out", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
        for extra in range(4, norms):  # more norms than modelled placements: count their weights
            b.norm(f"norm.extra{extra}", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
        if s.parallel_block:
            _residual(b, "residual.parallel", count, lk, inputs=3)
        else:
            _residual(b, "residual.ffn", count, lk)


def _embedding(b: _Builder, prefix: str = "embed", own_positions: bool = True, token_table: bool = True):
    s = b.spec
    D, V = s.d_model, s.vocab_size
    b.add(
        f"{prefix}.tokens",
        "embedding",
        "memory",
        "BT,VD->BTD",
        dict(V=V, D=D),
        1,
        [("embedding.token", V * D if token_table else 0)],
        weight=[(D, "BT", "D")],
        act_out=[(D, "BT", "D")],
    )
    if s.position == "learned" and own_positions:
        rows = s.max_positions + s.position_table_offset
        b.add(
            f"{prefix}.positions",
            "embedding",
            "vector",
            "BT,PD->BTD",
            dict(P=rows, D=D),
            1,
            [("embedding.position", rows * D)],
            vflops=[(D, "BT", "D")],
            weight=[(D, "BT", "D")],
            act_in=[(D, "BT", "D")],
            act_out=[(D, "BT", "D")],
        )
    if s.embedding_scale:
        b.add(
            f"{prefix}.scale",
            "embedding",
            "vector",
            "BTD->BTD",
            dict(D=D),
            1,
            (),
            vflops=[(D, "BT", "D")],
            act_in=[(D, "BT", "D")],
            act_out=[(D, "BT", "D")],
        )
    if s.embedding_norm:
        b.norm(f"{prefix}.norm", D, count=1, pkey="embedding.norm", component="embedding")


def _head(b: _Builder):
    s = b.spec
    D, V = s.d_model, s.vocab_size
    if s.final_norm:
        b.norm("norm.final", D, count=1, pkey="norm.final")
    params = [("lm_head.weight", 0 if s.tie_embeddings else V * D)]
    if s.lm_head_bias:
        params.append(("lm_head.bias", V))
    b.add(
        "lm_head",
        "lm_head",
        "matmul",
        "BLD,DV->BLV",
        dict(D=D, V=V),
        1,
        params,
        flops=[(2 * D * V, "BL", "2·D·V")],
        vflops=[(V, "BL", "V")] if s.lm_head_bias else [],
        weight=[(D * V + (V if s.lm_head_bias else 0), "1", "D·V")],
        act_in=[(D, "BL", "D")],
        act_out=[(V, "BL", "V")],
    )
    if s.final_softcap:
        b.add(
            "lm_head.softcap",
            "lm_head",
            "vector",
            "BLV->BLV",
            dict(V=V),
            1,
            (),
            vflops=[(SOFTCAP_FLOPS * V, "BL", "3·V")],
            act_in=[(V, "BL", "V")],
            act_out=[(V, "BL", "V")],
        )


def _encoder_decoder(b: _Builder):
    """Encoder-decoder stacks, for parameter counts (stage costs are not modelled for them)."""
    s, enc = b.spec, b.spec.encoder
    _embedding(b, "encoder.embed", own_positions=enc.own_position_table)
    for i, (n_layers, cross, norms) in enumerate(
        ((enc.n_layers, False, enc.norms_per_layer), (s.n_layers, True, s.norms_per_layer))
    ):
        stack = "encoder" if i == 0 else "decoder"
        lk = stack
        for j in range(norms):
            b.norm(f"{stack}.norm{j}", s.d_model, count=n_layers, pkey="norm.layers", layer_kind=lk)
        _attention_block(b, None, n_layers, lk, prefix=f"{stack}.self_attn")
        if cross:
            _attention_block(b, None, n_layers, lk, prefix=f"{stack}.cross_attn", cross=True)
        _ffn(b, s.d_ff, n_layers, lk, f"{stack}.ffn", "ffn", "ffn")
        final = enc.final_norm if i == 0 else s.final_norm
        if final:
            b.norm(f"{stack}.norm_final", s.d_model, count=1, pkey="norm.final")
    if enc.own_position_table:
        _embedding(b, "decoder.embed", token_table=False)
    elif s.embedding_norm:
        b.norm("decoder.embed_norm", s.d_model, count=1, pkey="embedding.norm", component="embedding")
    # lm head (final norms handled per stack above)
    D, V = s.d_model, s.vocab_size
    b.add(
        "lm_head",
        "lm_head",
        "matmul",
        "BLD,DV->BLV",
        dict(D=D, V=V),
        1,
        [("lm_head.weight", 0 if s.tie_embeddings else V * D)],
        flops=[(2 * D * V, "BL", "2·D·V")],
        weight=[(D * V, "1", "D·V")],
        act_in=[(D, "BL", "D")],
        act_out=[(V, "BL", "V")],
    )


@lru_cache(maxsize=256)
def build_ops(spec: ModelSpec, stage: Stage = "prefill", attention: Attention = "flash") -> tuple[Op, ...]:
    """The operator list of one forward pass of ``spec`` at ``stage`` under ``attention``."""
    if attention not in ATTENTIONS:
        raise WorkloadError(f"attention={attention!r} must be one of {', '.join(ATTENTIONS)}")
    if stage not in ("prefill", "decode"):
        raise WorkloadError(f"stage={stage!r} must be 'prefill' or 'decode'")
    b = _Builder(spec, attention, stage)
    if spec.is_encoder_decoder:
        _encoder_decoder(b)
    else:
        _embedding(b)
        _decoder_layers(b)
        _head(b)
    return tuple(b.ops)


# ---- evaluation -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpCost:
    """One operator's totals over its ``count`` runs, in FLOPs and elements per class."""

    op: Op
    values: dict[str, object]  # class -> total (FLOPs or elements)


def evaluate(ops: tuple[Op, ...], scenario: Scenario, spec: ModelSpec) -> list[OpCost]:
    """Each operator's totals for a scenario (Python ints for int sizes; arrays broadcast)."""
    monos = {t.mono for op in ops for _, ts in op.costs for t in ts}
    mv = scenario.monomials(monos, spec)
    shape = np.broadcast_shapes(*(np.shape(v) for v in mv.values()))
    if shape:  # a sweep: every class total gets the sweep's shape (constants included)
        mv = {k: np.broadcast_to(v, shape) for k, v in mv.items()}
    out = []
    for op in ops:
        vals: dict[str, object] = {}
        for cls, terms in op.costs:
            tot = 0
            for t in terms:
                tot = tot + t.coef * mv[t.mono]
            vals[cls] = tot * op.count
        out.append(OpCost(op, vals))
    return out


def explain(op: Op, scenario: Scenario, spec: ModelSpec, cls: str = "flops") -> str:
    """A term-by-term formula with the numbers substituted, e.g. ``2·D·N·H × B·T = 2·4096·32·128 × 16 = …``."""
    terms = op.terms(cls)
    if not terms:
        return ""
    mv = scenario.monomials({t.mono for t in terms}, spec)
    parts, total = [], 0
    for t in terms:
        v = mv[t.mono]
        total = total + t.coef * v
        mt = _mono_text(t.mono)
        lhs = t.sym if t.mono == "1" else f"{t.sym} × {mt}"
        rhs = f"{t.coef:,}" if t.mono == "1" else f"{t.coef:,} × {_fmt(v)}"
        parts.append(f"{lhs} = {rhs}")
    cnt = f" × {op.count} layers" if op.count > 1 else ""
    return f"({'  +  '.join(parts)}){cnt} = {_fmt(total * op.count)}"


def _fmt(v) -> str:
    if isinstance(v, int | np.integer):
        return f"{int(v):,}"
    if isinstance(v, float):
        return f"{v:,.6g}"
    return str(v)


# ---- compiled coefficient tables (the fast path) ---------------------------------------------------


@dataclass(frozen=True, eq=False)  # hashed by identity: tables are cached per (spec, stage, attention)
class Table:
    """A model's operator list as a dense coefficient array, for vectorised scenario evaluation.

    ``coef[i, c, m]`` is the coefficient of monomial ``monos[m]`` in class ``CLASSES[c]`` of op ``i``,
    times the op's ``count``. Evaluating a scenario is ``coef @ monomial_values``.
    """

    spec: ModelSpec
    ops: tuple[Op, ...]
    monos: tuple[str, ...]
    coef: np.ndarray
    kernels: np.ndarray  # kernel launches per pass for each op (its count)
    is_weight_mm: np.ndarray  # weight GEMMs (bandwidth-bound like a GEMV when skinny)
    is_kv_attention: np.ndarray  # attention products reading the KV cache
    logit_rows: np.ndarray  # ops whose rows are the logit rows (B·L), not the B·T tokens
    weight_token_rows: np.ndarray  # weight GEMMs over the B·T tokens
    weight_logit_rows: np.ndarray  # weight GEMMs over the logit rows (the LM head)

    def monomial_matrix(self, scenario: Scenario) -> np.ndarray:
        """(…, n_monos) monomial values of a scenario (sizes broadcast over the leading axes)."""
        mv = scenario.monomials(self.monos, self.spec)
        vals = [mv[m] for m in self.monos]
        if not any(isinstance(v, np.ndarray) for v in vals):
            return np.array(vals, dtype=float)
        shape = np.broadcast_shapes(*(np.shape(v) for v in vals))
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape) for v in vals], axis=-1)

    def values(self, scenario: Scenario) -> np.ndarray:
        """(…, n_ops, n_classes) float64 totals; scenario sizes broadcast over the leading axes."""
        return np.einsum("ocm,...m->...oc", self.coef, self.monomial_matrix(scenario))

    def class_matrix(self, weights: np.ndarray) -> np.ndarray:
        """(n_ops, n_monos): the classes combined with per-class ``weights`` (e.g. bytes per element)."""
        return np.einsum("c,ocm->om", weights, self.coef)

    def rhs(self, weights: tuple[float, ...]) -> np.ndarray:
        """(n_monos, n_ops) contiguous right-hand side for ``monomials @ rhs`` (BLAS), cached per weights."""
        return _rhs(self, weights)


@lru_cache(maxsize=1024)
def _rhs(t: Table, weights: tuple[float, ...]) -> np.ndarray:
    out = np.ascontiguousarray(t.class_matrix(np.asarray(weights, dtype=float)).T)
    out.setflags(write=False)
    return out


def one_hot(cls: str) -> tuple[float, ...]:
    return tuple(1.0 if c == cls else 0.0 for c in CLASSES)


@lru_cache(maxsize=256)
def table(spec: ModelSpec, stage: Stage = "prefill", attention: Attention = "flash") -> Table:
    ops = build_ops(spec, stage, attention)
    monos = tuple(sorted({t.mono for op in ops for _, ts in op.costs for t in ts}))
    index = {m: i for i, m in enumerate(monos)}
    coef = np.zeros((len(ops), len(CLASSES), len(monos)))
    for i, op in enumerate(ops):
        for cls, terms in op.costs:
            c = CLASSES.index(cls)
            for t in terms:
                coef[i, c, index[t.mono]] += t.coef * op.count
    kernels = np.array([op.count for op in ops], dtype=float)
    is_weight_mm = np.array([op.kind == "matmul" and op.n_params > 0 for op in ops])
    is_kv_attn = np.array([op.kind == "matmul" and op.n_params == 0 and bool(op.terms("kv_read")) for op in ops])
    logit_rows = np.array([any(t.mono == "BL" for t in op.terms("flops")) for op in ops])
    w_tok, w_log = is_weight_mm & ~logit_rows, is_weight_mm & logit_rows
    for a in (coef, kernels, is_weight_mm, is_kv_attn, logit_rows, w_tok, w_log):
        a.setflags(write=False)
    return Table(spec, ops, monos, coef, kernels, is_weight_mm, is_kv_attn, logit_rows, w_tok, w_log)
