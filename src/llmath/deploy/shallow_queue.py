"""The closed loop with a shallow queue behind the engine's running-request cap: B < C < 3B clients
(``SHALLOW``·B).

C clients send their first requests together and each its next one when the previous completes; the engine
runs B places, the others wait first come first served, and a freed place takes the queue's head at the
next iteration. With fixed lengths every request holds its place the same number of iterations after its
prompt ends, so places free in the order they were taken and the loop is a deterministic queue whose
admissions follow a max-plus recurrence over the requests, in iterations (docs/serving.md, "When the
running-request cap binds"). Request k (0-based, in the order the engine takes them) is admitted at

    a_k = max(f_{k−B} + 1, f_{k−C} + 1 + λ)

(the place request k − B frees; its own send, when request k − C of the same client finishes, and the λ
iterations a follow-up takes to be taken in: the engine's replacement lag or its front end); the first B
at 0 and the next C − B at f_{k−B} + 1. Its prompt takes u_k iterations of the budget, first come first
served after the prompts before it (e_k = max(a_k, e_{k−1}) + u_k: P' / (K − D·w) for chunked prompts,
1/g for whole prompts, g of them fitting beside the decoders), ends in iteration p_k = ⌈e_k⌉ − 1, and the
request ends G − 1 decode iterations later, f_k = p_k + G − 1. A prefill-first engine (SGLang without mixed
chunks) runs the prompts admitted at a decode step's boundary in their own passes before the next decode
step: there the recurrence counts decode steps, a request ends G − 1 decode steps after its admission, and a
follow-up's λ iterations start with the prefill passes of its boundary.

When C < 2B the queue never holds all the freed places' takers: the groups of requests that end together
split apart from cycle to cycle (eight that end together at 9 clients become 1 + 7, then 1 + 1 + 6, …), a
transient that lasts about B / (C − B) cycles, most of a benchmark's ten prompts per client, so the
recurrence runs over all C·m requests. Each iteration is then timed at its own decoders and chunks
(:meth:`~llmath.deploy.serving.Decoding.mixed`, ``step``) with the engine's overheads; a request's TTFT runs
from its send (the first C from the start, the front end o_req before the first iteration) to the end of
its prompt's last iteration, its TPOT from there to its end over G − 1, and the means are over every
request, as the benchmark clients report them.
"""

from __future__ import annotations

from bisect import bisect_right
from functools import partial

import numpy as np

from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.replacement import queued_passes
from llmath.deploy.serving import Decoding, Requests, _budget, _overheads, active_overheads

EPS = 1e-9
MAX_LAG = 64  # iterations a follow-up's front end is followed through at most
MAX_ROUNDS = 64  # prompts per client followed one by one
MAX_REQUESTS = 100_000  # requests followed at one concurrency (fewer rounds beyond; the deep queue beyond that)
LAYOUT_PASSES = 4  # layouts of a block's prompts beside the decoders of their iterations, at most
SHALLOW = 3  # the recurrence below SHALLOW·B clients; beyond, the deep queue's cycles (llmath.deploy.capped_loop)


def shallow_capped(dec: Decoding, eng: EngineConfig, req: Requests, CBm: tuple, lag, means: tuple, waves: tuple):
    """(mean TTFT, mean decode iteration, the time the last request ends) with B < C < 3B from the admission
    recurrence (module docstring), elsewhere ``means`` as given; ``lag``: the iterations λ a follow-up takes to
    be taken in (mixed prefill; a prefill-first engine's follows its passes), ``waves``: the first wave's burst,
    a later wave's cycle and the decode step τ_d, for the span elsewhere: o_req, the first wave's burst and its
    last prompt's G − 1 decode steps, and a cycle for each later group of B (⌈C / B⌉ − 1 of them; the offline
    reading's throughput is C over it)."""
    (C, B, m), (ttft, step_s) = CBm, means
    steps = req.decode_steps / dec.tokens
    o_req = active_overheads(dec.dev, eng).served_request_s(req.prompt)
    span = o_req + waves[0] + steps * waves[2] + (np.ceil(C / B - 1e-9) - 1) * waves[1]
    ttft, step_s, span = (np.array(np.broadcast_to(x, np.shape(C)), dtype=float) for x in (ttft, step_s, span))
    lags = np.broadcast_to(lag, np.shape(C))
    for i in np.flatnonzero((C > B) & (C < SHALLOW * B) & (C <= MAX_REQUESTS)):
        one = np.zeros(np.shape(C), dtype=bool)
        one[i] = True
        ttft[i], step_s[i], span[i] = _point(dec.select(one), eng, req, (int(C[i]), int(B[i]), m), int(lags[i]), o_req)
    return ttft, step_s, span


def _point(dec: Decoding, eng: EngineConfig, req: Requests, CBm: tuple, lag: int, o_req: float) -> tuple:
    """One concurrency's (mean TTFT, mean decode iteration, the time the last request ends). Beyond
    ``MAX_ROUNDS`` prompts per client (or ``MAX_REQUESTS`` requests) the loop is followed that far and the last
    round's requests stand for the rounds after it (the transient is over after about B / (C − B) rounds)."""
    C, B, m = CBm
    steps = req.decode_steps / dec.tokens
    whole = int(round(steps))
    rounds = min(max(int(round(m)), 1), MAX_ROUNDS, max(MAX_REQUESTS // C, 1))
    n = C * rounds
    share = partial(_budget_share, eng, req, B, dec.width)
    if eng.mixed_prefill:
        s, e, p, f = _mixed_admissions((C, B, n), whole, lag, share)
        kinds = _mixed_iterations(s, e, p, f, float(req.new))
    else:
        joins = (eng.replacement_lag, queued_passes(eng), o_req, *_typical_passes(dec, eng, req, B))
        p, f, kinds = _prefill_first_admissions(C, B, n, whole, joins, share(np.zeros(n)), float(req.new))
    end = o_req + np.cumsum(_iteration_times(dec, eng, req, *kinds))
    ttft = end[p] - np.concatenate([np.zeros(C), end[f[: n - C]]])
    decode = end[f] - end[p]
    later = max(m, 1.0) - rounds  # the rounds after the last followed, as it
    mean = [(x.sum() + later * x[-C:].sum()) / (C * (rounds + later)) for x in (ttft, decode)]
    span = end[f].max() + later * (end[f[-C:]].max() - end[f[-2 * C : -C]].max() if rounds > 1 else 0.0)
    return mean[0], mean[1] / max(steps, EPS), span


def _typical_passes(dec: Decoding, eng: EngineConfig, req: Requests, B: int) -> tuple:
    """(a prefill pass of one budget's chunk, a decode step of B requests), with the engine's overheads: what a
    prefill-first loop's front end runs against (the overheads as :func:`_iteration_times` adds them: a pass without
    decoders, a decode step of B)."""
    o_m, o_d, _ = _overheads(dec, eng, req, B, 0.0)
    Pn, (K, _) = float(req.new), _budget(eng, req)
    one = np.ones(1)
    pass_s = np.asarray(dec.mixed(0 * one, req.decode_context, one, min(K, Pn) * one, req.cached * one)).ravel()
    step_s = np.asarray(dec.step(B * one, req.decode_context)).ravel()
    return float(pass_s[0]) + o_m, float(step_s[0]) + o_d


def _budget_share(eng: EngineConfig, req: Requests, B: int, w: float, D) -> np.ndarray:
    """u, the iterations of budget a prompt takes beside D decoding requests: chunked, P' / (K − D·w); whole
    prompts 1/g, the g = ⌊(K − D·w) / P'⌋ that fit (one at least, B at most); a prefill-first engine gives the
    prompts the whole budget (D = 0)."""
    Pn, (K, chunked) = float(req.new), _budget(eng, req)
    D = np.asarray(D, dtype=float)
    room = np.maximum(K - D * w, 1.0) if eng.mixed_prefill else np.full(D.shape, K)
    if chunked:
        return Pn / room
    return 1.0 / np.clip(np.floor(room / Pn), 1.0, B) if np.isfinite(K) else np.full(D.shape, 1.0 / B)


def _chain(a: np.ndarray, u: np.ndarray, before: float) -> np.ndarray:
    """e_k = max(a_k, e_{k−1}) + u_k over one block (``before``: the last e of the block before), as a
    running maximum: e_k = U_k + max(before, max_{j ≤ k} (a_j − U_{j−1})), U the running sum of u."""
    U = np.cumsum(u)
    return U + np.maximum(before, np.maximum.accumulate(a - (U - u)))


def _mixed_admissions(CBn: tuple, steps: int, lag: int, share) -> tuple:
    """The recurrence of a mixed-prefill engine (module docstring), one block of B requests at a time (each
    depends on the blocks before it only, C > B): (prompt starts s, prompt ends e in iterations, the
    iteration p_k its prompt ends in, the iteration f_k it ends in). A prompt's budget (``share`` of the
    decoders) is the one left beside the requests decoding in the iteration it starts in: those of the blocks
    before (p_j < i ≤ f_j, both ascending in j) and the block's own whose prompts ended before it, found in
    ``LAYOUT_PASSES`` passes over the block."""
    C, B, n = CBn
    e, a = np.zeros(n), np.zeros(n)
    p, f = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for j in range(0, n, B):
        k = np.arange(j, min(j + B, n))
        freed = np.where(k >= B, f[np.maximum(k - B, 0)] + 1.0, 0.0)
        back = np.where(k >= C, f[np.maximum(k - C, 0)] + 1.0 + lag, 0.0)
        a[k] = np.maximum(freed, back)
        u = share(np.zeros(len(k)))
        for _ in range(LAYOUT_PASSES):
            e[k] = _chain(a[k], u, e[j - 1] if j else 0.0)
            p[k] = np.ceil(e[k] - EPS).astype(np.int64) - 1
            i = np.floor(e[k] - u + EPS).astype(np.int64)
            own = np.searchsorted(p[k], i, side="left") - np.searchsorted(p[k] + steps, i, side="left")
            D = np.searchsorted(p[:j], i, side="left") - np.searchsorted(f[:j], i, side="left") + own
            u, before = share(D), u
            if np.array_equal(u, before):
                break
        e[k] = _chain(a[k], u, e[j - 1] if j else 0.0)
        p[k] = np.ceil(e[k] - EPS).astype(np.int64) - 1
        f[k] = p[k] + steps
        a[k] = e[k] - u  # the prompt's start
    return a, e, p, f


def _mixed_iterations(s, e, p, f, Pn: float) -> tuple:
    """Every iteration's (decoders, chunks, prompt tokens) from the requests' prompt spans [s_k, e_k) and
    decode spans (p_k, f_k]: the tokens are the budget's share of each span in the iteration."""
    H = int(f.max()) + 1
    D = np.cumsum(np.bincount(p + 1, minlength=H + 1)[:H] - np.bincount(f + 1, minlength=H + 1)[:H])
    first = np.floor(s + EPS).astype(np.int64)
    N = np.cumsum(np.bincount(first, minlength=H + 1)[:H] - np.bincount(p + 1, minlength=H + 1)[:H])
    xs = np.stack([s, e], axis=1).ravel()
    done = np.stack([np.arange(len(s)) * Pn, np.arange(1, len(s) + 1) * Pn], axis=1).ravel()
    T = np.diff(np.interp(np.arange(H + 1.0), xs, done))
    return D.astype(float), N.astype(float), T, _prefix_sums(s, e - s, p, Pn, H), np.zeros(H, dtype=bool)


def _prefix_sums(s, u, p, Pn: float, H: int) -> np.ndarray:
    """Σ over each iteration's chunks of the prompt tokens done before it: none in a prompt's first iteration,
    P'·(i − s_k) / u_k in its later ones i (up to p_k), summed as i·Σ r_k − Σ r_k·s_k over the prompts then
    under way (r_k = P' / u_k, the budget's tokens per iteration)."""
    start = np.floor(s + EPS).astype(np.int64) + 1
    live = start <= p
    r = Pn / np.maximum(u, EPS)

    def running(weights):
        w = weights[live]
        return np.cumsum(np.bincount(start[live], w, H + 1)[:H] - np.bincount(p[live] + 1, w, H + 1)[:H])

    return np.arange(H) * running(r) - running(r * s)


def _prefill_first_admissions(C: int, B: int, n: int, steps: int, joins: tuple, u: np.ndarray, Pn: float) -> tuple:
    """The recurrence of a prefill-first engine (module docstring), request by request: request k is taken in
    at decode-step boundary a_k (its prefill passes run there, before decode step a_k + 1) and ends at decode
    step f_k = a_k + G − 1; a place frees at boundary f_{k−B}, and a follow-up sent at boundary x = f_{k−C}
    is taken in λ iterations later, at the first boundary y whose passes or next decode step reach that far
    (the passes of the boundaries between count among the λ; ``joins``: :func:`_joined`'s terms). Returns
    :func:`_prefill_first_layout`'s."""
    a, f = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    load: dict[int, float] = {}
    marks, before = [0], [0]  # boundaries with passes, ascending, and the passes before each

    def start(x: int) -> int:  # the iteration index of boundary x's first pass
        i = bisect_right(marks, x) - 1
        return x + before[i] + (_passes(load.get(marks[i], 0.0)) if marks[i] < x else 0)

    for k in range(n):
        y = int(f[k - B]) if k >= B else 0
        if k >= C:
            x = int(f[k - C])
            goal, y = start(x) + _joined(joins, x, load), max(y, x)
            while start(y) + _passes(load.get(y, 0.0)) < goal:
                y += 1
        a[k] = max(y, int(a[k - 1]) if k else 0)
        x = int(a[k])
        if x != marks[-1]:
            before.append(before[-1] + _passes(load.get(marks[-1], 0.0)))
            marks.append(x)
        load[x] = load.get(x, 0.0) + float(u[k])
        f[k] = x + steps
    return _prefill_first_layout(a, f, u, Pn, (marks, before, load))


def _joined(joins: tuple, x: int, load: dict) -> int:
    """λ for a follow-up sent at boundary x: the engine's replacement lag, or the iterations j that its front
    end o_req outlasts (boundary x's prefill passes at τ_p each, then decode steps and later boundaries' passes)
    and the passes queued behind its arrival (:func:`llmath.deploy.replacement.joined_passes`, whose
    iterations are decode steps only)."""
    lag, queued, o_req, tau_p, tau_d = joins
    j, t, y = 0, 0.0, x
    while t < o_req and j <= MAX_LAG:  # bounded where the passes take no time
        n = _passes(load.get(y, 0.0))
        if t + n * tau_p >= o_req:
            j += int(np.ceil((o_req - t) / tau_p - EPS))
            break
        j, t, y = j + n + 1, t + n * tau_p + tau_d, y + 1
    return max(lag, max(j, 1) + queued)


def _passes(load: float) -> int:
    """The prefill passes of a boundary's prompts: its load in budgets, rounded up."""
    return int(np.ceil(load - EPS)) if load > 0 else 0


def _prefill_first_layout(a, f, u, Pn: float, boundaries: tuple) -> tuple:
    """The iterations of a prefill-first loop in order, boundary x's passes then decode step x + 1, from the
    admissions: (its prompt's last pass p, the request's last iteration, as iteration indices, and every
    iteration's decoders, chunks, prompt tokens, tokens done before its chunks, kinds)."""
    marks, before, load = boundaries
    top = int(f.max()) + 1
    passes = np.zeros(top, dtype=np.int64)
    passes[np.asarray(marks)] = [_passes(load.get(x, 0.0)) for x in marks]
    first = np.arange(top) + np.concatenate([[0], np.cumsum(passes)[:-1]])  # boundary x's first pass
    step = first + passes  # decode step x + 1
    s = first[a] + (np.cumsum(u) - u - np.concatenate([[0.0], np.cumsum(u)])[np.searchsorted(a, a)])
    e = s + u
    p = np.ceil(e - EPS).astype(np.int64) - 1
    H = int(step[-1]) + 1
    D = np.zeros(H)
    D[step] = np.cumsum(np.bincount(a, minlength=top)[:top] - np.bincount(f, minlength=top)[:top])
    kinds = _mixed_iterations(s, e, p, np.full(len(a), H - 1), Pn)
    ends = np.where(f > a, step[np.maximum(f - 1, 0)], p)  # one output token: it ends with its prompt
    return p, ends, (D, *kinds[1:4], np.ones(H, dtype=bool))


def _iteration_times(dec: Decoding, eng: EngineConfig, req: Requests, D, N, T, S, prefill_first) -> np.ndarray:
    """Each iteration's time: with chunks, the mixed pass at its decoders (none in a prefill-first pass), its
    chunks' mean size and mean prefix (the cached tokens and ``S``, the tokens done before them, over N);
    without, the decode step of its decoders; with the engine's overheads as the simulation adds
    them (eager term and per token for a mixed pass, the graph term for a decode step); an empty one 0."""
    ctx = req.decode_context
    pre = N > 0.5
    d = np.where(pre & prefill_first, 0.0, D)
    o_m, o_d, _ = _overheads(dec, eng, req, D, d)  # per mixed and per decode-only iteration
    t = np.zeros(len(D))
    c = np.where(pre, T / np.maximum(N, 1.0), 0.0)
    if pre.any():
        prefix = req.cached + S[pre] / N[pre]
        mixed = dec.mixed(d[pre][:, None], ctx, N[pre][:, None], c[pre][:, None], prefix[:, None])
        t[pre] = np.asarray(mixed)[:, 0] + o_m[pre]
    dec_only = ~pre & (D > 0.5)
    if dec_only.any():
        levels, inv = np.unique(D[dec_only], return_inverse=True)
        t[dec_only] = np.asarray(dec.step(levels[:, None], ctx))[:, 0][inv] + o_d[dec_only]
    return t
