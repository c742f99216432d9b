"""The command line: thin wrappers over the library, one output layer (human tables, --json, --csv).

Errors are mapped in one place, :func:`main`, to one line on stderr: a usage error (unknown option,
a value that breaks its rule) names the option, the value and the rule, exit code 2; a library error
(:class:`~llmath.errors.LLMathError`) exit code 1; anything else is a bug, reported as such, exit code 1.
``LLMATH_DEBUG=1`` shows the traceback. Numeric options are checked by :mod:`llmath.validation` as they
are parsed. Works with typer's vendored click (``typer._click``, typer >= 0.2x) and with older typers
that use the ``click`` package; this module never imports ``click`` itself.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from enum import Enum
from typing import Annotated

import typer

from llmath import output as out
from llmath import validation as val
from llmath.errors import LLMathError, WorkloadError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Exact parameters, FLOPs, bytes, intensity and roofline latency of transformer LLMs, offline.",
)


class Att(str, Enum):
    eager = "eager"
    flash = "flash"


class Eff(str, Enum):
    ideal = "ideal"
    expected = "expected"


class StageOpt(str, Enum):
    prefill = "prefill"
    decode = "decode"
    encoder = "encoder"


def _ints(lo: int, hi: int):
    """An option callback: an integer in [lo, hi] (a usage error otherwise)."""

    def check(value):
        why = None if value is None else val.int_rule(value, lo, hi)
        if why:
            raise typer.BadParameter(f"{value!r} {why}")
        return value

    return check


def _floats(lo: float | None, hi: float | None, lo_open: bool = False):
    """An option callback: a finite number in the range (NaN and ±inf are refused)."""

    def check(value):
        why = None if value is None else val.float_rule(value, lo, hi, lo_open=lo_open)
        if why:
            raise typer.BadParameter(f"{value!r} {why}")
        return value

    return check


def _format(role: str):
    """An option callback: a format name for ``role`` (weights, activations, kv; docs/formats.md)."""

    def check(value):
        from llmath.model.formats import canonical

        if value is not None:
            try:
                canonical(value, role)
            except LLMathError as e:
                raise typer.BadParameter(str(e)) from None
        return value

    return check


def _axis(param: typer.CallbackParam, value):
    """A sweep axis: a list or a range of integers (see llmath.validation.parse_range)."""
    from llmath.sweep import parse_axis

    try:
        parse_axis(f"--{param.name}", value)
    except LLMathError as e:
        raise typer.BadParameter(str(e)) from None
    return value


TOKENS = _ints(1, val.MAX_TOKENS)
TOKENS0 = _ints(0, val.MAX_TOKENS)
ModelArg = Annotated[
    str,
    typer.Argument(help="Registry name or hub id (see 'llmath models'), a hub id to fetch, a config.json or a .gguf."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object for scripts.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print CSV rows.")]
BatchOpt = Annotated[
    int, typer.Option("--batch", "-b", help="Sequences in the batch (B).", callback=_ints(1, val.MAX_BATCH))
]
PromptOpt = Annotated[int, typer.Option("--prompt", "-p", help="Prompt tokens per sequence (P).", callback=TOKENS)]
GenOpt = Annotated[int, typer.Option("--gen", "-n", help="Generated tokens per sequence (N).", callback=TOKENS)]
AttOpt = Annotated[Att, typer.Option("--attention", help="eager: what transformers executes; flash: serving kernels.")]
DtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        callback=_format("activations"),
        help="Weights, activations and KV cache (replaces the checkpoint's formats; default: what the checkpoint "
        "states, else bf16): fp32|bf16|fp16|fp8|int8|nvfp4|mxfp4 (docs/formats.md).",
    ),
]
WOpt = Annotated[
    str | None,
    typer.Option(
        "--weights",
        callback=_format("weights"),
        help="Weights format: bf16|fp16|fp8|fp8-block|int8|int4|awq|gptq|nvfp4|mxfp4|nf4|q4_0|q8_0|q4_k_m|... "
        "(quantised formats keep embedding/LM head/router in 16 bit; docs/formats.md).",
    ),
]
AOpt = Annotated[
    str | None,
    typer.Option(
        "--activations",
        help="Activations format: fp32|bf16|fp16|fp8|int8|nvfp4|mxfp4.",
        callback=_format("activations"),
    ),
]
KVOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-dtype", help="KV-cache format: bf16|fp16|fp32|fp8|nvfp4|int8|q8_0|q4_0.", callback=_format("kv")
    ),
]
GroupOpt = Annotated[
    int | None,
    typer.Option(
        "--group-size", help="Group size of int8/int4/awq/gptq scales (default 128).", callback=_ints(1, 1 << 20)
    ),
]
DEGREE = _ints(1, 1 << 16)
DecPromptOpt = Annotated[
    int,
    typer.Option(
        "--decoder-prompt",
        callback=TOKENS,
        help="Encoder-decoder models: decoder tokens in its prefill (default 1, the start token); "
        "--prompt is then the source length.",
    ),
]
GpusOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus", help="GPUs in the deployment (tp·pp·dp); alone: dense TP=N, MoE its usual.", callback=DEGREE
    ),
]
TpOpt = Annotated[
    int | None, typer.Option("--tp", help="Tensor-parallel degree (attention and dense layers).", callback=DEGREE)
]
PpOpt = Annotated[int | None, typer.Option("--pp", help="Pipeline-parallel stages.", callback=DEGREE)]
EpOpt = Annotated[
    int | None, typer.Option("--ep", help="Expert-parallel degree (MoE; divides tp·dp).", callback=DEGREE)
]
DpOpt = Annotated[
    int | None, typer.Option("--dp", help="Data-parallel (attention-DP) replicas; --batch is split.", callback=DEGREE)
]
OverlapOpt = Annotated[
    str, typer.Option("--overlap", help="none, or tbo: two-batch overlap hides the MoE all-to-all (needs --ep).")
]


def _precision(model, dtype: str | None, weights: str | None, activations: str | None, kv: str | None, group):
    """The checkpoint's formats with the flags overriding them (see llmath.model.checkpoint.precision_for)."""
    from llmath.model.checkpoint import precision_for

    return precision_for(model, dtype, weights, activations, kv, group)


def _gen_dist(text: str | None) -> tuple[tuple[int, float], ...]:
    """'64:0.5,512:0.5' -> ((64, 0.5), (512, 0.5)); a malformed entry is a one-line error."""
    out = []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        g, _, w = item.partition(":")
        try:
            out.append((int(g), float(w or 1)))
        except ValueError:
            raise WorkloadError(f"--gen-dist entry {item!r} must be LENGTH:WEIGHT, e.g. 64:0.5") from None
    return tuple(out)


def _speculation(method: str | None, k: int, acceptance: float | None, draft: str | None):
    if method is None:
        return None
    if acceptance is None:
        raise WorkloadError("--spec-method needs --acceptance (mean tokens per verify round, 1 … k+1, as measured)")
    from llmath.deploy.speculative import Speculation

    return Speculation(method, k, acceptance, draft)


def _hardware(
    name: str | None,
    peak_tflops: float | None,
    bandwidth_gbs: float | None,
    memory_gb: float | None,
    compute_dtype: str,
):
    from llmath import hardware

    flags = (peak_tflops, bandwidth_gbs, memory_gb)
    if any(v is not None for v in flags):
        if not all(v is not None for v in flags):
            raise WorkloadError("a custom device needs all of --peak-tflops, --bandwidth-gbs and --memory-gb")
        return hardware.custom(peak_tflops, bandwidth_gbs, memory_gb, dtype=compute_dtype)
    return hardware.get(name) if name else None


@app.command()
def models(json_: JsonOpt = False):
    """List the bundled models (name, model_type, exact parameters, source).

    Example: llmath models
    """
    from llmath.model import registry
    from llmath.ops.params import param_report

    rows = []
    for n in registry.names():
        s = registry.spec(n)
        rows.append(
            {
                "name": n,
                "model_type": s.model_type,
                "params": param_report(s).total,
                "source": registry.info(n).get("source", ""),
            }
        )
    out.emit_rows(rows, json_, title="Bundled models", columns=["name", "model_type", "params", "source"])


@app.command("hardware")
def hardware_cmd(json_: JsonOpt = False):
    """List the bundled accelerators (dense peaks, bandwidth, memory).

    Example: llmath hardware --json
    """
    from llmath import hardware

    rows = []
    for n in hardware.names():
        h = hardware.get(n)
        rows.append(
            {
                "name": n,
                "memory_GB": h.memory_bytes / 1e9,
                "bandwidth_TB_s": h.memory_bandwidth_bytes_per_s / 1e12,
                **{f"{k}_TFLOPs": v / 1e12 for k, v in sorted(h.peak_flops_per_s.items())},
                "source": h.source,
            }
        )
    out.emit_rows(
        rows,
        json_,
        title="Accelerators (dense peaks)",
        columns=[
            "name",
            "memory_GB",
            "bandwidth_TB_s",
            "bf16_TFLOPs",
            "fp16_TFLOPs",
            "fp8_TFLOPs",
            "int8_TFLOPs",
            "source",
        ],
    )


@app.command()
def params(model: ModelArg, json_: JsonOpt = False):
    """Exact parameter counts by component, per layer, active per token, and the seeds' estimates.

    Examples: llmath params llama-3-8b ; llmath params deepseek-v3 --json ; llmath params ./config.json
    """
    from llmath.model.registry import resolve
    from llmath.ops.params import param_report

    rep = param_report(resolve(model))
    if json_:
        out.emit_json(rep.to_dict())
    else:
        out.params_human(rep)


@app.command()
def ops(
    model: ModelArg,
    stage: Annotated[
        StageOpt, typer.Option("--stage", help="prefill, decode (one step) or encoder (encoder-decoder models).")
    ] = StageOpt.prefill,
    batch: BatchOpt = 1,
    prompt: PromptOpt = 512,
    context: Annotated[
        int | None,
        typer.Option("--context", "-s", help="Decode: cached positions S (default: the prompt).", callback=TOKENS0),
    ] = None,
    prefix: Annotated[
        int, typer.Option("--prefix", help="Prefill: cached prefix before the prompt.", callback=TOKENS0)
    ] = 0,
    attention: AttOpt = Att.flash,
    dtype: DtypeOpt = None,
    weights: WOpt = None,
    activations: AOpt = None,
    kv_dtype: KVOpt = None,
    group_size: GroupOpt = None,
    decoder_prompt: DecPromptOpt = 1,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Add roofline times on this accelerator.")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show each formula with its numbers substituted.")] = False,
    json_: JsonOpt = False,
    csv: CsvOpt = False,
):
    """Per-operator FLOPs, bytes by class and arithmetic intensity of one prefill or decode step.

    Encoder-decoder models: --prompt is the source length; --stage encoder is the encoder pass, prefill the
    decoder's first pass over --decoder-prompt tokens, decode a step at decoder context --context (default
    --decoder-prompt); both cross-attend the --prompt cached source positions.

    Examples: llmath ops llama-3-8b --stage decode --batch 16 --prompt 4096 --explain ;
    llmath ops transformer-base --stage encoder --prompt 128
    """
    from llmath.analysis import stage_report
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency
    from llmath.model.registry import resolve
    from llmath.ops import Scenario

    spec = resolve(model)
    p = _precision(model, dtype, weights, activations, kv_dtype, group_size)
    for name, v, lo in (
        ("--batch", batch, 1), ("--prompt", prompt, 1), ("--prefix", prefix, 0), ("--decoder-prompt", decoder_prompt, 1)
    ):  # fmt: skip
        if v < lo:
            raise WorkloadError(f"{name}={v} must be an integer >= {lo}")
    if spec.is_encoder_decoder:
        sc = _encdec_scenario(spec.name, stage.value, batch, prompt, decoder_prompt, context, prefix)
    elif stage == StageOpt.encoder:
        raise WorkloadError(f"--stage encoder: {spec.name!r} is a decoder-only model; use prefill or decode")
    elif stage == StageOpt.prefill:
        if context is not None:
            raise WorkloadError("--context applies to --stage decode; for a prefill after a cached prefix use --prefix")
        sc = Scenario(batch, prompt, prefix)
    else:
        if prefix:
            raise WorkloadError("--prefix applies to --stage prefill; a decode step's cache is --context")
        S = prompt if context is None else context
        if S < 0:
            raise WorkloadError(f"--context={S} must be >= 0")
        sc = Scenario(batch, 1, S)
    from llmath.seeds import context_warnings

    for msg in context_warnings(spec, sc.S0 + sc.T):
        out.note(f"warning: {msg}")
    hw = get(hardware) if hardware else None
    eff = efficiency("expected", hw) if hw else None
    rep = stage_report(spec, stage.value, sc, attention.value, p, hw, eff)
    if json_:
        scen = {"B": sc.B, "T": sc.T, "S0": sc.S0} | ({"src": sc.src} if spec.is_encoder_decoder else {})
        out.emit_json({"model": spec.name, "scenario": scen, **rep.to_dict()})
    elif csv:
        out.ops_csv(rep)
    else:
        out.ops_human(spec, rep, sc, attention.value, explain)


def _encdec_scenario(name: str, stage: str, B: int, P: int, T0: int, context: int | None, prefix: int):
    """An encoder-decoder stage's scenario: source P; decoder prefill of T0 tokens; decode at context S."""
    from llmath.ops import Scenario

    if prefix:
        raise WorkloadError(f"--prefix: {name!r} is an encoder-decoder model; its decoder prefill is --decoder-prompt")
    if stage == "encoder":
        return Scenario(B, P)
    if stage == "prefill":
        if context is not None:
            raise WorkloadError("--context applies to --stage decode; the decoder prefill is --decoder-prompt tokens")
        return Scenario(B, T0, 0, src=P)
    S = T0 if context is None else context
    if S < 0:
        raise WorkloadError(f"--context={S} must be >= 0")
    return Scenario(B, 1, S, src=P)


@app.command()
def analyze(
    model: ModelArg = "llama-3-8b",
    hardware: Annotated[
        str, typer.Option("--hardware", "-H", help="Accelerator name or JSON/TOML file ('none' to skip).")
    ] = "h100-sxm",
    batch: BatchOpt = 1,
    prompt: PromptOpt = 512,
    gen: GenOpt = 128,
    prefix: Annotated[int, typer.Option("--prefix", help="Cached prefix before the prompt.", callback=TOKENS0)] = 0,
    attention: AttOpt = Att.flash,
    dtype: DtypeOpt = None,
    weights: WOpt = None,
    activations: AOpt = None,
    kv_dtype: KVOpt = None,
    group_size: GroupOpt = None,
    decoder_prompt: DecPromptOpt = 1,
    efficiency: Annotated[
        Eff, typer.Option("--efficiency", help="ideal: datasheet roofline; expected: measured fractions.")
    ] = Eff.expected,
    matmul_eff: Annotated[
        float | None,
        typer.Option("--matmul-eff", help="Override the matmul fraction of peak.", callback=_floats(0, 1, True)),
    ] = None,
    memory_eff: Annotated[
        float | None,
        typer.Option("--memory-eff", help="Override the bandwidth fraction.", callback=_floats(0, 1, True)),
    ] = None,
    overhead_us: Annotated[
        float | None,
        typer.Option("--overhead-us", help="Override the per-kernel overhead (µs).", callback=_floats(0, 1e6)),
    ] = None,
    reserve_gb: Annotated[
        float, typer.Option("--reserve-gb", help="Memory kept for the runtime (GB).", callback=_floats(0, 1e9))
    ] = 0.0,
    peak_tflops: Annotated[
        float | None,
        typer.Option("--peak-tflops", help="Custom device: dense peak TFLOP/s.", callback=_floats(0, 1e9, True)),
    ] = None,
    bandwidth_gbs: Annotated[
        float | None, typer.Option("--bandwidth-gbs", help="Custom device: GB/s.", callback=_floats(0, 1e9, True))
    ] = None,
    memory_gb: Annotated[
        float | None, typer.Option("--memory-gb", help="Custom device: GB.", callback=_floats(0, 1e9, True))
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Operators to list per stage.", callback=_ints(0, 10**6))] = 8,
    plot: Annotated[str | None, typer.Option("--plot", help="Write the roofline chart (PNG or SVG).")] = None,
    memory_plot: Annotated[
        str | None, typer.Option("--memory-plot", help="Write memory (weights, KV, activations) vs context.")
    ] = None,
    gpus: GpusOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    ep: EpOpt = None,
    dp: DpOpt = None,
    overlap: OverlapOpt = "none",
    json_: JsonOpt = False,
    concurrency: Annotated[
        float | None, typer.Option("--concurrency", "-c", help="Serve C concurrent requests (continuous batching).")
    ] = None,
    rate: Annotated[float | None, typer.Option("--rate", help="Serve an open loop of this many requests/s.")] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", help="vllm|sglang|trtllm|llama.cpp scheduler defaults (default vllm).")
    ] = None,
    prefix_hit: Annotated[
        float, typer.Option("--prefix-hit", help="Fraction of each prompt in the prefix cache.")
    ] = 0.0,
    max_num_batched_tokens: Annotated[
        int | None, typer.Option("--max-num-batched-tokens", help="Override the engine's token budget per iteration.")
    ] = None,
    max_num_seqs: Annotated[
        int | None, typer.Option("--max-num-seqs", help="Override the engine's running-request cap.")
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None, typer.Option("--gpu-memory-utilization", help="Override the engine's memory fraction.")
    ] = None,
    gen_dist: Annotated[
        str | None, typer.Option("--gen-dist", help="Serving: output lengths 'G:weight,...' (e.g. 64:0.5,512:0.5).")
    ] = None,
    enforce_eager: Annotated[
        bool, typer.Option("--enforce-eager", help="Serving: no CUDA graphs (eager kernel launches in decode).")
    ] = False,
    spec_method: Annotated[
        str | None, typer.Option("--spec-method", help="Speculative decoding: draft | eagle | mtp.")
    ] = None,
    spec_tokens: Annotated[int, typer.Option("--spec-tokens", help="Draft tokens k per verify round.")] = 3,
    acceptance: Annotated[
        float | None, typer.Option("--acceptance", help="Mean tokens a round yields (1 … k+1), as measured.")
    ] = None,
    draft_model: Annotated[
        str | None, typer.Option("--draft-model", help="Draft model for --spec-method draft.")
    ] = None,
):
    """The full report: params, KV cache, prefill/decode FLOPs, bytes, intensity, time, bound, TTFT, TPOT,
    throughput and memory fit. With --concurrency or --rate: continuous batching by a serving engine.

    Examples: llmath analyze llama-3-8b --hardware h100-sxm ; llmath analyze mixtral-8x7b -H h200 -b 32 --json ;
    llmath analyze llama-3.1-70b -H h100-sxm --gpus 2 --weights fp8 ; llmath analyze deepseek-v3 -H h200 --gpus 8
    --ep 8 --dp 8 ; llmath analyze llama-3-8b -H h100-sxm --concurrency 64 --prompt 1024 --gen 256 --engine vllm
    """
    from llmath.analysis import analyze as run

    p = _precision(model, dtype, weights, activations, kv_dtype, group_size)
    serving_flags = (engine, max_num_batched_tokens, max_num_seqs, gpu_memory_utilization, spec_method)
    unused = any(v is not None for v in serving_flags) or prefix_hit or enforce_eager or gen_dist
    if concurrency is None and rate is None and unused:
        raise WorkloadError(
            "--engine, --prefix-hit, --max-num-*, --gpu-memory-utilization and --spec-* apply to serving: add"
            " --concurrency C or --rate R (--batch B is a static batch)"
        )
    if concurrency is not None or rate is not None:
        from llmath.deploy.service import serve

        rep = serve(
            model,
            _hardware(hardware, peak_tflops, bandwidth_gbs, memory_gb, p.compute),
            prompt=prompt,
            gen=gen,
            concurrency=concurrency,
            rate=rate,
            engine=engine or "vllm",
            gpus=gpus,
            tp=tp,
            pp=pp,
            ep=ep,
            dp=dp,
            overlap=overlap,
            prefix_hit=prefix_hit,
            gen_dist=_gen_dist(gen_dist),
            precision=p,
            attention=attention.value,
            efficiency_mode=efficiency.value,
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            gpu_memory_utilization=gpu_memory_utilization,
            cuda_graph_bytes=reserve_gb * 1e9 if reserve_gb else None,
            cuda_graphs=False if enforce_eager else None,
            speculation=_speculation(spec_method, spec_tokens, acceptance, draft_model),
        )
        if json_:
            out.emit_json(rep.to_dict())
        else:
            from llmath.output.serving import serving_human

            serving_human(rep.to_dict())
        return
    hw = None if hardware.lower() == "none" else _hardware(hardware, peak_tflops, bandwidth_gbs, memory_gb, p.compute)
    if reserve_gb < 0:
        raise WorkloadError(f"--reserve-gb={reserve_gb} must be >= 0")
    ov = None if overhead_us is None else overhead_us * 1e-6
    a = run(
        model,
        hw,
        batch=batch,
        prompt=prompt,
        gen=gen,
        prefix=prefix,
        attention=attention.value,
        precision=p,
        efficiency_mode=efficiency.value,
        reserve_bytes=reserve_gb * 1e9,
        decoder_prompt=decoder_prompt,
        matmul=matmul_eff,
        memory=memory_eff,
        overhead_s=ov,
        decode_overhead_s=ov,
        gpus=gpus,
        tp=tp,
        pp=pp,
        ep=ep,
        dp=dp,
        overlap=overlap,
    )
    if plot:
        from llmath.plots import roofline_plot

        roofline_plot(a, plot)
    if memory_plot:
        from llmath.model.registry import resolve
        from llmath.plots import memory_plot as mem_plot

        mem_plot(resolve(model), hw, batch, p, memory_plot, attention.value)
    if json_:
        out.emit_json(a.to_dict())
    else:
        out.analysis_human(a, top)
        for f in (plot, memory_plot):
            if f:
                out.note(f"wrote {f}")


@app.command()
def sweep(
    model: ModelArg,
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="Accelerator.")] = "h100-sxm",
    batch: Annotated[
        str, typer.Option("--batch", "-b", help="List '1,2,4' or range '1:256:x2' / '128:4096:+128'.", callback=_axis)
    ] = "1",
    prompt: Annotated[str, typer.Option("--prompt", "-p", help="List or range.", callback=_axis)] = "512",
    gen: Annotated[str, typer.Option("--gen", "-n", help="List or range.", callback=_axis)] = "128",
    attention: AttOpt = Att.flash,
    dtype: DtypeOpt = None,
    weights: WOpt = None,
    activations: AOpt = None,
    kv_dtype: KVOpt = None,
    group_size: GroupOpt = None,
    efficiency: Annotated[Eff, typer.Option("--efficiency")] = Eff.expected,
    plot: Annotated[
        str | None, typer.Option("--plot", help="Latency and throughput vs the swept axis (PNG/SVG).")
    ] = None,
    gpus: GpusOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    ep: EpOpt = None,
    dp: DpOpt = None,
    overlap: OverlapOpt = "none",
    json_: JsonOpt = False,
    csv: CsvOpt = False,
):
    """Evaluate a grid of batch × prompt × gen in one vectorised call: TTFT, TPOT, throughput, memory.

    Example: llmath sweep llama-3-8b -H h100-sxm --batch 1:256:x2 --prompt 1024 --gen 256 --csv
    """
    from llmath.sweep import parse_axis, run_sweep

    p = _precision(model, dtype, weights, activations, kv_dtype, group_size)
    axes = {
        "batch": parse_axis("--batch", batch),
        "prompt": parse_axis("--prompt", prompt),
        "gen": parse_axis("--gen", gen),
    }
    layout = dict(gpus=gpus, tp=tp, pp=pp, ep=ep, dp=dp, overlap=overlap)
    rows = run_sweep(model, hardware, axes, attention.value, p, efficiency.value, layout)
    if plot:
        from llmath.plots import sweep_plot

        sweep_plot(rows, axes, plot)
    if json_:
        out.emit_json({"model": model, "hardware": hardware, "rows": rows})
    elif csv:
        out.rows_csv(rows)
    else:
        out.emit_rows(rows, False, title=f"{model} on {hardware}", columns=list(rows[0]) if rows else [])
        if plot:
            out.note(f"wrote {plot}")


@app.command()
def compare(
    models_: Annotated[list[str], typer.Argument(metavar="MODEL...", help="One or more models.")],
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="Comma-separated accelerators.")] = "h100-sxm",
    batch: BatchOpt = 1,
    prompt: PromptOpt = 512,
    gen: GenOpt = 128,
    attention: AttOpt = Att.flash,
    dtype: DtypeOpt = None,
    efficiency: Annotated[Eff, typer.Option("--efficiency")] = Eff.expected,
    gpus: GpusOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    ep: EpOpt = None,
    dp: DpOpt = None,
    overlap: OverlapOpt = "none",
    json_: JsonOpt = False,
    csv: CsvOpt = False,
):
    """Several models and/or accelerators side by side.

    Example: llmath compare llama-3-8b mistral-7b-v0.1 qwen3-8b -H h100-sxm,a100-sxm-80gb -b 8
    """
    from llmath.analysis import analyze as run

    hws = [x.strip() for x in hardware.split(",") if x.strip()]
    if not hws:
        raise WorkloadError(f"--hardware={hardware!r} names no accelerator; e.g. -H h100-sxm,a100-sxm-80gb")
    rows = []
    for m in models_:
        for h in hws:
            a = run(
                m,
                h,
                batch=batch,
                prompt=prompt,
                gen=gen,
                attention=attention.value,
                precision=_precision(m, dtype, None, None, None, None),
                efficiency_mode=efficiency.value,
                gpus=gpus,
                tp=tp,
                pp=pp,
                ep=ep,
                dp=dp,
                overlap=overlap,
            )
            rows.append(
                {
                    "model": a.model,
                    "hardware": h,
                    "params": a.params.total,
                    "kv_bytes_per_token": a.kv_cache["bytes_per_token"],
                    "ttft_s": a.generation["ttft_s"],
                    "tpot_s": a.generation["tpot_s"],
                    "throughput_tok_s": a.generation["throughput_tok_s"],
                    "memory_GB": a.memory.total_bytes / 1e9,
                    "fits": a.memory.fits,
                    **({"layout": _layout_text(a.parallel)} if a.parallel else {}),
                }
            )
    if json_:
        out.emit_json({"rows": rows})
    elif csv:
        out.rows_csv(rows)
    else:
        out.emit_rows(rows, False, title="Comparison", columns=list(rows[0]))


def _layout_text(par: dict) -> str:
    return f"tp{par['tp']} pp{par['pp']} dp{par['dp']} ep{par['ep']}"


@app.command()
def seeds(
    model: ModelArg = "llama-7b",
    context: Annotated[
        str, typer.Option("--context", help="Contexts for per-token FLOPs (list or range).", callback=_axis)
    ] = "128,2048,32768",
    prompt: PromptOpt = 512,
    gen: GenOpt = 4096,
    batch: BatchOpt = 1,
    json_: JsonOpt = False,
):
    """The seeds' derivations on a real model: 24·L·d² + 4·L·d·N vs exact per-token FLOPs, the N = 6d
    crossover, batch prefill vs token loop, and how arithmetic intensity moves over a generation.

    Example: llmath seeds llama-7b --context 128,4096,65536
    """
    from llmath.model.registry import resolve
    from llmath.seeds import seed_report
    from llmath.sweep import parse_axis

    rep = seed_report(resolve(model), parse_axis("--context", context), prompt, gen, batch)
    if json_:
        out.emit_json(rep)
    else:
        out.seeds_human(rep)


@app.command()
def calibrate(
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    out_file: Annotated[str, typer.Option("--out", help="Where to write the hardware profile.")] = "profile.json",
    dtype: Annotated[str, typer.Option("--dtype", help="Dtypes to measure, comma-separated.")] = "fp32",
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes, few repeats (seconds).")] = False,
    threads: Annotated[
        int | None, typer.Option("--threads", help="torch threads (default: all cores).", callback=_ints(1, 4096))
    ] = None,
    json_: JsonOpt = False,
):
    """Measure the local device (matmul FLOP/s by shape, bandwidth, kernel overhead) into a profile that
    --hardware accepts.

    Example: llmath calibrate --device cpu --out cpu.json
    """
    from llmath.measure.calibrate import calibrate as run

    prof = run(
        device=device, dtypes=[d.strip() for d in dtype.split(",")], quick=quick, progress=not json_, threads=threads
    )
    with open(out_file, "w") as f:
        json.dump(prof, f, indent=2)
    if json_:
        out.emit_json(prof)
    else:
        from llmath.output.validation import calibration_human

        calibration_human(prof, out_file)


@app.command()
def validate(
    model: Annotated[str | None, typer.Argument(help="Model to build and time (a registry name or config).")] = None,
    hardware: Annotated[
        str | None, typer.Option("--hardware", help="Hardware profile (from calibrate) or name.")
    ] = None,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype")] = "fp32",
    published: Annotated[
        bool, typer.Option("--published", help="Compare with published serving measurements.")
    ] = False,
    quick: Annotated[bool, typer.Option("--quick", help="Few shapes, few repeats.")] = False,
    threads: Annotated[
        int | None, typer.Option("--threads", help="torch threads (default: all cores).", callback=_ints(1, 4096))
    ] = None,
    json_: JsonOpt = False,
    serving: Annotated[
        bool, typer.Option("--serving", help="With --published: the concurrency/offline rows, served by engines.")
    ] = False,
):
    """Measured vs predicted: time a real model here, or compare with published measurements.

    Examples: llmath validate --published ; llmath validate llama-3.2-1b --hardware cpu.json --device cpu
    """
    if published and serving:
        from llmath.measure.serving_validation import validate_serving

        rep = validate_serving()
        if json_:
            out.emit_json(rep)
        else:
            from llmath.output.serving import serving_validation_human

            serving_validation_human(rep)
        return
    if published:
        from llmath.measure.validate import validate_published

        rep = validate_published()
        if json_:
            out.emit_json(rep)
        else:
            from llmath.output.validation import published_human

            published_human(rep)
        return
    if model is None:
        raise WorkloadError(
            "validate needs a MODEL (or --published); e.g. llmath validate llama-3.2-1b --hardware cpu.json"
        )
    from llmath.measure.validate import validate_model

    rep = validate_model(model, hardware, device=device, dtype=dtype, quick=quick, progress=not json_, threads=threads)
    if json_:
        out.emit_json(rep)
    else:
        from llmath.output.validation import validation_human

        validation_human(rep)


@app.command()
def serve(
    port: Annotated[
        int, typer.Option("--port", help="Port on 127.0.0.1 (0: any free port).", callback=_ints(0, 65535))
    ] = 8765,
):
    """The local web page: pick a model, an accelerator and a workload; see the report. Loopback only.

    Example: llmath serve --port 8765   (then open http://127.0.0.1:8765/)
    """
    from llmath.web import make_server

    try:
        server = make_server(port)
    except OSError as e:
        raise WorkloadError(f"--port {port}: cannot listen on 127.0.0.1 ({e.strerror}); pick another port") from None
    out.note(f"llmath: serving on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _click_module():
    """The click that typer runs on: typer's vendored copy (``typer._click``, typer >= 0.2x) or, for older
    typers, the ``click`` package that ``typer.main`` imported. Never imported here directly."""
    import typer.main as typer_main

    return getattr(typer, "_click", None) or getattr(typer_main, "_click", None) or getattr(typer_main, "click", None)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _usage_error(e: BaseException) -> int | None:
    """Print a click-style error (usage: exit 2; other click errors: their code) as one line; its exit code.
    None when ``e`` is not one."""
    mod = _click_module()
    base = getattr(mod, "ClickException", None) or getattr(getattr(mod, "exceptions", None), "ClickException", None)
    is_click = isinstance(e, base) if isinstance(base, type) else False
    if not is_click and not (hasattr(e, "format_message") and isinstance(getattr(e, "exit_code", None), int)):
        return None
    if type(e).__name__ == "NoArgsIsHelpError":  # bare 'llmath' or 'llmath COMMAND': the help text
        e.show()
        return 2
    ctx = getattr(e, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    print(f"error: {_one_line(e.format_message())}{where}", file=sys.stderr)
    return e.exit_code


def main(argv: list[str] | None = None) -> None:
    """Entry point: one line on stderr for every error; exit 2 for usage errors, 1 for the rest."""
    warnings.simplefilter("default")
    warnings.showwarning = lambda msg, *a, **k: print(f"warning: {msg}", file=sys.stderr)
    debug = bool(os.environ.get("LLMATH_DEBUG"))
    try:
        rv = app(args=argv, standalone_mode=False)
    except LLMathError as e:
        if debug:
            raise
        print(f"error: {_one_line(e)}", file=sys.stderr)
        sys.exit(1)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        code = _usage_error(e)
        if code is not None:
            sys.exit(code)
        if debug:
            raise
        if isinstance(e, OSError) and e.strerror:  # e.g. --plot or --out in a folder that does not exist
            print(f"error: {e.filename or ''}: {e.strerror}; check the path".lstrip(": "), file=sys.stderr)
        elif isinstance(e, MemoryError):
            print("error: out of memory; try a smaller workload or grid", file=sys.stderr)
        else:
            print(
                f"error: internal error ({type(e).__name__}: {_one_line(e)[:300]}). This is a bug in llmath: "
                "rerun with LLMATH_DEBUG=1 for the traceback and report it",
                file=sys.stderr,
            )
        sys.exit(1)
    if isinstance(rv, int) and rv:  # standalone_mode=False returns the exit code of ctx.exit(n)
        sys.exit(rv)
