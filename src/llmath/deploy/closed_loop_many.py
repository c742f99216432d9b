"""Several replicas' closed loops in one evaluation: :func:`~.closed_loop.lockstep_state` over many layouts.

A search evaluates the closed loop of every candidate layout at a few dozen concurrencies; each evaluation is
a few hundred numpy calls on arrays of that size, so the calls, not the arithmetic, set its cost. The
closed-loop formulas are element-wise in the concurrency once each replica's iteration times are known, and
they read of the engine, the requests and the decoding only scalars that the replicas of one search share.
:func:`lockstep_states` therefore concatenates the replicas' concurrency grids that share those scalars
(same engine settings, requests, way of decoding and efficiency) into one axis and calls
:func:`~.closed_loop.lockstep_state` itself once over it: its iteration times come from each replica's own
:meth:`~.serving.Decoding.step`, ``mixed`` and ``mixed_and_step`` on its own slice (:class:`_Stacked`),
its ``max_resident`` is each point's replica's. The numbers are the formulas' own, element for element
(tests/test_closed_loop_many.py compares them with one call per replica); the one reduction over the points,
the number of burst positions summed one by one (``closed_loop.iterations_ahead``), only adds zero terms to the replicas
that need fewer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from llmath.deploy.closed_loop import lockstep_state
from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.serving import Decoding, Requests, SteadyState


@dataclass(frozen=True)
class _Stacked(Decoding):
    """Replicas decoding alike (the first one's ``dev``, ``spec`` and ``draft`` stand for all: what the
    formulas read of them is shared), their points concatenated: ``bounds[i]:bounds[i + 1]`` are replica
    ``i``'s."""

    members: tuple[Decoding, ...] = ()
    bounds: tuple[int, ...] = ()

    def step(self, d, ctx) -> np.ndarray:
        """Each replica's own :meth:`~.serving.Decoding.step` on its points (the last axis), concatenated."""
        return self._each("step", d, ctx)

    def mixed(self, d, ctx, n, c, pf) -> np.ndarray:
        """Each replica's own :meth:`~.serving.Decoding.mixed` on its points (the last axis), concatenated."""
        return self._each("mixed", d, ctx, n, c, pf)

    def _each(self, method: str, *args) -> np.ndarray:
        points = self.bounds[-1]
        shape = np.broadcast_shapes(*(np.shape(x) for x in args))
        shape = (*shape[:-1], points) if shape and shape[-1] in (1, points) else (*shape, points)
        full = [np.broadcast_to(np.asarray(x, dtype=float), shape) for x in args]
        spans = zip(self.bounds[:-1], self.bounds[1:], strict=True)
        outs = [getattr(m, method)(*(x[..., a:b] for x in full)) for m, (a, b) in zip(self.members, spans, strict=True)]
        return np.concatenate(outs, axis=-1)

    def mixed_and_step(self, d, d_step, ctx, n, c, pf) -> tuple[np.ndarray, np.ndarray]:
        """Each replica's own :meth:`~.serving.Decoding.mixed_and_step` on its points (the last axis), concatenated."""
        d, n, c, pf = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (d, n, c, pf)))
        d_step = np.broadcast_to(np.asarray(d_step, dtype=float), (len(d_step), *d.shape[1:]))
        spans = zip(self.bounds[:-1], self.bounds[1:], strict=True)
        outs = [m.mixed_and_step(d[..., a:b], d_step[..., a:b], ctx, n[..., a:b], c[..., a:b], pf[..., a:b])
                for m, (a, b) in zip(self.members, spans, strict=True)]  # fmt: skip
        return np.concatenate([o[0] for o in outs], axis=-1), np.concatenate([o[1] for o in outs], axis=-1)

    def select(self, mask) -> Decoding:
        """The replicas of the points ``mask`` selects, each with those points."""
        counts = [int(np.count_nonzero(mask[a:b])) for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        members = tuple(m for m, n in zip(self.members, counts, strict=True) if n)
        bounds = tuple(np.cumsum([0] + [n for n in counts if n]).tolist())
        return replace(self, members=members, bounds=bounds)


def _key(dec: Decoding, eng: EngineConfig) -> tuple:
    """What the closed-loop formulas read of a replica besides its iteration times: the engine's settings, the
    way it decodes (tokens and budget per step) and its efficiency (whether overheads apply)."""
    return (eng, dec.spec, dec.dev.eff)


def lockstep_states(items: list[tuple[Decoding, EngineConfig, np.ndarray, int]], req: Requests) -> list[SteadyState]:
    """:func:`~.closed_loop.lockstep_state` of each (decoding, engine, concurrencies, max_resident) for the
    requests ``req`` (every client replacing its request, the default prompts per client), in order: one
    evaluation per group of replicas that share an engine, a way of decoding and an efficiency (module doc)."""
    groups: dict[tuple, list[int]] = {}
    for i, (dec, eng, _, _) in enumerate(items):
        groups.setdefault(_key(dec, eng), []).append(i)
    out: list[SteadyState | None] = [None] * len(items)
    for idx in groups.values():
        for i, ss in zip(idx, _group([items[i] for i in idx], req), strict=True):
            out[i] = ss
    return [ss for ss in out if ss is not None]


def _group(items: list[tuple[Decoding, EngineConfig, np.ndarray, int]], req: Requests) -> list[SteadyState]:
    """One :func:`~.closed_loop.lockstep_state` call over the concatenated points of replicas of one group."""
    if len(items) == 1:
        dec, eng, c, top = items[0]
        return [lockstep_state(dec, eng, req, c, top)]
    grids = [np.asarray(c, dtype=float) for _, _, c, _ in items]
    bounds = tuple(np.cumsum([0] + [len(g) for g in grids]).tolist())
    first = items[0][0]
    stacked = _Stacked(first.dev, first.spec, first.draft, tuple(d for d, _, _, _ in items), bounds)
    tops = np.concatenate([np.full(len(g), float(top)) for g, (_, _, _, top) in zip(grids, items, strict=True)])
    ss = lockstep_state(stacked, items[0][1], req, np.concatenate(grids), tops)  # type: ignore[arg-type]
    return [_slice(ss, a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _slice(ss: SteadyState, a: int, b: int) -> SteadyState:
    """The points ``a:b`` of every per-point field (a scalar field stays as it is)."""
    n = len(ss.concurrency)
    cut = {f.name: v[a:b] for f in fields(ss) if np.ndim(v := getattr(ss, f.name)) and len(v) == n}
    return replace(ss, **cut)
