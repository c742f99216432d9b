"""The planner's disaggregated finalists, re-timed by the closed loop ``llmath analyze --disagg`` runs.

The search (:mod:`.plan_search`, :func:`.disagg.disagg_grid`) ranks rate-matched pools fast: a request's TTFT is
one prefill pass, the concurrency the Little's-law count at the pools' rate. The benchmark clients' closed loop
(:func:`.disagg.serve_disaggregated`) on the same pools at that concurrency also waits for the passes already
scheduled and for the first wave's prompts, so its TTFT is larger (and its tokens/s lower). The planner reports
what the closed loop gives:

* **finalists**: the disaggregated rows on the grid's own Pareto front (tokens/s per GPU against tokens/s per
  user) among those meeting the targets by the grid's numbers, at most :data:`FINALISTS` of them spread evenly
  along the front, the one with the most tokens/s per GPU always kept. A pool whose grid misses the targets is
  not re-timed (its one-pass TTFT is at most the closed loop's at the same concurrency);
* **concurrency**: C₀ = the grid's Little's-law count, rounded (at least 1). When the closed loop at C₀ misses a
  target, the largest C < C₀ at which it meets them, by bisection of log C over [1, C₀] (:data:`BISECTIONS`
  halvings at most, keeping the last C that meets them: TTFT and TPOT grow with C); a finalist that misses them
  even at one client is dropped;
* each finalist's row is then :func:`~.disagg.serve_disaggregated`'s ``ttft_s``, ``tpot_s``, tokens/s and
  ``decode_batch`` at that C, its pools unchanged; the grid's numbers stay beside them as ``grid_*`` columns.
  The disaggregated rows that are not finalists leave the ranking.

``serve_disaggregated`` times fixed-length requests with the engine's default settings and flash attention: a
plan with ``prefix_hit``, ``gen_dist``, engine overrides or another attention keeps the grid's numbers, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmath.deploy.disagg import Pool, built_pool, pools_closed_loop
from llmath.deploy.plan_rows import canonical, pareto_mask
from llmath.deploy.plan_search import meets
from llmath.deploy.serving import Requests
from llmath.deploy.workload import PROMPTS_PER_CLIENT
from llmath.errors import LLMathError

FINALISTS = 16  # disaggregated rows re-timed by the closed loop (about 7 ms each, a few more when backing off)
BISECTIONS = 5  # halvings of log C over [1, C₀] when the closed loop at C₀ misses a target: C within C₀ ** (1 / 32)
GRID_COLUMNS = ("concurrency", "ttft_s", "tpot_s", "throughput_tok_s_per_gpu", "decode_batch")


@dataclass(frozen=True)
class Timing:
    """What :func:`~.disagg.serve_disaggregated` needs besides the pools: the model, hardware, each weight
    format's precision, engine, efficiency mode, the speculation of speculating rows, the request, the targets."""

    spec: Any
    hw: Any
    precisions: dict
    engine: str
    efficiency_mode: str
    speculation: Any
    req: Any
    targets: dict
    pools: dict = field(default_factory=dict)  # the rows' pools (.disagg.Pool), built once each (_at)


def unsupported(req, overrides: dict, attention: str) -> str:
    """Why the closed loop cannot time this plan's disaggregated rows ("" when it can)."""
    if req.prefix_hit or req.gen_dist:
        return "prefix_hit and gen_dist"
    if overrides:
        return "engine settings (" + ", ".join(sorted(overrides)) + ")"
    return "" if attention == "flash" else f"attention={attention}"


def finalists(arr: dict[str, np.ndarray], targets: dict) -> np.ndarray:
    """Indices of the disaggregated rows to re-time (module doc), fastest user first."""
    ok = (arr["mode"] == "disaggregated") & meets(arr["ttft_s"], arr["tpot_s"], **targets)
    idx = canonical(arr, np.flatnonzero(ok))
    if not len(idx):
        return idx
    thr, user = arr["throughput_tok_s_per_gpu"], arr["tok_s_per_user"]
    front = idx[pareto_mask(thr[idx], user[idx])]
    front = front[np.argsort(-user[front], kind="stable")]
    if len(front) > FINALISTS:
        spread = np.linspace(0, len(front) - 1, FINALISTS - 1).round().astype(int)
        keep = np.unique(np.append(spread, np.argmax(thr[front])))
        front = front[keep]
    return front


def retimed(arr: dict[str, np.ndarray], timing: Timing) -> tuple[dict[str, np.ndarray], int]:
    """``arr`` with its disaggregated rows replaced by the finalists as the closed loop times them (module doc),
    the grid's numbers as ``grid_*`` columns; (columns, rows)."""
    picked = finalists(arr, timing.targets)
    keep = arr["mode"] != "disaggregated"
    out = []
    for i in picked:
        s = _closed_loop(arr, int(i), timing)
        if s is not None:
            out.append((int(i), s))
    cols = {k: v[keep] for k, v in arr.items()}
    cols.update({f"grid_{k}": np.full(int(keep.sum()), np.nan) for k in GRID_COLUMNS})
    if out:
        rows = np.array([i for i, _ in out])
        new = {k: v[rows] for k, v in arr.items()}
        new.update({f"grid_{k}": arr[k][rows] for k in GRID_COLUMNS})
        for k, col in _timed_columns([s for _, s in out]).items():
            new[k] = col
        cols = {k: np.concatenate([cols[k], new[k]]) for k in cols}
    return cols, len(cols["mode"])


def _timed_columns(timed: list[dict]) -> dict[str, np.ndarray]:
    """The closed loop's numbers as the row's columns (tokens/s per user: 1 / TPOT, as every row's)."""
    col = {k: np.array([s[k] for s in timed], dtype=float) for k in ("ttft_s", "tpot_s", "decode_batch")}
    col["concurrency"] = np.array([s["concurrency"] for s in timed], dtype=float)
    col["throughput_tok_s"] = np.array([s["throughput_tok_s"] for s in timed], dtype=float)
    col["throughput_tok_s_per_gpu"] = np.array([s["throughput_tok_s_per_gpu"] for s in timed], dtype=float)
    col["tok_s_per_user"] = 1 / col["tpot_s"]
    return col


def _closed_loop(arr: dict[str, np.ndarray], i: int, timing: Timing) -> dict | None:
    """The closed loop on row ``i``'s pools at the concurrency of the module's rule (None: it misses the targets
    at every concurrency up to C₀, or its pools are refused)."""
    c0 = max(1, round(float(arr["concurrency"][i])))
    at = _at(arr, i, timing)
    try:
        s = at(c0)
        if _meets(s, timing.targets):
            return s
        lo, hi = 1, c0
        best = at(lo)
        if not _meets(best, timing.targets):
            return None
        for _ in range(BISECTIONS):
            if hi - lo <= 1:
                break
            mid = min(max(round((lo * hi) ** 0.5), lo + 1), hi - 1)  # halves log C: small C are found too
            s = at(mid)
            lo, hi, best = (mid, hi, s) if _meets(s, timing.targets) else (lo, mid, best)
        return best
    except LLMathError:
        return None


def _meets(s: dict, targets: dict) -> bool:
    return bool(meets(s["ttft_s"], s["tpot_s"], **targets))


def _at(arr: dict[str, np.ndarray], i: int, timing: Timing):
    """Row ``i``'s pools as ``llmath analyze --disagg`` runs them (:func:`~.disagg.serve_disaggregated`'s pools and
    closed loop), as a function of the concurrency: each pool built once per format, way of decoding and layout
    (``timing.pools``), whatever its workers and the concurrencies timed."""
    prefill = {"tp": int(arr["prefill_tp"][i])}
    decode = {k: int(arr[k][i]) for k in ("tp", "pp", "ep")} | {"dp": int(arr["decode_dp"][i])}
    workers = (int(arr["prefill_workers"][i]), int(arr["dp"][i]))
    speculating = "speculation" in arr and arr["speculation"][i] == 1
    fmt = str(arr["weights"][i])
    req = Requests(timing.req.prompt, timing.req.gen)  # fixed lengths, as serve_disaggregated takes them

    def pool(name: str, layout: dict) -> Pool:
        key = (fmt, speculating, name, *layout.values())
        if key not in timing.pools:
            sd = timing.speculation if speculating else None
            run = (timing.spec, timing.hw, timing.precisions[fmt], timing.engine, timing.efficiency_mode, req, sd)
            timing.pools[key] = built_pool(*run, None, None, name, layout)
        return timing.pools[key]

    def at(c: int) -> dict:
        # plan() has refused requests past the context, or carries the note of allow_long_context
        pools = (pool("prefill", prefill), pool("decode", decode))
        s = pools_closed_loop(pools, workers, timing.hw, timing.engine, req, float(c), PROMPTS_PER_CLIENT)
        return {**s, "concurrency": float(c)}

    return at
