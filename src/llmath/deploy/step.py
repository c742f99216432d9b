"""The cost of one engine iteration, composed from the operator list (never a second cost formula).

A serving engine runs *iterations*: one forward pass over the tokens of every scheduled sequence. An
iteration mixes ``n_decode`` decoding sequences (one new token each, at a mean context ``S``) with
``n_chunks`` prefill chunks of ``chunk`` tokens after ``prefix`` cached positions each. Its cost is the
roofline of the *prefill* operator table evaluated at the sum of the two scenarios' monomials:

* every per-token monomial (``B·T``, ``B·S``, ``B·pairs``, ``B·T·S``, ``B·held``, logit rows) is a sum over
  sequences, so the monomials of the mixed batch are the sum of those of its parts; for attention over a
  full cache they are affine in S, so n sequences at a mean context are exact for that sum;
* the constant monomial ``1`` (the weights read) counts once per iteration: weights are streamed once for
  all the batch's tokens, as engines fuse decode and prefill tokens in the same GEMMs;
* MoE expert weights hit are the expectation for all the iteration's tokens together.

Each operator's time is then :func:`llmath.hardware.roofline.monomial_times` on those monomials. An iteration without
prefill tokens is a decode step (``decode=True``: CUDA-graph overhead, decode-attention efficiency); one with
prefill tokens uses the prefill rates. For models whose decode and prefill operator lists differ (MLA runs
absorbed in decode), the two parts are timed on their own tables and summed: the weights are then read twice
in mixed iterations (an overestimate stated here, at most one weight read per mixed iteration).

Sizes broadcast: every argument may be a numpy array, so one call times a whole grid of iterations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

import numpy as np

from llmath.hardware import Hardware
from llmath.hardware.roofline import Efficiency, byte_weights_key, monomial_times
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops import CLASSES, Scenario, Table, experts_hit, one_hot, table


@dataclass(frozen=True)
class StepCost:
    """Time (s), bytes moved and FLOPs (matmul + vector) of one iteration (arrays broadcast)."""

    time_s: np.ndarray
    bytes: np.ndarray
    flops: np.ndarray


@dataclass(frozen=True, eq=False)
class Device:
    """One model replica on one device: the iteration cost of any mix of decode and prefill tokens.

    ``cuda_graphs=False`` charges decode iterations the eager per-kernel overhead instead of the
    CUDA-graph one. This is the narrow interface the serving model and the planner use; a parallel layout
    supplies a per-GPU table and adds its communication (see :mod:`llmath.deploy`).
    """

    spec: ModelSpec
    hw: Hardware
    precision: Precision
    eff: Efficiency
    attention: str = "flash"
    cuda_graphs: bool = True

    @cached_property
    def prefill_table(self) -> Table:
        return table(self.spec, "prefill", self.attention)

    @cached_property
    def decode_table(self) -> Table:
        return table(self.spec, "decode", self.attention)

    @cached_property
    def shared(self) -> bool:
        """Whether one table serves both parts (same operators; MLA differs)."""
        a, b = self.prefill_table, self.decode_table
        return [o.name for o in a.ops] == [o.name for o in b.ops] and a.monos == b.monos

    @cached_property
    def decode_eff(self) -> Efficiency:
        return self.eff if self.cuda_graphs else replace(self.eff, decode_overhead_s=self.eff.overhead_s)

    def _mv(self, t: Table, B, T, S0) -> np.ndarray:
        return t.monomial_matrix(Scenario(np.asarray(B, float), np.asarray(T, float), np.asarray(S0, float)))

    def _fix(self, t: Table, mv: np.ndarray, tokens) -> np.ndarray:
        """The weights are read once per iteration; MoE experts hit by all its tokens together."""
        mv = np.array(mv, dtype=float, copy=True)
        mv[..., t.monos.index("1")] = 1.0
        if "U:moe" in t.monos:
            moe = self.spec.moe
            mv[..., t.monos.index("U:moe")] = experts_hit(tokens, moe.n_experts, moe.top_k)
        return mv

    def _time(self, t: Table, mv: np.ndarray, rows, tokens, decode: bool) -> StepCost:
        eff = self.decode_eff if decode else self.eff
        tm, _, _ = monomial_times(t, mv, self.hw, self.precision, eff, rows, tokens, decode)
        totals = mv @ _totals(t, byte_weights_key(self.precision))  # [bytes, FLOPs] of the whole pass
        return StepCost(tm.sum(-1), totals[..., 0], totals[..., 1])

    def iteration(self, n_decode, context, n_chunks=0, chunk=0, prefix=0) -> StepCost:
        """One iteration: ``n_decode`` sequences at mean context ``context`` (each feeds one token and
        attends context + 1 positions) plus ``n_chunks`` prefill chunks of ``chunk`` tokens after ``prefix``
        cached positions. Arguments broadcast; ``n_chunks = 0`` is a pure decode step."""
        args = (n_decode, context, n_chunks, chunk, prefix)
        d, s, nc, c, pf = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in args))
        tokens = d + nc * c
        rows = d + nc  # logit rows: one per decoding sequence and one per chunk (its last position)
        has_prefill = (nc * c) > 0
        if self.shared:
            t = self.prefill_table
            mv = self._fix(t, self._mv(t, d, 1, s) + self._mv(t, nc, c, pf), tokens)
            if not has_prefill.any():
                return self._time(t, mv, rows, tokens, decode=True)
            mix = self._time(t, mv, rows, tokens, decode=False)
            if has_prefill.all():
                return mix
            dec = self._time(t, mv, rows, tokens, decode=True)
            return StepCost(*(np.where(has_prefill, m, x) for m, x in zip(_parts(mix), _parts(dec), strict=True)))
        dt, pt = self.decode_table, self.prefill_table
        dec = self._time(dt, self._fix(dt, self._mv(dt, d, 1, s), d), d, d, decode=True)
        pre = self._time(pt, self._fix(pt, self._mv(pt, nc, c, pf), nc * c), nc, nc * c, decode=False)
        return StepCost(*(np.where(has_prefill, a + b, a) for a, b in zip(_parts(dec), _parts(pre), strict=True)))

    def verify(self, n_seqs, width, context) -> StepCost:
        """A speculative verify pass: ``n_seqs`` sequences each feeding ``width`` tokens after ``context``
        cached positions, on the decode operator list (MLA stays absorbed, as engines verify), timed as a
        decode iteration (graph-captured)."""
        b, w, s = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (n_seqs, width, context)))
        t = self.decode_table
        mv = self._fix(t, self._mv(t, b, w, s), b * w)
        return self._time(t, mv, b, b * w, decode=True)


@lru_cache(maxsize=512)
def _totals(t: Table, bw_key: tuple[float, ...]) -> np.ndarray:
    """(n_monos, 2): bytes and FLOPs (matmul + vector) of the whole pass per monomial."""
    flops = t.rhs(one_hot("flops")) + t.rhs(one_hot("vflops"))
    out = np.ascontiguousarray(np.stack([t.rhs(bw_key).sum(1), flops.sum(1)], axis=1))
    out.setflags(write=False)
    return out


def _parts(s: StepCost) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return s.time_s, s.bytes, s.flops


# ---- memory the engine holds per sequence and per chunk ------------------------------------------------


def kv_bytes_per_sequence(spec: ModelSpec, positions, precision: Precision, attention: str = "flash"):
    """KV-cache bytes one sequence of ``positions`` positions holds: what the K/V operators write per token
    (the ``B·T`` terms of their ``kv_write`` class), windowed layers holding at most W positions."""
    if isinstance(positions, int | float):
        return _kv_scalar(spec, positions, precision, attention)
    return _kv_bytes(spec, positions, precision, attention)


@lru_cache(maxsize=4096)
def _kv_scalar(spec: ModelSpec, positions, precision: Precision, attention: str) -> float:
    return float(_kv_bytes(spec, positions, precision, attention))


def _kv_bytes(spec: ModelSpec, positions, precision: Precision, attention: str):
    t = table(spec, "decode", attention)
    ci, mi = CLASSES.index("kv_write"), t.monos.index("BT")
    total = 0.0
    for o, op in enumerate(t.ops):
        per = t.coef[o, ci, mi]
        if per:
            held = positions if op.window is None else np.minimum(positions, op.window)
            total = total + per * np.asarray(held, dtype=float)
    return total * precision.kv_bytes


@lru_cache(maxsize=4096)
def chunk_activation_bytes(spec: ModelSpec, tokens: int, precision: Precision, attention: str = "flash") -> float:
    """Live activations of one forward pass over ``tokens`` tokens: the widest operator's inputs + outputs,
    plus the residual stream (the same view of the operator list as the static report's activation peak)."""
    t = table(spec, "prefill", attention)
    act = tuple(float(c in ("act_in", "act_out")) for c in CLASSES)
    per_op = (t.monomial_matrix(Scenario(1, np.asarray(tokens, dtype=float), 0)) @ t.rhs(act)) / t.kernels
    return float((per_op.max(-1) + tokens * spec.d_model) * precision.act_bytes)
