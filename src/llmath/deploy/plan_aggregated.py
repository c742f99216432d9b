"""The planner's aggregated layouts: each replica's concurrency grid, its sample, and the stretches between
samples that could still reach the front (:mod:`.plan_search`'s sampled curves and pipeline dominance).

The pruned search samples the layouts of every TP/DP/EP family at once, one pipeline depth per family and
round (:func:`sample_round`): the closed loops of a round are one evaluation per engine and way of decoding
(:func:`.closed_loop_many.lockstep_states`), instead of one per layout. A family goes one stage deeper in the
next round only while memory, not the targets, bounds it. What each family found (its rows, rejections and
samples) is kept in its own :class:`Family` and handed on in the family order, so the search's rows,
rejections and refinement order are those of visiting the families one after the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from llmath.deploy.budget import poll
from llmath.deploy.closed_loop import lockstep_state
from llmath.deploy.closed_loop_many import lockstep_states
from llmath.deploy.disagg import pool_memory as _pool_memory
from llmath.deploy.plan_rows import add_served
from llmath.deploy.plan_search import Frontier, live_stretches, meets, sorted_unique
from llmath.deploy.serving import Decoding, Requests

if TYPE_CHECKING:
    from llmath.deploy.plan import Replica

GRID = 1024  # concurrency points per replica layout (vectorised: more points cost little)
SAMPLE = 24  # of them first evaluated by the pruned search (plan_search.live_stretches)


# a pool's memory once per (device, engine, requests, draft, method): a search asks again for the pools that are
# both aggregated replicas and disaggregated workers
pool_memory = lru_cache(maxsize=1024)(_pool_memory)


def grid(rep: Replica, eng, req: Requests, gpus: int, fmt: str, rejected: list, dec, draft: str) -> tuple | None:
    """(concurrency grid of one replica, its memory with ``dec``'s draft of method ``draft`` (its weights and
    KV, :func:`.disagg.pool_memory`), attention replicas in all, instances), or None when the layout does not
    fit (listed under ``rejected``)."""
    mem = pool_memory(rep.held, eng, req, dec.draft, draft)  # serve's: no engine term is memory
    inst = gpus // rep.gpus  # engine instances side by side
    where = {"mode": "aggregated", "weights": fmt, "tp": rep.tp, "pp": rep.pp, "ep": rep.ep, "dp": rep.dp}
    if not mem.fits or inst < 1:
        why = ("does not fit" + (" with the draft" if draft else "")) if not mem.fits else f"needs {rep.gpus} GPUs"
        rejected.append({**where, "reason": why})
        return None
    c = sorted_unique(np.round(np.geomspace(1, mem.max_resident, GRID)))
    return c, mem, inst * rep.dp, inst  # dp: attention replicas, each serving its share of the requests


def agg_rows(rep: Replica, fmt: str, dp: int, inst: int, c: np.ndarray, ss, cols: list, spec: bool) -> int:
    n, layout, latency = len(c), ("aggregated", fmt, rep, dp), (c * dp, ss.ttft_s, ss.tpot_s)
    add_served(cols, n, layout, latency, ss.throughput_tok_s * dp, inst * rep.gpus, speculation=float(spec))
    return n


@dataclass
class Sampled:
    """An aggregated layout evaluated at a sample of its concurrency grid ``c`` (indices ``at``), the rest
    left to :func:`refine`."""

    rep: Replica
    dec: Decoding
    eng: Any
    req: Requests
    fmt: str
    c: np.ndarray
    at: np.ndarray
    max_resident: int
    dp: int
    inst: int
    thr: np.ndarray  # tokens/s per GPU at the samples
    user: np.ndarray
    ok: np.ndarray  # the samples meeting the targets

    def live(self, front: Frontier) -> np.ndarray:
        return live_stretches(front, self.thr, self.user, self.ok)

    def top(self, front: Frontier) -> float:
        """The most tokens/s per GPU a live stretch may hold (−inf: none live)."""
        live = self.live(front)
        return float(np.maximum(self.thr[:-1], self.thr[1:])[live].max()) if live.any() else -np.inf


@dataclass
class Family:
    """One TP/DP/EP family's layouts by pipeline depth (``keys``; ``at``: the next to build), and what the
    search found of it: whether any layout is valid, its rejections, rows, samples and points evaluated."""

    keys: list
    at: int = 0
    valid: bool = False
    rejected: list = field(default_factory=list)
    cols: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    n: int = 0


def _sample(n: int) -> np.ndarray:
    """``SAMPLE`` indices spread evenly over a grid of ``n`` points, its ends included."""
    return sorted_unique(np.linspace(0, n - 1, min(SAMPLE, n)).round().astype(int))


def sample_round(picked: list[tuple[Family, Replica, int]], search: Any, front: Frontier) -> list[Family]:
    """Each picked family's layout (a replica on ``use`` GPUs) at ``SAMPLE`` points of its grid, every way it
    may decode (``search``'s engine, requests, format, targets, decodings), as rows of its family; the
    families whose next pipeline depth could still win (the targets did not bound this one)."""
    todo = []
    for fam, rep, use in picked:
        eng = search.engine_at(rep.tp)
        for dec, draft in search.decodings(rep):
            g = grid(rep, eng, search.req, use, search.fmt, fam.rejected, dec, draft)
            todo.append((fam, rep, eng, dec, None if g is None else (*g, _sample(len(g[0])))))
    items = [(dec, eng, g[0][g[4]], g[1].max_resident) for _, _, eng, dec, g in todo if g is not None]
    states = iter(lockstep_states(items, search.req))
    bound = {id(fam): True for fam, _, _ in picked}  # each way of decoding: dominated by pipeline depth alone
    for fam, rep, eng, dec, g in todo:
        if g is None:
            bound[id(fam)] = False
            continue
        c, mem, dp, inst, at = g
        ss = next(states)
        agg_rows(rep, search.fmt, dp, inst, c[at], ss, fam.cols, dec.spec is not None)
        ok = meets(ss.ttft_s, ss.tpot_s, **search.targets)
        thr = ss.throughput_tok_s * dp / (inst * rep.gpus)
        s = Sampled(rep, dec, eng, search.req, search.fmt, c, at, mem.max_resident, dp, inst, thr, 1 / ss.tpot_s, ok)
        fam.n += len(at)
        fam.samples.append(s)
        front.add(s.thr[s.ok], s.user[s.ok])
        bound[id(fam)] = bound[id(fam)] and not s.ok[-1]
    return [fam for fam, _, _ in picked if not bound[id(fam)]]


def refine(samples: list[Sampled], front: Frontier, cols: list, targets: dict) -> int:
    """The concurrencies between samples that the front does not beat, the most promising layout first
    (each one's points tighten the front for the next); how many."""
    n = 0
    for s in sorted(samples, key=lambda s: -s.top(front)):
        poll()
        todo = np.zeros(len(s.c), dtype=bool)
        for i in np.flatnonzero(s.live(front)):
            todo[s.at[i] + 1 : s.at[i + 1]] = True
        if not todo.any():
            continue
        ss = lockstep_state(s.dec, s.eng, s.req, s.c[todo], s.max_resident)
        n += agg_rows(s.rep, s.fmt, s.dp, s.inst, s.c[todo], ss, cols, s.dec.spec is not None)
        ok = meets(ss.ttft_s, ss.tpot_s, **targets)
        front.add((ss.throughput_tok_s * s.dp / (s.inst * s.rep.gpus))[ok], (1 / ss.tpot_s)[ok])
    return n
