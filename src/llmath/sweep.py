"""Sweeps: a grid of batch × prompt × gen evaluated in one vectorised call (no Python loop per point)."""

from __future__ import annotations

import numpy as np

from llmath.analysis import activation_peak_bytes, kv_cache_bytes
from llmath.deploy import Layout, decode_totals, per_gpu_stage
from llmath.deploy.cost import rank_memory_parts
from llmath.deploy.layout import ParallelConfig
from llmath.hardware import Hardware
from llmath.hardware import get as get_hardware
from llmath.hardware.decode import decode_total
from llmath.hardware.roofline import efficiency, prefill_total, stage_times
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.model.spec import ModelSpec
from llmath.ops import Scenario, table
from llmath.ops.params import weight_bytes_of
from llmath.validation import MAX_BATCH, MAX_TOKENS, check_grid, check_int_array, parse_range


def parse_axis(flag: str, text: str) -> np.ndarray:
    """'1,2,4' | 'lo:hi:x2' (geometric) | 'lo:hi:+128' or 'lo:hi:128' (arithmetic), inclusive of hi.

    Checked by :func:`llmath.validation.parse_range`: integers >= 1 (batch <= ``MAX_BATCH``, token counts
    <= ``MAX_TOKENS``), ranges that progress, at most ``MAX_POINTS`` points.
    """
    hi = MAX_BATCH if flag.lstrip("-") in ("batch", "b") else MAX_TOKENS
    return np.array(parse_range(flag, text, 1, hi), dtype=np.int64)


def _checked_sizes(batch, prompt, gen):
    """Integers in range (``llmath.validation``), broadcasting to at most ``MAX_POINTS`` points."""
    batch = check_int_array("batch", batch, 1, MAX_BATCH)
    prompt = check_int_array("prompt", prompt, 1, MAX_TOKENS)
    gen = check_int_array("gen", gen, 1, MAX_TOKENS)
    check_grid({"points": int(np.prod(np.broadcast_shapes(np.shape(batch), np.shape(prompt), np.shape(gen))))})
    return batch, prompt, gen


CHUNK = 1 << 13  # points per block: keeps the (points × operators) temporaries in cache (fastest here)


def _blocks(spec: ModelSpec, hw: Hardware, attention: str, p: Precision, eff, B, P, N):
    """(TTFT, decode seconds, activation peak bytes) per point, in blocks of ``CHUNK`` points."""
    ed = spec.is_encoder_decoder
    tabs = tuple(table(spec, k, attention) if k != "encoder" or ed else None for k in ("encoder", "prefill", "decode"))
    t_pre = table(spec, "prefill", attention)
    ttft, dec, act = np.empty(B.shape), np.empty(B.shape), np.empty(B.shape)
    for i in range(0, max(B.size, 1), CHUNK):
        sl = slice(i, i + CHUNK)
        b, pr, n = B[sl], P[sl], N[sl]
        mv = None if ed else t_pre.monomial_matrix(Scenario(b, pr, 0))  # shared by TTFT and activations
        ttft[sl], dec[sl] = _chunk_times(tabs, hw, p, eff, b, pr, n, mv)
        act[sl] = activation_peak_bytes(spec, b, pr, attention, p, mv=mv)
    return ttft, dec, act


def grid(
    spec: ModelSpec | str,
    hw: Hardware | str,
    batch,
    prompt,
    gen,
    attention: str = "flash",
    precision: Precision | None = None,
    eff_mode: str = "expected",
    layout: Layout | None = None,
) -> dict[str, np.ndarray]:
    """Vectorised serving metrics; ``batch``, ``prompt``, ``gen`` broadcast against each other.

    Evaluated in blocks of ``CHUNK`` points (a loop over blocks, not over points). With a ``layout``
    (:func:`llmath.deploy.make_layout`), ``batch`` is the deployment's total and memory is per GPU.
    Encoder-decoder models: ``prompt`` is the source length, the decoder starts from one token
    (:mod:`llmath.ops.stages`).
    """
    if precision is None and isinstance(spec, str):
        from llmath.model.checkpoint import precision_for

        precision = precision_for(spec)
    spec = resolve(spec)
    hw = get_hardware(hw) if isinstance(hw, str) else hw
    p = precision or Precision()
    eff = efficiency(eff_mode, hw)
    batch, prompt, gen = _checked_sizes(batch, prompt, gen)
    if layout is not None:
        return _layout_grid(spec, hw, batch, prompt, gen, attention, p, eff, layout)
    # float64 from here: products such as B·T² would wrap in int64 near the caps
    B, P, N = (
        a.ravel().astype(float) for a in np.broadcast_arrays(np.asarray(batch), np.asarray(prompt), np.asarray(gen))
    )
    shape = np.broadcast_shapes(np.shape(batch), np.shape(prompt), np.shape(gen))
    ttft, dec, act = _blocks(spec, hw, attention, p, eff, B, P, N)
    e2e = ttft + dec
    weights = weight_bytes_of(spec, p)
    ed = spec.is_encoder_decoder
    kv_end = kv_cache_bytes(spec, B, N, p, src=P) if ed else kv_cache_bytes(spec, B, P + N - 1, p)
    mem = weights + kv_end + act
    steps = np.maximum(N - 1, 1)
    out = {
        "batch": B,
        "prompt": P,
        "gen": N,
        "ttft_s": ttft,
        "tpot_s": np.where(N > 1, dec / steps, 0.0),
        "e2e_s": e2e,
        "throughput_tok_s": B * N / e2e,
        "per_sequence_tok_s": N / e2e,
        "kv_peak_bytes": kv_end,
        "memory_bytes": mem,
        "fits": mem <= hw.memory_bytes,
    }
    return {k: np.reshape(v, shape) for k, v in out.items()}


def _chunk_times(tabs, hw, p, eff, b, pr, n, mv=None):
    """(TTFT, decode total) of a block of points; encoder-decoder: the encoder, the decoder prefill of the
    start token, and decode from context 1, cross-attending the ``pr`` source positions. ``mv``: the
    decoder-only prefill's monomial matrix."""
    t_enc, t_pre, t_dec = tabs
    if t_enc is None:
        mv = t_pre.monomial_matrix(Scenario(b, pr, 0)) if mv is None else mv
        ttft = prefill_total(t_pre, mv, hw, p, eff, b, b * pr)
        return ttft, decode_total(t_dec, hw, p, eff, b, pr, n)
    # an external encoder (TrOCR's image encoder) is another model's pass: its table holds no operators
    enc = stage_times(t_enc, Scenario(b, pr), hw, p, eff, decode=False)[0].sum(-1) if t_enc.ops else 0.0
    ttft = enc + stage_times(t_pre, Scenario(b, 1, 0, src=pr), hw, p, eff, decode=False)[0].sum(-1)
    return ttft, decode_total(t_dec, hw, p, eff, b, 1, n, src=pr)


def _layout_grid(spec, hw, batch, prompt, gen, attention, p, eff, layout: Layout) -> dict[str, np.ndarray]:
    """:func:`grid` on a layout: each DP replica serves ⌈B/dp⌉; one GPU per pipeline stage, vectorised.
    Encoder-decoder: TTFT adds the encoder pass; decode starts at context 1, cross-attending P positions."""
    B, P, N = (np.asarray(a) for a in np.broadcast_arrays(np.asarray(batch), np.asarray(prompt), np.asarray(gen)))
    b = -(-B // layout.dp)
    ed = spec.is_encoder_decoder
    pre = Scenario(b, 1, 0, src=P) if ed else Scenario(b, P, 0)
    ttft = per_gpu_stage(spec, layout, "prefill", pre, hw, p, eff, attention).time_s
    if ed and not (spec.encoder is not None and spec.encoder.external):  # TrOCR: the encoder is another model
        ttft = ttft + per_gpu_stage(spec, layout, "encoder", Scenario(b, P), hw, p, eff, attention).time_s
    d = decode_totals(spec, layout, hw, p, eff, attention, b, 1 if ed else P, N, P if ed else 0)
    e2e = ttft + d["total_s"]
    end, src = (N, P) if ed else (P + N - 1, 0)
    per_gpu = 0.0
    for plan, ops, tab, enc_tab in rank_memory_parts(spec, attention, layout):
        kv = kv_cache_bytes(spec, b, end, p, ops=ops, src=src)
        act = activation_peak_bytes(spec, b, P, attention, p, tab=tab, enc_tab=enc_tab)
        share = 1 / layout.tp if plan.index == 0 else 0.0  # a wrapper's towers: as analysis.memory_report
        per_gpu = np.maximum(per_gpu, weight_bytes_of(spec, p, ops, share) + kv + act)
    return {
        "batch": B,
        "prompt": P,
        "gen": N,
        "ttft_s": ttft,
        "tpot_s": np.where(N > 1, d["total_s"] / np.maximum(N - 1, 1), 0.0),
        "e2e_s": e2e,
        "throughput_tok_s": B * N / e2e,
        "throughput_tok_s_per_gpu": B * N / e2e / layout.gpus,
        "per_sequence_tok_s": N / e2e,
        "kv_peak_bytes": kv_cache_bytes(spec, B, end, p, src=src),
        "memory_bytes": per_gpu,
        "fits": per_gpu <= hw.memory_bytes,
    }


def run_sweep(
    model,
    hardware,
    axes: dict[str, np.ndarray],
    attention: str,
    precision: Precision,
    eff_mode: str,
    parallel: ParallelConfig | None = None,
) -> list[dict]:
    """The grid of ``axes`` as rows on the layout ``parallel`` fits to the model (None: one device)."""
    check_grid({k: len(axes[k]) for k in ("batch", "prompt", "gen")})
    lay = parallel.layout(resolve(model)) if parallel is not None else None
    Bg, Pg, Ng = np.meshgrid(axes["batch"], axes["prompt"], axes["gen"], indexing="ij")
    g = grid(model, hardware, Bg.ravel(), Pg.ravel(), Ng.ravel(), attention, precision, eff_mode, lay)
    cols = {}
    for k, v in g.items():
        v = np.asarray(v)
        cols[k] = (
            v.astype(bool)
            if k == "fits"
            else (v.astype(np.int64) if k in ("batch", "prompt", "gen") else v.astype(float))
        )
    keys = list(cols)
    return [dict(zip(keys, r, strict=True)) for r in zip(*(c.tolist() for c in cols.values()), strict=True)]
