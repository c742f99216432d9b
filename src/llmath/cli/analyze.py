"""``llmath analyze``: the full report of one workload, or continuous batching by a serving engine."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Annotated

import typer

from llmath import output as out
from llmath.cli import options as o
from llmath.cli.analyze_disagg import DISAGG_OPTIONS, POOL_FLAGS
from llmath.cli.app import app
from llmath.cli.engine import EmitOpt, EngineArgsOpt
from llmath.cli.options import SPECULATION_OPTIONS
from llmath.errors import WorkloadError

HardwareOpt = Annotated[
    str, typer.Option("--hardware", "-H", help="Accelerator name or JSON/TOML file ('none' to skip).")
]
PrefixOpt = Annotated[int, typer.Option("--prefix", help="Cached prefix before the prompt.", callback=o.TOKENS0)]
EfficiencyOpt = Annotated[
    o.Eff, typer.Option("--efficiency", help="ideal: datasheet roofline; expected: measured fractions.")
]
MatmulEffOpt = Annotated[
    float | None, typer.Option("--matmul-eff", help="Override the matmul fraction of peak.", callback=o.FRACTION)
]
MemoryEffOpt = Annotated[
    float | None, typer.Option("--memory-eff", help="Override the bandwidth fraction.", callback=o.FRACTION)
]
OverheadOpt = Annotated[
    float | None,
    typer.Option("--overhead-us", help="Override the per-kernel overhead (µs).", callback=o.floats(0, 1e6)),
]
ReserveOpt = Annotated[
    float, typer.Option("--reserve-gb", help="Memory kept for the runtime (GB).", callback=o.floats(0, 1e9))
]
PeakOpt = Annotated[
    float | None, typer.Option("--peak-tflops", help="Custom device: dense peak TFLOP/s.", callback=o.DEVICE_RATE)
]
BandwidthOpt = Annotated[
    float | None, typer.Option("--bandwidth-gbs", help="Custom device: GB/s.", callback=o.DEVICE_RATE)
]
MemoryOpt = Annotated[float | None, typer.Option("--memory-gb", help="Custom device: GB.", callback=o.DEVICE_RATE)]
TopOpt = Annotated[int, typer.Option("--top", help="Operators to list per stage.", callback=o.ints(0, 10**6))]
PlotOpt = Annotated[str | None, typer.Option("--plot", help="Write the roofline chart (PNG or SVG).")]
MemoryPlotOpt = Annotated[
    str | None, typer.Option("--memory-plot", help="Write memory (weights, KV, activations) vs context.")
]
ConcurrencyOpt = Annotated[
    float | None, typer.Option("--concurrency", "-c", help="Serve C concurrent requests (continuous batching).")
]
RateOpt = Annotated[float | None, typer.Option("--rate", help="Serve an open loop of this many requests/s.")]
EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="vllm|sglang|trtllm|llama.cpp: scheduler defaults and the kernels of quantised formats (default vllm).",
    ),
]
PrefixHitOpt = Annotated[float, typer.Option("--prefix-hit", help="Fraction of each prompt in the prefix cache.")]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-num-batched-tokens", help="Override the engine's token budget per iteration.")
]
MaxSeqsOpt = Annotated[int | None, typer.Option("--max-num-seqs", help="Override the engine's running-request cap.")]
GpuMemOpt = Annotated[
    float | None, typer.Option("--gpu-memory-utilization", help="Override the engine's memory fraction.")
]
GenDistOpt = Annotated[
    str | None, typer.Option("--gen-dist", help="Serving: output lengths 'G:weight,...' (e.g. 64:0.5,512:0.5).")
]
EagerOpt = Annotated[
    bool, typer.Option("--enforce-eager", help="Serving: no CUDA graphs (eager kernel launches in decode).")
]
MixedOpt = Annotated[
    bool | None,
    typer.Option(
        "--mixed-prefill/--prefill-first",
        help="Serving: prefill chunks ride in the decoding requests' iterations (vLLM, TensorRT-LLM, SGLang with"
        " --enable-mixed-chunk) or run alone ahead of them (SGLang's default). Default: the engine's.",
    ),
]
CalibrationOpt = Annotated[
    str | None,
    typer.Option(
        "--calibration", help="Serving: a 'llmath bench --save' report; its measured TTFT/TPOT set the efficiency."
    ),
]
ArrivalOpt = Annotated[
    str | None,
    typer.Option(
        "--arrival",
        help="Serving: closed (default with --concurrency: C requests started together, each replaced when it ends), "
        "staggered (C clients already out of step: requests spread over a lifetime), poisson (default with --rate) "
        "or offline (every request queued at once).",
    ),
]
PromptsPerClientOpt = Annotated[
    float | None,
    typer.Option(
        "--prompts-per-client", help="Closed loop: requests each client sends (10).", callback=o.floats(1, 1e9)
    ),
]


@app.command()
@o.with_options(
    attention=o.FORMAT_OPTIONS,
    memory_plot=o.LAYOUT_OPTIONS,
    enforce_eager=SPECULATION_OPTIONS,
    prompts_per_client=DISAGG_OPTIONS,
)
def analyze(
    model: o.ModelArg = "llama-3-8b",
    hardware: HardwareOpt = "h100-sxm",
    batch: o.BatchOpt = 1,
    prompt: o.PromptOpt = 512,
    gen: o.GenOpt = 128,
    prefix: PrefixOpt = 0,
    attention: o.AttOpt = o.Att.flash,
    decoder_prompt: o.DecPromptOpt = 1,
    images: o.ImagesOpt = 0,
    efficiency: EfficiencyOpt = o.Eff.expected,
    matmul_eff: MatmulEffOpt = None,
    memory_eff: MemoryEffOpt = None,
    overhead_us: OverheadOpt = None,
    reserve_gb: ReserveOpt = 0.0,
    peak_tflops: PeakOpt = None,
    bandwidth_gbs: BandwidthOpt = None,
    memory_gb: MemoryOpt = None,
    top: TopOpt = 8,
    plot: PlotOpt = None,
    memory_plot: MemoryPlotOpt = None,
    json_: o.JsonOpt = False,
    concurrency: ConcurrencyOpt = None,
    rate: RateOpt = None,
    engine: EngineOpt = None,
    prefix_hit: PrefixHitOpt = 0.0,
    max_num_batched_tokens: MaxTokensOpt = None,
    max_num_seqs: MaxSeqsOpt = None,
    gpu_memory_utilization: GpuMemOpt = None,
    gen_dist: GenDistOpt = None,
    enforce_eager: EagerOpt = False,
    mixed_prefill: MixedOpt = None,
    engine_args: EngineArgsOpt = None,
    emit: EmitOpt = None,
    calibration: CalibrationOpt = None,
    arrival: ArrivalOpt = None,
    prompts_per_client: PromptsPerClientOpt = None,
    allow_long_context: o.AllowLongContextOpt = False,
    **shared,
):
    """The full report: params, KV cache, prefill/decode FLOPs, bytes, intensity, time, bound, TTFT, TPOT,
    throughput and memory fit. With --concurrency or --rate: continuous batching by a serving engine.

    Examples: llmath analyze llama-3-8b --hardware h100-sxm ; llmath analyze mixtral-8x7b -H h200 -b 32 --json ;
    llmath analyze llama-3.1-70b -H h100-sxm --gpus 2 --weights fp8 ; llmath analyze deepseek-v3 -H h200 --gpus 8
    --ep 8 --dp 8 ; llmath analyze llama-3-8b -H h100-sxm --concurrency 64 --prompt 1024 --gen 256 --engine vllm ;
    llmath analyze -H h100-sxm -c 64 --engine-args "vllm serve meta-llama/Llama-3.1-70B -tp 8 --kv-cache-dtype fp8" ;
    llmath analyze llama-3.1-70b -H h100-sxm -c 64 --disagg --prefill-tp 4 --decode-tp 8 --engine sglang
    """
    _run(SimpleNamespace(**locals(), **shared))


# --arrival offline without --concurrency: vLLM's offline benchmark default (benchmark_throughput --num-prompts 1000)
OFFLINE_REQUESTS = 1000
# What only a static batch uses, and what only serving uses (--engine is not here: a static batch runs quantised
# formats in the engine's kernels); a flag counts as given when it differs from analyze's default.
STATIC_ONLY = (
    "--batch --prefix --images --decoder-prompt --matmul-eff --memory-eff --overhead-us --top --plot --memory-plot"
)
SERVING_ONLY = (
    "--arrival --prompts-per-client --prefix-hit --max-num-batched-tokens --max-num-seqs --gpu-memory-utilization "
    "--gen-dist --enforce-eager --mixed-prefill --calibration --spec-method --spec-tokens --acceptance --draft-model "
    "--allow-long-context"
)
SERVING_HINT = {
    "--batch": "the serving load is --concurrency C or --rate R",
    "--prefix": "use --prefix-hit F, the cached fraction of each prompt",
}


def _attribute(flag: str) -> str:
    return flag[2:].replace("-", "_")


def _given(a: SimpleNamespace, flags: str) -> list[str]:
    """The ``flags`` (space-separated) whose value in ``a`` is not analyze's default."""
    defaults = inspect.signature(analyze).parameters
    return [f for f in flags.split() if getattr(a, _attribute(f)) != defaults[_attribute(f)].default]


def _refuse_unused(a: SimpleNamespace, serving: bool) -> None:
    """A flag that does nothing in the chosen mode is a usage error, never silently ignored."""
    if serving:
        for flag in _given(a, STATIC_ONLY):
            hint = SERVING_HINT.get(flag, "drop it, or drop --concurrency/--rate for a static batch")
            value = getattr(a, _attribute(flag))
            raise WorkloadError(f"{flag} {value} applies to a static batch (--batch B); {hint}")
        spec = _given(a, "--spec-tokens --acceptance --draft-model")
        if spec and a.spec_method is None:
            raise WorkloadError(f"{', '.join(spec)}: speculative decoding only; add --spec-method draft|eagle|mtp")
        return
    unused = _given(a, SERVING_ONLY)
    if unused:
        raise WorkloadError(
            f"{', '.join(unused)} appl{'ies' if len(unused) == 1 else 'y'} to serving: add --concurrency C or"
            " --rate R (--batch B is a static batch)"
        )


def _run(a: SimpleNamespace) -> None:
    """Serve when --concurrency or --rate is given (or --arrival offline), else analyse the static batch;
    --emit prints the engine command of the deployment instead."""
    if a.engine_args and not a.disagg:
        from llmath.cli.engine import apply_engine_args

        apply_engine_args(a)
    if a.disagg or _given(a, POOL_FLAGS):
        return _disagg(a)
    if a.emit:
        from llmath.cli.engine import emit_analyze

        emit_analyze(a)
        return
    from llmath.deploy.workload import ARRIVALS  # the command imports the deployment layer anyway

    if a.arrival is not None and a.arrival not in ARRIVALS:
        raise typer.BadParameter(
            f"{a.arrival!r} must be one of {', '.join(ARRIVALS)}; e.g. --arrival staggered (with --concurrency)",
            param_hint="--arrival",
        )
    if a.arrival == "offline" and a.concurrency is None and a.rate is None:
        a.concurrency = OFFLINE_REQUESTS
    serving = a.concurrency is not None or a.rate is not None
    _refuse_unused(a, serving)
    p = o.precision(a.model, a.dtype, a.weights, a.activations, a.kv_dtype, a.group_size, a.ssm_state_dtype)
    if serving:
        _serve(a, p)
    else:
        _static(a, p)


def _disagg(a: SimpleNamespace) -> None:
    """--disagg: the serving flags' checks, then those of the pools (llmath.cli.analyze_disagg)."""
    from llmath.cli.analyze_disagg import refuse_unused, serve_disagg

    refuse_unused(a, _given)
    _refuse_unused(a, serving=True)
    serve_disagg(
        a, o.precision(a.model, a.dtype, a.weights, a.activations, a.kv_dtype, a.group_size, a.ssm_state_dtype)
    )


def _serve(a: SimpleNamespace, p) -> None:
    from llmath.deploy.service import serve

    rep = serve(
        **o.served_request(a, p),
        engine="vllm" if a.engine is None else a.engine,
        parallel=o.parallel_config(a),
        attention=a.attention.value,
        efficiency_mode=_calibrated(a) if a.calibration else a.efficiency.value,
        max_num_batched_tokens=a.max_num_batched_tokens,
        max_num_seqs=a.max_num_seqs,
        gpu_memory_utilization=a.gpu_memory_utilization,
        cuda_graph_bytes=a.reserve_gb * 1e9 if a.reserve_gb else None,
        cuda_graphs=False if a.enforce_eager else None,
        mixed_prefill=a.mixed_prefill,
        **getattr(a, "engine_settings", {}),  # what --engine-args set beyond analyze's flags
    )
    if a.json_:
        out.emit_json(rep.to_dict())
    else:
        from llmath.output.serving import serving_human

        serving_human(rep.to_dict())


def _calibrated(a: SimpleNamespace):
    """The efficiency a saved ``llmath bench`` run calibrates (llmath.measure.bench_calibration); notes on stderr."""
    from llmath.hardware import get
    from llmath.measure.bench_calibration import calibrate, load, saved_predictor

    report = load(a.calibration)
    if get(report["prediction"]["hardware"]).name != get(a.hardware).name:
        raise WorkloadError(
            f"--calibration {a.calibration!r} was measured on {report['prediction']['hardware']}, not {a.hardware};"
            " calibrate with a run on the same device"
        )
    cal = calibrate(report, saved_predictor(report))
    for line in cal.lines(a.calibration):
        out.note(f"note: {line}")
    return cal.efficiency


def _static(a: SimpleNamespace, p) -> None:
    from llmath.analysis import analyze as run

    hw = (
        None
        if a.hardware.lower() == "none"
        else o.device(a.hardware, a.peak_tflops, a.bandwidth_gbs, a.memory_gb, p.compute)
    )
    if a.reserve_gb < 0:
        raise WorkloadError(f"--reserve-gb={a.reserve_gb} must be >= 0; give the GB kept for the runtime (0: none)")
    ov = None if a.overhead_us is None else a.overhead_us * 1e-6
    rep = run(
        a.model,
        hw,
        workload=o.static_workload(a),
        attention=a.attention.value,
        precision=p,
        efficiency_mode=a.efficiency.value,
        reserve_bytes=a.reserve_gb * 1e9,
        engine=a.engine or "vllm",
        matmul=a.matmul_eff,
        memory=a.memory_eff,
        overhead_s=ov,
        decode_overhead_s=ov,
        parallel=o.parallel_config(a),
    )
    _plots(a, rep, hw, p)
    if a.json_:
        out.emit_json(rep.to_dict())
    else:
        out.analysis_human(rep, a.top)
        for f in (a.plot, a.memory_plot):
            if f:
                out.note(f"wrote {f}")


def _plots(a: SimpleNamespace, rep, hw, p) -> None:
    if a.plot:
        from llmath.plots import roofline_plot

        roofline_plot(rep, a.plot)
    if a.memory_plot:
        from llmath.model.registry import resolve
        from llmath.plots import memory_plot as mem_plot

        mem_plot(resolve(a.model), hw, a.batch, p, a.memory_plot, a.attention.value)
