"""The public API: a model, a workload and (optionally) a hardware spec -> a result object.

Everything is derived from the operator lists of :mod:`llmath.ops`: parameter counts (their weight
operands), FLOPs and bytes (their terms), KV-cache size (what the K/V operators write), roofline times
(:mod:`llmath.roofline`). Nothing here prints. Results are dataclasses with ``to_dict()``.

Workload conventions: a generation of ``gen`` = N tokens after a ``prompt`` = P-token prompt is the
prefill (which yields the first token) then N − 1 decode steps at contexts S = P … P+N−2. ``decode``
reports step 0 (context P: the first generated token is fed and attends P + 1 positions). The KV cache
after the prefill holds B×P positions; at the end of the generation B×(P+N−1) (the last token is
returned, never fed). ``throughput_tok_s`` is B·N / e2e (aggregate output tokens/s, prefill included).
Encoder-decoder models: ``prompt`` is the source length (conventions in :mod:`llmath.ops.stages`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, cast

from llmath.checks import (
    ANALYZE_ARGS,
    Run,
    _check_hardware,
    _check_parallel,
    _check_precision,
    _check_workload,
)
from llmath.deploy.cost import decode_totals, rank_memory_parts
from llmath.deploy.layout import Layout, ParallelConfig, make_layout
from llmath.deploy.speculative import refuse_draft_only
from llmath.deploy.workload import Workload
from llmath.errors import HardwareError, LayoutError
from llmath.hardware import Hardware, compiled, execution, kernels
from llmath.hardware import get as get_hardware
from llmath.hardware.decode import decode_generation
from llmath.hardware.efficiency import check_overrides
from llmath.hardware.roofline import Efficiency, byte_weights
from llmath.hardware.topology import topology
from llmath.memory_report import MemoryReport, memory_report
from llmath.model.checkpoint import Checkpoint
from llmath.model.dtypes import Precision
from llmath.model.notes import context_notes, wrapper_notes
from llmath.model.registry import resolve
from llmath.model.spec import ModelSpec
from llmath.ops import Attention, table
from llmath.ops import stages as ostages
from llmath.ops.params import ParamReport, param_report
from llmath.ops.stages import activation_peak_bytes, training_flops  # noqa: F401 - public here too
from llmath.ops.state import kv_cache_bytes, kv_elements_per_position, kv_growth, state_summary
from llmath.pass_report import StageReport, stage_report
from llmath.validation import check_float

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
    vision: StageReport | None = None  # a request's images through the image encoder (Llama 3.2 Vision)
    parallel: dict[str, Any] | None = None  # the layout and its per-stage figures (multi-GPU only)
    precision: dict[str, Any] = field(default_factory=dict)  # formats per module, their sources, what runs
    comm: dict[str, Any] | None = None  # bytes and time per stage by collective (multi-GPU only)

    def to_dict(self, with_ops: bool = True) -> dict[str, Any]:
        d = {
            "model": self.model,
            "hardware": self.hardware,
            "workload": self.workload,
            "params": self.params.to_dict(),
            "prefill": self.prefill.to_dict(with_ops),
            "decode": self.decode.to_dict(with_ops),
            "kv_cache": self.kv_cache,
            "state": state_summary(self.kv_cache),
            "memory": asdict(self.memory),
            "efficiency": self.efficiency,
            "training": self.training,
            "warnings": self.warnings,
            "precision": self.precision,
            "components_not_in_stages": list(self.params.towers) + list(self.params.towers_not_counted),
        }
        if self.encoder is not None:
            d["encoder"] = self.encoder.to_dict(with_ops)
        if self.vision is not None:
            d["vision"] = self.vision.to_dict(with_ops)
        d.update(self.generation)
        if self.parallel is not None:
            d["parallel"] = self.parallel
            d["comm"] = self.comm
        return d


def analyze(
    model: str | ModelSpec | Checkpoint,
    hardware: str | Hardware | None = None,
    *,
    workload: Workload | None = None,
    attention: str = "flash",
    precision: Precision | None = None,
    efficiency_mode: str | Efficiency = "expected",
    reserve_bytes: float = 0.0,
    parallel: ParallelConfig | None = None,
    engine: str = "vllm",
    **efficiency_overrides,
) -> Analysis:
    """Params, prefill, decode step 0, KV cache, memory and (with hardware) TTFT/TPOT/throughput.

    ``workload``: a static batch (:class:`~llmath.deploy.workload.Workload` of ``batch``, ``prompt``, ``gen``,
    ``prefix``, ``decoder_prompt``, ``images``; None: one 512-token prompt, 128 tokens generated).
    ``parallel``: a parallel layout (:class:`~llmath.deploy.layout.ParallelConfig`, any degree given);
    ``batch`` is then the total over the deployment, split over the dp replicas; ``prefill``/``decode`` and
    ``memory`` describe one GPU of each pipeline stage (the busiest), ``parallel`` the layout and ``comm`` its
    collectives; without them, one device. Encoder-decoder models add the ``encoder`` pass (``decoder_prompt``:
    :mod:`llmath.ops.stages`); ``images`` per request (Llama 3.2 Vision) add the ``vision`` pass and the
    cross-attention layers' work and cache (one device). ``engine``: whose kernels run a declared quantised
    weight format (a checkpoint's, or one set by ``precision_for``), e.g. FP8 as W8A8 on fp8 tensor cores
    (:mod:`llmath.hardware.kernels`). ``efficiency_overrides``: Efficiency fields only (hardware/efficiency.py).
    """
    parallel = _check_parallel(parallel, efficiency_overrides)
    workload = _check_workload(workload, efficiency_overrides)
    check_overrides(efficiency_overrides, "analyze()", ANALYZE_ARGS)
    spec = resolve(model)
    refuse_draft_only(spec)  # a Gemma 4 assistant runs only as a draft (deploy/speculative.py)
    batch, prompt, gen, prefix = workload.batch, workload.prompt, workload.gen, workload.prefix
    reserve_bytes = check_float("reserve_bytes", reserve_bytes, 0, 1e18)
    precision, read_notes = execution.checkpoint_precision(model, _check_precision(precision))
    hardware = _check_hardware(hardware)
    precision, hardware = kernels.as_run(precision, hardware, engine)  # the engine's kernels and accumulate rate
    decoder_prompt, images = workload.decoder_prompt, workload.images
    w, hw = Run(batch, prompt, gen, prefix, attention, precision, decoder_prompt, images, engine), hardware
    if parallel is not None and parallel.given:
        if images:
            raise LayoutError(f"images={images}: image requests are modelled on one device; drop --gpus/--tp/--pp")
        layout = make_layout(spec, parallel)
        return _analyze_layout(spec, hw, layout, w, efficiency_mode, reserve_bytes, efficiency_overrides)
    return _analyze_device(spec, hw, w, efficiency_mode, efficiency_overrides, reserve_bytes, read_notes)


def _analyze_device(
    spec: ModelSpec, hw: Hardware | None, w: Run, efficiency_mode, efficiency_overrides, reserve_bytes, read_notes
) -> Analysis:
    """:func:`analyze` on one device (checked arguments)."""
    batch, prompt, prefix, attention, decoder_prompt = w.batch, w.prompt, w.prefix, w.attention, w.decoder_prompt
    gen = w.gen
    eff = kernels.run_efficiency(efficiency_mode, hw, w.precision, w.engine, efficiency_overrides)
    end = ostages.context_end(spec, prompt, prefix, decoder_prompt, gen)
    notes = read_notes + context_notes(spec, end) + wrapper_notes(spec)
    notes += execution.fallback_notes(spec, w.attention, w.precision, hw)
    params = param_report(spec)
    scens = ostages.stage_scenarios(spec, batch, prompt, prefix, decoder_prompt, w.images)
    rep = {k: stage_report(spec, k, sc, attention, w.precision, hw, eff) for k, sc in scens.items()}
    pre, dec, enc = rep["prefill"], rep["decode"], rep.get("encoder", rep.get("vision"))
    kv = _kv_summary(spec, w)
    mem = memory_report(spec, params, w, hw, reserve_bytes)
    wd = _workload_dict(w, spec.is_encoder_decoder)
    a = Analysis(spec.name, hw.name if hw else None, wd, params, pre, dec, kv, mem, warnings=notes,
                 encoder=rep.get("encoder"), vision=rep.get("vision"))  # fmt: skip
    a.training = training_flops(spec, batch, prompt)
    a.precision = execution.precision_report(spec, w.precision, hw, attention, w.engine)
    if hw is not None and eff is not None and pre.time_s is not None:  # all three or none
        a.efficiency = asdict(eff)
        a.generation = generation_metrics(spec, hw, w, eff, pre.time_s + ((enc.time_s or 0.0) if enc else 0.0))
        if enc is not None:
            a.generation["vision_s" if a.vision is not None else "encoder_s"] = enc.time_s
    return a


def _kv_summary(spec: ModelSpec, w: Run) -> dict[str, Any]:
    """Per-sequence state after the prefill, at the end of the generation, and per position. ``bytes`` and
    ``peak_bytes`` hold all of it (the KV cache and the mixers' fixed-size state, ``fixed_bytes_per_sequence``
    per sequence); ``bytes_per_token`` is the KV cache's first positions' rate (encoder-decoder: the
    self-attention cache per decoder position, and the fixed cross-attention cache of the source)."""
    p, (ctx0, src) = w.precision, ostages.decode_start(spec, w.prompt, w.prefix, w.decoder_prompt, w.images)
    end = ctx0 + w.gen - 1
    out = {
        "bytes": kv_cache_bytes(spec, w.batch, ctx0, p, src=src),
        "peak_bytes": kv_cache_bytes(spec, w.batch, end, p, src=src),
        **kv_growth(spec, p),
        "elements_per_position": {
            ("full" if k is None else str(k)): v for k, v in kv_elements_per_position(spec).items()
        },
        "positions_after_prefill": ctx0,
        "positions_at_end": end,
    }
    if spec.is_encoder_decoder or src:  # an encoder-decoder's source, or a request's vision tokens
        out["cross_bytes"] = kv_cache_bytes(spec, w.batch, 0, p, src=src) - kv_cache_bytes(spec, w.batch, 0, p)
        out["cross_bytes_per_source_token"] = kv_cache_bytes(spec, 1, 0, p, src=1) - kv_cache_bytes(spec, 1, 0, p)
        out["source_positions"] = src
    return out


def _workload_dict(w: Run, encoder_decoder: bool = False) -> dict[str, Any]:
    p = w.precision
    extra = {"decoder_prompt": w.decoder_prompt} if encoder_decoder else {}
    extra |= {"images": w.images} if w.images else {}
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


def _analyze_layout(spec, hardware, layout: Layout, w: Run, efficiency_mode, reserve_bytes, overrides) -> Analysis:
    """:func:`analyze` on a layout: the single-device analysis for the deployment-level figures (params,
    KV cache of all sequences, training FLOPs), then one GPU per pipeline stage for time and memory."""
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    eff = kernels.run_efficiency(efficiency_mode, hw, w.precision, w.engine, overrides)
    b, p, attention = layout.replica_batch(w.batch), w.precision, w.attention
    scens = ostages.stage_scenarios(spec, b, w.prompt, w.prefix, w.decoder_prompt)
    rep = {k: stage_report(spec, k, sc, attention, p, hw, eff, layout) for k, sc in scens.items()}
    pre, dec, enc = rep["prefill"], rep["decode"], rep.get("encoder")
    stages: list[dict[str, Any]] = []
    mems = []
    for plan, ops, tab, enc_tab in rank_memory_parts(spec, cast(Attention, attention), layout):
        # a wrapper's towers run on the first pipeline stage, their weights split over its TP ranks (vLLM's
        # default mm_encoder_tp_mode "weights": docs.vllm.ai, vllm.config.multimodal)
        share = 1 / layout.tp if plan.index == 0 else 0.0
        m = memory_report(spec, param_report(spec), w, hw, reserve_bytes, (ops, tab, enc_tab), b, share)
        mems.append(m)
        n_params = sum(n * op.count for op in ops for _, n in op.params) + round(share * spec.tower_total)
        stages.append({"index": plan.index, "layers": [plan.layers.start, plan.layers.stop], "params": n_params,
                       "weights_bytes": m.weights_bytes, "kv_cache_bytes": m.kv_cache_bytes,
                       "activation_bytes": m.activation_bytes, "per_gpu_bytes": m.total_bytes})  # fmt: skip
    mem = max(mems, key=lambda m: m.total_bytes)
    if mem.max_batch is not None:
        mem.max_batch = min(int(m.max_batch or 0) for m in mems) * layout.dp
        mem.max_context = min(int(m.max_context or 0) for m in mems)
        mem.max_context_bounded = any(m.max_context_bounded for m in mems)
    notes = context_notes(spec, ostages.context_end(spec, w.prompt, w.prefix, w.decoder_prompt, w.gen))
    notes += wrapper_notes(spec)
    notes += execution.fallback_notes(spec, w.attention, p, hw)
    if w.batch % layout.dp:
        notes.append(
            f"batch {w.batch} does not split evenly over dp={layout.dp} replicas: each replica is modelled with "
            f"{b} sequences (the busiest), so the MoE layers see {b * layout.dp} tokens per step"
        )
    wd = _workload_dict(w, spec.is_encoder_decoder) | {"replica_batch": b}
    a = Analysis(spec.name, hw.name if hw else None, wd, param_report(spec), pre, dec, _kv_summary(spec, w), mem,
                 warnings=notes, encoder=enc)  # fmt: skip
    a.training = training_flops(spec, w.batch, w.prompt)
    a.precision = execution.precision_report(spec, p, hw, attention, w.engine)
    deployment = sum(float(st["per_gpu_bytes"]) for st in stages) * layout.tp * layout.dp
    a.parallel = layout.to_dict() | {"replica_batch": b, "stages": stages, "deployment_bytes": deployment}
    a.comm = {k: r.comm for k, r in rep.items()}
    if hw is not None and eff is not None:
        a.efficiency = asdict(eff)
        a.parallel["topology"] = topology(hw).to_dict()
        a.generation = _layout_generation(spec, hw, w, eff, layout, pre, dec, enc)
        a.comm["decode_total_s"] = a.generation.pop("_decode_comm_s")
    return a


def _layout_generation(spec, hw, w: Run, eff, layout: Layout, pre, dec, enc) -> dict:
    """TTFT (encoder-decoder: + the encoder pass), TPOT, throughput of the deployment: one replica's pass
    through the pipeline stages."""
    b = layout.replica_batch(w.batch)
    ctx0, src = ostages.decode_start(spec, w.prompt, w.prefix, w.decoder_prompt, w.images)
    d = decode_totals(spec, layout, hw, w.precision, eff, cast(Attention, w.attention), b, ctx0, w.gen, src)
    first = [enc] if enc is not None else []
    ttft = sum(r.time_s for r in first + [pre])
    out = _serving(w, hw, layout.gpus, ttft, d["total_s"], d["first_s"], d["last_s"], d["steps"],
                   sum(float(r.flops["matmul"]) for r in first + [pre]), float(dec.bytes["total"]))  # fmt: skip
    return out | {"_decode_comm_s": d["comm_s"]} | ({"encoder_s": enc.time_s} if enc is not None else {})


def generation_metrics(spec: ModelSpec, hw: Hardware, w: Run, eff: Efficiency, ttft: float) -> dict[str, Any]:
    t = table(spec, "decode", w.attention)
    scens = ostages.stage_scenarios(spec, w.batch, w.prompt, w.prefix, w.decoder_prompt, w.images)
    ctx0, src = ostages.decode_start(spec, w.prompt, w.prefix, w.decoder_prompt, w.images)
    d = decode_generation(t, hw, w.precision, eff, w.batch, ctx0, w.gen, src)
    pre_flops = sum(ostages.stage_flops(spec, k, w.attention, sc) for k, sc in scens.items() if k != "decode")
    dvals = t.values(scens["decode"])
    dbytes0 = float((dvals * byte_weights(t, w.precision)).sum())
    return _serving(w, hw, 1, ttft, float(d.total_s), float(d.first_s), float(d.last_s), float(d.steps), pre_flops,
                    dbytes0)  # fmt: skip


def _serving(w: Run, hw: Hardware, gpus: int, ttft, dec_total, first, last, steps, pre_flops, dbytes0) -> dict:
    """Serving metrics of a generation from its prefill time and decode-step sums (one GPU's path)."""
    e2e = ttft + dec_total
    tpot = dec_total / steps if steps else 0.0
    peak = hw.peak_flops_per_s[execution.executed(hw, w.precision.compute)[0]]  # the default weights' GEMMs
    return {
        "ttft_s": ttft,
        "tpot_s": tpot,
        "tpot_first_s": first if steps else 0.0,
        "tpot_last_s": last if steps else 0.0,
        "decode_total_s": dec_total,
        "e2e_s": e2e,
        "throughput_tok_s": w.batch * w.gen / e2e,
        "throughput_tok_s_per_gpu": w.batch * w.gen / e2e / gpus,
        "decode_throughput_tok_s": w.batch / tpot if tpot else None,
        "per_sequence_tok_s": w.gen / e2e,
        "prefill_tok_s": w.batch * w.prompt / ttft,
        "utilisation": {
            "prefill_flops_fraction": pre_flops / ttft / peak,
            "decode_bandwidth_fraction": dbytes0 / first / hw.memory_bandwidth_bytes_per_s if steps else None,
        },
    }


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
    if (hw := _check_hardware(hardware)) is None:
        raise HardwareError("scenario() needs a hardware (a registry name, a file, or a llmath Hardware)")
    if precision is None and isinstance(model, ModelSpec):
        p = compiled.spec_precision(model)  # the checkpoint's, once per spec
    else:
        p = execution.checkpoint_precision(model, _check_precision(precision))[0]  # the checkpoint's unless given
    if not compiled.plain_sizes(batch, prompt, gen, attention):
        w = Run(batch, prompt, gen, 0, attention, p)
        batch, prompt, gen = int(w.batch), int(w.prompt), int(w.gen)
    eff = compiled.device_efficiency(efficiency_mode, hw)
    pre_t, dec_t, d, ttft = compiled.scenario_times(spec, attention, hw, p, eff, batch, prompt, gen)
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
