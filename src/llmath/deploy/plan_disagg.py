"""The planner's disaggregated pairs: a prefill worker's layout and a decode worker's, rate-matched over a grid of
decode batches (:func:`.disagg.disagg_grid`), as rows.

Each pool runs as :func:`.disagg.serve_disaggregated` runs it: its replica built by
:func:`.engine_device.pool_device` with the engine's hardware and precision terms
(:func:`.engine_device.engine_terms`), the prefill pool's passes eager where the engine's are (``eager_prefill``),
and each pool's engine settings at its own TP degree (a memory share, a token budget), admitting without the
new-token reserve. What stays the grid's own is its queueing: rate-matched pools, a request's TTFT one prefill
pass; the finalists the plan returns are re-timed by the closed loop (:mod:`.plan_finalists`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from llmath.deploy.disagg import disagg_grid, kv_transfer_s, pool_decoding, prefill_worker
from llmath.deploy.plan_aggregated import pool_memory
from llmath.deploy.plan_rows import add_served
from llmath.deploy.plan_search import DecodeCurve, PairCell, decode_batches

if TYPE_CHECKING:
    from llmath.deploy.plan import Replica
    from llmath.deploy.serving import Requests
    from llmath.deploy.speculative import Speculation
    from llmath.deploy.step import Device


def _workers(rep: Replica) -> tuple[Device, Device]:
    """(decode worker, prefill worker) of a one-stage layout of a plan searching disaggregated pools."""
    return cast("Device", rep.device), cast("Device", rep.prefill)


def unfit_pair(fmt: str, prefill_tp: int, decode_tp: int, sd=None) -> dict[str, Any]:
    why = "does not fit" + (" with the draft" if sd is not None else "")
    return {"mode": "disaggregated", "weights": fmt, "prefill_tp": prefill_tp, "decode_tp": decode_tp, "reason": why}


def pair(search: Any, pre: Replica, dec: Replica, gpus: int, cols: list, rejected: list, sd=None) -> int:
    """The pair's rate-matched pools, both decoding as ``sd`` (a Speculation, or None: one token per step), each
    with ``search``'s engine at its TP degree (``search.pool_engine``); how many rows."""
    req, fmt, method = search.req, search.fmt, sd.method if sd else ""
    p_eng, d_eng = search.pool_engine(pre.tp), search.pool_engine(dec.tp)
    p_dev, d_dev = _workers(pre)[1], _workers(dec)[0]
    p_dec, d_dec = pool_decoding(p_dev, sd), pool_decoding(d_dev, sd)
    mem_p = pool_memory(pre.held, p_eng, req, p_dec.draft, method)  # the eager launches hold no memory
    mem_d = pool_memory(d_dev, d_eng, req, d_dec.draft, method)
    if not (mem_p.fits and mem_d.fits) or pre.gpus + dec.gpus > gpus:
        rejected.append(unfit_pair(fmt, pre.tp, dec.tp, sd))
        return 0
    pw = prefill_worker(p_dev, p_eng, req, p_dec.draft)
    kv_s = kv_transfer_s(p_dec, req.prompt, p_dev.hw, d_dev)
    g = disagg_grid(pw, d_dec, req, mem_d.max_resident, gpus, pre.gpus, dec.gpus, kv_s, eng=d_eng)
    return disagg_rows(g, pre, dec, req, gpus, fmt, cols, sd is not None)


def disagg_rows(g, pre: Replica, dec: Replica, req: Requests, gpus: int, fmt: str, cols, sd: bool = False) -> int:
    """The rate-matched pools of grid ``g`` that fit ``gpus`` as rows; how many."""
    ok = g.gpus_used <= gpus
    n = int(ok.sum())
    thr, ttft, tpot = g.throughput_tok_s[ok], g.ttft_s[ok], g.tpot_s[ok]
    concurrency = thr / req.mean_gen * (ttft + req.decode_steps * tpot)  # Little's law
    add_served(
        cols, n, ("disaggregated", fmt, dec, g.decode_workers[ok]), (concurrency, ttft, tpot), thr, g.gpus_used[ok],
        prefill_workers=g.prefill_workers[ok], prefill_tp=pre.tp, decode_batch=g.decode_batch[ok],
        speculation=float(sd), decode_dp=dec.dp, kv_transfer_s=g.kv_transfer_s,
    )  # fmt: skip
    return n


def pair_cells(search: Any, workers: list, gpus: int, rejected: list, sd: Speculation | None) -> list:
    """(PairCell, ``sd``) of every fitting pair of ``workers`` ((layout key, Replica or None)), both pools decoding
    as ``sd`` (the draft in their memory), each with ``search``'s engine at its TP degree."""
    req, fmt, method = search.req, search.fmt, sd.method if sd else ""
    live = [(key, rep) for key, rep in workers if rep is not None]
    dec = {key: pool_decoding(_workers(rep)[0], sd) for key, rep in live}
    mem = {key: pool_memory(dec[key].dev, search.pool_engine(key[0]), req, dec[key].draft, method) for key, _ in live}
    fit = [(key, rep) for key, rep in live if mem[key].fits]  # a layout's memory: the same in either pool
    fitting = {key for key, _ in fit}
    for ka, kb in ((ka, kb) for ka, _ in workers if ka[2] == 1 for kb, _ in workers):
        if ka not in fitting or kb not in fitting:
            rejected.append(unfit_pair(fmt, ka[0], kb[0], sd))
    cells, curves = [], {}
    for _, a in [w for w in fit if w[1].dp == 1]:  # prefill workers: tensor parallel only
        pre = pool_decoding(_workers(a)[1], sd)
        pw = prefill_worker(pre.dev, search.pool_engine(a.tp), req, pre.draft)
        for kb, b in fit:
            if a.gpus + b.gpus > gpus:
                rejected.append(unfit_pair(fmt, a.tp, b.tp, sd))
                continue
            if kb not in curves:
                curves[kb] = DecodeCurve(dec[kb], decode_batches(mem[kb].max_resident), req.decode_context)
            handoff = (search.pool_engine(b.tp), kv_transfer_s(pre, req.prompt, pre.dev.hw, dec[kb].dev))
            cell = PairCell(a, b, pw, curves[kb], mem[kb].max_resident, req, gpus, search.targets, handoff)
            cells.append((cell, sd))
    return cells
