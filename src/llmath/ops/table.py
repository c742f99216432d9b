"""Evaluation of an operator list: per-op totals, --explain formulas, compiled coefficient tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import count
from typing import Any

import numpy as np

from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops.assemble import build_ops
from llmath.ops.core import CLASSES, Attention, Op, Stage, Value
from llmath.ops.routing import experts_hit
from llmath.ops.scenario import Scenario, mono_text
from llmath.ops.ssm_state import class_bytes


@dataclass(frozen=True)
class OpCost:
    """One operator's totals over its ``count`` runs, in FLOPs and elements per class."""

    op: Op
    values: dict[str, Value]  # class -> total (FLOPs or elements)


def evaluate(ops: tuple[Op, ...], scenario: Scenario, spec: ModelSpec, moe_tokens: int = 1) -> list[OpCost]:
    """Each operator's totals for a scenario (Python ints for int sizes; arrays broadcast).

    ``moe_tokens``: see :meth:`Scenario.monomials` (1 on one device)."""
    monos = {t.mono for op in ops for _, ts in op.costs for t in ts}
    mv = scenario.monomials(monos, spec, moe_tokens)
    shape = np.broadcast_shapes(*(np.shape(v) for v in mv.values()))
    if shape:  # a sweep: every class total gets the sweep's shape (constants included)
        mv = {k: np.broadcast_to(v, shape) for k, v in mv.items()}
    out = []
    for op in ops:
        vals: dict[str, Value] = {}
        for cls, terms in op.costs:
            tot: Value = 0
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
    parts: list[str] = []
    total: Value = 0
    for t in terms:
        v = mv[t.mono]
        total = total + t.coef * v
        mt = mono_text(t.mono)
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
    weight_token_rows: np.ndarray  # weight GEMMs over the B·T tokens (not cross-attention K/V: B·src rows)
    weight_logit_rows: np.ndarray  # weight GEMMs over the logit rows (the LM head)
    moe_tokens: int = 1  # tokens an MoE layer routes per scenario token (attention-DP degree; 1 on one device)

    @cached_property
    def launches(self) -> float:
        """Kernels a serving engine launches for one pass: each op's count × its launches per run
        (:attr:`~llmath.ops.core.Op.launches`, ops/launches.py)."""
        return float(sum(op.count * op.launches for op in self.ops))

    @cached_property
    def routed_expert_layers(self) -> float:
        """Routed-expert (MoE) layers a pass over the table runs: its router's top-k operators (``moe.topk``, one
        per MoE layer: :func:`llmath.ops.moe.router`) × their counts; 0 for a dense model."""
        return float(sum(op.count for op in self.ops if op.name == "moe.topk"))

    def experts_hit(self, batch_tokens):
        """Expected distinct experts hit by the MoE layer's tokens (``batch_tokens`` × ``moe_tokens``)."""
        m = self.spec.moe
        if m is None:  # pragma: no cover - only MoE tables ask
            raise AssertionError("experts_hit on a dense model")
        return experts_hit(np.asarray(batch_tokens, dtype=float) * self.moe_tokens, m.n_experts, m.top_k)

    def monomial_matrix(self, scenario: Scenario) -> np.ndarray:
        """(…, n_monos) monomial values of a scenario (sizes broadcast over the leading axes)."""
        mv = scenario.monomials(self.monos, self.spec, self.moe_tokens)
        vals = [mv[m] for m in self.monos]
        if not any(isinstance(v, np.ndarray) for v in vals):
            return np.array(vals, dtype=float)
        shape = np.broadcast_shapes(*(np.shape(v) for v in vals))
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape) for v in vals], axis=-1)

    def values(self, scenario: Scenario) -> np.ndarray:
        """(…, n_ops, n_classes) float64 totals; scenario sizes broadcast over the leading axes."""
        return np.einsum("ocm,...m->...oc", self.coef, self.monomial_matrix(scenario))

    def class_matrix(self, weights: np.ndarray) -> np.ndarray:
        """(n_ops, n_monos): the classes combined with ``weights`` (e.g. bytes per element), per class
        ``(n_classes,)`` or per op and class ``(n_ops, n_classes)`` (weights' bytes depend on the op's module)."""
        if weights.ndim == 2:
            return np.einsum("oc,ocm->om", weights, self.coef)
        return np.einsum("c,ocm->om", weights, self.coef)

    def rhs(self, weights: tuple) -> np.ndarray:
        """(n_monos, n_ops) contiguous right-hand side for ``monomials @ rhs`` (BLAS), cached per weights
        (a tuple per class, or a tuple of per-class tuples per op)."""
        return _rhs(self, weights)

    def byte_matrix(self, p: Precision) -> np.ndarray:
        """(n_ops, n_classes) bytes per element: activations and KV per class, weights by the op's module."""
        return np.asarray(byte_key(self, p))


# Rows per BLAS call in :func:`matmul_rows`: OpenBLAS splits a product of more than about 10⁶ multiply-adds
# (m·n·k) over its threads, and for these skinny shapes (k = a few monomials, n = the ops) the threads cost
# far more than they save on a busy machine (16,384 × 5 × 51: 36 ms with two threads, 0.06 ms on one, on
# the 2-core VM under load); below 2¹⁸ every call runs on the calling thread.
_MNK_PER_CALL = 1 << 18


def matmul_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for a tall (rows, k) ``a`` and a small (k, n) ``b``, in row blocks small enough for one
    thread each (see ``_MNK_PER_CALL``); other shapes as ``a @ b``."""
    rows = max(_MNK_PER_CALL // max(b.size, 1), 1)
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] <= rows:
        return a @ b
    out = np.empty((a.shape[0], b.shape[1]), dtype=np.result_type(a, b))
    for i in range(0, a.shape[0], rows):
        np.matmul(a[i : i + rows], b, out=out[i : i + rows])
    return out


@lru_cache(maxsize=1024)
def _rhs(t: Table, weights: tuple[float, ...]) -> np.ndarray:
    return _class_rhs(t, weights)


@lru_cache(maxsize=1024)
def byte_rhs(t: Table, p: Precision) -> np.ndarray:
    """:meth:`Table.rhs` of ``p``'s bytes per element (:func:`byte_key`), cached by the precision (whose hash is
    kept) instead of by the bytes' tuple, a float per op and class, which a lookup would hash again."""
    return _class_rhs(t, byte_key(t, p))


def _class_rhs(t: Table, weights: tuple) -> np.ndarray:
    picked = _picked(weights)
    if picked is not None and np.isfinite(t.coef).all():
        m = t.coef[:, picked[0], :] if len(picked) == 1 else t.coef[:, picked[0], :] + t.coef[:, picked[1], :]
        out = np.ascontiguousarray(m.T)
    else:
        out = np.ascontiguousarray(t.class_matrix(np.asarray(weights, dtype=float)).T)
    out.setflags(write=False)
    return out


def _picked(weights: tuple) -> tuple[int, ...] | None:
    """The classes a per-class weights tuple of ones and zeros selects, when it selects one or two (``None``
    otherwise): the class matrix is then their coefficients' sum, exactly (finite coefficients: the other
    classes' products are zeros; two terms add in either order alike), without the general contraction."""
    if any(isinstance(w, tuple) or w not in (0.0, 1.0) for w in weights):
        return None
    picked = tuple(c for c, w in enumerate(weights) if w == 1.0)
    return picked if 1 <= len(picked) <= 2 else None


@lru_cache(maxsize=1024)
def op_kinds(t: Table) -> tuple[tuple[str, str, str, bool], ...]:
    """Each op's name, component, kind and whether it has weight terms: all that the per-format reads of a table
    ask of its ops (bytes per element by module, the format each GEMM runs in). Sharding keeps all four, so
    the tables of layouts whose stages place the same operators share those reads (:func:`by_kinds`)."""
    return tuple(_op_entry(op).kinds for op in t.ops)


_BY_KINDS: dict[tuple, Any] = {}
_KIND_IDS: dict[tuple, int] = {}  # an :func:`op_kinds` tuple → a number of its own, never given to another
_NEXT_KIND_ID = count()


@lru_cache(maxsize=1024)
def _kinds_id(t: Table) -> int:
    """The number of ``t``'s :func:`op_kinds`, once per table: the caches keyed by it hash one int instead of
    a tuple of every op's names."""
    kinds = op_kinds(t)
    got = _KIND_IDS.get(kinds)
    if got is None:
        if len(_KIND_IDS) >= 65536:
            _KIND_IDS.clear()  # a tuple seen again gets a new number: only a cache miss
        got = _KIND_IDS[kinds] = next(_NEXT_KIND_ID)
    return got


def by_kinds(read: Callable, t: Table, *args: Any) -> Any:
    """``read(t, *args)`` once per (read, spec, :func:`op_kinds`, args): for a read of ``t`` that depends on
    nothing else of its ops."""
    key = (read, t.spec, _kinds_id(t), args)
    hit = _BY_KINDS.get(key)
    if hit is None:
        if len(_BY_KINDS) >= 4096:
            _BY_KINDS.clear()
        hit = _BY_KINDS[key] = read(t, *args)
    return hit


@lru_cache(maxsize=1024)
def byte_key(t: Table, p: Precision) -> tuple[tuple[float, ...], ...]:
    """Hashable (n_ops, n_classes) bytes per element of ``p`` for the ops of ``t`` (see :meth:`Table.byte_matrix`)."""
    return by_kinds(_byte_key, t, p)


def _byte_key(t: Table, p: Precision) -> tuple[tuple[float, ...], ...]:
    from llmath.ops.params import weight_bytes_per_element

    per = p.per_class
    by_module = weight_bytes_per_element(t.spec, p)
    rows, seen = [], {}  # a row per (module, whether the op holds the SSM state): ops share a few
    for op in t.ops:
        b = class_bytes(op, t.spec, p, per)  # the SSM state's own format (llmath.ops.ssm_state)
        key = (op.module, b is per)
        if key not in seen:
            w = by_module.get(op.module, per["weight"])
            seen[key] = tuple(w if c == "weight" else b.get(c, 0.0) for c in CLASSES)
        rows.append(seen[key])
    return tuple(rows)


def one_hot(cls: str) -> tuple[float, ...]:
    return tuple(1.0 if c == cls else 0.0 for c in CLASSES)


@lru_cache(maxsize=256)
def table(spec: ModelSpec, stage: Stage = "prefill", attention: Attention = "flash") -> Table:
    return compile_table(spec, build_ops(spec, stage, attention))


@dataclass(frozen=True)
class _OpEntry:
    """What :func:`compile_table` reads of one operator: its (class index, monomial, coefficient × count) terms,
    their monomials, its flags (weight GEMM, KV attention, logit rows, cross-attention source rows) and what
    :func:`op_kinds` reads of it."""

    terms: tuple[tuple[int, str, int | float], ...]
    flags: tuple[bool, bool, bool, bool]
    monos: frozenset[str]
    kinds: tuple[str, str, str, bool]


_ENTRIES: dict[int, tuple[Op, _OpEntry]] = {}


def _op_entry(op: Op) -> _OpEntry:
    """The operator's entry, read once per operator object (sharded operators are shared by the layouts that
    give them the same factors); the cache keeps ``op``, so its id is not reused while cached."""
    hit = _ENTRIES.get(id(op))
    if hit is not None and hit[0] is op:
        return hit[1]
    terms = tuple((CLASSES.index(cls), t.mono, t.coef * op.count) for cls, ts in op.costs for t in ts)
    mm, kv_read, flops = op.kind == "matmul", bool(op.terms("kv_read")), op.terms("flops")
    weight = op.n_params > 0
    logit, src = any(t.mono == "BL" for t in flops), any(t.mono == "X" for t in flops)  # cross K/V: B·src rows
    kinds = (op.name, op.component, op.kind, bool(op.terms("weight")))
    flags = (mm and weight, mm and not weight and kv_read, logit, src)
    out = _OpEntry(terms, flags, frozenset(t[1] for t in terms), kinds)
    if len(_ENTRIES) >= 65536:
        _ENTRIES.clear()
    _ENTRIES[id(op)] = (op, out)
    return out


_WEIGHTS: dict[int, tuple[Op, int, bool]] = {}


@lru_cache(maxsize=1024)
def op_weights(t: Table) -> tuple[np.ndarray, np.ndarray]:
    """(weight elements of each op, at least 1, as floats; whether its weights are routed experts': a ``U:moe``
    weight term), read-only: what the fitted GEMM and MoE models read of the ops, once per table and each
    operator once (sharded operators are shared by the tables of the layouts that give them the same factors)."""
    facts = []
    for op in t.ops:
        hit = _WEIGHTS.get(id(op))
        if hit is None or hit[0] is not op:
            if len(_WEIGHTS) >= 65536:
                _WEIGHTS.clear()
            hit = _WEIGHTS[id(op)] = (op, max(op.n_params, 1), any(x.mono == "U:moe" for x in op.terms("weight")))
        facts.append(hit[1:])
    elements = np.array([n for n, _ in facts], dtype=float)
    routed = np.array([r for _, r in facts], dtype=bool)
    for a in (elements, routed):
        a.setflags(write=False)
    return elements, routed


def compile_table(spec: ModelSpec, ops: tuple[Op, ...], moe_tokens: int = 1) -> Table:
    """The coefficient table of any operator list of ``spec`` (one device's, or one rank's of a layout)."""
    entries = [_op_entry(op) for op in ops]
    monos = tuple(sorted(frozenset().union(*(e.monos for e in entries))))
    index = {m: i for i, m in enumerate(monos)}
    n_c, n_m = len(CLASSES), len(monos)
    at = [(i * n_c + c) * n_m + index[m] for i, e in enumerate(entries) for c, m, _ in e.terms]
    values = np.array([v for e in entries for _, _, v in e.terms], dtype=float)
    # each cell the sum of its terms in order, from 0 (as adding them one by one)
    coef = np.bincount(np.array(at, dtype=np.intp), values, len(ops) * n_c * n_m).reshape(len(ops), n_c, n_m)
    kernels = np.array([op.count for op in ops], dtype=float)
    flags = np.array([e.flags for e in entries], dtype=bool).reshape(len(ops), 4)  # bool even for no ops
    is_weight_mm, is_kv_attn, logit_rows, src_rows = (np.ascontiguousarray(flags[:, j]) for j in range(4))
    w_tok, w_log = is_weight_mm & ~logit_rows & ~src_rows, is_weight_mm & logit_rows
    for a in (coef, kernels, is_weight_mm, is_kv_attn, logit_rows, w_tok, w_log):
        a.setflags(write=False)
    return Table(spec, ops, monos, coef, kernels, is_weight_mm, is_kv_attn, logit_rows, w_tok, w_log, moe_tokens)
