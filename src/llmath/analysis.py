"""The public API: a model, a workload and (optionally) a hardware spec -> a result object.

Everything is derived from the operator lists of :mod:`llmath.ops`: parameter counts (their weight
operands), FLOPs and bytes (their terms), KV-cache size (what the K/V operators write), roofline times
(:mod:`llmath.roofline`). Nothing here prints. Results are dataclasses with ``to_dict()``.

Workload conventions: a generation of ``gen`` = N tokens after a ``prompt`` = P-token prompt is the
prefill (which yields the first token) then N − 1 decode steps at contexts S = P … P+N−2. ``decode``
reports step 0 (context P: the first generated token is fed and attends P + 1 positions). The KV cache
after the prefill holds B×P positions; at the end of the generation B×(P+N−1) (the last token is
returned, never fed). ``throughput_tok_s`` is B·N / e2e (aggregate output tokens/s, prefill included).

Encoder-decoder models (T5, BART, the original Transformer): ``prompt`` = P is the *source* length. The
encoder runs once over the P source tokens; the decoder prefill runs ``decoder_prompt`` tokens (default 1,
the start token, as translation / T5 generation begins) and cross-attends the P encoder positions,
projecting them to the cross-attention K/V once; decode steps run at decoder contexts S = decoder_prompt
… decoder_prompt+N−2 and read that cross cache. TTFT = encoder + decoder prefill. The KV cache is the
self-attention cache (B × decoder positions, growing) plus the cross-attention cache (B × P, fixed).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from llmath.errors import WorkloadError
from llmath.hardware import Hardware
from llmath.hardware import get as get_hardware
from llmath.hardware.roofline import Efficiency, byte_weights, decode_generation, efficiency, op_times, stage_times
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.model.spec import ModelSpec
from llmath.ops import CLASSES, Scenario, Value, build_ops, evaluate, held_positions, table
from llmath.ops.params import ParamReport, param_report

BYTE_CLASSES = ("weight", "act_in", "act_out", "kv_read", "kv_write")
DEFAULT_PRECISION = Precision()


def _check_len(name: str, v, minimum: int = 1) -> None:
    arr = np.asarray(v)
    if not np.issubdtype(arr.dtype, np.integer) or np.any(arr < minimum):
        raise WorkloadError(f"{name}={v!r} must be an integer >= {minimum}")


@dataclass(frozen=True)
class Workload:
    batch: int = 1
    prompt: int = 512
    gen: int = 128
    prefix: int = 0  # cached prefix before the prompt (prefix caching)
    attention: str = "flash"
    precision: Precision = field(default_factory=Precision)
    decoder_prompt: int = 1  # encoder-decoder only: decoder tokens in its prefill (1 = the start token)

    def __post_init__(self) -> None:
        _check_len("batch", self.batch)
        _check_len("prompt", self.prompt)
        _check_len("decoder_prompt", self.decoder_prompt)
        _check_len("gen", self.gen)
        _check_len("prefix", self.prefix, 0)
        if self.attention not in ("eager", "flash"):
            raise WorkloadError(f"attention={self.attention!r} must be 'eager' or 'flash'")


@dataclass
class OpRow:
    name: str
    component: str
    kind: str
    signature: str
    count: int
    flops: Value
    vflops: Value
    bytes: dict[str, Value]
    intensity: float
    time_s: float | None = None
    compute_s: float | None = None
    memory_s: float | None = None
    bound: str | None = None
    layer_kind: str = ""


@dataclass
class StageReport:
    stage: str
    flops: dict[str, Value]  # matmul, vector, total (Python ints for one scenario; arrays for a sweep)
    bytes: dict[str, float]  # weights, act_in, act_out, kv_read, kv_write, total
    intensity: float
    ops: list[OpRow]
    time_s: float | None = None
    bound: str | None = None
    compute_s: float | None = None
    memory_s: float | None = None

    def to_dict(self, with_ops: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not with_ops:
            d.pop("ops")
        return d


def _num(v):
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        return int(v)
    return v


def stage_report(
    spec: ModelSpec,
    stage: str,
    scenario: Scenario,
    attention: str,
    precision: Precision,
    hw: Hardware | None = None,
    eff: Efficiency | None = None,
) -> StageReport:
    """Exact per-operator FLOPs and bytes of one pass (Python ints), plus roofline times if ``hw``."""
    ops = build_ops(spec, stage, attention)
    costs = evaluate(ops, scenario, spec)
    bpe = precision.per_class
    rows: list[OpRow] = []
    tot: dict[str, Value] = dict.fromkeys(CLASSES, 0)
    for c in costs:
        b = {k: _num(c.values.get(k, 0) * bpe[k]) for k in BYTE_CLASSES}
        for k in CLASSES:
            tot[k] = tot[k] + c.values.get(k, 0)
        fl = c.values.get("flops", 0) + c.values.get("vflops", 0)
        bt = sum(b.values())
        rows.append(
            OpRow(
                c.op.name,
                c.op.component,
                c.op.kind,
                c.op.signature,
                c.op.count,
                c.values.get("flops", 0),
                c.values.get("vflops", 0),
                b,
                fl / bt if bt else float("inf"),
                layer_kind=c.op.layer_kind,
            )
        )
    byts = {("weights" if k == "weight" else k): _num(tot[k] * bpe[k]) for k in BYTE_CLASSES}
    byts["total"] = _num(sum(byts.values()))
    flops: dict[str, Value] = {"matmul": tot["flops"], "vector": tot["vflops"], "total": tot["flops"] + tot["vflops"]}
    # the useful FLOPs: causal (and window) pairs only, as a fused kernel counts them
    useful = costs if attention == "flash" else evaluate(build_ops(spec, stage, "flash"), scenario, spec)
    flops["useful_matmul"] = sum(c.values.get("flops", 0) for c in useful)
    rep = StageReport(stage, flops, byts, flops["total"] / byts["total"], rows)
    if hw is not None:
        eff = eff if eff is not None else efficiency("expected", hw)
        t = table(spec, stage, attention)
        vals = t.values(scenario)
        tokens = scenario.B * scenario.T
        times, comp, mem, _ = op_times(vals, t, hw, precision, eff, scenario.B, tokens, decode=stage == "decode")
        for r, ti, ci, mi in zip(rows, times, comp, mem, strict=True):
            r.time_s, r.compute_s, r.memory_s = float(ti), float(ci), float(mi)
            r.bound = "compute" if ci >= mi else "memory"
        rep.time_s = float(times.sum())
        rep.compute_s, rep.memory_s = float(comp.sum()), float(mem.sum())
        rep.bound = "compute" if rep.compute_s >= rep.memory_s else "memory"
    return rep


# ---- KV cache -------------------------------------------------------------------------------------


def kv_elements_per_position(spec: ModelSpec, layout: str = "serving") -> dict[int | None, int]:
    """KV-cache elements one sequence position adds, per attention window, read off the K/V writers.

    ``layout="transformers"``: what transformers' cache holds (Falcon's new architecture caches K/V
    broadcast to all N query heads).
    """
    out: dict[int | None, int] = {}
    for op in build_ops(spec, "decode", "flash"):
        per = sum(t.coef for t in op.terms("kv_write") if t.mono == "BT") * op.count
        if per:
            if layout == "transformers" and spec.hf_cache_kv_heads:
                per = per * spec.hf_cache_kv_heads // spec.n_kv_heads
            out[op.window] = out.get(op.window, 0) + per
    return out


def cross_kv_elements_per_source(spec: ModelSpec) -> int:
    """Encoder-decoder models: cross-attention cache elements per source position (K and V of every decoder
    layer), read off the cross K/V projections of the decoder prefill; 0 for decoder-only models."""
    if not spec.is_encoder_decoder:
        return 0
    return sum(
        t.coef * op.count for op in build_ops(spec, "prefill", "flash") for t in op.terms("kv_write") if t.mono == "X"
    )


def kv_cache_bytes(spec: ModelSpec, batch, positions, precision: Precision, layout: str = "serving", src=0):
    """Bytes held by the KV cache for ``batch`` sequences of ``positions`` positions.

    Windowed layers hold min(positions, W) (``layout="transformers"``: W − 1, as its sliding cache keeps).
    Encoder-decoder models: ``positions`` are the decoder's own (self-attention cache, growing) and ``src``
    the source positions of the cross-attention cache (fixed once the encoder has run).
    """
    total = batch * src * cross_kv_elements_per_source(spec) if spec.is_encoder_decoder else 0
    for w, per in kv_elements_per_position(spec, layout).items():
        if w is not None and layout == "transformers":
            held = np.minimum(positions, w - 1) if not isinstance(positions, int) else min(positions, w - 1)
        else:
            held = held_positions(positions, 0, w)
        total = total + batch * held * per
    return _num(total * precision.kv_bytes) if isinstance(total, int) else total * precision.kv_bytes


# ---- memory ----------------------------------------------------------------------------------------


@dataclass
class MemoryReport:
    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    reserve_bytes: float
    total_bytes: float
    capacity_bytes: float | None
    fits: bool | None
    over_by_bytes: float | None
    max_batch: int | None
    max_context: int | None


def _act_peak(spec: ModelSpec, stage: str, sc: Scenario, attention: str):
    t = table(spec, stage, attention)
    act = tuple(float(c in ("act_in", "act_out")) for c in CLASSES)
    per_op = (t.monomial_matrix(sc) @ t.rhs(act)) / t.kernels
    resid = np.asarray(sc.B) * (np.asarray(sc.T) + np.asarray(sc.src)) * spec.d_model  # + the encoder output
    return per_op.max(-1) + resid


def activation_peak_bytes(
    spec: ModelSpec, batch, prompt, attention: str, precision: Precision, prefix=0, decoder_prompt=1
):
    """Largest live activation set of the prefill: the widest op's inputs + outputs, plus the residual
    (encoder-decoder: the larger of the encoder pass and the decoder prefill, which keeps the encoder output)."""
    peak = _act_peak(spec, "prefill", Scenario(batch, prompt, prefix), attention)
    if spec.is_encoder_decoder:
        enc = _act_peak(spec, "encoder", Scenario(batch, prompt), attention)
        pre = _act_peak(spec, "prefill", Scenario(batch, decoder_prompt, 0, src=prompt), attention)
        peak = np.maximum(enc, pre)
    return peak * precision.act_bytes


def memory_report(
    spec: ModelSpec, params: ParamReport, w: Workload, hw: Hardware | None, reserve_bytes: float
) -> MemoryReport:
    p = w.precision
    weights = params.total * p.weight_bytes
    src = _src(spec, w)
    end = _context0(spec, w) + w.gen - 1
    kv = kv_cache_bytes(spec, w.batch, end, p, src=src)
    act = float(activation_peak_bytes(spec, w.batch, w.prompt, w.attention, p, w.prefix, w.decoder_prompt))
    total = weights + kv + act + reserve_bytes
    if hw is None:
        return MemoryReport(weights, kv, act, reserve_bytes, total, None, None, None, None, None)
    cap = hw.memory_bytes
    free = cap - weights - reserve_bytes
    per_seq = kv_cache_bytes(spec, 1, end, p, src=src) + float(
        activation_peak_bytes(spec, 1, w.prompt, w.attention, p, w.prefix, w.decoder_prompt)
    )
    max_batch = max(int(free // per_seq), 0) if per_seq > 0 else None
    # longest total context (prompt + generated) for this batch: bisection on a monotone function
    lo, hi = 0, 1 << 24

    def need(ctx: int) -> float:  # encoder-decoder: ctx = the decoder's context, the source fixed at P
        if src:
            return kv_cache_bytes(spec, w.batch, ctx, p, src=src) + act
        return kv_cache_bytes(spec, w.batch, ctx, p) + float(
            activation_peak_bytes(spec, w.batch, min(ctx, w.prompt), w.attention, p)
        )

    if need(1) > free:
        max_ctx = 0
    else:
        lo = 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if need(mid) <= free else (lo, mid)
        max_ctx = lo
    return MemoryReport(
        weights, kv, act, reserve_bytes, total, cap, total <= cap, max(total - cap, 0.0), max_batch, max_ctx
    )


# ---- the analysis ------------------------------------------------------------------------------------


@dataclass
class Analysis:
    model: str
    hardware: str | None
    workload: dict[str, Any]
    params: ParamReport
    prefill: StageReport
    decode: StageReport
    kv_cache: dict[str, Any]
    memory: MemoryReport
    generation: dict[str, Any] = field(default_factory=dict)
    efficiency: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    training: dict[str, int] = field(default_factory=dict)
    encoder: StageReport | None = None  # encoder-decoder models: the encoder pass over the source

    def to_dict(self, with_ops: bool = True) -> dict[str, Any]:
        d = {
            "model": self.model,
            "hardware": self.hardware,
            "workload": self.workload,
            "params": self.params.to_dict(),
            "prefill": self.prefill.to_dict(with_ops),
            "decode": self.decode.to_dict(with_ops),
            "kv_cache": self.kv_cache,
            "memory": asdict(self.memory),
            "efficiency": self.efficiency,
            "training": self.training,
            "warnings": self.warnings,
        }
        if self.encoder is not None:
            d["encoder"] = self.encoder.to_dict(with_ops)
        d.update(self.generation)
        return d


def analyze(
    model: str | ModelSpec,
    hardware: str | Hardware | None = None,
    *,
    batch: int = 1,
    prompt: int = 512,
    gen: int = 128,
    prefix: int = 0,
    attention: str = "flash",
    precision: Precision | None = None,
    efficiency_mode: str | Efficiency = "expected",
    reserve_bytes: float = 0.0,
    decoder_prompt: int = 1,
    **efficiency_overrides,
) -> Analysis:
    """Params, prefill, decode step 0, KV cache, memory and (with hardware) TTFT/TPOT/throughput.

    Encoder-decoder models add the encoder pass (``prompt`` = source tokens; ``decoder_prompt`` = decoder
    prefill tokens, see the module docstring)."""
    spec = resolve(model)
    w = Workload(batch, prompt, gen, prefix, attention, precision or Precision(), decoder_prompt)
    if spec.is_encoder_decoder and prefix:
        raise WorkloadError(
            f"prefix={prefix}: {spec.name!r} is an encoder-decoder model, whose decoder starts after the encoder "
            "pass with no cached prefix; set the decoder's own prefill length with decoder_prompt"
        )
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    eff = efficiency(efficiency_mode, hw, **efficiency_overrides) if hw is not None else None
    notes = _context_notes(spec, w)
    if hw is not None:
        hw.peak(w.precision.compute)  # a dtype the device lacks is an error up front
    params = param_report(spec)
    rep = {k: stage_report(spec, k, sc, attention, w.precision, hw, eff) for k, sc in stage_scenarios(spec, w).items()}
    pre, dec, enc = rep["prefill"], rep["decode"], rep.get("encoder")
    kv = _kv_summary(spec, w)
    mem = memory_report(spec, params, w, hw, reserve_bytes)
    wd = _workload_dict(w, spec.is_encoder_decoder)
    a = Analysis(spec.name, hw.name if hw else None, wd, params, pre, dec, kv, mem, warnings=notes, encoder=enc)
    a.training = training_flops(spec, batch, prompt)
    if hw is not None and eff is not None and pre.time_s is not None:  # all three or none
        a.efficiency = asdict(eff)
        a.generation = generation_metrics(spec, hw, w, eff, pre.time_s + ((enc.time_s or 0.0) if enc else 0.0))
        if enc is not None:
            a.generation["encoder_s"] = enc.time_s
    return a


def stage_scenarios(spec: ModelSpec, w: Workload) -> dict[str, Scenario]:
    """The scenario of each stage of a workload: decoder-only, the prefill of P tokens after the prefix and
    decode step 0 at context prefix + P; encoder-decoder, the encoder over the P source tokens, the decoder
    prefill of ``decoder_prompt`` tokens and its decode step 0, both cross-attending the P positions."""
    B, P = w.batch, w.prompt
    if not spec.is_encoder_decoder:
        return {"prefill": Scenario(B, P, w.prefix), "decode": Scenario(B, 1, w.prefix + P)}
    T0 = w.decoder_prompt
    return {"encoder": Scenario(B, P), "prefill": Scenario(B, T0, 0, src=P), "decode": Scenario(B, 1, T0, src=P)}


def _context0(spec: ModelSpec, w: Workload) -> int:
    """Positions in the (decoder's) self-attention cache when the decode steps start."""
    return w.decoder_prompt if spec.is_encoder_decoder else w.prefix + w.prompt


def _src(spec: ModelSpec, w: Workload) -> int:
    """Source positions in the cross-attention cache (0 for decoder-only models)."""
    return w.prompt if spec.is_encoder_decoder else 0


def _context_notes(spec: ModelSpec, w: Workload) -> list[str]:
    end = _context0(spec, w) + w.gen - 1
    longest = max(end, w.prompt)
    if not (spec.max_positions and longest > spec.max_positions):
        return []
    msg = (
        f"{spec.name}: context {longest} exceeds the model's max_position_embeddings={spec.max_positions}; "
        "the figures extrapolate the architecture past what it was trained for"
    )
    warnings.warn(msg, stacklevel=3)
    return [msg]


def _kv_summary(spec: ModelSpec, w: Workload) -> dict[str, Any]:
    """KV cache after the prefill, at the end of the generation, and per position (encoder-decoder: the
    self-attention cache per decoder position, and the fixed cross-attention cache of the source)."""
    p, ctx0, src = w.precision, _context0(spec, w), _src(spec, w)
    end = ctx0 + w.gen - 1
    out = {
        "bytes": kv_cache_bytes(spec, w.batch, ctx0, p, src=src),
        "peak_bytes": kv_cache_bytes(spec, w.batch, end, p, src=src),
        "bytes_per_token": kv_cache_bytes(spec, 1, 1, p),  # one position of one sequence, every layer
        "elements_per_position": {
            ("full" if k is None else str(k)): v for k, v in kv_elements_per_position(spec).items()
        },
        "positions_after_prefill": ctx0,
        "positions_at_end": end,
    }
    if spec.is_encoder_decoder:
        out["cross_bytes"] = kv_cache_bytes(spec, w.batch, 0, p, src=src)
        out["cross_bytes_per_source_token"] = kv_cache_bytes(spec, 1, 0, p, src=1)
        out["source_positions"] = src
    return out


def _workload_dict(w: Workload, encoder_decoder: bool = False) -> dict[str, Any]:
    p = w.precision
    extra = {"decoder_prompt": w.decoder_prompt} if encoder_decoder else {}
    return extra | {
        "batch": w.batch,
        "prompt": w.prompt,
        "gen": w.gen,
        "prefix": w.prefix,
        "attention": w.attention,
        "weights": p.weights,
        "activations": p.activations,
        "kv_dtype": p.kv,
        "group_size": p.group_size,
    }


def generation_metrics(spec: ModelSpec, hw: Hardware, w: Workload, eff: Efficiency, ttft: float) -> dict[str, Any]:
    """TTFT (encoder-decoder: encoder + decoder prefill), TPOT over the decode steps, throughput, utilisation."""
    t = table(spec, "decode", w.attention)
    scens = stage_scenarios(spec, w)
    d = decode_generation(t, hw, w.precision, eff, w.batch, _context0(spec, w), w.gen, _src(spec, w))
    steps = float(d.steps)
    dec_total = float(d.total_s)
    e2e = ttft + dec_total
    tpot = dec_total / steps if steps else 0.0
    peak = hw.peak(w.precision.compute)
    pre_flops = sum(  # the passes before the first token: the prefill (and the encoder)
        float(table(spec, k, w.attention).values(sc)[..., CLASSES.index("flops")].sum())
        for k, sc in scens.items()
        if k != "decode"
    )
    dvals = t.values(scens["decode"])
    dbytes0 = float((dvals @ byte_weights(w.precision)).sum())
    return {
        "ttft_s": ttft,
        "tpot_s": tpot,
        "tpot_first_s": float(d.first_s) if steps else 0.0,
        "tpot_last_s": float(d.last_s) if steps else 0.0,
        "decode_total_s": dec_total,
        "e2e_s": e2e,
        "throughput_tok_s": w.batch * w.gen / e2e,
        "decode_throughput_tok_s": w.batch / tpot if tpot else None,
        "per_sequence_tok_s": w.gen / e2e,
        "prefill_tok_s": w.batch * w.prompt / ttft,
        "utilisation": {
            "prefill_flops_fraction": pre_flops / ttft / peak,
            "decode_bandwidth_fraction": dbytes0 / float(d.first_s) / hw.memory_bandwidth_bytes_per_s
            if steps
            else None,
        },
    }


def training_flops(spec: ModelSpec, batch: int, seq: int) -> dict[str, int]:
    """A training step on B sequences of ``seq`` tokens: the forward with logits at every position, and
    forward + backward = 3 × its matmul FLOPs (backward = 2 × forward), 4 × with full recomputation.
    Encoder-decoder: ``seq`` source tokens through the encoder and ``seq`` target tokens through the decoder."""
    src = seq if spec.is_encoder_decoder else 0
    passes = [("prefill", Scenario(batch, seq, 0, logits="all", src=src))]
    if spec.is_encoder_decoder:
        passes.append(("encoder", Scenario(batch, seq)))
    fwd = int(
        sum(c.values.get("flops", 0) for st, sc in passes for c in evaluate(build_ops(spec, st, "flash"), sc, spec))
    )
    return {"tokens": batch * seq, "forward_matmul": fwd, "step_matmul": 3 * fwd, "step_matmul_recompute": 4 * fwd}


def scenario(
    model: str | ModelSpec,
    hardware: str | Hardware,
    batch: int = 1,
    prompt: int = 512,
    gen: int = 128,
    attention: str = "flash",
    precision: Precision | None = None,
    efficiency_mode: str | Efficiency = "expected",
) -> dict[str, Any]:
    """The fast path (floats, no exact integers): one scenario's params, per-op prefill and decode-step times,
    and a whole generation's serving metrics, from the cached coefficient tables."""
    spec = resolve(model)
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    p = precision or DEFAULT_PRECISION
    eff = efficiency(efficiency_mode, hw)
    w = Workload(batch, prompt, gen, 0, attention, p)
    sc = stage_scenarios(spec, w)
    t = {k: stage_times(table(spec, k, attention), v, hw, p, eff, k == "decode")[0] for k, v in sc.items()}
    pre_t, dec_t = t["prefill"], t["decode"]
    d = decode_generation(table(spec, "decode", attention), hw, p, eff, batch, _context0(spec, w), gen, _src(spec, w))
    ttft = float(pre_t.sum()) + (float(t["encoder"].sum()) if "encoder" in t else 0.0)  # encoder-decoder: + encoder
    e2e = ttft + float(d.total_s)
    return {
        "params": param_report(spec).total,
        "prefill_op_s": pre_t,
        "decode_op_s": dec_t,
        "decode_total_op_s": d.per_op_total_s,
        "ttft_s": ttft,
        "tpot_s": float(d.total_s) / max(gen - 1, 1),
        "e2e_s": e2e,
        "throughput_tok_s": batch * gen / e2e,
    }
