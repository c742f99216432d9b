"""The planner's table of configurations: rows gathered as column batches, the Pareto front and the best.

Every configuration is a row (``mode``, ``weights``, the layout, concurrency, latencies, tokens/s); the search
appends them in batches (:func:`add`) and :func:`select` picks ``best`` and ``pareto`` among those meeting the
targets, in an order that does not depend on the order the search found them in (:func:`canonical`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

COLUMNS = (
    "tp",
    "pp",
    "ep",
    "dp",
    "concurrency",
    "ttft_s",
    "tpot_s",
    "throughput_tok_s",
    "throughput_tok_s_per_gpu",
    "tok_s_per_user",
    "gpus_used",
)


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Points not dominated in (x, y), both maximised: no other point has x' ≥ x and y' ≥ y with one >."""
    order = np.lexsort((-x, -y))  # by y descending, ties by x descending
    xs = x[order]
    best_before = np.maximum.accumulate(np.concatenate([[-np.inf], xs[:-1]]))
    keep_sorted = xs > best_before
    keep = np.zeros(len(x), dtype=bool)
    keep[order[keep_sorted]] = True
    return keep


def dedupe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out, seen = [], set()
    for r in rows:
        key = tuple(sorted(r.items()))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def add(cols: list, n: int, **kw) -> None:
    cols.append((n, {k: _column(np.asarray(v), n) for k, v in kw.items()}))


def _column(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` as ``n`` rows: itself when it has them, a scalar repeated (its own dtype) otherwise."""
    if a.shape == (n,):
        return a
    return np.full(n, a) if a.ndim == 0 else np.broadcast_to(a, (n,))


def add_served(cols: list, n: int, layout: tuple, latency: tuple, thr: Any, gpus_used: Any, **more: Any) -> None:
    """``n`` rows of one served layout: ``layout`` = (mode, weights, replica, dp: its replicas), ``latency`` =
    (concurrency, TTFT, TPOT), ``thr`` tokens/s on ``gpus_used`` GPUs (per GPU: thr / GPUs; per user: 1 / TPOT)."""
    mode, weights, rep, dp = layout
    concurrency, ttft, tpot = latency
    add(cols, n, mode=mode, weights=weights, tp=rep.tp, pp=rep.pp, ep=rep.ep, dp=dp, concurrency=concurrency,
        ttft_s=ttft, tpot_s=tpot, throughput_tok_s=thr, throughput_tok_s_per_gpu=thr / gpus_used,
        tok_s_per_user=1 / tpot, gpus_used=gpus_used, **more)  # fmt: skip


def columns(batches: list) -> dict[str, np.ndarray]:
    """One array per column over every batch (columns a batch lacks, e.g. the disaggregated ones: NaN)."""
    keys = dict.fromkeys(k for _, b in batches for k in b)
    return {k: np.concatenate([b[k] if k in b else np.full(n, np.nan) for n, b in batches]) for k in keys}


def rows(cols: dict[str, np.ndarray], idx: np.ndarray, cost: float | None, spec: Any = None) -> list[dict]:
    """The configurations ``idx`` as plain dicts (one ``tolist`` per column, not per cell); a row decoding
    speculatively (column ``speculation`` = 1) carries ``spec``'s method, k, acceptance and draft model, the
    others None."""
    said = None
    if spec is not None:
        draft = getattr(spec.draft_model, "name", spec.draft_model)  # a ModelSpec by its name
        said = {"method": spec.method, "k": spec.k, "acceptance": spec.acceptance, "draft_model": draft}
    sel = {k: v[idx].tolist() for k, v in cols.items()}
    ints = ("tp", "pp", "ep", "dp", "gpus_used")
    out = []
    for j in range(len(idx)):
        r: dict[str, Any] = {"mode": sel["mode"][j], "weights": sel["weights"][j]}
        r.update({k: (int(sel[k][j]) if k in ints else sel[k][j]) for k in COLUMNS})
        r["speculation"] = said if "speculation" in sel and sel["speculation"][j] == 1 else None
        if r["mode"] == "disaggregated":
            r["prefill_workers"] = int(sel["prefill_workers"][j])
            r["prefill_tp"] = int(sel["prefill_tp"][j])
            r["decode_workers"] = r["dp"]
            r["decode_batch"] = sel["decode_batch"][j]
            r["decode_dp"] = int(sel["decode_dp"][j])  # the decode replica's attention-DP ranks
            r["kv_transfer_s"] = sel["kv_transfer_s"][j]
        if cost is not None:
            r["usd_per_million_tokens"] = cost / 3600 / r["throughput_tok_s_per_gpu"] * 1e6
        out.append(r)
    return out


def none_meets() -> tuple:
    return None, [], ["no configuration meets the targets: best and pareto are empty; relax --ttft-ms/--tpot-ms"]


def select(arr: dict[str, np.ndarray], n: int, ttft_ms, tpot_ms, cost, spec: Any = None) -> tuple:
    """(best, Pareto front, notes) among the configurations meeting the targets (``spec``: the
    :class:`~.speculative.Speculation` a speculating row decodes with, :func:`rows`)."""
    ok = np.ones(n, dtype=bool)
    if ttft_ms is not None:
        ok &= arr["ttft_s"] <= ttft_ms / 1e3
    if tpot_ms is not None:
        ok &= arr["tpot_s"] <= tpot_ms / 1e3
    if not ok.any():
        return none_meets()
    idx = canonical(arr, np.flatnonzero(ok))  # of identical points, the first in this order is kept
    thr = arr["throughput_tok_s_per_gpu"][idx]
    tied = idx[thr == thr.max()]  # equal tokens/s per GPU (pools limited by the same prefill): the faster per user
    best = int(tied[np.argmax(arr["tok_s_per_user"][tied])])
    front = idx[pareto_mask(arr["throughput_tok_s_per_gpu"][idx], arr["tok_s_per_user"][idx])]
    front = front[np.argsort(-arr["tok_s_per_user"][front], kind="stable")]
    return rows(arr, np.array([best]), cost, spec)[0], rows(arr, front, cost, spec), []


def canonical(arr: dict[str, np.ndarray], idx: np.ndarray) -> np.ndarray:
    """``idx`` ordered by the configuration (mode, weights, layout, concurrency, pools), whatever order the
    search found them in: layouts that give identical numbers resolve the same way in any search."""
    keys = ["concurrency", "decode_batch", "prefill_workers", "prefill_tp", "dp", "ep", "pp", "tp", "speculation"]
    cols = [np.nan_to_num(arr[k][idx], nan=-1.0) for k in keys if k in arr]
    return idx[np.lexsort([*cols, arr["weights"][idx], arr["mode"][idx]])]
