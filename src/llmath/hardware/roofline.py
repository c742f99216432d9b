"""Roofline times per operator, and whole generations in closed form.

An operator's time is ``max(compute, memory) + kernels × overhead`` with
``compute = matmul FLOPs / (peak(dtype) · η_mm) + vector FLOPs / (vector peak · η_vec)`` and
``memory = bytes / (bandwidth · η_mem)``; it is compute-bound when the first term wins. ``ideal``
efficiency is the pure roofline (η = 1, no overhead); ``expected`` uses achievable fractions
measured on real hardware (``data/efficiency.json``, justified in docs/hardware.md), all overridable.

A decode step at context S costs, per operator, an affine function of u = min(S + 1, W) (the positions
its layer attends), so its time is the max of two affine functions of u. A generation's decode steps
are summed per operator in closed form, split where the bound flips: a 10⁶-token generation costs what
one step costs, with no Python loop over steps.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from llmath.hardware import Hardware, aligned_moe
from llmath.hardware import efficiency_fit as ef
from llmath.hardware import fitted_columns as fc
from llmath.hardware import fitted_ops as fo
from llmath.hardware.efficiency import IDEAL, Efficiency, efficiency, expected  # noqa: F401 (re-exported)
from llmath.hardware.execution import executed, op_executed, op_peaks
from llmath.hardware.gemm_runs import gemm_runs
from llmath.model import formats as fmt
from llmath.model.dtypes import Precision
from llmath.model.traits import traits
from llmath.ops import CLASSES, Scenario, Table, one_hot
from llmath.ops.launches import pass_launches
from llmath.ops.table import _MNK_PER_CALL, by_kinds, byte_key, byte_rhs, matmul_rows, op_weights

I_FLOPS, I_VFLOPS = CLASSES.index("flops"), CLASSES.index("vflops")
# Weight GEMMs with at most this many token rows stream weights like a GEMV (decode); above it they are
# compute-bound enough that max(compute, memory) at the large-GEMM rates describes them. A calibrated
# skinny_rows curve is used up to this cut as well.
SKINNY_ROWS = 64


def byte_weights_key(table: Table, p: Precision) -> tuple[tuple[float, ...], ...]:
    """Hashable (n_ops, n_classes) bytes per element (weights by each op's module)."""
    return byte_key(table, p)


def byte_weights(table: Table, p: Precision) -> np.ndarray:
    """(n_ops, n_classes) bytes per element of each op's classes (weights by the op's module)."""
    return table.byte_matrix(p)


@lru_cache(maxsize=1024)
def run_format(hw: Hardware, p: Precision) -> str:
    """The format the default weights' GEMMs run in on ``hw`` (after fallbacks): the fitted models' key."""
    return executed(hw, p.compute)[0]


def _base_inv(table: Table, hw: Hardware, eff: Efficiency, decode: bool) -> np.ndarray:
    """(n_ops,) seconds per byte before the skinny-GEMM adjustment (decode attention has its own)."""
    frac = (
        np.where(table.is_kv_attention, eff.attention_decode, eff.memory)
        if decode
        else np.full(len(table.ops), eff.memory)
    )
    return 1.0 / (hw.memory_bandwidth_bytes_per_s * frac)


def _curve(pairs: tuple[tuple[int, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    """A measured (rows, fraction) curve as arrays, for interpolation in log(rows)."""
    return np.array([x for x, _ in pairs], dtype=float), np.array([f for _, f in pairs], dtype=float)


def _per_row_kind(table: Table, f_tokens, f_batch, other):
    """(…, n_ops): ``f_tokens`` for weight GEMMs over the B·T tokens, ``f_batch`` for the LM head's B logit
    rows, ``other`` for every other op (each broadcast over the leading axes)."""
    return np.where(table.weight_token_rows, f_tokens, np.where(table.weight_logit_rows, f_batch, other))


@lru_cache(maxsize=1024)
def _inv_variants(table: Table, hw: Hardware, eff: Efficiency, decode: bool) -> np.ndarray:
    """(4, n_ops) seconds per byte for [token rows skinny?] × [logit rows skinny?] (default efficiency)."""
    bw = hw.memory_bandwidth_bytes_per_s
    base = _base_inv(table, hw, eff, decode)
    skinny = 1.0 / (bw * eff.skinny)
    out = np.stack(
        [_per_row_kind(table, skinny if t else base, skinny if lg else base, base) for t in (0, 1) for lg in (0, 1)]
    )
    out.setflags(write=False)
    return out


@lru_cache(maxsize=512)
def _gemm_shapes(table: Table, fused: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(n·k, rows share) of each op for the fitted GEMM model: its weight elements per run (per expert for
    routed experts), and the share of the token rows one of its GEMMs sees: top-k / E for routed experts,
    times the tokens the layer routes per token of the table (``moe_tokens``: with data-parallel attention,
    an expert's rows come from every replica)."""
    elements, routed = op_weights(table)
    nk = (gemm_runs(table)[0] if fused else elements).copy()
    share = np.ones(len(table.ops))
    moe = table.spec.moe
    if moe is not None:
        share[routed] = moe.top_k / moe.n_experts * table.moe_tokens
        nk[routed] /= moe.n_experts  # a routed op's parameters are those of all its experts
    nk.setflags(write=False)
    share.setflags(write=False)
    return nk, share


def stream_format(hw: Hardware, eff: Efficiency, p: Precision) -> str:
    """The GEMM fit whose memory fraction the default weights stream at: the weights' own tensor format where
    it has a fit (fp8 weights dequantised to a bf16 GEMM, W8A16, read the same fp8 bytes the measured fp8
    kernel reads), else the format the GEMM runs in."""
    own = fmt.get(p.weights).compute
    return own if (own is not None and eff.gemm_coef(own) is not None) else run_format(hw, p)


@lru_cache(maxsize=1024)
def _fitted_inv(table: Table, hw: Hardware, eff: Efficiency, p: Precision, decode: bool) -> np.ndarray | None:
    """(n_ops,) seconds per byte with a fitted GEMM model: weight GEMMs at its memory fraction for their
    weight bytes per run (:func:`stream_format`; in decode, FP8 weight GEMMs at ``eff.fp8_decode_gemm``'s, one
    byte per weight), the other ops as :func:`_base_inv`; ``None`` without a fit for ``p``'s format."""
    coef = eff.gemm_coef(stream_format(hw, eff, p)) if eff.gemm_coef(run_format(hw, p)) is not None else None
    if coef is None:
        return None
    # a kernel's weight stream: a routed op's experts run as one grouped GEMM per layer, which streams the
    # weights of all of them (the MoE fit's memory feature is the whole expert layer's bytes as well)
    # (in decode, a run of fused GEMMs streams the run's weights: hardware/gemm_runs.py)
    stream = gemm_runs(table)[0] if (eff.fused_gemms and decode) else op_weights(table)[0]
    em = ef.fractions(coef, 1.0, 1.0, stream * p.weight_bytes)[1]
    if decode and eff.fp8_decode_gemm is not None:  # FP8 weight GEMMs of a decode step: their own fit
        em = np.where(fo.fp8_gemms(table, p), ef.fractions(eff.fp8_decode_gemm, 1.0, 1.0, stream)[1], em)
    out = np.where(table.is_weight_mm, 1.0 / (hw.memory_bandwidth_bytes_per_s * em), _base_inv(table, hw, eff, decode))
    out.setflags(write=False)
    return out


def inv_bandwidth(
    table: Table, hw: Hardware, eff: Efficiency, batch, tokens, decode: bool, p: Precision | None = None
) -> np.ndarray:
    """(…, n_ops) seconds per byte of each op: 1 / (bandwidth × achievable fraction).

    Weight GEMMs with few rows stream their weights like a GEMV and get the ``skinny`` fraction (or the
    calibrated ``skinny_rows`` curve, interpolated in log rows); their rows are the B·T tokens, or the B
    logit rows for the LM head. Decode attention reading the KV cache gets ``attention_decode``. With a
    fitted GEMM model for ``p``'s format, weight GEMMs get its memory fraction at any rows instead. An engine's
    measured weight-stream fraction (``engine_stream``) comes first for weight GEMMs.
    """
    out = _model_inv_bandwidth(table, hw, eff, batch, tokens, decode, p)
    if eff.engine_stream is None:
        return out
    return np.where(table.is_weight_mm, 1.0 / (hw.memory_bandwidth_bytes_per_s * eff.engine_stream), out)


def _model_inv_bandwidth(table: Table, hw: Hardware, eff: Efficiency, batch, tokens, decode: bool, p) -> np.ndarray:
    """:func:`inv_bandwidth` from the fitted or default fractions."""
    fit = _fitted_inv(table, hw, eff, p, decode) if (eff.gemm_fit and p is not None) else None
    if fit is not None:
        return fit
    if not eff.skinny_rows:
        v = _inv_variants(table, hw, eff, decode)
        idx = 2 * (np.asarray(tokens) <= SKINNY_ROWS) + (np.asarray(batch) <= SKINNY_ROWS)
        return v[idx]
    bw = hw.memory_bandwidth_bytes_per_s
    base = _base_inv(table, hw, eff, decode)
    xs, fr = _curve(eff.skinny_rows)
    cap = min(xs.max(), SKINNY_ROWS)

    def inv(rows):
        r = np.asarray(rows, dtype=float)[..., None]
        return np.where(r <= cap, 1.0 / (bw * np.interp(np.log(np.maximum(r, 1)), np.log(xs), fr)), base)

    return _per_row_kind(table, inv(tokens), inv(batch), base)


def op_bandwidth(
    table: Table, hw: Hardware, eff: Efficiency, batch, tokens, decode: bool, p: Precision | None = None
) -> np.ndarray:
    """(…, n_ops) achievable bytes/s of each op (see :func:`inv_bandwidth`)."""
    return 1.0 / inv_bandwidth(table, hw, eff, batch, tokens, decode, p)


def rates(hw: Hardware, p: Precision, eff: Efficiency, table: Table) -> tuple[np.ndarray, float]:
    """Achievable matmul FLOP/s per op (each in the format the device executes it in) and vector FLOP/s."""
    return _mm_rates(table, hw, p, eff), hw.vector_peak * eff.vector


@lru_cache(maxsize=1024)
def _mm_rates(table: Table, hw: Hardware, p: Precision, eff: Efficiency) -> np.ndarray:
    """:func:`_mm_rates_of`, shared by the tables whose ops are alike (:func:`llmath.ops.table.by_kinds`)."""
    return by_kinds(_mm_rates_of, table, hw, p, eff)


def _mm_rates_of(table: Table, hw: Hardware, p: Precision, eff: Efficiency) -> np.ndarray:
    """Matmul FLOP/s per op. An fp8 GEMM without a measured fp8 GEMM table (the default fractions) runs at
    least at the 16-bit rate it replaces: on a device whose fp8 and bf16 peaks are equal (Gaudi 3, TPU v5p)
    the lower default fp8 fraction would otherwise make W8A8 slower than W8A16, which no measurement says."""
    fmts = op_executed(table, hw, p)
    eta = {f: eff.matmul_for(f) for f in set(fmts)}  # per format: a table's ops run in a few
    out = op_peaks(table, hw, p) * np.array([eta[f] for f in fmts])
    sixteen = [hw.peak_flops_per_s[f] * eff.matmul for f in ("bf16", "fp16") if f in hw.peak_flops_per_s]
    if sixteen and eff.gemm_coef("fp8") is None:
        out = np.where(np.array([f == "fp8" for f in fmts]), np.maximum(out, max(sixteen)), out)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=1024)
def _gemm_groups(table: Table, coef: tuple[float, ...], fused: bool = False):
    """For :func:`mm_factor`'s fitted GEMM model, one group per (row kind: token rows or logit rows, distinct
    rows share: routed experts see top-k / E): whether each group is of logit rows, its share, and the weight
    GEMMs (token rows' first), each with its group's index and its weight-size saturation sat(n·k; h2, p2)."""
    nk, share = _gemm_shapes(table, fused)
    logits: list[bool] = []
    shares: list[float] = []
    cols: list[np.ndarray] = []
    idx: list[np.ndarray] = []
    for is_logit, mask in ((False, table.weight_token_rows), (True, table.weight_logit_rows)):
        ops = np.flatnonzero(mask)
        sh = share[ops]
        for v in sorted(set(sh.tolist())):  # np.unique's values; np.unique would import numpy.ma (10 ms a process)
            cols.append(ops[sh == v])
            idx.append(np.full(cols[-1].size, len(idx)))
            logits.append(is_logit)
            shares.append(v)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.intp)
    i = np.concatenate(idx) if idx else np.zeros(0, dtype=np.intp)
    return np.array(logits, dtype=bool), np.array(shares, dtype=float), c, i, ef.sat(nk[c], coef[3], coef[4])


def mm_factor(
    table: Table, eff: Efficiency, batch, tokens, dtype: str | None = None, fused: bool = False
) -> np.ndarray | None:
    """(…, n_ops) factor on weight GEMMs' compute time at the ``matmul`` rate, 1 for the other ops; ``None``
    when there is none (the default efficiencies).

    With a fitted GEMM model for ``dtype``: η_matmul / ηc(rows, n·k) per op (the compute time becomes
    FLOPs / (peak · ηc)), with the model's tile floor (:func:`llmath.hardware.efficiency_fit.fractions`): at a
    few rows the GEMM (a GEMV or split-K kernel; weight-only formats' dequantising kernels alike) computes
    one tile at the large-GEMM fraction and streams its weights, so its time is set by the bytes on every
    device. Else 1 / η(rows) from a calibrated ``matmul_rows`` curve. An engine's measured rate
    (``engine_matmul``) comes first: η_matmul / that fraction at every row count. ``fused``: each GEMM's n·k is
    that of its run of fused GEMMs (:mod:`llmath.hardware.gemm_runs`; decode passes of ``eff.fused_gemms``)."""
    if eff.engine_matmul is not None:
        weight = np.logical_or(table.weight_token_rows, table.weight_logit_rows)
        per_op = np.where(weight, eff.matmul_for(dtype or "") / eff.engine_matmul, 1.0)
        return np.broadcast_to(per_op, np.broadcast_shapes(np.shape(tokens), np.shape(batch)) + per_op.shape).copy()
    coef = eff.gemm_coef(dtype)
    if coef is not None:
        mm, (c, h1, p1) = eff.matmul_for(dtype or ""), coef[:3]
        out = np.ones(np.broadcast(tokens, batch).shape + (len(table.ops),))
        logits, shares, cols, idx, s2 = _gemm_groups(table, coef, fused)
        if not cols.size:
            return out
        rows = np.where(logits, np.asarray(batch, dtype=float)[..., None], np.asarray(tokens, dtype=float)[..., None])
        x = np.maximum(rows * shares, 1.0)  # every (row kind, share)'s rows at once
        s1 = ef.sat_positive(x, h1, p1)  # x ≥ 1: sat's and tile_share's floor is no-op
        if eff.tile_rows:
            s1 = np.maximum(s1, ef.tile_share_positive(x, eff.tile_rows))
        out[..., cols] = mm / (c * s1[..., idx] * s2)  # as efficiency_fit.fractions' ηc; the rows' saturation per share
        return out
    if not eff.matmul_rows:
        return None
    xs, fr = _curve(eff.matmul_rows)

    def inv_eta(rows):
        r = np.asarray(rows, dtype=float)[..., None]
        return np.where(r <= xs.max(), 1.0 / np.interp(np.log(np.maximum(r, 1)), np.log(xs), fr), 1.0)

    return _per_row_kind(table, inv_eta(tokens), inv_eta(batch), 1.0)


@lru_cache(maxsize=1024)
def overheads(
    table: Table, eff: Efficiency, decode: bool, p: Precision | None = None, hw: Hardware | None = None
) -> np.ndarray:
    """(n_ops,) overhead seconds of each op per pass: its kernels × the per-kernel overhead (in decode, decode
    attention's own where one was fitted; with ``p``, context attention's and MoE layers' fitted ones).
    Read-only, computed once per (table, efficiency, pass, precision): a serving search asks for it per
    iteration."""
    ov = eff.decode_overhead_s if decode else eff.overhead_s
    if decode and eff.attention_overhead_s is not None:
        base = table.kernels * np.where(table.is_kv_attention, eff.attention_overhead_s, ov)
    else:
        base = table.kernels * ov
    out = base if p is None else fo.overheads(table, p, eff, decode, base, hw)
    if eff.fused_gemms and decode:
        out = out * gemm_runs(table)[1]  # one per-kernel time per run of fused GEMMs (hardware/gemm_runs.py)
    out.setflags(write=False)
    return out


EAGER_HOST_UNITS = ("launch", "operator")


def eager_host_s(table: Table, per_kernel_s: float, unit: str = "launch", moe_path: str = "", ep: int = 1) -> float:
    """Host seconds of one pass launched op by op from Python (no CUDA graph): the engine's host time per
    ``unit`` × the pass's count of them: ``launch``, the kernels the engines' module code launches for it
    (:func:`llmath.ops.launches.pass_launches`: fused projections one launch, a routed-expert layer's token sort
    and reduction more, or as the MoE kernel path ``moe_path`` launches it under ``ep`` expert-parallel ranks);
    ``operator``, its listed operators. The pass takes ``max(GPU time, this)``: the host enqueues ahead of the GPU
    until the GPU's work is shorter than the host's dispatch, then the GPU waits on every launch."""
    count = pass_launches(table, moe_path, ep) if unit == "launch" else float(table.kernels.sum())
    return count * per_kernel_s


def piecewise_host_s(table: Table, per_call_s: float) -> float:
    """Host seconds of one pass that replays piecewise CUDA graphs (vLLM's ``PIECEWISE`` runtime mode): the graph
    is split at each attention call, which runs eagerly between two replays; ``per_call_s`` is the host time of
    one such call with its replay, × the pass's attention calls (the table's KV-attention operators, one per
    layer). The pass takes ``max(GPU time, this)``: replays and eager launches are enqueued without a wait, so
    the host runs ahead of the GPU until its own time is the longer."""
    return float(table.kernels[table.is_kv_attention].sum()) * per_call_s


def _fitted(table: Table, hw: Hardware, p: Precision, eff: Efficiency, batch, tokens, decode: bool, context):
    """(compute factor or None, seconds per byte) per op, the fitted attention and MoE columns included. A decode
    step of a model that reruns its context (model/traits.py, BLT) runs all S + 1 positions: its GEMMs have the
    rows of a prefill of S + 1 tokens."""
    if decode and context is not None and traits(table.spec).reruns_context:
        tokens, decode = batch * (context + 1), False
    f = mm_factor(table, eff, batch, tokens, run_format(hw, p), eff.fused_gemms and decode)
    inv = inv_bandwidth(table, hw, eff, batch, tokens, decode, p)
    if eff.kernel_fits:
        rts = (rates(hw, p, eff, table)[0], op_peaks(table, hw, p), run_format(hw, p))
        f, inv = fo.apply(table, hw, p, eff, batch, tokens, decode, f, inv, context, rts)
        f = aligned_moe.apply(table, eff, tokens, f, rts)
    if eff.fp4_gemm is not None:
        f, inv = fo.apply_fp4(table, hw, p, eff, batch, tokens, f, inv, rates(hw, p, eff, table)[0], decode)
    return f, inv


def op_times(
    values: np.ndarray,
    table: Table,
    hw: Hardware,
    p: Precision,
    eff: Efficiency,
    batch,
    tokens,
    decode: bool,
    context=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(time, compute time, memory time, bytes) per op from evaluated class totals ``values`` (matmul FLOPs,
    vector FLOPs and the bytes they weigh to); ``context``: a decode step's S (its attention's fitted fractions
    depend on it)."""
    bytes_ = (values * byte_weights(table, p)).sum(-1)
    flops, vflops = values[..., I_FLOPS], values[..., I_VFLOPS]
    mm_rate, vec_rate = rates(hw, p, eff, table)
    f, inv = _fitted(table, hw, p, eff, batch, tokens, decode, context)
    compute = (flops / mm_rate if f is None else flops / mm_rate * f) + vflops / vec_rate
    memory = bytes_ * inv
    return np.maximum(compute, memory) + overheads(table, eff, decode, p, hw), compute, memory, bytes_


@lru_cache(maxsize=1024)
def _compute_rhs(table: Table, hw: Hardware, p: Precision, eff: Efficiency) -> np.ndarray:
    """(n_monos, n_ops): compute seconds per monomial (matmul FLOPs at the matmul rate, vector at the vector rate)."""
    mm_rate, vec_rate = rates(hw, p, eff, table)
    out = np.ascontiguousarray(table.rhs(one_hot("flops")) / mm_rate + table.rhs(one_hot("vflops")) / vec_rate)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=1024)
def _time_rhs(table: Table, hw: Hardware, p: Precision, eff: Efficiency) -> np.ndarray:
    """(n_monos, 3·n_ops): matmul seconds at the matmul rate, vector seconds and bytes per monomial, side by side
    (one product per block of a sweep)."""
    mm_rate, vec_rate = rates(hw, p, eff, table)
    fl, vfl = table.rhs(one_hot("flops")) / mm_rate, table.rhs(one_hot("vflops")) / vec_rate
    out = np.ascontiguousarray(np.concatenate([fl, vfl, byte_rhs(table, p)], axis=1))
    out.setflags(write=False)
    return out


@lru_cache(maxsize=4096)
def _stage_matrices(
    table: Table, hw: Hardware, p: Precision, eff: Efficiency, batch: int, tokens: int, decode: bool, context=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute seconds, memory seconds) right-hand sides (n_monos, n_ops), and the overheads, for scalars."""
    f, inv = _fitted(table, hw, p, eff, batch, tokens, decode, context)
    if f is None:
        comp = _compute_rhs(table, hw, p, eff)
    else:
        mm_rate, vec_rate = rates(hw, p, eff, table)
        comp = table.rhs(one_hot("flops")) / mm_rate * f + table.rhs(one_hot("vflops")) / vec_rate
    mem = byte_rhs(table, p) * inv
    ov = overheads(table, eff, decode, p, hw)
    return comp, mem, ov


def stage_times(table: Table, scenario: Scenario, hw: Hardware, p: Precision, eff: Efficiency, decode: bool):
    """Fast path: (time, compute, memory) per op of a scenario, by matrix products with cached tables."""
    mv = table.monomial_matrix(scenario)
    B = scenario.B
    if mv.ndim == 1:
        ctx = int(scenario.S0) if decode else None
        comp, mem, ov = _stage_matrices(table, hw, p, eff, int(B), int(B * scenario.T), decode, ctx)
        c, m = mv @ comp, mv @ mem
        return np.maximum(c, m) + ov, c, m
    B = np.asarray(B)
    return monomial_times(table, mv, hw, p, eff, B, B * np.asarray(scenario.T), decode, scenario.S0 if decode else None)


def monomial_times(
    table: Table, mv: np.ndarray, hw: Hardware, p: Precision, eff: Efficiency, batch, tokens, decode: bool, context=None
):
    """(time, compute, memory) per op from monomial values ``mv`` (…, n_monos): the array path of
    :func:`stage_times`, and the entry for callers that compose a pass from several scenarios (a serving
    iteration mixing decode and prefill tokens); ``batch``/``tokens`` are the pass's logit rows and tokens;
    ``context``: a decode pass's S (``None``: decode attention at its scalar fitted fraction)."""
    f, inv = _fitted(table, hw, p, eff, batch, tokens, decode, context)
    n = len(table.ops)
    prod = matmul_rows(mv, _time_rhs(table, hw, p, eff))  # one product: [matmul, vector] seconds and bytes
    fl, vfl, bytes_ = prod[..., :n], prod[..., n : 2 * n], prod[..., 2 * n :]
    comp = fl + vfl if f is None else fl * f
    if f is not None:
        comp += vfl  # in place: the block's temporaries are the sweep's cost
    mem = bytes_ * inv
    t = np.maximum(comp, mem)
    ov = overheads(table, eff, decode, p, hw)
    if ov.any():
        t += ov
    return t, comp, mem


@lru_cache(maxsize=256)
def _total_rhs(table: Table, hw: Hardware, p: Precision, eff: Efficiency) -> tuple[np.ndarray, np.ndarray, int, float]:
    """For :func:`prefill_total`: (its right-hand side transposed, (1 + 2·s + 3·v, n_monos), the v varying ops,
    s, Σ overheads).

    An op outside the weight GEMMs, the attention over the KV cache and the fitted attention, MLA and MoE columns
    has a compute factor of 1 and a fixed seconds per byte at every size (:func:`_fitted`): its compute and
    memory seconds are fixed combinations of the monomials. Those of one monomial (residual adds, rotary,
    activation functions, embeddings) take max(compute, memory) per monomial, all of them one row (the
    first); the s others keep a compute and a memory row each; the v varying ops their matmul seconds,
    vector seconds and bytes, as :func:`monomial_times`."""
    cols = fc.columns(table)
    vary = table.weight_token_rows | table.weight_logit_rows | table.is_weight_mm | table.is_kv_attention
    vary[cols.attn] = True
    vary[cols.mla] = True
    vary[cols.routed] = True
    mm_rate, vec_rate = rates(hw, p, eff, table)
    fl, vfl = table.rhs(one_hot("flops")) / mm_rate, table.rhs(one_hot("vflops")) / vec_rate
    by = byte_rhs(table, p)
    inv0 = np.broadcast_to(_fitted(table, hw, p, eff, 1.0, 1.0, False, None)[1], (len(table.ops),))
    comp, mem = fl + vfl, by * inv0
    single = np.count_nonzero((comp != 0) | (mem != 0), axis=0) <= 1
    fold, plain = ~vary & single, ~vary & ~single
    folded = np.maximum(comp[:, fold], mem[:, fold]).sum(axis=1, keepdims=True)  # costs are ≥ 0
    parts = [folded, comp[:, plain], mem[:, plain], fl[:, vary], vfl[:, vary], by[:, vary]]
    out = np.ascontiguousarray(np.concatenate(parts, axis=1).T)
    out.setflags(write=False)
    return out, np.flatnonzero(vary), int(plain.sum()), float(overheads(table, eff, False, p, hw).sum())


def _op_rows(a, ops: np.ndarray, lead: tuple) -> np.ndarray:
    """The ``ops`` of an (…, n_ops) array as rows, (len(ops), points); of an (n_ops,) one, (len(ops), 1)."""
    a = np.asarray(a)
    if a.ndim == 1:
        return a[ops][:, None]
    return np.broadcast_to(a, lead + a.shape[-1:]).reshape(-1, a.shape[-1]).T[ops]


def prefill_total(table: Table, mv: np.ndarray, hw: Hardware, p: Precision, eff: Efficiency, batch, tokens):
    """Σ over ops of :func:`monomial_times`' time of a prefill pass (…,), with the ops as rows (the points
    contiguous) and no per-op arrays where an op's time does not need them (:func:`_total_rhs`): what a sweep
    reports. Equal to ``monomial_times(...)[0].sum(-1)`` to rounding (the same terms in another order)."""
    rhs, vary, s, ov = _total_rhs(table, hw, p, eff)
    f, inv = _fitted(table, hw, p, eff, batch, tokens, False, None)
    lead = mv.shape[:-1]
    m = mv.reshape(-1, mv.shape[-1])
    n = m.shape[0]
    prod = np.empty((rhs.shape[0], n))
    step = max(_MNK_PER_CALL // max(rhs.size, 1), 1)  # one thread per product (ops/table.py's matmul_rows)
    for i in range(0, n, step):
        prod[:, i : i + step] = rhs @ m[i : i + step].T
    out = prod[0] + ov
    if s:
        out += np.maximum(prod[1 : 1 + s], prod[1 + s : 1 + 2 * s]).sum(0)
    v, a = vary.size, 1 + 2 * s
    fl, vfl, by = prod[a : a + v], prod[a + v : a + 2 * v], prod[a + 2 * v :]
    comp = fl + vfl if f is None else fl * _op_rows(f, vary, lead) + vfl
    out += np.maximum(comp, by * _op_rows(inv, vary, lead)).sum(0)
    return out.reshape(lead)
