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
  context, so a generation's sum over steps is taken per context band (:func:`decode_attention_sum`).
* **routed experts** (the weight GEMMs whose weights are the MoE experts): compute at the dense peak ×
  ηc(tokens per expert, hidden · inter), memory at ηm(bytes of the whole expert layer), and the fit's ``t0``
  (one grouped MoE layer) shared equally by the layer's routed GEMMs. On one rank of a parallel layout the
  grouped kernel runs the rank's share s = 1 / (moe-TP × EP) of the layer (:func:`_expert_shares`): the same
  tokens per expert (all the tokens the layer routes, every attention-DP replica's), hidden · inter / moe-TP
  (moe-TP splits each expert's width, EP holds whole experts) and the layer's bytes × s. Checked against the
  split rows of the same tables, which the fit never saw: ``scripts/moe_split_check.py`` (docs/decode_step.md).
  Under EP the layer waits for its busiest rank: compute × the routing's busiest-rank factor
  (:func:`llmath.ops.routing.busiest_rank_factor`).
  Experts stored in another format than their GEMMs run in (4-bit weights dequantised to a 16-bit GEMM) are
  not the measured kernel: they keep the GEMM fit.

Formats: attention fits are keyed by the KV-cache format, the MoE fit by the compute format (fp16 uses bf16's).
Columns without a fit for their format keep the GEMM fit and the scalar fractions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from llmath.hardware import Hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.efficiency import Efficiency
from llmath.hardware.execution import executed, op_executed, op_formats
from llmath.hardware.gemm_runs import gemm_runs
from llmath.hardware.moe_ep_token import ep_token_factor, routed_flops_per_token
from llmath.model import formats as fmt
from llmath.model.dtypes import Precision
from llmath.ops import Table
from llmath.ops.kernel import Kernel
from llmath.ops.routing import busiest_rank_factor
from llmath.ops.table import by_kinds, op_weights


@dataclass(frozen=True)
class Columns:
    """Operator columns the fits apply to, and the sizes that are their features."""

    attn: np.ndarray  # attention columns (the dense attention kernel's, decoder-only, non-MLA)
    windows: np.ndarray  # their windows (inf: full attention)
    heads: np.ndarray  # their query and KV heads (a rank's share on a parallel layout)
    kv_heads: np.ndarray
    head_dim: int
    routed: np.ndarray  # routed expert GEMM columns
    moe: tuple[int, int, int, int]  # (hidden, expert inter, top-k, experts); zeros without MoE
    share: float = 1.0  # the share of every expert's weights the table's rank holds (1 / (moe-TP × EP))
    inter_share: float = 1.0  # the share of each expert's intermediate width it computes (1 / moe-TP)
    mla: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # MLA prefill attention (MLA_CONTEXT)
    mla_heads: np.ndarray = field(default_factory=lambda: np.zeros(0))  # their heads (a rank's share)
    mla_dims: tuple[int, int] = (0, 0)  # (qk_nope + qk_rope, v_head_dim) per head
    routed_flops: float = 0.0  # the rank's routed-expert FLOPs per routed token of one MoE layer (its own terms)


def _heads(op, d: int) -> tuple[float, float]:
    """(query heads, KV heads) of an attention op from its own terms: 4·H·d FLOPs per visible pair (QK and
    PV), 2·K·d elements of K/V read per position; on a layout, the rank's share."""
    fl = sum(t.coef for t in op.terms("flops") if t.mono.startswith("P:"))
    kv = sum(t.coef for t in op.terms("kv_read") if t.mono.startswith("K:"))
    return fl / (4 * d), kv / (2 * d)


@lru_cache(maxsize=512)
def columns(table: Table) -> Columns:
    spec = table.spec
    d = spec.head_dim
    # the fits are the dense attention kernel's (features: pairs, positions read): the operators that declare
    # it (ops/kernel.py) of a decoder-only, non-MLA model
    plain = spec.mla is None and spec.encoder is None
    attn = [i for i, op in enumerate(table.ops) if plain and op.kernel == Kernel.DENSE_ATTENTION]
    win = np.array([np.inf if table.ops[i].window is None else table.ops[i].window for i in attn], dtype=float)
    hk = np.array([_heads(table.ops[i], d) for i in attn], dtype=float).reshape(-1, 2)
    routed: list[int] = []
    m = spec.moe
    if m is not None:
        routed = np.flatnonzero(table.is_weight_mm & op_weights(table)[1]).tolist()
    moe = (spec.d_model, m.d_ff_expert, m.top_k, m.n_experts) if m is not None else (0, 0, 0, 0)
    share, inter = _expert_shares(table, routed) if routed else (1.0, 1.0)
    r = np.array(routed, dtype=int)
    mla, mh, dims = _mla_columns(table)
    per_layer = routed_flops_per_token(table, routed)
    return Columns(np.array(attn, dtype=int), win, hk[:, 0], hk[:, 1], d, r, moe, share, inter, mla, mh, dims,
                   per_layer)  # fmt: skip


@lru_cache(maxsize=256)
def attention_columns(table: Table) -> np.ndarray:
    """The ops whose attention has a fitted kernel model (dense attention and MLA's prefill attention): the
    columns a pass mixing decoders and prefill chunks times in two parts."""
    cols = columns(table)
    out = np.concatenate([cols.attn, cols.mla])
    out.setflags(write=False)
    return out


def _mla_columns(table: Table) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """MLA's prefill attention columns (decoder-only), their heads from their own terms (2·(qk + v) FLOPs per
    head per visible pair; on a layout, the rank's share) and the per-head widths."""
    m = table.spec.mla
    if m is None or table.spec.encoder is not None:
        return np.zeros(0, dtype=int), np.zeros(0), (0, 0)
    q, v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
    cols = [i for i, op in enumerate(table.ops) if op.kernel == Kernel.MLA_CONTEXT]
    fl = [sum(t.coef for t in table.ops[i].terms("flops") if t.mono.startswith("P:")) for i in cols]
    return np.array(cols, dtype=int), np.array(fl, dtype=float) / (2 * (q + v)), (q, v)


def _mla_fractions(coef, cols: Columns, p: Precision, B, T):
    """(ηc, ηm) of MLA prefill attention: B sequences of T new tokens, each column's heads."""
    kv = _fmt(p.kv) or "bf16"
    q, v = cols.mla_dims
    xm = ef.mla_context_bytes(B, T, cols.mla_heads, q, v, kv, kv)  # mla_context_cost's, B and T float arrays
    ec, em, _ = ef.fractions(coef, T, B * cols.mla_heads * T, xm)
    return ec, em


def _expert_shares(table: Table, routed: list[int]) -> tuple[float, float]:
    """(share of every expert's weights, share of each expert's intermediate width) one rank computes, from its
    routed GEMMs' own terms: each reads hidden · inter weights per expert hit times the first share; the
    gate/up GEMMs read top-k · hidden inputs per routed token (× the attention-DP replicas whose tokens the layer
    routes) over the experts' share the rank holds, so their ratio is the expert-parallel share and what is
    left is the moe-TP split of the intermediate width (the down GEMM's input, top-k · inter / moe-TP, is never
    larger: an expert's inter is below hidden)."""
    spec, m = table.spec, table.spec.moe
    assert m is not None
    per_hit = max(t.coef for i in routed for t in table.ops[i].terms("weight") if t.mono == "U:moe")
    share = min(per_hit / (spec.d_model * m.d_ff_expert), 1.0)
    rows_in = max(t.coef for i in routed for t in table.ops[i].terms("act_in") if t.mono == "BT")
    ep_share = min(rows_in / (m.top_k * spec.d_model * table.moe_tokens), 1.0)
    return share, min(share / ep_share, 1.0)


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
    return _fmt(run_fmt) or "bf16"


def rank_moe_bytes(tokens, cols: Columns, weights: str):
    """The MoE fit's memory feature for one rank's share of the expert layer: the weights of the experts hit
    and the routed activations (:func:`llmath.hardware.efficiency_fit.moe_cost`), times the share of every
    expert the rank holds (moe-TP splits each expert, EP holds a share of them: the same bytes per token)."""
    h, i, k, E = cols.moe
    return ef.moe_bytes(np.asarray(tokens, dtype=float), h, i, k, E, weights) * cols.share


def _fmt(dtype: str) -> str | None:
    return ef.FORMAT_ALIASES.get(dtype)


def decode_attention_coef(eff: Efficiency, p: Precision) -> tuple[float, ...] | None:
    return eff.fit("attn_decode", p.kv)


def _decode_fractions(coef, cols: Columns, p: Precision, B, u, heads=None, kv_heads=None):
    """(ηc, ηm) of decode attention at batch B and u positions read (arrays broadcast over the columns)."""
    H = cols.heads if heads is None else heads
    K = cols.kv_heads if kv_heads is None else kv_heads
    xm = ef.attn_decode_cost(B, u - 1, H, K, cols.head_dim, _fmt(p.kv) or "bf16")[2]
    ec, em, _ = ef.fractions(coef, B * H, u, xm)
    return ec, em


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


@lru_cache(maxsize=1024)
def fits(table: Table, hw: Hardware, p: Precision, eff: Efficiency, decode: bool, with_context: bool, run_fmt: str):
    """The :class:`Fits` of a pass (``None``: no fitted column applies)."""
    cols = columns(table)
    do_attn = cols.attn.size and (with_context or not decode)
    ctx = eff.fit("attn_decode" if decode else "attn_context", p.kv) if do_attn else None
    moe = _moe_coef(cols, eff, p, run_fmt, decode)
    mla = eff.fit("attn_mla_context", p.kv) if (cols.mla.size and not decode) else None
    if ctx is None and moe is None and mla is None:
        return None
    h, i, _, _ = cols.moe
    s2 = ef.sat(float(h * i) * cols.inter_share, moe[3], moe[4]) if moe is not None else 1.0
    ranks = round(cols.inter_share / cols.share)
    launched = launcher_moe(cols, eff, p, decode)
    key = launched[1] if launched is not None else _moe_bytes_key(p, run_fmt, eff)
    moe_peak = hw.peak(ef.LAUNCHER_MOE_RUNS[key]) if launched is not None else None
    peak = ef.peak_for("attn_mla_context", hw, p.kv) if mla is not None else 0.0
    ept = eff.fit("moe_ep_token", key) if (moe is not None and launched is None) else None
    return Fits(cols, ctx, mla, moe, key, moe_peak, s2, ranks, peak, ept[0] if ept else 0.0)


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
            ec, em = _decode_fractions(ctx, cols, p, B, np.minimum(S + 1, cols.windows))
            f[..., j], inv[..., j] = mm[j] / (hw.vector_peak * ec), 1.0 / (bw * em)
        else:
            T = rows / B
            kv = _fmt(p.kv) or "bf16"
            xm = ef.attn_context_cost(B, T, cols.heads, cols.kv_heads, cols.head_dim, kv, kv)[2]
            ec, em, _ = ef.fractions(ctx, T, B * cols.heads * T, xm)
            _set(f, inv, j, mm[j] / (peaks[j] * ec), 1.0 / (bw * em), mixed)
    if fit.mla is not None:
        ec, em = _mla_fractions(fit.mla, cols, p, B, rows / B)
        _set(f, inv, cols.mla, mm[cols.mla] / (fit.mla_peak * ec), 1.0 / (bw * em), mixed)
    if fit.moe is not None:
        _apply_moe(fit, rows * table.moe_tokens, eff.tile_rows, bw, f, inv, (mm, peaks))
    return f, inv


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
    moe = _moe_coef(cols, eff, p, executed(hw, p.compute)[0] if hw is not None else p.compute, decode)
    fp8 = fp8_gemms(table, p) if eff.fp8_gemm_overhead_s is not None else None
    fp4 = fp4_gemms(table, hw, p)[0] if (eff.fp4_gemm is not None and hw is not None) else None
    if (
        ctx is None
        and mla is None
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
    if moe is not None:
        # one grouped kernel per MoE layer: its t0 shared by that layer's routed GEMMs (gate, up, down), however
        # many layer kinds the table repeats them in (gpt-oss: sliding and full-attention layers)
        t0 = moe[8] / len({table.ops[i].name for i in cols.routed})
        out[cols.routed] = table.kernels[cols.routed] * (max(eff.overhead_s, t0) if not decode else t0)
    out.setflags(write=False)
    return out


# ---- decode attention over a generation: band-wise closed form ---------------------------------------
#
# Decode attention's step time at u positions is t(u) = max(c(u), m(u)) with c(u) = FLOPs(u) / (vector peak ·
# ηc(B·H, u)) and m(u) = bytes(u) / (bandwidth · ηm(bytes(u))): FLOPs and bytes are affine in u, the fractions
# are not, so the affine closed form of the roofline (one split where the bound flips) does not apply as is.
# Per context band [2^k, 2^(k+1)) c and m are replaced by their secants through the band's edges (exact at
# every power of two; a secant of u ↦ u / sat(u) over a factor-2 band is within 1.5% of it for exponents
# ≥ 0.5), and each band is summed in closed form, split where its two secants cross. G(v), the sum over
# u < v, is a cumulative table over whole bands plus one partial band, so a generation costs two lookups
# whatever its length; the first and last steps use the exact t(u).


def _tri(L0, L1, lo, hi):
    """Σ over integers u in [lo, hi) of L0 + L1·u."""
    n = hi - lo
    return L0 * n + L1 * n * (lo + hi - 1) / 2


def _lsum(c0, c1, m0, m1, a, x):
    """Σ over integers u in [a, x) of max(c0 + c1·u, m0 + m1·u), split where the lines cross (arrays)."""
    dc = c1 - m1
    us = np.divide(m0 - c0, dc, out=np.full(np.broadcast_shapes(np.shape(dc), np.shape(c0)), np.inf), where=dc != 0)
    s = np.clip(np.ceil(us), a, x)
    lo_c, hi_c, lo_m, hi_m = _tri(c0, c1, a, s), _tri(c0, c1, s, x), _tri(m0, m1, a, s), _tri(m0, m1, s, x)
    out = np.where(dc > 0, lo_m + hi_c, lo_c + hi_m)
    return np.where(dc == 0, np.maximum(lo_c + hi_c, lo_m + hi_m), out)


def _lsum1(c0: float, c1: float, m0: float, m1: float, a: float, x: float) -> float:
    """Scalar :func:`_lsum`."""
    dc = c1 - m1
    if dc == 0:
        return max(_tri(c0, c1, a, x), _tri(m0, m1, a, x))
    s = min(max(float(math.ceil((m0 - c0) / dc)), a), x)
    if dc > 0:
        return _tri(m0, m1, a, s) + _tri(c0, c1, s, x)
    return _tri(c0, c1, a, s) + _tri(m0, m1, s, x)


@dataclass(frozen=True)
class DecodeAttention:
    """Decode attention's (compute, memory) step time at u: ``coef`` its fit, ``rates`` (vector peak, vector
    rate, bandwidth). Lines are 6-tuples (FLOPs, vector FLOPs, bytes as a + b·u: F0, F1, V0, V1, M0, M1)."""

    coef: tuple[float, ...]
    cols: Columns
    p: Precision
    rates: tuple[float, float, float]

    def cm(self, L, B, u, heads=None, kv_heads=None):
        ec, em = _decode_fractions(self.coef, self.cols, self.p, B, u, heads, kv_heads)
        vpk, vec, bw = self.rates
        F0, F1, V0, V1, M0, M1 = L
        return (F0 + F1 * u) / (vpk * ec) + (V0 + V1 * u) / vec, (M0 + M1 * u) / (bw * em)

    def bands(self, lines, Bu, K: int):
        """Per band k < K: secant lines (c0, c1, m0, m1), (nB, nj, K), and G(2^k), (nB, nj, K + 1)."""
        e = 2.0 ** np.arange(K + 1)
        H, K_ = self.cols.heads[:, None], self.cols.kv_heads[:, None]
        c, m = self.cm(tuple(lines[:, i, :, None] for i in range(6)), Bu[:, None, None], e, H, K_)
        c1, m1 = np.diff(c, axis=-1) / e[:-1], np.diff(m, axis=-1) / e[:-1]
        c0, m0 = c[..., :-1] - c1 * e[:-1], m[..., :-1] - m1 * e[:-1]
        full = _lsum(c0, c1, m0, m1, e[:-1], e[1:])
        G = np.concatenate([np.zeros(full.shape[:-1] + (1,)), np.cumsum(full, axis=-1)], axis=-1)
        return c0, c1, m0, m1, G


def _G(band, idx, v, K: int):
    """G(v) = Σ_{u<v} of the banded step time, v ≥ 1, (…, nj); ``idx`` (…) picks each element's batch."""
    k = np.clip(np.floor(np.log2(v)), 0, K - 1).astype(np.intp)
    nj = band[0].shape[1]
    flat = (idx[..., None] * nj + np.arange(nj)) * K + k  # into the (nB, nj, K) tables
    c0, c1, m0, m1 = (a.reshape(-1)[flat] for a in band[:4])
    G = band[4][..., :K].reshape(-1)[flat]
    return G + _lsum(c0, c1, m0, m1, np.exp2(k), v)


def band_count(u0, n, w) -> int:
    """Context bands [2^k, 2^(k+1)) a generation's sum needs: those below its largest position read."""
    return max(int(np.ceil(np.log2(max(float(np.max(np.minimum(u0 + n, w))), 2.0)))), 1)


def _rows(lines, Bu, idx):
    """Each element's attention lines (6 × (…, nj)) and batch (…, 1), picked by ``idx``."""
    return tuple(lines[:, i, :][idx] for i in range(6)), Bu[idx][..., None]


def _below(da: DecodeAttention, lines, Bu, idx, u0, n, w, band):
    """Σ over the n steps of the attention columns' step times, without overheads (…, nj), and the rows
    (:func:`_rows`) when the windowed tail needed them (else ``None``)."""
    hi = np.minimum(u0 + n, w)  # raw positions below the window: [u0, hi)
    K = band_count(u0, n, w)
    band = da.bands(lines, Bu, K) if band is None else band
    g = _G(band, idx, np.stack(np.broadcast_arrays(np.maximum(hi, u0), u0 + 0 * hi)), K)  # G(hi), G(u0) at once
    below = np.where(hi > u0, g[0] - g[1], 0.0)
    tail = np.maximum(u0 + n - np.maximum(u0, w), 0)
    if not np.any(tail > 0):
        return below, None
    L, Bk = _rows(lines, Bu, idx)
    return below + tail * np.maximum(*da.cm(L, Bk, np.where(np.isinf(w), 1.0, w))), (L, Bk)


def decode_attention_sum(da: DecodeAttention, lines, Bu, idx, u0, n, w, ov, band=None):
    """(total, first, last) seconds of the attention columns over n steps with u_j = min(u0 + j, w), each
    (…, nj). ``lines`` (nB, 6, nj) per distinct batch ``Bu``; ``idx`` (…) each element's batch; u0, n (…, 1).
    ``band``: ``da.bands(lines, Bu, band_count(u0, n, w))``, when the caller has it."""
    below, rows = _below(da, lines, Bu, idx, u0, n, w, band)
    L, Bk = _rows(lines, Bu, idx) if rows is None else rows
    ends = np.stack(np.broadcast_arrays(np.minimum(u0, w), np.minimum(u0 + np.maximum(n - 1, 0), w)))
    t = np.maximum(*da.cm(L, Bk, ends)) + ov  # the first and the last step
    return below + n * ov, t[0], t[1]


def decode_attention_total(da: DecodeAttention, lines, Bu, idx, u0, n, w, ov, band=None):
    """:func:`decode_attention_sum`'s total alone (no exact first and last step): what a sweep reports."""
    return _below(da, lines, Bu, idx, u0, n, w, band)[0] + n * ov


def scalar_step(da: DecodeAttention, L, B: float, i: int):
    """A pure-Python t(u) of attention column ``i`` at batch B: :meth:`DecodeAttention.cm`'s max, with every
    constant of the batch folded in (the scalar path is timed per scenario)."""
    c, h1, p1, h2, p2, mem, hm, pm, _ = da.coef
    vpk, vec, bw = da.rates
    F0, F1, V0, V1, M0, M1 = L
    H, d = float(da.cols.heads[i]), da.cols.head_dim
    kvb = 2 * float(da.cols.kv_heads[i]) * d * ef.BYTES[_fmt(da.p.kv) or "bf16"] * B  # xm = kvb·u + qo
    qo = 4 * H * d * B
    c1 = c / (1 + (h1 / (B * H)) ** p1)

    def t(u: float) -> float:  # xm: efficiency_fit.attn_decode_cost
        ec = c1 / (1 + (h2 / u) ** p2)
        em = mem / (1 + (hm / (kvb * u + qo)) ** pm)
        return max((F0 + F1 * u) / (vpk * ec) + (V0 + V1 * u) / vec, (M0 + M1 * u) / (bw * em))

    return t


def decode_attention_scalar(band, t, u0: float, n: float, w: float, ov: float):
    """Scalar :func:`decode_attention_sum` for one column: ``band`` its (c0, c1, m0, m1, G) lists, ``t`` its
    exact step time (:func:`scalar_step`)."""
    K = len(band[0])

    def G(v: float) -> float:
        k = min(max(math.frexp(v)[1] - 1, 0), K - 1)  # floor(log2 v) for v ≥ 1
        return band[4][k] + _lsum1(band[0][k], band[1][k], band[2][k], band[3][k], 2.0**k, v)

    hi = min(u0 + n, w)
    total = G(hi) - G(u0) if hi > u0 else 0.0
    tail = max(u0 + n - max(u0, w), 0.0)
    if tail > 0:
        total += tail * t(w)
    return total + n * ov, t(min(u0, w)) + ov, t(min(u0 + max(n - 1, 0.0), w)) + ov
