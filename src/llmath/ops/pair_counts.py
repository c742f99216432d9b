"""Closed-form counts per sequence of the positions and (query, key) pairs one pass touches.

The values behind the monomials of :mod:`llmath.ops.scenario`: causal pairs under a window
(:mod:`llmath.ops.core` states the convention), chunked attention's keys and pairs, chunked scans, the
compressed entries of :mod:`llmath.ops.compressed` and the blocks and pairs of :mod:`llmath.ops.qsa`. Each
takes Python ints (exact) or numpy arrays (a sweep) and keeps integer arithmetic on integers.
"""

from __future__ import annotations

import numpy as np

from llmath.ops.core import Value


def is_int(*xs: object) -> bool:
    return all(type(x) is int or isinstance(x, np.integer) for x in xs)


def _min(a: Value, b: Value) -> Value:
    return min(a, b) if is_int(a, b) else np.minimum(a, b)


def _clip0(a: Value, hi: Value) -> Value:
    return max(0, min(a, hi)) if is_int(a, hi) else np.clip(a, 0, hi)


def causal_pairs(T: Value, S0: Value, w: int | None) -> Value:
    """Σ_{i=1..T} min(S0 + i, w): the (query, key) pairs a causal kernel computes per sequence."""
    if w is None:
        if is_int(T, S0):
            return T * S0 + T * (T + 1) // 2
        return T * S0 + T * (T + 1) / 2
    m = _clip0(w - S0, T)  # queries whose reach is below the window
    if is_int(T, S0, m):
        return m * S0 + m * (m + 1) // 2 + (T - m) * w
    return m * S0 + m * (m + 1) / 2 + (T - m) * w


def _chunk_prefix(n: Value, c: int) -> Value:
    """Σ_{p=1..n} ((p − 1) mod c) + 1 = q·c(c+1)/2 + r(r+1)/2 with n = q·c + r."""
    q, r = n // c, n % c
    if is_int(q, r):
        return q * (c * (c + 1) // 2) + r * (r + 1) // 2
    return q * (c * (c + 1) / 2) + r * (r + 1) / 2


def chunk_pairs(T: Value, S0: Value, c: int) -> Value:
    """Chunked attention (Llama-4): query p (1-based) attends the keys of its own c-aligned chunk up to
    itself, ((p − 1) mod c) + 1 of them; pairs = Σ over the T new queries."""
    return _chunk_prefix(S0 + T, c) - _chunk_prefix(S0, c)


def chunk_keys(T: Value, S0: Value, c: int) -> Value:
    """Keys a chunked step reads per sequence: from the start of the first new query's chunk, S0 mod c + T."""
    return S0 % c + T


def with_prefix(T: Value, S0: Value, n: int) -> tuple[Value, Value]:
    """(T, S0) of a model that prepends ``n`` positions to every sequence (CPM-Ant's prompt tokens,
    :attr:`ModelSpec.prefix_positions`): a pass from an empty cache (S0 = 0) runs them with its T new tokens;
    a later pass finds them cached (S0 + n). Logits are never computed for them."""
    if is_int(S0):
        return (T + n, S0) if S0 == 0 else (T, S0 + n)
    first = np.asarray(S0) == 0
    return T + n * first, S0 + n * ~first


def visible_keys(T: Value, S0: Value, w: int | None) -> Value:
    """Keys a step can see per sequence: S0 + T, or min(S0, w − 1) + T with a window."""
    return S0 + T if w is None else _min(S0, w - 1) + T


def held_positions(T: Value, S0: Value, w: int | None) -> Value:
    """KV positions held after the step per sequence (a windowed layer keeps w)."""
    return S0 + T if w is None else _min(S0 + T, w)


def chunks(T: Value, q: int) -> Value:
    """Chunks of ``q`` positions that T new tokens fill (the last one padded): ceil(T / q)."""
    return -(-T // q)


def scan_chunk_pairs(T: Value, q: int) -> Value:
    """Σ over the chunks of q(q+1)/2: the causal (query, key) pairs inside chunks of ``q`` positions."""
    full, r = T // q, T % q
    if is_int(T):
        return full * (q * (q + 1) // 2) + r * (r + 1) // 2
    return full * (q * (q + 1) / 2) + r * (r + 1) / 2


def _entries_prefix(n: Value, m: int) -> Value:
    """Σ_{j=1..n} ⌊j/m⌋ = m·q(q − 1)/2 + q·(r + 1) with n = q·m + r."""
    q, r = n // m, n % m
    return m * q * (q - 1) // 2 + q * (r + 1) if is_int(q, r) else m * q * (q - 1) / 2 + q * (r + 1)


def compressed_pairs(T: Value, S0: Value, m: int, cap: int | None = None) -> Value:
    """Σ_{i=1..T} min(⌊(S0 + i)/m⌋, cap): (query, compressed entry) pairs when query i sees the entries of the
    windows of ``m`` positions closed by then (at most ``cap`` of them: a top-k)."""
    if cap is None:
        return _entries_prefix(S0 + T, m) - _entries_prefix(S0, m)
    edge = cap * m - 1  # positions up to here see fewer than cap entries

    def capped(n: Value) -> Value:
        low = _min(n, edge)
        return _entries_prefix(low, m) + cap * (n - low)

    return capped(S0 + T) - capped(S0)


def compressed_monomial(kind: str, m: int, cap: int | None, B: Value, T: Value, S0: Value) -> Value:
    """Compressed-cache monomials (ops/compressed.py): entries visible after the step ``zK`` (capped at a top-k
    ``cap``), the eager rectangle ``zE`` (T × entries), causal pairs ``zP``, entries the step emits ``zN``,
    positions waiting in the compressor's buffer ``zM``, and whether a window has closed ``zO`` (per B)."""
    n = (S0 + T) // m
    if kind == "zK":
        return B * (n if cap is None else _min(n, cap))
    if kind == "zE":
        return B * T * n
    if kind == "zP":
        return B * compressed_pairs(T, S0, m, cap)
    if kind == "zN":
        return B * (n - S0 // m)
    if kind == "zM":
        return B * ((S0 + T) % m)
    if kind == "zO":
        return B * (S0 + T >= m) if isinstance(S0 + T, np.ndarray) else (B if S0 + T >= m else 0)
    raise AssertionError(kind)  # pragma: no cover - ops/compressed.py emits the kinds above


def _block_prefix(n: Value, c: int) -> Value:
    """Σ_{v=1..n} ⌊v/c⌋ = c·q(q−1)/2 + q·(r+1) with n = q·c + r."""
    q, r = n // c, n % c
    return c * q * (q - 1) // 2 + q * (r + 1)


def qsa_blocks(T: Value, S0: Value, c: int) -> Value:
    """Σ over the T new queries of the complete blocks of ``c`` keys each sees (query i sees S0 + i keys):
    the blocks a QSA indexer scores per sequence (ops/qsa.py)."""
    return _block_prefix(S0 + T, c) - _block_prefix(S0, c)


def _selected_prefix(n: Value, budget: int, c: int) -> Value:
    """Σ_{v=1..n} sel(v): a query seeing v keys attends all of them while v < budget + c (at most
    budget/c complete blocks), else budget + (v mod c) (the best blocks and the incomplete tail)."""
    lim = budget + c - 1

    def mods(m: Value) -> Value:  # Σ_{v=1..m} (v mod c)
        q, r = m // c, m % c
        return q * (c * (c - 1) // 2) + r * (r + 1) // 2

    upto = _min(n, lim)
    over = n - upto
    return upto * (upto + 1) // 2 + over * budget + mods(n) - mods(upto)


def qsa_pairs(T: Value, S0: Value, budget: int, c: int) -> Value:
    """(query, key) pairs of QSA's sparse attention per sequence over the T new queries."""
    return _selected_prefix(S0 + T, budget, c) - _selected_prefix(S0, budget, c)
