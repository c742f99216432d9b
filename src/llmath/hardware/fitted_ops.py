"""The fitted attention and MoE kernel models (:mod:`.efficiency_fit`) applied to a model's operator table.

Which operators a class's fit applies to, with the fit's own features (docs/efficiency.md, "In the roofline"):

* **context attention** (prefill operators that declare the dense attention kernel, ops/kernel.py, in
  decoder-only, non-MLA models): compute at the dense peak of
  the KV-cache format × ηc(S, B·H·S) with S = T, the new tokens per sequence; memory at ηm(bytes of the fit's
  cost function); per kernel the larger of the fit's ``t0`` and the eager-launch overhead. After a cached
  prefix of S0 positions the operator's FLOPs and bytes count it (T·S0 more pairs, the cached K/V read) at the
  fractions of the new tokens' shape: the source tables have no prefixed rows (their ``step`` column is 0
  throughout); docs/efficiency.md states the rule.
* **decode attention** (the same operators in decode): compute at the **vector** peak × ηc(B·H, u), u = min(S + 1, W)
  the positions read; memory at ηm(bytes); per kernel the fit's ``t0``. Both fractions depend on the
  context, so a generation's sum over steps is taken per context band (:mod:`llmath.hardware.decode_attention_sum`).
* **routed experts** (the weight GEMMs whose weights are the MoE experts): compute at the dense peak ×
  ηc(tokens per expert, hidden · inter), memory at ηm(bytes of the whole expert layer), and the fit's ``t0``
  (one grouped MoE layer) shared equally by the layer's routed GEMMs. On one rank of a parallel layout the
  grouped kernel runs the rank's share s = 1 / (moe-TP × EP) of the layer
  (:func:`llmath.hardware.fitted_columns._expert_shares`): the same tokens per expert (all the tokens the layer
  routes, every attention-DP replica's), hidden · inter / moe-TP (moe-TP splits each expert's width, EP holds
  whole experts) and the layer's bytes × s. Checked against the
  split rows of the same tables, which the fit never saw: ``scripts/moe_split_check.py`` (docs/decode_step.md).
  Under EP the layer waits for its busiest rank: compute × the routing's busiest-rank factor
  (:func:`llmath.ops.routing.busiest_rank_factor`).
  Experts stored in another format than their GEMMs run in (4-bit weights dequantised to a 16-bit GEMM) are
  not the measured kernel: they keep the GEMM fit.

Formats: attention fits are keyed by the KV-cache format, the MoE fit by the compute format (fp16 uses bf16's).
Columns without a fit for their format keep the GEMM fit and the scalar fractions. Which operators are the
columns, with their features, is :mod:`llmath.hardware.fitted_columns`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from llmath.hardware import Hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.decode_attention_sum import decode_fractions
from llmath.hardware.efficiency import Efficiency
from llmath.hardware.execution import executed, op_executed, op_formats
from llmath.hardware.fitted_columns import Columns, columns, fit_format
from llmath.hardware.gemm_runs import gemm_runs
from llmath.hardware.moe_ep_token import ep_token_factor
from llmath.model import formats as fmt
from llmath.model.dtypes import Precision
from llmath.ops import Table
from llmath.ops.routing import busiest_rank_factor
from llmath.ops.table import by_kinds, op_weights


def _mla_fractions(coef, cols: Columns, p: Precision, B, T):
    """(ηc, ηm) of MLA prefill attention: B sequences of T new tokens, each column's heads."""
    kv = fit_format(p.kv) or "bf16"
    q, v = cols.mla_dims
    xm = ef.mla_context_bytes(B, T, cols.mla_heads, q, v, kv, kv)  # mla_context_cost's, B and T float arrays
    ec, em, _ = ef.fractions(coef, T, B * cols.mla_heads * T, xm)
    return ec, em


def _moe_coef(cols: Columns, eff: Efficiency, p: Precision, run_fmt: str, decode: bool) -> tuple[float, ...] | None:
    """The routed experts' fitted kernel model: the device's ``moe`` fit in the format their GEMMs run in, where
    their weights are stored in that format too (a weight-only kernel dequantising 4-bit experts to a 16-bit
    GEMM is not the kernel the fit measured), the fit of their storage format where the tables time its own
    kernel (block-scaled FP8, :data:`llmath.hardware.efficiency_fit.MOE_STORAGE`); ``None`` otherwise. A prefill
    pass of 4-bit experts takes the weight-only kernel a launcher picked (``moe_prefill``,
    :func:`llmath.hardware.kernels.launcher_moe_kernel`) where there is one."""
    stored = p.weight_format("experts")
    if not cols.routed.size:
        return None
    launched = launcher_moe(cols, eff, p, decode)
    if launched is not None:
        return launched[0]
    if weight_only_fp4(stored, run_fmt):
        return eff.fit("moe", "w4a16_mxfp4")
    if fmt.get(stored).compute != run_fmt:
        return None
    return (eff.fit("moe", stored) if stored in ef.MOE_STORAGE else None) or eff.fit("moe", run_fmt)


def launcher_moe(cols: Columns, eff: Efficiency, p: Precision, decode: bool) -> tuple[tuple[float, ...], str] | None:
    """(coefficients, format key) of the grouped-expert kernel a launcher picked for a prefill pass (class
    ``moe_prefill``, :func:`llmath.hardware.kernels.launcher_moe_kernel`) of experts stored in the format family it
    takes (:data:`llmath.hardware.efficiency_fit.LAUNCHER_MOE_STORED`): its fit computes at the peak of
    :data:`llmath.hardware.efficiency_fit.LAUNCHER_MOE_RUNS`. ``None`` in decode, without routed experts, for other
    formats or where no launcher picked a kernel."""
    if decode or not cols.routed.size:
        return None
    family = fmt.get(p.weight_format("experts")).family
    keys = [k for k, f in ef.LAUNCHER_MOE_STORED.items() if f == family]
    return next(((c, k) for k in keys if (c := eff.fit("moe_prefill", k)) is not None), None)


def weight_only_fp4(stored: str, run_fmt: str) -> bool:
    """Experts stored in a 4-bit float format (MXFP4, NVFP4) whose GEMMs run in 16-bit (no fp4 peak): the
    weight-only grouped kernel of :data:`llmath.hardware.efficiency_fit.MOE_WEIGHT_ONLY`."""
    return fmt.get(stored).family == "fp4" and run_fmt in ("bf16", "fp16")


def _moe_bytes_key(p: Precision, run_fmt: str, eff: Efficiency) -> str:
    """The format the MoE fit's memory feature counts the experts' weights in: NVFP4 where an engine's own NVFP4
    kernel's fit applies (:data:`llmath.hardware.efficiency_fit.ENGINE_NVFP4_MOE`)."""
    stored = p.weight_format("experts")
    if weight_only_fp4(stored, run_fmt):
        return "w4a16_mxfp4"
    if ef.MOE_STORAGE.get(stored) == "nvfp4" and fmt.get(stored).compute == run_fmt and eff.fit("moe", "nvfp4"):
        return "nvfp4"
    return fit_format(run_fmt) or "bf16"


def rank_moe_bytes(tokens, cols: Columns, weights: str):
    """The MoE fit's memory feature for one rank's share of the expert layer: the weights of the experts hit
    and the routed activations (:func:`llmath.hardware.efficiency_fit.moe_cost`), times the share of every
    expert the rank holds (moe-TP splits each expert, EP holds a share of them: the same bytes per token)."""
    h, i, k, E = cols.moe
    return ef.moe_bytes(np.asarray(tokens, dtype=float), h, i, k, E, weights) * cols.share


@dataclass(frozen=True)
class Fits:
    """The fitted kernel models :func:`apply` sets on one table's pass, with what they read that the sizes do not
    change: resolved once per (table, device, precision, efficiency, pass, whether a context is given, format
    the GEMMs run in) instead of once per serving iteration."""

    cols: Columns
    ctx: tuple[float, ...] | None  # the dense attention fit (decode or context)
    mla: tuple[float, ...] | None  # MLA prefill attention's
    moe: tuple[float, ...] | None  # the routed experts'
    moe_bytes: str  # the format the MoE fit's memory feature counts the experts' weights in
    moe_peak: float | None  # the peak a launcher's MoE kernel computes at (None: each routed op's own)
    moe_s2: float  # the MoE fit's second saturation, sat(hidden · inter × inter share; h2, p2): fixed per table
    moe_ranks: int  # expert-parallel ranks the layer's busiest rank is the busiest of (1 without EP)
    mla_peak: float  # the peak MLA prefill attention's fit is against
    moe_ep_token: float = 0.0  # s per token of the layer a rank spends under EP (hardware.moe_ep_token; 0: none)
    mla_decode: tuple[float, ...] | None = None  # MLA's absorbed decode kernel's (an engine's own, decode only)
    bf16_peak: float = 0.0  # the peak the MLA decode fit's products are against (they run in 16 bit)


@lru_cache(maxsize=1024)
def fits(table: Table, hw: Hardware, p: Precision, eff: Efficiency, decode: bool, with_context: bool, run_fmt: str):
    """The :class:`Fits` of a pass (``None``: no fitted column applies)."""
    cols = columns(table)
    do_attn = cols.attn.size and (with_context or not decode)
    ctx = eff.fit("attn_decode" if decode else "attn_context", p.kv) if do_attn else None
    moe = _moe_coef(cols, eff, p, run_fmt, decode)
    mla = eff.fit("attn_mla_context", p.kv) if (cols.mla.size and not decode) else None
    mla_dec = eff.fit("attn_mla_decode", p.kv) if (cols.mla_decode.size and decode) else None
    if ctx is None and moe is None and mla is None and mla_dec is None:
        return None
    h, i, _, _ = cols.moe
    s2 = ef.sat(float(h * i) * cols.inter_share, moe[3], moe[4]) if moe is not None else 1.0
    ranks = round(cols.inter_share / cols.share)
    launched = launcher_moe(cols, eff, p, decode)
    key = launched[1] if launched is not None else _moe_bytes_key(p, run_fmt, eff)
    moe_peak = hw.peak(ef.LAUNCHER_MOE_RUNS[key]) if launched is not None else None
    peak = ef.peak_for("attn_mla_context", hw, p.kv) if mla is not None else 0.0
    ept = eff.fit("moe_ep_token", key) if (moe is not None and launched is None) else None
    # (plain top-k, grouped top-k) seconds per token: the router's kind picks one (hardware.moe_ep_token)
    s_token = (ept[1] if cols.grouped_routing and len(ept) > 1 else ept[0]) if ept else 0.0
    bf16 = hw.peak("bf16") if mla_dec is not None else 0.0
    return Fits(cols, ctx, mla, moe, key, moe_peak, s2, ranks, peak, s_token, mla_dec, bf16)


def apply(table: Table, hw: Hardware, p: Precision, eff: Efficiency, batch, tokens, decode: bool, f, inv, context,
          rts):  # fmt: skip
    """(compute factor, seconds per byte), each (…, n_ops), with the fitted attention and MoE columns set.

    ``f`` multiplies an op's matmul FLOPs at the ``matmul`` rate (``None``: ones), ``inv`` is
    :func:`llmath.hardware.roofline.inv_bandwidth`'s. ``context``: in decode, the step's S (``None``: decode
    attention keeps its scalar fraction); in prefill (B = ``batch`` sequences of T = ``tokens`` / B new
    tokens), optionally a mask of the passes that mix decode tokens into prefill chunks: their attention reads
    the decoders' KV caches as well, which no single fitted shape describes, so it keeps the scalar fractions.
    ``rts``: (the roofline's matmul rate per op, each op's dense peak in the format it executes in, the
    format weight GEMMs run in): ``f`` is relative to the first, the fitted fractions apply to the second."""
    mm, peaks, run_fmt = rts
    fit = fits(table, hw, p, eff, decode, context is not None, run_fmt)
    if fit is None:
        return f, inv
    cols, ctx = fit.cols, fit.ctx
    mixed = None if (decode or context is None) else np.asarray(context, dtype=bool)[..., None]
    B = np.asarray(batch, dtype=float)[..., None]
    rows = np.asarray(tokens, dtype=float)[..., None]
    S = np.asarray(context if (ctx is not None and context is not None) else 0, dtype=float)[..., None]
    shape = np.broadcast(B, rows, S).shape[:-1] + (len(table.ops),)
    if f is None or f.shape != shape or not f.flags.writeable:  # mm_factor's own array is reused
        f = _filled(shape, 1.0 if f is None else f)
    if inv.shape != shape or not inv.flags.writeable:
        inv = _filled(shape, inv)
    bw = hw.memory_bandwidth_bytes_per_s
    if ctx is not None:
        j = cols.attn
        if decode:
            ec, em = decode_fractions(ctx, cols, p, B, np.minimum(S + 1, cols.windows))
            f[..., j], inv[..., j] = mm[j] / (hw.vector_peak * ec), 1.0 / (bw * em)
        else:
            T = rows / B
            kv = fit_format(p.kv) or "bf16"
            xm = ef.attn_context_cost(B, T, cols.heads, cols.kv_heads, cols.head_dim, kv, kv)[2]
            ec, em, _ = ef.fractions(ctx, T, B * cols.heads * T, xm)
            _set(f, inv, j, mm[j] / (peaks[j] * ec), 1.0 / (bw * em), mixed)
    if fit.mla is not None:
        ec, em = _mla_fractions(fit.mla, cols, p, B, rows / B)
        _set(f, inv, cols.mla, mm[cols.mla] / (fit.mla_peak * ec), 1.0 / (bw * em), mixed)
    if fit.moe is not None:
        _apply_moe(fit, rows * table.moe_tokens, eff.tile_rows, bw, f, inv, (mm, peaks))
    if fit.mla_decode is not None:
        _apply_mla_decode(fit, rows, bw, f, inv, mm)
    return f, inv


def _apply_mla_decode(fit: Fits, rows, bw: float, f, inv, mm) -> None:
    """Set MLA's absorbed decode columns of ``f`` and ``inv`` (:func:`apply`) from the engine's fit at ``rows``
    query tokens (a verify pass's draft tokens included) × the rank's heads: its compute fraction of the 16-bit
    peak, its memory fraction the fit's constant (its context and bytes saturations are held at 1, so a decode
    generation's closed-form sums see the same fractions at every context; ``scripts/fit_mla_decode.py``)."""
    c, j = fit.mla_decode, fit.cols.mla_decode
    assert c is not None
    ec = c[0] * ef.sat(rows * fit.cols.mla_decode_heads, c[1], c[2])
    f[..., j] = mm[j] / (fit.bf16_peak * ec)
    inv[..., j] = 1.0 / (bw * c[5])


def _apply_moe(fit: Fits, tok, tile: int, bw: float, f, inv, rates) -> None:
    """Set the routed experts' columns of ``f`` and ``inv`` (:func:`apply`) from the MoE fit at ``tok`` tokens
    routed per layer (every attention-DP replica's), at the peak of the format the kernel computes in (a
    launcher's kernel: :data:`llmath.hardware.efficiency_fit.LAUNCHER_MOE_RUNS`; else the op's executed format);
    ``rates``: the roofline's matmul rate and each op's dense peak."""
    mm, peaks = rates
    cols = fit.cols
    _, _, k, E = cols.moe
    r = cols.routed
    peak = peaks[r] if fit.moe_peak is None else fit.moe_peak
    xm = rank_moe_bytes(tok, cols, fit.moe_bytes)
    ec, em, _ = ef.fractions_at(fit.moe, tok * k / E, fit.moe_s2, xm, tile)
    busy = busiest_rank_factor(tok, E, k, fit.moe_ranks)  # 1 without EP
    factor = ep_token_factor(fit.moe_ep_token, fit.moe_ranks, cols.routed_flops, peak, ec, busy)
    f[..., r] = mm[r] / (peak * ec) * busy * factor
    inv[..., r] = 1.0 / (bw * em)


def _filled(shape: tuple[int, ...], value) -> np.ndarray:
    """A new array of ``shape`` holding ``value`` broadcast (np.broadcast_to's copy, without its Python layers)."""
    out = np.empty(shape)
    out[...] = value
    return out


def _set(f, inv, j, fa, ia, mixed) -> None:
    """Columns ``j`` of ``f`` and ``inv`` set to ``fa`` and ``ia``, but in the ``mixed`` passes (which keep theirs)."""
    if mixed is not None:
        fa, ia = np.where(mixed, f[..., j], fa), np.where(mixed, inv[..., j], ia)
    f[..., j], inv[..., j] = fa, ia


@lru_cache(maxsize=256)
def fp4_gemms(table: Table, hw: Hardware, p: Precision) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mask, k, n·k) of the weight GEMMs that run in fp4 on ``hw`` (W4A4: NVFP4 weights and activations), routed
    experts aside (their grouped kernel is another): each one's reduction width k (input elements per row) and
    weight elements."""
    routed = set(columns(table).routed.tolist())
    fmts = op_executed(table, hw, p)
    mask = np.array([bool(table.is_weight_mm[i]) and f == "fp4" and i not in routed for i, f in enumerate(fmts)])
    k = np.array([max([t.coef for t in op.terms("act_in")] or [1]) for op in table.ops], dtype=float)
    nk = op_weights(table)[0]
    for a in (mask, k, nk):
        a.setflags(write=False)
    return mask, k, nk


def apply_fp4(
    table: Table, hw: Hardware, p: Precision, eff: Efficiency, batch, tokens, f, inv, mm, decode: bool = False
):
    """(compute factor, seconds per byte) with the engine's NVFP4 GEMM model on the fp4 weight GEMMs
    (``eff.fp4_gemm`` = (t0, mem, k-loop rate, compute share), :func:`llmath.hardware.efficiency_fit.fp4_gemm`):
    each streams its weights at ``mem`` of the bandwidth, computes at the kernel's own share of the dense FP4 peak
    where the GEMM fit's large-GEMM fraction ``c`` would be (a factor c / share on the fit's compute time), and
    no faster than one output tile walks the reduction width k, k / rate per kernel: a factor
    mm·k / (2·rows·n·k·rate) on the op's FLOPs at the matmul rate ``mm`` (rows: its token or logit rows); in a
    decode pass of ``eff.fused_gemms``, once per run of fused GEMMs (n·k the run's,
    :mod:`llmath.hardware.gemm_runs`). ``f``/``inv`` as :func:`apply` takes them."""
    assert eff.fp4_gemm is not None
    mask, k, nk = fp4_gemms(table, hw, p)
    if not mask.any():
        return f, inv
    if eff.fused_gemms and decode:  # one k loop per run of fused GEMMs (hardware/gemm_runs.py)
        nk = gemm_runs(table)[0]
    _, mem, rate, share = eff.fp4_gemm
    coef = eff.gemm_coef("fp4")
    rows = np.where(table.weight_logit_rows, np.asarray(batch, dtype=float)[..., None],
                    np.asarray(tokens, dtype=float)[..., None])  # fmt: skip
    kloop = mm * k / (2 * np.maximum(rows, 1.0) * nk * rate)
    f = np.ones(kloop.shape) if f is None else np.broadcast_to(f, np.broadcast_shapes(f.shape, kloop.shape))
    f = np.where(mask, np.maximum(f * (coef[0] if coef else eff.matmul) / share, kloop), f)
    inv = np.where(mask, 1.0 / (hw.memory_bandwidth_bytes_per_s * mem), inv)
    return f, inv


@lru_cache(maxsize=256)
def fp8_gemms(table: Table, p: Precision) -> np.ndarray:
    """(n_ops,) mask of the weight GEMMs that run in fp8 under ``p`` (W8A8) or read fp8 weights into a 16-bit
    GEMM (W8A16: the same fp8 weight stream; its per-kernel time is taken as the fp8 kernel's). Shared by the
    tables whose ops are alike and whose weight GEMMs are the same (:func:`llmath.ops.table.by_kinds`)."""
    return by_kinds(_fp8_gemms, table, p, table.is_weight_mm.tobytes())


def _fp8_gemms(table: Table, p: Precision, _weight_gemms: bytes) -> np.ndarray:
    fmts = op_formats(table, p)
    computes = {m: fmt.get(p.weight_format(m)).compute for m in {op.module for op in table.ops}}
    fp8 = [f == "fp8" or computes[op.module] == "fp8" for f, op in zip(fmts, table.ops, strict=True)]
    out = table.is_weight_mm & np.array(fp8, dtype=bool)
    out.setflags(write=False)
    return out


def overheads(
    table: Table, p: Precision, eff: Efficiency, decode: bool, base: np.ndarray, hw: Hardware | None = None
) -> np.ndarray:
    """(n_ops,) per-pass overheads with the fits' per-kernel times: context attention the larger of its
    ``t0`` and the eager launch; a MoE layer's ``t0`` shared by its routed GEMMs (decode: as fitted,
    prefill: at least the eager launch each); weight GEMMs running in fp8 the fp8 GEMM fit's ``t0`` less the
    activation quantiser it measured (``eff.fp8_gemm_overhead_s``: static scale, quantiser fused upstream, see
    :func:`llmath.hardware.efficiency_fit.fp8_static_gemm_overhead`; prefill: at least the eager launch; decode:
    the ``t0`` of ``eff.fp8_decode_gemm`` where the device has that fit).
    ``base`` is the roofline's (decode attention's included)."""
    if not eff.fit_overheads:
        return base
    cols = columns(table)
    ctx = eff.fit("attn_context", p.kv) if (cols.attn.size and not decode) else None
    mla = eff.fit("attn_mla_context", p.kv) if (cols.mla.size and not decode) else None
    mla_dec = eff.fit("attn_mla_decode", p.kv) if (cols.mla_decode.size and decode) else None
    moe = _moe_coef(cols, eff, p, executed(hw, p.compute)[0] if hw is not None else p.compute, decode)
    fp8 = fp8_gemms(table, p) if eff.fp8_gemm_overhead_s is not None else None
    fp4 = fp4_gemms(table, hw, p)[0] if (eff.fp4_gemm is not None and hw is not None) else None
    if (
        ctx is None
        and mla is None
        and mla_dec is None
        and moe is None
        and (fp8 is None or not fp8.any())
        and (fp4 is None or not fp4.any())
    ):
        return base
    out = base.copy()
    if fp8 is not None and eff.fp8_gemm_overhead_s is not None:
        t = eff.fp8_gemm_overhead_s if decode else max(eff.overhead_s, eff.fp8_gemm_overhead_s)
        if decode and eff.fp8_decode_gemm is not None:
            t = eff.fp8_decode_gemm[8]
        out[fp8] = table.kernels[fp8] * t
    if fp4 is not None and eff.fp4_gemm is not None:
        t = eff.fp4_gemm[0] if decode else max(eff.overhead_s, eff.fp4_gemm[0])
        out[fp4] = table.kernels[fp4] * t
    if ctx is not None:
        out[cols.attn] = table.kernels[cols.attn] * max(eff.overhead_s, ctx[8])
    if mla is not None:
        out[cols.mla] = table.kernels[cols.mla] * max(eff.overhead_s, mla[8])
    if mla_dec is not None:
        out[cols.mla_decode] = table.kernels[cols.mla_decode] * mla_dec[8]
    if moe is not None:
        # one grouped kernel per MoE layer: its t0 shared by that layer's routed GEMMs (gate, up, down), however
        # many layer kinds the table repeats them in (gpt-oss: sliding and full-attention layers)
        t0 = moe[8] / len({table.ops[i].name for i in cols.routed})
        out[cols.routed] = table.kernels[cols.routed] * (max(eff.overhead_s, t0) if not decode else t0)
    out.setflags(write=False)
    return out
