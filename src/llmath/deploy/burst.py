"""The burst iterations of a wave of prompts in step, one by one, as the scheduler lays them out.

B prompts of P' new tokens queue together (first come first served) and an iteration takes the token budget
left by its decoders: T_i = min(K − D_i·w, what is left) prompt tokens (whole prompts only when prompts are not
chunked). Iteration i covers the tokens [S_{i−1}, S_i) of the prompts laid end to end, so it carries the chunks
of the n_i = ⌈S_i / P'⌉ − ⌊S_{i−1} / P'⌋ prompts it touches, the first after the S_{i−1} mod P' tokens its
prompt already has (an iteration's cost takes its chunks at their mean size T_i / n_i and mean prefix, as the
iteration simulation times it), and ends the prompts ⌊S_i / P'⌋ − ⌊S_{i−1} / P'⌋ of them.

Its decoders D_i: in the first wave, the prompts ended before it (⌊S_{i−1} / P'⌋); in a later wave, a flow
(:func:`flow_decoders`). The iteration cost is not affine in the decoders (the decode-attention kernel's launch
is paid from the first) nor in the chunk tokens (a small remainder chunk costs the dense weights' prefill
pass), so the iterations are timed in three kinds (:func:`wave_kinds`): those before any prompt has ended
(no decoder), the full ones after, and the last (the remainder), each at its members' mean decoders and
chunk layout, where the cost is close to affine; the first :data:`EXACT_ITERATIONS` are laid out one by one,
the rest as a flow of full iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXACT_ITERATIONS = 32  # burst iterations laid out one by one; beyond, a flow of full iterations


@dataclass(frozen=True)
class Kind:
    """Iterations of one kind in a burst: how many, the mean number of them up to and including the one that
    ends a request's prompt (over the B requests), and their mean decoders, chunks, chunk size and prefix."""

    count: np.ndarray
    upto: np.ndarray
    decoders: np.ndarray
    chunks: np.ndarray
    size: np.ndarray
    prefix: np.ndarray


def _layout(S, E, Pn: float, cached: float):
    """(chunks, mean prefix, prompts ended before, prompts ended by) of the iteration over tokens [S, E)."""
    before, by = np.floor(S / Pn + 1e-9), np.floor(E / Pn + 1e-9)
    n = np.maximum(np.ceil(E / Pn - 1e-9) - before, 1.0)
    return n, cached + (S - before * Pn) / n, before, by


def _room(K: float, chunked: bool, D, w: float, Pn: float, total):
    """Prompt tokens the budget leaves an iteration with D decoders: K − D·w, whole prompts when unchunked."""
    if chunked:
        return np.maximum(K - D * w, 1.0)
    if not np.isfinite(K):
        return total
    return np.maximum(np.floor(np.maximum(K - D * w, 0.0) / Pn), 1.0) * Pn


def _tail(S, B, Pn: float, K: float, chunked: bool, w: float, decoders):
    """The iterations beyond :data:`EXACT_ITERATIONS`: a flow of full iterations with ``decoders`` at the mean
    budget, then the remainder; (full iterations, their tokens, the remainder's start)."""
    total = B * Pn
    left = np.maximum(total - S, 0.0)
    T = np.minimum(_room(K, chunked, decoders, w, Pn, total), np.maximum(left, 1.0))
    full = np.maximum(np.ceil(left / T - 1e-9) - 1.0, 0.0) * (left > 0)
    return full, T, total - (left - full * T)


def wave_kinds(B, Pn: float, cached: float, K: float, chunked: bool, w: float, decoders=None, life=np.inf) -> tuple:
    """The burst of B prompts in step as three :class:`Kind` (module docstring): (before any prompt has ended,
    full, the last). ``decoders``: a later wave's flow of decoders in every full iteration (its budget stays
    K − D·w); ``None``: the first wave, whose decoders are the prompts ended before each iteration and less
    than ``life`` iterations ago (a request decodes ``life`` iterations after its prompt, then leaves)."""
    B = np.asarray(B, dtype=float)
    total, S = B * Pn, np.zeros_like(B)
    starts, tokens, ended = [], [], []
    for i in range(EXACT_ITERATIONS):  # the layout, iteration by iteration
        left = total - S
        if not (left > 1e-9).any():
            break
        ended.append(np.minimum(B, np.floor(S / Pn + 1e-9)))
        gone = ended[i - int(life)] if i >= life else 0.0
        D = ended[i] - gone if decoders is None else decoders
        T = np.minimum(_room(K, chunked, D, w, Pn, total), np.maximum(left, 0.0))
        starts.append(S)
        tokens.append(D)
        tokens.append(T)
        S = S + T
    S_i, D_i, T_i = np.stack(starts), np.stack(tokens[::2]), np.stack(tokens[1::2])
    live, last = T_i > 1e-9, (S_i + T_i >= total - 1e-9) & (T_i > 1e-9)
    n, pf, before, by = _layout(S_i, S_i + T_i, Pn, cached)
    D0 = np.minimum(B, before)
    D = D_i if decoders is None else np.where(last, B - n, np.minimum(decoders, B - n))
    head = live & ~last & (D < 0.5) & (decoders is None)
    ended = (np.minimum(by, B) - D0) * live / B  # share of the requests whose prompt this iteration ends
    acc, seen = {}, {}
    for k, m in (("head", head), ("full", live & ~last & ~head), ("last", last)):
        seen[k] = m.sum(axis=0)
        upto = (ended * np.cumsum(m, axis=0)).sum(axis=0)  # requests ended here count every one so far
        acc[k] = [seen[k], upto, *((m * v).sum(axis=0) for v in (D, n, T_i, pf))]
    if decoders is None:  # the first wave's tail: the prompts ended, those still decoding at most
        decoders_tail = np.minimum((np.floor(S / Pn + 1e-9) + B) / 2, life * K / Pn)
    full, T, start = _tail(S, B, Pn, K, chunked, w, decoders_tail if decoders is None else decoders)
    if np.any(S < total - 1e-9):
        _add_tail(acc, seen, (S, full, T, start), B, Pn, cached, decoders_tail if decoders is None else decoders)
    return tuple(_kind(acc[k]) for k in ("head", "full", "last"))


def _add_tail(acc: dict, seen: dict, tail: tuple, B, Pn: float, cached: float, decoders) -> None:
    """Adds the flow of ``full`` iterations of T tokens from S, then the remainder from ``start``."""
    S, full, T, start = tail
    more = S < B * Pn - 1e-9
    n = T / Pn + 1.0  # a full iteration in the flow touches T / P' + 1 prompts, the first after P'/2 on average
    D = np.minimum(decoders, B - n)
    f = acc["full"]
    for j, v in enumerate((full, 0.0, full * D, full * n, full * T, full * (cached + Pn / 2 / n))):
        f[j] = f[j] + v
    end = np.where(more, start, 0.0)
    n_l, pf_l, _, _ = _layout(end, B * Pn, Pn, cached)
    rest = B * Pn - end
    a = acc["last"]
    for j, v in enumerate((1.0, 0.0, B - n_l, n_l, rest, pf_l)):
        a[j] = a[j] + more * v
    # the requests ended in the tail: evenly over its full iterations, the remainder's share in the last
    tail_req = np.where(more, B - np.minimum(B, np.floor(S / Pn + 1e-9)), 0.0) / B
    q_last = np.where(more, np.minimum(rest / Pn, 1.0) / np.maximum(B - np.floor(S / Pn + 1e-9), 1.0), 0.0)
    f[1] = f[1] + tail_req * (seen["full"] + (1 - q_last) * (full + 1) / 2 + q_last * full)
    acc["head"][1] = acc["head"][1] + tail_req * seen["head"]
    a[1] = a[1] + tail_req * q_last


def _kind(a: list) -> Kind:
    """Means over the iterations of a kind (sums in ``a``: count, upto, D·m, n·m, T·m, prefix·m); the chunk
    size is their tokens over their chunks, so that the mean iteration carries the kind's mean tokens."""
    c = np.maximum(a[0], 1e-12)
    n = np.maximum(a[3] / c, 1.0)
    return Kind(a[0], a[1], a[2] / c, n, np.maximum(a[4] / c / n, 1.0), a[5] / c)


def flow_decoders(B, Pn: float, K: float, chunked: bool, w: float, lag, cap, queued=0.0):
    """Decoders in a later wave's full burst iteration: its requests come back as the previous wave's finish,
    at the rate a = T / P' prompts per iteration that the burst ends them, and each waits ``lag`` iterations
    before it is scheduled, so lag·a requests are away, less the ``queued`` ones already waiting (C − B: a slot
    that frees takes the queue's head at once); the n = a + 1 whose prompts the iteration touches (a whole
    prompts when unchunked) do not decode: D = B − n − max(lag·a − queued, 0) with T = K − D·w, capped at
    ``cap``."""
    if not np.isfinite(K):
        return np.clip(np.asarray(cap, dtype=float), 0.0, None)
    if not chunked:  # the whole prompts that fit beside at least one decoder
        a = max(np.floor((K - w) / Pn), 1.0)
        return np.clip(B - a - np.maximum(lag * a - queued, 0.0), 0.0, cap)
    alone = (B - 1 - K / Pn) / (1 - w / Pn)  # no request away
    away = (B - 1 + queued - K * (1 + lag) / Pn) / (1 - w * (1 + lag) / Pn)
    return np.clip(np.minimum(alone, away), 0.0, cap)
