"""One scenario on one device, compiled: everything that depends on the model, the device, the formats and
the efficiency but not on the sizes is looked up once per (spec, attention, device, precision, efficiency)
(:func:`compiled`), so a scenario evaluates only its size-dependent arithmetic.

:meth:`CompiledScenario.times` is :func:`llmath.analysis.scenario`'s arithmetic for a decoder-only model: the
cached right-hand sides of :func:`llmath.hardware.roofline.stage_times`' scalar path (compute and memory
seconds per monomial, side by side, so one product gives both) and the same closed-form generation
(:func:`llmath.hardware.decode.decode_generation`), with the monomials of each stage evaluated by small
functions of exact ints chosen once per table instead of parsed per call. Models it does not cover
(encoder-decoders, prompt prefixes, chunked scans, compressed caches, image inputs) answer ``None`` and take
the general path; tests/test_compiled.py checks the two paths agree on every model it covers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import numpy as np

from llmath.hardware import Hardware
from llmath.hardware.decode import DecodeSummary, _decode_scalar, decode_generation
from llmath.hardware.efficiency import Efficiency
from llmath.hardware.roofline import _stage_matrices, efficiency, stage_times
from llmath.model.checkpoint import precision_for
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.model.spec_moe import MoESpec
from llmath.ops import Attention, Table, table
from llmath.ops import stages as ostages
from llmath.ops.routing import experts_hit
from llmath.validation import MAX_BATCH, MAX_TOKENS

Monomial = Callable[[int, int, int], int | float]  # (B, T, S0) -> the monomial's value (exact ints but U:moe)


def _windowed(kind: str, w: int | None) -> Monomial:
    """B·keys (``K``), B·causal pairs (``P``) or B·T·keys (``E``, eager scores) of exact ints:
    :func:`llmath.ops.pair_counts.visible_keys` and :func:`llmath.ops.pair_counts.causal_pairs`' integer branches,
    without their type tests."""
    if kind == "K":
        return (lambda B, T, S0: B * (S0 + T)) if w is None else (lambda B, T, S0: B * (min(S0, w - 1) + T))
    if kind == "E":
        return (lambda B, T, S0: B * T * (S0 + T)) if w is None else (lambda B, T, S0: B * T * (min(S0, w - 1) + T))
    if w is None:
        return lambda B, T, S0: B * (T * S0 + T * (T + 1) // 2)

    def pairs(B: int, T: int, S0: int) -> int:
        m = max(0, min(w - S0, T))  # queries whose reach is below the window
        return B * (m * S0 + m * (m + 1) // 2 + (T - m) * w)

    return pairs


_PLAIN: dict[str, Monomial] = {
    "1": lambda B, T, S0: 1,
    "B": lambda B, T, S0: B,
    "BT": lambda B, T, S0: B * T,
    "BL": lambda B, T, S0: B,  # logits of the last position only
    "BP": lambda B, T, S0: B if S0 > 0 else 0,  # sequences continuing a cached prefix
    "X": lambda B, T, S0: 0,  # no source positions (a decoder-only model without images)
    "XE": lambda B, T, S0: 0,
}


def _experts_hit(moe: MoESpec) -> Monomial:
    return lambda B, T, S0: float(experts_hit(B * T, moe.n_experts, moe.top_k))  # one device: moe_tokens 1


def monomial_functions(monos: tuple[str, ...], moe: MoESpec | None = None) -> tuple[Monomial, ...] | None:
    """One function per monomial of exact int sizes, the same values as :meth:`llmath.ops.Scenario.monomials`
    on one device for a scenario with no source and logits for the last position (tests/test_compiled.py);
    ``None`` if a monomial is not one of the plain kinds (token counts, keys, causal pairs and eager scores,
    full or windowed, and the experts an MoESpec layer hits)."""
    out = []
    for m in monos:
        f = _PLAIN.get(m)
        if f is None and m[:2] in ("K:", "P:", "E:") and not m[2:].startswith("c"):
            f = _windowed(m[0], None if m[2:] == "full" else int(m[2:]))
        elif f is None and m == "U:moe" and moe is not None:
            f = _experts_hit(moe)
        if f is None:
            return None
        out.append(f)
    return tuple(out)


@dataclass(frozen=True, eq=False)
class CompiledScenario:
    """A decoder-only model's prefill and decode tables on one device, with their monomial functions."""

    hw: Hardware
    p: Precision
    eff: Efficiency
    prefill: Table
    decode: Table
    prefill_monos: tuple[Monomial, ...]
    decode_monos: tuple[Monomial, ...]

    def times(self, batch: int, prompt: int, gen: int) -> tuple[np.ndarray, np.ndarray, DecodeSummary]:
        """(prefill per-op seconds, first decode step per-op seconds, the generation's decode summary): each
        op's max(compute, memory) + overhead, both passes from one product."""
        rhs, ov_pre, ov_dec = _block_rhs(self, batch, prompt)
        mv = [f(batch, prompt, 0) for f in self.prefill_monos] + [f(batch, 1, prompt) for f in self.decode_monos]
        cm = np.array(mv, dtype=float) @ rhs
        n1, n2 = len(ov_pre), len(ov_dec)
        pre = np.maximum(cm[:n1], cm[n1 : 2 * n1])
        pre += ov_pre
        dec = np.maximum(cm[2 * n1 : 2 * n1 + n2], cm[2 * n1 + n2 :])
        dec += ov_dec
        # decode_generation's scalar closed form: the plain monomials are never its stepwise ones
        d = _decode_scalar(self.decode, self.hw, self.p, self.eff, batch, float(prompt), float(gen), 0.0)
        return pre, dec, d


@lru_cache(maxsize=1024)  # (batch, prompt length) pairs of all compiled scenarios: tens of kB each at most
def _block_rhs(c: CompiledScenario, B: int, prompt: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The right-hand side of both passes' product: block-diagonal, (prefill monomials + decode monomials,
    [prefill compute | prefill memory | decode compute | decode memory] seconds per op), built from
    :func:`llmath.hardware.roofline.stage_times`' scalar-path matrices; and each pass's overheads."""
    pre = _stage_matrices(c.prefill, c.hw, c.p, c.eff, B, B * prompt, False, None)
    dec = _stage_matrices(c.decode, c.hw, c.p, c.eff, B, B, True, prompt)
    (m1, n1), (m2, n2) = pre[0].shape, dec[0].shape
    rhs = np.zeros((m1 + m2, 2 * (n1 + n2)))
    rhs[:m1, :n1], rhs[:m1, n1 : 2 * n1] = pre[0], pre[1]
    rhs[m1:, 2 * n1 : 2 * n1 + n2], rhs[m1:, 2 * n1 + n2 :] = dec[0], dec[1]
    rhs.setflags(write=False)
    return rhs, pre[2], dec[2]


@lru_cache(maxsize=256)
def compiled(spec: ModelSpec, attention: str, hw: Hardware, p: Precision, eff: Efficiency) -> CompiledScenario | None:
    """The compiled scenario of a decoder-only model without prompt prefixes or image inputs, else ``None``."""
    if spec.is_encoder_decoder or spec.prefix_positions:
        return None
    a = cast(Attention, attention)
    pre, dec = table(spec, "prefill", a), table(spec, "decode", a)
    fp, fd = monomial_functions(pre.monos, spec.moe), monomial_functions(dec.monos, spec.moe)
    if fp is None or fd is None:
        return None
    return CompiledScenario(hw, p, eff, pre, dec, fp, fd)


@lru_cache(maxsize=256)
def _named_efficiency(mode: str, hw: Hardware) -> Efficiency:
    return efficiency(mode, hw)


def device_efficiency(mode: str | Efficiency, hw: Hardware) -> Efficiency:
    """:func:`llmath.hardware.roofline.efficiency` without overrides, once per (mode name, device)."""
    return _named_efficiency(mode, hw) if type(mode) is str else efficiency(mode, hw)


def plain_sizes(batch, prompt, gen, attention) -> bool:
    """Whether a scenario's sizes are exact ints in range and its attention a valid name (the common case,
    checked without building a :class:`llmath.analysis.Workload`, whose checks say what is wrong otherwise)."""
    return (
        type(batch) is int
        and type(prompt) is int
        and type(gen) is int
        and 1 <= batch <= MAX_BATCH
        and 1 <= prompt <= MAX_TOKENS
        and 1 <= gen <= MAX_TOKENS
        and type(attention) is str
        and attention in ("eager", "flash")
    )


@lru_cache(maxsize=256)
def spec_precision(spec: ModelSpec) -> Precision:
    """The precision a spec given as an object is analysed at (:func:`llmath.model.checkpoint.precision_for`:
    the spec's own formats, bf16 if it states none), once per spec."""
    return precision_for(spec)


def scenario_times(
    spec: ModelSpec, attention: str, hw: Hardware, p: Precision, eff: Efficiency, batch: int, prompt: int, gen: int
) -> tuple[np.ndarray, np.ndarray, DecodeSummary, float]:
    """(prefill per-op seconds, first decode step per-op seconds, the generation's decode summary, TTFT) of one
    scenario: compiled where :func:`compiled` covers the model, else stage by stage (encoder-decoder: TTFT adds
    the encoder pass)."""
    c = compiled(spec, attention, hw, p, eff)
    if c is not None:
        pre, dec, d = c.times(batch, prompt, gen)
        return pre, dec, d, float(np.add.reduce(pre))  # ndarray.sum's reduction, without its wrapper
    sc = ostages.stage_scenarios(spec, batch, prompt)
    a = cast(Attention, attention)
    t = {k: stage_times(table(spec, k, a), v, hw, p, eff, k == "decode")[0] for k, v in sc.items()}
    ctx0, src = ostages.decode_start(spec, prompt)
    d = decode_generation(table(spec, "decode", a), hw, p, eff, batch, ctx0, gen, src)
    ttft = float(t["prefill"].sum()) + (float(t["encoder"].sum()) if "encoder" in t else 0.0)
    return t["prefill"], t["decode"], d, ttft
