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

Encoder-decoder models (``Device.source`` = the P source tokens of every request): a request's prefill is
its encoder pass over the P source tokens (bidirectional, so never chunked) plus the decoder prefill of its
start token, which projects the P encoder outputs to the cross-attention K/V once; a decoding request at
decoder context S attends S + 1 positions and cross-attends the P cached ones. The encoder pass runs on its
own operator table (its own weights read once per iteration that carries prefills), the decoder's prefill
and decode tokens on theirs (the two decoder lists differ: decode reads the cross K/V, prefill writes them).

Sizes broadcast: every argument may be a numpy array, so one call times a whole grid of iterations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from llmath.deploy.cost import comm_seconds, fitted_device, rank_table
from llmath.deploy.ep_balance import at_busiest_rank
from llmath.deploy.host_step import HostStep
from llmath.deploy.layout import Layout
from llmath.deploy.shard import rank_plans
from llmath.errors import WorkloadError
from llmath.hardware import Hardware
from llmath.hardware.fitted_columns import attention_columns
from llmath.hardware.roofline import Efficiency, eager_host_s, monomial_times, piecewise_host_s
from llmath.hardware.topology import topology
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops import CLASSES, Scenario, Table, one_hot, table
from llmath.ops.params import param_report
from llmath.ops.state import fixed_state_bytes
from llmath.ops.table import byte_rhs


@dataclass(frozen=True)
class StepCost:
    """Time (s), bytes moved and FLOPs (matmul + vector) of one iteration (arrays broadcast)."""

    time_s: np.ndarray
    bytes: np.ndarray
    flops: np.ndarray


@dataclass(frozen=True)
class Part:
    """One GPU of one pipeline stage (the whole model on one device): its prefill and decode operator
    tables, the collectives each pass adds, and its parameters."""

    prefill: Table
    decode: Table
    prefill_collectives: tuple = ()
    decode_collectives: tuple = ()
    params: int = 0
    encoder: Table | None = None  # encoder-decoder models: the encoder pass's table and collectives
    encoder_collectives: tuple = ()

    @cached_property  # asked per iteration (frozen: cached in the instance's __dict__)
    def shared(self) -> bool:
        """Whether one table serves both kinds of token (same operators; MLA's absorbed decode differs)."""
        a, b = self.prefill, self.decode
        return [o.name for o in a.ops] == [o.name for o in b.ops] and a.monos == b.monos


class _Mixed:
    """The monomials of an iteration mixing decode sequences and prefill chunks (each a Scenario): the sum
    of the parts' monomials, the constant once. Duck-types :class:`~llmath.ops.Scenario` for the
    collectives' message sizes (:func:`llmath.deploy.cost.comm_seconds`)."""

    def __init__(self, *parts: Scenario):
        self.parts = parts

    def monomials(self, monos, spec, moe_tokens: int = 1) -> dict:
        vals = [p.monomials(monos, spec, moe_tokens) for p in self.parts]
        return {m: (1 if m == "1" else sum(v[m] for v in vals)) for m in monos}


@dataclass(frozen=True, eq=False)
class Device:
    """One model replica: the iteration cost of any mix of decode and prefill tokens.

    Without a ``layout`` the replica is one device (the operator tables of :func:`llmath.ops.table`).
    With one (:func:`llmath.deploy.make_layout`), it is one attention-DP replica of the layout: each
    pipeline stage's rank runs its sharded operator table (:func:`llmath.deploy.rank_table`) and its
    collectives (:func:`llmath.deploy.cost.comm_costs`, on the device's topology), and the iteration takes
    Σ over stages of (operator times + exposed communication), as :func:`llmath.deploy.per_gpu_stage`
    times a pass. ``cuda_graphs=False`` charges decode iterations the eager per-kernel overhead.
    ``eager_host_s``: the engine's host seconds per kernel of a pass launched eagerly (every pass that prefills;
    decode passes too with ``cuda_graphs=False``); such a pass takes the longer of its GPU time and its
    kernels × ``eager_host_s`` (:func:`llmath.hardware.roofline.eager_host_s`; 0: no host floor), counted per
    ``eager_host_unit`` (``launch``: the engines' module-code launches; ``operator``: listed operators).
    ``graph_tokens``: the largest pass, in tokens, replayed from a CUDA graph, prefill passes included (vLLM's
    ``max_cudagraph_capture_size``): a pass of more tokens runs eagerly and one of at most as many does not; 0: no
    such limit, and every pass that prefills runs eagerly where ``eager_host_s`` is set.
    ``piecewise_host_s``: the engine's host seconds per attention call of a pass that prefills and replays
    piecewise CUDA graphs (vLLM's default ``cudagraph_mode``: attention runs eagerly between graph pieces); such a
    pass takes the longer of its GPU time and its attention calls × ``piecewise_host_s``
    (:func:`llmath.hardware.roofline.piecewise_host_s`; 0: no such floor).
    ``moe_prefill_host_s``: the engine's seconds per routed-expert layer of a pass that prefills, added to the
    pass's time (vLLM's ``moe_prefill_host_per_layer_s``, a term fitted to measured rows; 0: none).
    ``source``: encoder-decoder models only (required there), the source tokens of every request (module doc).
    ``decode_graph_requests``: the largest decode step, in requests, replayed from a CUDA graph (SGLang's
    ``--cuda-graph-max-bs``; a verify step's draft tokens ride on each request); a decode or verify step of more
    requests runs eagerly and takes the longer of its GPU time and its kernels × ``decode_eager_host_s`` (0: no cap).
    ``moe_path``: the grouped-expert kernel the engine runs (``EngineConfig.moe_kernel``), whose launches of a
    routed-expert layer the eager floor counts (:data:`llmath.ops.launches.MOE_PATH_LAUNCHES`; "": the operators').
    ``host_step``: the engine's host time per step (:mod:`llmath.deploy.host_step`): an :meth:`iteration` lasts the
    longer of its GPU time and the host's (or their sum without an overlap scheduler); None: no host term.
    """

    spec: ModelSpec
    hw: Hardware
    precision: Precision
    eff: Efficiency
    attention: str = "flash"
    cuda_graphs: bool = True
    layout: Layout | None = None
    source: int = 0
    eager_host_s: float = 0.0
    graph_tokens: int = 0
    eager_host_unit: str = "launch"
    host_step: HostStep | None = None
    piecewise_host_s: float = 0.0
    moe_prefill_host_s: float = 0.0
    decode_graph_requests: int = 0
    decode_eager_host_s: float = 0.0
    moe_path: str = ""

    def __post_init__(self) -> None:
        if self.spec.is_encoder_decoder and self.source < 1:
            raise WorkloadError(
                f"{self.spec.name!r} is an encoder-decoder model: its serving cost needs the source length "
                "(Device(source=P), the prompt tokens each request's encoder runs over)"
            )
        if self.source and not self.spec.is_encoder_decoder:
            raise WorkloadError(f"source={self.source}: {self.spec.name!r} is decoder-only; leave source at 0")

    @property
    def gpus(self) -> int:
        return self.layout.gpus if self.layout is not None else 1

    @property
    def dp(self) -> int:
        """Attention-DP replicas inside the layout (each serves its own requests)."""
        return self.layout.dp if self.layout is not None else 1

    @property
    def replica_gpus(self) -> int:
        """GPUs of one attention-DP replica: the attention ranks that hold one request's KV cache."""
        return max(self.gpus // max(self.dp, 1), 1)

    @cached_property
    def parts(self) -> tuple[Part, ...]:
        return stage_parts(self.spec, self.attention, self.layout)

    @cached_property
    def topology(self):
        return topology(self.hw)

    @cached_property
    def prefill_table(self) -> Table:
        return self.parts[0].prefill

    @cached_property
    def decode_table(self) -> Table:
        return self.parts[0].decode

    @cached_property
    def decode_eff(self) -> Efficiency:
        return self.eff if self.cuda_graphs else replace(self.eff, decode_overhead_s=self.eff.overhead_s)

    def _mv(self, t: Table, B, T, S0) -> np.ndarray:
        return _mono(t, Scenario(np.asarray(B, float), np.asarray(T, float), np.asarray(S0, float)))

    def _fix(self, t: Table, mv: np.ndarray, tokens) -> np.ndarray:
        """The weights are read once per iteration; MoE experts hit by all its tokens together."""
        mv = np.array(mv, dtype=float, copy=True)
        mv[..., t.monos.index("1")] = 1.0
        if "U:moe" in t.monos:
            mv[..., t.monos.index("U:moe")] = t.experts_hit(tokens)
        return mv

    def _time(self, t: Table, mv: np.ndarray, rows, tokens, decode: bool, context=None) -> StepCost:
        """``context``: a decode pass's (mean) context, at which decode attention's fitted fractions apply;
        in prefill, the mask of passes mixing decode tokens in (their attention keeps the scalar fractions)."""
        eff = self.decode_eff if decode else self.eff
        tm, _, _ = monomial_times(t, mv, self.hw, self.precision, eff, rows, tokens, decode, context)
        return StepCost(self._busiest_rank(t, tm, tokens).sum(-1), *self._pass_totals(t, mv))

    def _busiest_rank(self, t: Table, tm: np.ndarray, tokens) -> np.ndarray:
        """Per-op times ``tm`` with the routed experts' at the busiest expert-parallel rank's pace
        (:func:`llmath.deploy.ep_balance.at_busiest_rank`; unchanged without expert parallelism or under a kernel
        that pads every local expert to a worst case)."""
        fmt, aligned = self.precision.weight_format("experts"), bool(self.eff.moe_aligned_rows)
        return at_busiest_rank(tm, t, self.layout, self.hw.name, fmt, tokens, aligned)

    def _mixed_time(self, t: Table, mv: np.ndarray, rows, tokens, shape: tuple) -> StepCost:
        """A pass of ``d`` decoders at context ``s`` and ``nc`` chunks of ``c`` tokens after ``pf`` cached ones:
        every op over all the tokens at once, but attention in two parts, the chunks' at the fitted prefill
        attention and the decoders' at the fitted decode attention (each part reads its own KV, so no single
        fitted shape is both); an iteration never gets cheaper for carrying one more decoder."""
        d, s, nc, c, pf = shape
        hw, p = self.hw, self.precision
        tm = monomial_times(t, mv, hw, p, self.eff, rows, tokens, False, d > 0)[0]
        j = attention_columns(t)
        tm = self._busiest_rank(t, tm, tokens)
        if not j.size or not (d > 0).any():
            return StepCost(tm.sum(-1), *self._pass_totals(t, mv))
        has = nc * c > 0
        n1, c1, d1 = np.where(has, nc, 1.0), np.where(has, c, 1.0), np.maximum(d, 1.0)
        pre_mv = self._fix(t, _mono(t, Scenario(n1, c1, pf)), n1 * c1)
        dec_mv = self._fix(t, _mono(t, Scenario(d1, 1, s)), d1)
        at = _attention_table(t)  # the two parts time only the attention columns
        pre = monomial_times(at, pre_mv, hw, p, self.eff, n1, n1 * c1, False)[0]
        dec = monomial_times(at, dec_mv, hw, p, self.decode_eff, d1, d1, True, s)[0]
        tm[..., j] = np.where((d > 0)[..., None], pre + dec, tm[..., j])
        return StepCost(tm.sum(-1), *self._pass_totals(t, mv))

    def _pass_totals(self, t: Table, mv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bytes and FLOPs of the whole pass of monomial values ``mv`` (:func:`_totals` per monomial)."""
        totals = mv @ _totals(t, self.precision)
        return totals[..., 0], totals[..., 1]

    def _comm(self, colls: tuple, scen, ops_s: np.ndarray) -> np.ndarray:
        """Exposed communication: the plain collectives + what overlapped ones leave uncovered."""
        if not colls:
            return np.zeros_like(ops_s)
        dev = fitted_device(self.hw, self.eff)
        plain, hidden = comm_seconds(colls, scen, self.spec, self.precision, self.topology, dev)
        return plain + np.maximum(0.0, hidden - ops_s)

    def _with_comm(self, cost: StepCost, colls: tuple, scen) -> StepCost:
        return StepCost(cost.time_s + self._comm(colls, scen, cost.time_s), cost.bytes, cost.flops)

    def _host_bound(
        self, cost: StepCost, t: Table, eager: bool | np.ndarray = True, per_kernel_s: float | None = None
    ) -> StepCost:
        """``cost`` of a pass over ``t`` floored at the host's launch time where the pass runs eagerly (``eager``:
        one flag, or one per row; ``per_kernel_s``: the host seconds per launch, ``eager_host_s`` unless given)."""
        host_s = self.eager_host_s if per_kernel_s is None else per_kernel_s
        if not (host_s and np.any(eager)):
            return cost
        ep = self.layout.ep if self.layout is not None else 1
        floored = np.maximum(cost.time_s, eager_host_s(t, host_s, self.eager_host_unit, self.moe_path, ep))
        return StepCost(np.where(eager, floored, cost.time_s), cost.bytes, cost.flops)

    def _decode_bound(self, cost: StepCost, t: Table, tokens, requests) -> StepCost:
        """``cost`` of a decode pass of ``requests`` requests in an iteration of ``tokens`` over ``t``: the host floor
        where it runs eagerly by its tokens (:meth:`_eager`), then by its requests (:meth:`_capped`)."""
        return self._capped(self._host_bound(cost, t, self._eager(tokens, False)), t, requests)

    def _capped(self, cost: StepCost, t: Table, requests) -> StepCost:
        """``cost`` of a decode or verify pass over ``t`` floored at its kernels × ``decode_eager_host_s`` where its
        ``requests`` exceed ``decode_graph_requests`` (no graph holds so large a batch)."""
        if not self.decode_graph_requests:
            return cost
        return self._host_bound(cost, t, np.asarray(requests) > self.decode_graph_requests, self.decode_eager_host_s)

    def _piecewise_bound(self, cost: StepCost, t: Table, tokens: np.ndarray) -> StepCost:
        """``cost`` of a pass that prefills over ``t`` floored at the host time of its eager attention calls where it
        replays piecewise CUDA graphs: with graphs on, at most ``graph_tokens`` tokens (any count where none is
        set), and not every prefill eager (``eager_host_s`` without ``graph_tokens``)."""
        if not (self.piecewise_host_s and self.cuda_graphs) or (self.eager_host_s and not self.graph_tokens):
            return cost
        piecewise = tokens <= self.graph_tokens if self.graph_tokens else np.ones_like(tokens, dtype=bool)
        floored = np.maximum(cost.time_s, piecewise_host_s(t, self.piecewise_host_s))
        return StepCost(np.where(piecewise, floored, cost.time_s), cost.bytes, cost.flops)

    def _prefill_host(self, cost: StepCost, t: Table, tokens: np.ndarray) -> StepCost:
        """``cost`` of a pass that prefills over ``t``: the piecewise floor (:meth:`_piecewise_bound`), then
        ``moe_prefill_host_s`` × the routed-expert layers ``t`` runs added."""
        cost = self._piecewise_bound(cost, t, tokens)
        if not self.moe_prefill_host_s:
            return cost
        return StepCost(cost.time_s + t.routed_expert_layers * self.moe_prefill_host_s, cost.bytes, cost.flops)

    def _eager(self, tokens: np.ndarray, prefill: bool) -> bool | np.ndarray:
        """Whether a pass of ``tokens`` (holding a prefill token or not) runs without a CUDA graph: every pass where
        ``cuda_graphs`` is off; else one above ``graph_tokens``, and at or below it a pass that prefills where no
        ``graph_tokens`` is set (every prefill pass eager)."""
        below = not self.cuda_graphs or (prefill and not self.graph_tokens)
        return np.logical_or(below, tokens > self.graph_tokens) if self.graph_tokens else below

    def _part(self, part: Part, d, s, nc, c, pf, tokens, rows, has_prefill) -> StepCost:
        if part.encoder is not None:
            return self._encdec_part(part, d, s, nc, c, has_prefill)
        dec_s = Scenario(d, 1, s)
        if part.shared:
            pre_s = Scenario(nc, c, pf)
            mixed = _Mixed(dec_s, pre_s)
            t = part.prefill
            mv = self._fix(t, _mono(t, dec_s) + _mono(t, pre_s), tokens)
            out = []
            if (~has_prefill).any():
                dec_only = self._with_comm(self._time(t, mv, rows, tokens, True, s), part.decode_collectives, mixed)
                out.append(self._decode_bound(dec_only, t, tokens, d))
            if has_prefill.any():
                pre = self._mixed_time(t, mv, rows, tokens, (d, s, nc, c, pf))
                pre = self._host_bound(
                    self._with_comm(pre, part.prefill_collectives, mixed), t, self._eager(tokens, True)
                )
                out.append(self._prefill_host(pre, t, tokens))
            if len(out) == 1:
                return out[0]
            return StepCost(*(np.where(has_prefill, m, x) for m, x in zip(_parts(out[1]), _parts(out[0]), strict=True)))
        dt, pt = part.decode, part.prefill
        dec = self._time(dt, self._fix(dt, _mono(dt, dec_s), d), d, d, True, s)
        dec = self._decode_bound(self._with_comm(dec, part.decode_collectives, dec_s), dt, tokens, d)
        dec = StepCost(*(np.where(d > 0, x, 0.0) for x in _parts(dec)))  # no decoders: no decode pass
        if not has_prefill.any():
            return dec

        def prefill(nc, c, pf, tokens) -> StepCost:
            pre_s = Scenario(nc, c, pf)
            pre = self._time(pt, self._fix(pt, _mono(pt, pre_s), nc * c), nc, nc * c, decode=False)
            pre = self._host_bound(self._with_comm(pre, part.prefill_collectives, pre_s), pt, self._eager(tokens, True))
            return self._prefill_host(pre, pt, tokens)

        pre = _on_rows(has_prefill, prefill, nc, c, pf, tokens)
        return StepCost(*(np.where(has_prefill, a + b, a) for a, b in zip(_parts(dec), _parts(pre), strict=True)))

    def _encdec_part(self, part: Part, d, s, nc, c, has_prefill) -> StepCost:
        """An encoder-decoder iteration: ``d`` decoding requests (decoder context ``s``, the ``source``
        positions cross-attended) and ``nc`` new requests of ``c`` source tokens: their encoder pass and the
        decoder prefill of their start token (module doc)."""
        assert part.encoder is not None
        dec_s = Scenario(d, 1, s, src=self.source)
        dt, pt, et = part.decode, part.prefill, part.encoder
        dec = self._time(dt, self._fix(dt, _mono(dt, dec_s), d), d, d, True, s)
        dec = self._with_comm(dec, part.decode_collectives, dec_s)
        dec = StepCost(*(np.where(d > 0, x, 0.0) for x in _parts(dec)))  # no decoders: no decode pass
        if not has_prefill.any():
            return dec

        def encoder(nc, c) -> StepCost:
            enc_s = Scenario(nc, c)
            enc = self._time(et, self._fix(et, _mono(et, enc_s), nc * c), nc, nc * c, False)
            return self._with_comm(enc, part.encoder_collectives, enc_s)

        def prefill(nc, c) -> StepCost:
            pre_s = Scenario(nc, 1, 0, src=c)
            pre = self._time(pt, self._fix(pt, _mono(pt, pre_s), nc), nc, nc, False)
            return self._with_comm(pre, part.prefill_collectives, pre_s)

        enc, pre = _on_rows(has_prefill, encoder, nc, c), _on_rows(has_prefill, prefill, nc, c)
        both = zip(_parts(dec), _parts(enc), _parts(pre), strict=True)
        return StepCost(*(np.where(has_prefill, a + b + e, a) for a, b, e in both))

    def iteration(self, n_decode, context, n_chunks=0, chunk=0, prefix=0) -> StepCost:
        """One iteration: ``n_decode`` sequences at mean context ``context`` (each feeds one token and
        attends context + 1 positions) plus ``n_chunks`` prefill chunks of ``chunk`` tokens after ``prefix``
        cached positions. Arguments broadcast; ``n_chunks = 0`` is a pure decode step."""
        args = (n_decode, context, n_chunks, chunk, prefix)
        d, s, nc, c, pf = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in args))
        tokens = d + nc * c
        rows = d + nc  # logit rows: one per decoding sequence and one per chunk (its last position)
        has_prefill = (nc * c) > 0
        costs = [self._part(p, d, s, nc, c, pf, tokens, rows, has_prefill) for p in self.parts]
        cost = _total(costs)
        if self.host_step is None or not self.host_step.active:
            return cost
        return StepCost(self.host_step.step_s(cost.time_s, rows), cost.bytes, cost.flops)

    def verify(self, n_seqs, width, context) -> StepCost:
        """A speculative verify pass: ``n_seqs`` sequences each feeding ``width`` tokens after ``context``
        cached positions, on the decode operator list (MLA stays absorbed, as engines verify), timed as a
        decode iteration (graph-captured up to ``decode_graph_requests`` sequences, eager above)."""
        if self.spec.is_encoder_decoder:
            raise WorkloadError(f"{self.spec.name!r}: speculative decoding of encoder-decoder models is not modelled")
        b, w, s = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (n_seqs, width, context)))
        out = []
        for part in self.parts:
            t = part.decode
            scen = Scenario(b, w, s)
            cost = self._time(t, self._fix(t, _mono(t, scen), b * w), b, b * w, True, s)
            out.append(self._capped(self._with_comm(cost, part.decode_collectives, scen), t, b))
        return _total(out)


@lru_cache(maxsize=256)
def stage_parts(s: ModelSpec, a: str, L: Layout | None) -> tuple[Part, ...]:
    """Each pipeline stage's :class:`Part` of ``s`` under layout ``L`` (None: one device) and attention ``a``, once
    per (model, attention, layout): the devices of one replica that differ in their engine's terms share them."""
    ed = s.is_encoder_decoder
    if L is None or L.trivial:
        enc = table(s, "encoder", a) if ed else None
        return (Part(table(s, "prefill", a), table(s, "decode", a), params=param_report(s).total, encoder=enc),)
    pre, dec = rank_plans(s, "prefill", a, L), rank_plans(s, "decode", a, L)
    enc_p = rank_plans(s, "encoder", a, L) if ed else ()
    return tuple(
        Part(
            rank_table(s, "prefill", a, L, i),
            rank_table(s, "decode", a, L, i),
            pre[i].collectives,
            dec[i].collectives,
            sum(n * op.count for op in pre[i].ops + (enc_p[i].ops if ed else ()) for _, n in op.params)
            + (s.tower_total // L.tp if i == 0 else 0),  # a wrapper's towers: first stage, TP-split (vLLM)
            rank_table(s, "encoder", a, L, i) if ed else None,
            enc_p[i].collectives if ed else (),
        )
        for i in range(len(pre))
    )


def _on_rows(mask: np.ndarray, fn, *arrays: np.ndarray) -> StepCost:
    """``fn(*arrays)`` on the rows ``mask`` selects, zeros on the others (all selected: ``fn`` as given): a pass
    of prefill chunks is evaluated only where an iteration has them (a pass of no tokens has no batch)."""
    if mask.all():
        return fn(*arrays)
    cost = fn(*(a[mask] for a in arrays))
    out = []
    for x in _parts(cost):
        full = np.zeros(mask.shape)
        full[mask] = x
        out.append(full)
    return StepCost(*out)


def _total(costs: list[StepCost]) -> StepCost:
    """The pipeline stages of one pass, one after the other: their times, bytes and FLOPs add."""
    t, b, f = costs[0].time_s, costs[0].bytes, costs[0].flops
    for c in costs[1:]:
        t, b, f = t + c.time_s, b + c.bytes, f + c.flops
    return StepCost(t, b, f)


def _mono(t: Table, scen: Scenario) -> np.ndarray:
    """(…, n_monos) monomial values of ``scen`` for table ``t`` (one broadcast for all of them; the values
    are :meth:`Table.monomial_matrix`'s)."""
    vals = scen.monomials(t.monos, t.spec, t.moe_tokens)
    cols = [vals[m] for m in t.monos]
    out = np.empty(np.broadcast_shapes(*(np.shape(v) for v in cols)) + (len(cols),))
    for i, v in enumerate(cols):  # each broadcast into its column
        out[..., i] = v
    return out


@lru_cache(maxsize=1024)
def _totals(t: Table, p: Precision) -> np.ndarray:
    """(n_monos, 2): bytes and FLOPs (matmul + vector) of the whole pass per monomial, under ``p``'s bytes per
    element (keyed by the precision, whose hash is kept, rather than by the bytes' long tuple)."""
    flops = t.rhs(one_hot("flops")) + t.rhs(one_hot("vflops"))
    out = np.ascontiguousarray(np.stack([byte_rhs(t, p).sum(1), flops.sum(1)], axis=1))
    out.setflags(write=False)
    return out


@lru_cache(maxsize=512)
def _attention_table(t: Table) -> Table:
    """The table of ``t``'s :func:`~llmath.hardware.fitted_columns.attention_columns` alone, with all of ``t``'s
    monomials: every per-op read of the roofline (its rates, bytes, fitted fractions and overheads) is the op's
    own, so its times are those columns of ``t``'s, from the same monomial values."""
    j = attention_columns(t)
    per_op: dict[str, Any] = {}
    for name in ("coef", "kernels", "is_weight_mm", "is_kv_attention", "logit_rows", *_WEIGHT_ROWS):
        per_op[name] = np.ascontiguousarray(getattr(t, name)[j])
        per_op[name].setflags(write=False)
    return replace(t, ops=tuple(t.ops[i] for i in j), **per_op)


_WEIGHT_ROWS = ("weight_token_rows", "weight_logit_rows")


def _parts(s: StepCost) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return s.time_s, s.bytes, s.flops


# ---- memory the engine holds per sequence and per chunk ------------------------------------------------


def kv_bytes_per_sequence(spec: ModelSpec, positions, precision: Precision, attention: str = "flash", tab=None):
    """KV-cache bytes one sequence of ``positions`` positions holds: what the K/V operators write per token
    (the ``B·T`` terms of their ``kv_write`` class), windowed layers holding at most W positions."""
    t = table(spec, "decode", attention) if tab is None else tab
    if isinstance(positions, int | float):
        return _kv_scalar(t, positions, precision)
    return _kv_bytes(t, positions, precision)


@lru_cache(maxsize=4096)
def _kv_scalar(t: Table, positions, precision: Precision) -> float:
    return float(_kv_bytes(t, positions, precision))


def _kv_bytes(t: Table, positions, precision: Precision):
    total: float | np.ndarray = 0.0  # an array for an array of positions
    for per, window in _kv_writers(t):
        held = positions if window is None else np.minimum(positions, window)
        total = total + per * np.asarray(held, dtype=float)
    return total * precision.kv_bytes


@lru_cache(maxsize=4096)
def _kv_writers(t: Table) -> tuple[tuple[float, int | None], ...]:
    """(KV elements written per ``B·T`` row, attention window) of each op of ``t`` that writes the KV cache, in
    order: once per table (every weight format and context length asks again)."""
    ci, mi = CLASSES.index("kv_write"), t.monos.index("BT")
    return tuple((t.coef[o, ci, mi], op.window) for o, op in enumerate(t.ops) if t.coef[o, ci, mi])


@lru_cache(maxsize=4096)
def fixed_state_per_sequence(decode: Table, precision: Precision) -> float:
    """Fixed-size state bytes one sequence holds on a GPU (:func:`llmath.ops.state.fixed_state_bytes` of its decode
    operators), once per (table, precision)."""
    return fixed_state_bytes(decode.spec, precision, ops=decode.ops)


def cross_bytes_per_source(prefill: Table, precision: Precision) -> float:
    """Cross-attention cache bytes per source position of one sequence: what the decoder prefill's cross K/V
    projections write per ``B·src`` row (0 for decoder-only models)."""
    ci, monos = CLASSES.index("kv_write"), prefill.monos
    if "X" not in monos:
        return 0.0
    return float(prefill.coef[:, ci, monos.index("X")].sum()) * precision.kv_bytes


@lru_cache(maxsize=4096)
def chunk_activation_bytes(
    spec: ModelSpec, tokens: int, precision: Precision, attention: str = "flash", tab: Table | None = None
) -> float:
    """Live activations of one forward pass over ``tokens`` tokens: the widest operator's inputs + outputs,
    plus the residual stream (the same view of the operator list as the static report's activation peak)."""
    t = table(spec, "prefill", attention) if tab is None else tab
    return float(_activation_elements(t, tokens) * precision.act_bytes)


@lru_cache(maxsize=1024)
def _activation_elements(t: Table, tokens: int) -> np.ndarray:
    """:func:`chunk_activation_bytes` in elements, once per (table, tokens): every weight format asks again."""
    act = tuple(float(c in ("act_in", "act_out")) for c in CLASSES)
    per_op = (_mono(t, Scenario(1, np.asarray(tokens, dtype=float), 0)) @ t.rhs(act)) / t.kernels
    return per_op.max(-1) + tokens * t.spec.d_model
