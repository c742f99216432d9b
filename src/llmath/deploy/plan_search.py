"""The planner's pruning: what lets :func:`llmath.deploy.plan.plan` skip configurations that cannot win.

Three rules, each exact under the serving model's own structure (:mod:`.step`, :mod:`.serving`,
:mod:`.disagg`), so the pruned search finds the exhaustive search's ``best`` and ``pareto``:

* **memory bound**: every weight is held by some GPU of a replica, so its busiest GPU holds at least
  (all weights) / (its GPUs); a layout where that alone leaves no KV pool (≥ the engine's weight budget)
  does not fit, and is rejected before any operator is sharded;
* **pipeline dominance**: an iteration takes the sum of its pipeline stages' times (a batch flows through
  them in turn), so more stages of the same TP/DP/EP family add GPUs without shortening an iteration:
  at the same decode batch they give ≤ the tokens/s per GPU at ≥ the TPOT. They can only win by holding
  more requests. Once a family's layout cannot meet the targets at the batch its memory admits, the
  latency targets, not memory, bound it, and its deeper pipelines are dominated: they are not evaluated;
* **sampled curves**: an aggregated layout is first evaluated at a sample of its concurrencies; between
  two samples its tokens/s per GPU and per user are bounded by theirs (:func:`live_stretches`), and only the
  stretches the front does not already beat are evaluated point by point;
* **disaggregated bound**: a rate-matched pool of x prefill workers (r_p requests/s on g_p GPUs each) and
  y = ⌈x·r_p / r_d⌉ decode workers (r_d at decode batch B on g_d GPUs) delivers at most
  r_p·G / (g_p + (r_p / r_d)·g_d) tokens/s per GPU (the ceiling only adds GPUs), at TPOT τ_d(B) for every x.
  A (pair, B) whose bound is beaten at an equal or faster TPOT by a configuration already found cannot
  reach the front; the rest are evaluated exactly by :func:`.disagg.disagg_grid`, each decode worker's
  iterations timed once for all the prefill workers it pairs with (:class:`DecodeCurve`).

The search's cost then grows with the layouts that could win, not with the GPUs: a replica's tokens/s per
GPU do not depend on how many copies of it run side by side.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.plan_rows import pareto_mask
from llmath.deploy.serving import Decoding
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops.params import param_report

SLACK = 1e-9  # relative: bounds computed by another formula than the exact values they bound


def weights_leave_no_pool(spec: ModelSpec, p: Precision, eng: EngineConfig, capacity: float, gpus: int) -> bool:
    """Whether a replica of ``gpus`` GPUs cannot fit: its busiest GPU's weights (≥ the mean) already reach
    the engine's budget (``gpu_memory_utilization`` × capacity, or the whole device when the fraction
    applies to what weights leave), before activations, graphs and one request's KV."""
    mean = param_report(spec).total * p.weight_bytes / gpus
    budget = capacity if eng.kv_fraction_of_free else eng.gpu_memory_utilization * capacity
    return mean >= budget


def families(keys: list[tuple[int, int, int, int]]) -> list[list[tuple[int, int, int, int]]]:
    """(tp, pp, dp, ep) layouts grouped by (tp, dp, ep), each group by pipeline depth ascending."""
    groups: dict[tuple[int, int, int], list[tuple[int, int, int, int]]] = {}
    for k in keys:
        groups.setdefault((k[0], k[2], k[3]), []).append(k)
    return [sorted(g, key=lambda k: k[1]) for g in groups.values()]


def meets(ttft_s, tpot_s, ttft_ms: float | None, tpot_ms: float | None) -> np.ndarray:
    """Element-wise: the latency targets hold (no target: always)."""
    ok = np.ones(np.shape(tpot_s), dtype=bool)
    if ttft_ms is not None:
        ok &= np.asarray(ttft_s) <= ttft_ms / 1e3
    if tpot_ms is not None:
        ok &= np.asarray(tpot_s) <= tpot_ms / 1e3
    return ok


class Frontier:
    """The Pareto front (tokens/s per GPU, tokens/s per user) of the feasible configurations found so far."""

    def __init__(self) -> None:
        self.thr = np.empty(0)
        self.user = np.empty(0)

    def add(self, thr: np.ndarray, user: np.ndarray) -> None:
        x, y = np.concatenate([self.thr, thr]), np.concatenate([self.user, user])
        keep = pareto_mask(x, y)
        order = np.argsort(-y[keep])  # fastest user first: a prefix holds every point at least as fast
        self.thr, self.user = x[keep][order], y[keep][order]

    def beats(self, thr_bound: np.ndarray, user: np.ndarray) -> np.ndarray:
        """Element-wise: a found point has ≥ ``user`` tokens/s per user and more than ``thr_bound`` per GPU."""
        if not len(self.thr):
            return np.zeros(np.shape(thr_bound), dtype=bool)
        n = np.searchsorted(-self.user, -np.asarray(user), side="right")  # points with user' ≥ user
        best = np.maximum.accumulate(self.thr)[np.maximum(n - 1, 0)]
        return (n > 0) & (best >= np.asarray(thr_bound) * (1 + SLACK))


class DecodeCurve:
    """A decode worker's decoding (one token per step, or speculative rounds: :class:`~.serving.Decoding`) whose
    pure-decode steps over its batch grid are timed once: every pair it joins (:func:`.disagg.disagg_grid`
    calls ``step(B, context)``) reads them back."""

    def __init__(self, decoding: Decoding, batches: np.ndarray, context: float):
        self.decoding = decoding
        self.dev, self.draft, self.tokens = decoding.dev, decoding.draft, decoding.tokens
        self.batches = np.asarray(batches, dtype=float)
        self.context = context
        self.step_s = np.broadcast_to(decoding.step(self.batches[:, None], context), (len(self.batches), 1))[:, 0]

    def step(self, n_decode, context) -> np.ndarray:
        b = np.asarray(n_decode, dtype=float)
        i = np.clip(np.searchsorted(self.batches, b), 0, len(self.batches) - 1)
        if context != self.context or not np.array_equal(self.batches[i], b):
            return self.decoding.step(n_decode, context)
        return self.step_s[i]


def disagg_bound(requests_s: float, g_prefill: int, r_decode: np.ndarray, g_decode: int, mean_gen: float):
    """Tokens/s per GPU a rate-matched pool reaches at most (module doc), per decode batch."""
    return requests_s * mean_gen / (g_prefill + requests_s / r_decode * g_decode)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` of a 1-d array without NaN (the same values): ``np.unique`` imports ``numpy.ma``, 10 ms of
    a process's start-up."""
    x = np.sort(x)
    return x[np.concatenate(([True], x[1:] != x[:-1]))] if len(x) else x


def decode_batches(max_resident: int) -> np.ndarray:
    """The decode batches :func:`.disagg.disagg_grid` searches by default (a geometric grid to what fits)."""
    return sorted_unique(np.geomspace(1, max(max_resident, 1), 128).round())


class PairCell:
    """One (prefill worker, decode worker) pair over the decode worker's batches: each batch's bound
    (:func:`disagg_bound`) and tokens/s per user, and whether it can meet the TPOT target and fit."""

    def __init__(self, pre, dec, pw, curve: DecodeCurve, max_batch: int, req, gpus: int, targets: dict, handoff):
        from llmath.deploy.disagg import decode_tpot_s

        self.pre, self.dec, self.pw, self.curve = pre, dec, pw, curve
        self.max_batch, self.req, self.gpus, self.targets = max_batch, req, gpus, targets
        self.eng, self.kv_s = handoff  # the decode pool's engine and the KV transfer's seconds
        # seconds per output token (a round over the tokens it yields, the engine's overheads included)
        tau = decode_tpot_s(cast(Decoding, curve), self.eng, curve.batches, req.decode_context)
        r_d = dec.dp * curve.batches / (max(req.decode_steps, 1.0) * tau)  # each attention-DP rank holds B
        self.bound = disagg_bound(pw.requests_s, pre.gpus, r_d, dec.gpus, req.mean_gen)
        one = pre.gpus + np.ceil(pw.requests_s / r_d) * dec.gpus  # one prefill worker and its decode pool
        self.user = 1 / tau
        self.possible = meets(0.0, tau, None, targets["tpot_ms"]) & (one <= gpus)
        self.top = float(self.bound[self.possible].max()) if self.possible.any() else -np.inf

    def grid(self, front: Frontier):
        """The exact grid of the batches the front does not already beat (None when none is left, or when
        the pair's TTFT misses its target)."""
        from llmath.deploy.disagg import disagg_grid

        todo = self.possible & ~front.beats(self.bound, self.user)
        if not todo.any():
            return None
        pre, dec = self.pre, self.dec
        args = (self.pw, cast(Decoding, self.curve), self.req, self.max_batch, self.gpus, pre.gpus, dec.gpus, self.kv_s)
        first = disagg_grid(*args, batches=self.curve.batches[todo][:1], eng=self.eng)
        if not meets(first.ttft_s.flat[0], 0.0, self.targets["ttft_ms"], None):
            return None
        return disagg_grid(*args, batches=self.curve.batches[todo], eng=self.eng)


def live_stretches(front: Frontier, thr: np.ndarray, user: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Which stretches between consecutive sampled concurrencies could still hold a point of the front. As
    concurrency grows, a layout's tokens/s per GPU grow and its tokens/s per user and its latencies' slack
    shrink, so a point between samples i and i + 1 has at most the larger of their tokens/s per GPU, at
    most sample i's tokens/s per user, and meets the targets only if sample i does."""
    hi = np.maximum(thr[:-1], thr[1:])
    return ok[:-1] & ~front.beats(hi, user[:-1])
