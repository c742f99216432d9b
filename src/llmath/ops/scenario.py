"""A scenario (B sequences of T new tokens after S0 cached positions) and the monomials of the cost terms:
their values for a scenario (:meth:`Scenario.monomials`) and their text for ``--explain`` (:func:`mono_text`).

Monomials (:mod:`llmath.ops.core`): ``BT`` = B·T tokens, ``K:w`` visible keys, ``P:w`` causal pairs, ``E:w``
score entries, ``H:w`` held positions under window ``w``, ``U:moe`` experts hit, and the family-specific kinds
named where they are computed below.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from llmath.model.spec import ModelSpec
from llmath.ops.bigbird_sizes import bigbird_monomial, bigbird_text
from llmath.ops.core import Value
from llmath.ops.pair_counts import (
    causal_pairs,
    chunk_keys,
    chunk_pairs,
    chunks,
    compressed_monomial,
    held_positions,
    is_int,
    qsa_blocks,
    qsa_pairs,
    scan_chunk_pairs,
    visible_keys,
    with_prefix,
)
from llmath.ops.routing import experts_hit

MONO_TEXT = {"1": "1", "B": "B", "BP": "B·[S0>0]", "BT": "B·T", "BL": "B·L", "X": "B·src", "XE": "B·T·src",
             "I": "[src>0]", "BTI": "B·T·[src>0]"}  # fmt: skip
MONO_TEXT |= {"L": "B·(S0+T)", "LL": "B·(S0+T)²"}  # BLT reruns every byte each pass (ops/blt.py)


def mono_text(m: str) -> str:
    if m in MONO_TEXT:
        return MONO_TEXT[m]
    if m[0] == "b":  # BigBird's block-sparse encoder (ops/bigbird_sizes.py)
        return bigbird_text(m)
    if m.startswith("z"):  # compressed entries (ops/compressed.py)
        kind, m_, *cap = m.split(":")
        n = f"⌊(S0+T)/{m_}⌋" if not cap else f"min(⌊(S0+T)/{m_}⌋, {cap[0]})"
        return {"zK": f"B·{n}", "zE": f"B·T·{n}", "zP": f"B·Σᵢ{n.replace('T', 'i')}",
                "zN": f"B·(⌊(S0+T)/{m_}⌋ − ⌊S0/{m_}⌋)", "zM": f"B·((S0+T) mod {m_})",
                "zO": f"B·[S0+T ≥ {m_}]"}[kind]  # fmt: skip
    kind, w = m.split(":")
    label = "" if w == "full" else f"[chunk={w[1:]}]" if w.startswith("c") else f"[W={w}]"
    return {"K": f"B·S{label}", "P": f"B·pairs{label}", "E": f"B·T·S{label}", "H": f"B·held{label}",
            "U": "experts hit", "C": f"B·chunks[Q={w}]", "Q": f"B·chunks²[Q={w}]",
            "X": f"B·pairs in chunks[Q={w}]", "F": f"B·⌊T/{w}⌋", "R": f"B·(T mod {w})",
            "Z": f"B·Σ blocks[c={w}]", "N": f"B·⌊(S0+T)/{w}⌋",
            "Y": f"B·selected pairs[budget/c={w}]"}[kind]  # fmt: skip


def _compressed(m: str, B: Value, T: Value, S0: Value) -> Value:
    kind, rate, *cap = m.split(":")
    return compressed_monomial(kind, int(rate), int(cap[0]) if cap else None, B, T, S0)


@lru_cache(maxsize=1024)
def _parse_mono(m: str) -> tuple[str, int | None, bool]:
    """(kind, window or chunk size, whether it is a chunk)."""
    kind, w = m.split(":")
    if w.startswith("c"):
        return kind, int(w[1:]), True
    return kind, None if w == "full" else int(w), False


def _has_source(src: Value) -> Value:
    """1 where a scenario has source positions (src > 0), else 0."""
    return int(src > 0) if is_int(src) else (np.asarray(src) > 0).astype(float)


@dataclass(frozen=True)
class Scenario:
    """B sequences of T new tokens after S0 cached positions; logits for the last or all positions.

    ``src``: encoder-decoder models only, the source positions the decoder cross-attends (0 otherwise).
    """

    B: Value
    T: Value
    S0: Value = 0
    logits: Literal["last", "all"] = "last"
    src: Value = 0

    def monomials(self, monos: Iterable[str], spec: ModelSpec, moe_tokens: int = 1) -> dict[str, Value]:
        """Values of the monomials. ``moe_tokens``: tokens an MoE layer routes per token of this scenario
        (1 on one device; the attention-DP degree when a rank's MoE layer serves every replica's tokens)."""
        B, T, S0 = self.B, self.T, self.S0
        if spec.prefix_positions:
            T, S0 = with_prefix(T, S0, spec.prefix_positions)
        out: dict[str, Value] = {}
        plain: dict[str, Value] = {"1": 1, "B": B, "BT": B * T}
        for m in monos:
            v: Value
            if m in plain:
                v = plain[m]
            elif m == "BL":
                v = B if self.logits == "last" else B * self.T  # never the prefix positions
            elif m == "BP":  # sequences continuing a cached prefix (a mixer reads its state once)
                v = B * (S0 > 0) if isinstance(S0, np.ndarray) else (B if S0 > 0 else 0)
            elif m in ("I", "BTI"):  # work that runs only with a source (Mllama's cross layers with images)
                v = _has_source(self.src) * (1 if m == "I" else B * self.T)
            elif m in ("X", "XE"):
                v = B * self.src * (1 if m == "X" else T)
            elif m in ("L", "LL"):  # BLT: every byte again each pass, no cache (ops/blt.py)
                v = B * (S0 + T) ** len(m)
            elif m == "U:moe":
                moe = spec.moe
                if moe is None:  # pragma: no cover - only MoE layers emit U:moe
                    raise AssertionError(m)
                hit = experts_hit(B * T * moe_tokens, moe.n_experts, moe.top_k)
                v = float(hit) if np.ndim(hit) == 0 else hit
            elif m[0] in "bz":  # BigBird's encoder (ops/bigbird_sizes.py), compressed entries (ops/compressed.py)
                v = bigbird_monomial(m, B, T) if m[0] == "b" else _compressed(m, B, T, S0)
            elif m[0] in "YZN":  # QSA (ops/qsa.py): "Z:c" blocks scored, "Y:budget/c" pairs, "N:c" blocks held
                a, _, c = m[2:].partition("/")
                if m[0] == "Y":
                    v = B * qsa_pairs(T, S0, int(a), int(c))
                else:
                    v = B * (qsa_blocks(T, S0, int(a)) if m[0] == "Z" else (S0 + T) // int(a))
            else:
                kind, win, chunk = _parse_mono(m)
                if chunk and win is not None and kind in ("K", "P"):
                    v = B * (chunk_keys(T, S0, win) if kind == "K" else chunk_pairs(T, S0, win))
                elif kind == "K":
                    v = B * visible_keys(T, S0, win)
                elif kind == "P":
                    v = B * causal_pairs(T, S0, win)
                elif kind == "E":
                    v = B * T * visible_keys(T, S0, win)
                elif kind == "H":
                    v = B * held_positions(T, S0, win)
                elif kind in ("C", "Q", "X") and win is not None:  # chunked scans (ops/mixers.py)
                    n = chunks(T, win)
                    v = B * (n if kind == "C" else n * n if kind == "Q" else scan_chunk_pairs(T, win))
                elif kind in ("F", "R") and win is not None:  # whole chunks / the tokens after them (ops/recurrent.py)
                    v = B * (T // win if kind == "F" else T % win)
                else:  # pragma: no cover - op builders only emit the kinds above
                    raise AssertionError(m)
            out[m] = v
        return out
