"""``llmath plan``: the deployment with the most tokens/s per GPU under latency targets, and its Pareto front.

Registered on the app by importing this module (``llmath.cli`` does); the search is :func:`llmath.deploy.plan.plan`.
"""

# no ``from __future__ import annotations``: typer reads the options' annotations as objects instead of
# compiling each string when it builds the command (docs/speed.md)
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from llmath import output as out
from llmath.cli.app import app
from llmath.cli.engine import EmitOpt
from llmath.cli.options import (
    SPECULATION_OPTIONS,
    AllowLongContextOpt,
    JsonOpt,
    ModelArg,
    ints,
    parallel_config,
    speculation,
    with_options,
)
from llmath.errors import WorkloadError

TargetOpt = Annotated[float | None, typer.Option(help="Target: at most this many milliseconds.")]
PinOpt = Annotated[int | None, typer.Option(help="Pin this parallel degree.")]
WeightsOpt = Annotated[
    str | None,
    typer.Option(
        "--weights", help="Weight formats to try, comma-separated (e.g. bf16,fp8); default: the checkpoint's formats."
    ),
]


@app.command("plan")
@with_options(top=SPECULATION_OPTIONS)
def plan_cmd(
    model: ModelArg,
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="Accelerator name or hardware file.")] = "h100-sxm",
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs available.")] = 8,
    prompt: Annotated[int, typer.Option("--prompt", "-p", help="Prompt tokens per request.")] = 1024,
    gen: Annotated[int, typer.Option("--gen", "-n", help="Output tokens per request.")] = 256,
    ttft_ms: TargetOpt = None,
    tpot_ms: TargetOpt = None,
    tp: PinOpt = None,
    pp: PinOpt = None,
    ep: PinOpt = None,
    dp: PinOpt = None,
    weights: WeightsOpt = None,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache dtype (default: activations').")] = None,
    disagg: Annotated[
        bool,
        typer.Option(
            "--disagg",
            help="Also search disaggregated prefill/decode pools (rows timed as analyze --disagg times their pools).",
        ),
    ] = False,
    engine: Annotated[str, typer.Option("--engine", help="vllm|sglang|trtllm|llama.cpp scheduler defaults.")] = "vllm",
    prefix_hit: Annotated[float, typer.Option("--prefix-hit", help="Fraction of each prompt cached.")] = 0.0,
    cost: Annotated[
        float | None, typer.Option("--cost-per-gpu-hour", help="USD per GPU-hour: adds USD per million tokens.")
    ] = None,
    plot: Annotated[str | None, typer.Option("--plot", help="Write the Pareto front (PNG or SVG).")] = None,
    top: Annotated[
        int, typer.Option("--top", help="Pareto rows to print (human output).", callback=ints(1, 10**6))
    ] = 20,
    json_: JsonOpt = False,
    emit: EmitOpt = None,
    allow_long_context: AllowLongContextOpt = False,
    **speculation_flags,
):
    """Search GPU layouts, aggregated vs disaggregated serving and concurrency for the most output tokens/s per
    GPU under --ttft-ms/--tpot-ms (without targets: the maximum throughput); print the Pareto front.

    Examples: llmath plan llama-3-8b -H h100-sxm --gpus 8 --prompt 1024 --gen 256 --tpot-ms 30 ;
    llmath plan qwen3-30b-a3b -H h200 --gpus 4 --weights bf16,fp8 --disagg --json ;
    llmath plan llama-3.1-70b -H h100-sxm --gpus 8 --tpot-ms 50 --emit vllm ;
    llmath plan llama-3-8b --gpus 2 --tpot-ms 10 --spec-method eagle --acceptance 2.5 (speculating too)
    """
    from llmath.deploy.plan import plan
    from llmath.deploy.workload import Workload

    fmts = [w.strip() for w in weights.split(",") if w.strip()] if weights is not None else None
    pinned = parallel_config(SimpleNamespace(gpus=None, tp=tp, pp=pp, ep=ep, dp=dp))  # the search's GPUs: --gpus
    pins: dict[str, Any] = {"parallel": pinned, "ttft_ms": ttft_ms, "tpot_ms": tpot_ms}
    kw: dict[str, Any] = {"kv_dtype": kv_dtype, "disagg": disagg, "engine": engine}
    kw["allow_long_context"] = allow_long_context
    kw.update(weights=fmts, cost_per_gpu_hour=cost, speculation=_speculation(**speculation_flags))
    work = Workload(prompt=prompt, gen=gen, prefix_hit=prefix_hit)
    res = plan(model, hardware, gpus=gpus, workload=work, **pins, **kw).to_dict()
    _show(res, plot, emit, hardware, kv_dtype, json_, top, work)


def _show(res: dict, plot: str | None, emit: str | None, hardware: str, kv_dtype, json_: bool, top: int,
          work=None) -> None:  # fmt: skip
    """The plan as a plot, an engine command, JSON or tables."""
    if plot:
        from llmath.plots import pareto_plot

        pareto_plot(res, plot)
    if emit:
        return _emit(res, emit, hardware, kv_dtype, json_, work)
    if json_:
        out.emit_json(res)
        return
    from llmath.output.serving import plan_human

    plan_human(res, top)
    if plot:
        out.note(f"wrote {plot}")


def _speculation(spec_method: str | None, spec_tokens: int, acceptance: float | None, draft_model: str | None):
    """The speculation every aggregated layout is also planned with (None: none); its flags alone are an error."""
    flags = (
        ("--spec-tokens", spec_tokens, 3),
        ("--acceptance", acceptance, None),
        ("--draft-model", draft_model, None),
    )
    given = [flag for flag, value, default in flags if value != default]
    if spec_method is None and given:
        raise WorkloadError(f"{', '.join(given)}: speculative decoding only; add --spec-method draft|eagle|mtp")
    return speculation(spec_method, spec_tokens, acceptance, draft_model)


def _emit(res: dict, engine: str, hardware: str, kv_dtype: str | None, as_json: bool, work=None) -> None:
    from llmath.cli.engine import emit_plan

    emit_plan(res, engine, hardware, kv_dtype, as_json, work)
