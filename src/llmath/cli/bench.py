"""``llmath bench``: load an OpenAI-compatible server and report what it measured beside llmath's prediction.

Registered on the app by importing this module (``llmath.cli`` does); the load generator is
:mod:`llmath.measure.bench`, the prediction :func:`llmath.deploy.service.serve`.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace
from typing import Annotated

import typer

from llmath import output as out
from llmath.cli import options as o
from llmath.cli.app import app
from llmath.cli.engine import EngineArgsOpt

UrlArg = Annotated[str, typer.Argument(help="The server's base URL, e.g. http://127.0.0.1:8000")]
ServedOpt = Annotated[str, typer.Option("--model", help="The model name the server serves (the API's model field).")]
ConcOpt = Annotated[
    int, typer.Option("--concurrency", "-c", help="Requests in flight (closed loop).", callback=o.ints(1, 1 << 16))
]
RequestsOpt = Annotated[
    int | None,
    typer.Option("--requests", help="Requests in all (default 4 × concurrency).", callback=o.ints(1, 10**7)),
]
SECONDS = o.floats(0, 1e7, lo_open=True)
RateOpt = Annotated[
    float | None,
    typer.Option(
        "--rate", help="Poisson arrivals, requests/s (at most -c in flight).", callback=o.floats(0, 1e9, True)
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option("--timeout", help="Seconds without data: a request stalled.", callback=SECONDS),
]
MaxSecondsOpt = Annotated[
    float, typer.Option("--max-seconds", help="Stop sending new requests after this many seconds.", callback=SECONDS)
]
SaveOpt = Annotated[str | None, typer.Option("--save", help="Write the measured report (JSON) to this file.")]
HwOpt = Annotated[
    str | None, typer.Option("--hardware", help="Accelerator of the server: adds llmath's prediction (with -H).")
]
EngineOpt = Annotated[
    str | None, typer.Option("--engine", help="vllm|sglang|trtllm|llama.cpp scheduler defaults for the prediction.")
]


@app.command("bench")
@o.with_options(kv_dtype=o.LAYOUT_OPTIONS)
def bench_cmd(
    url: UrlArg,
    model: ServedOpt,
    concurrency: ConcOpt = 1,
    prompt: o.PromptOpt = 512,
    gen: o.GenOpt = 128,
    requests: RequestsOpt = None,
    rate: RateOpt = None,
    timeout: TimeoutOpt = 30.0,
    max_seconds: MaxSecondsOpt = 3600.0,
    hardware: Annotated[str | None, typer.Option("--hardware", "-H", help="Accelerator: adds the prediction.")] = None,
    engine: EngineOpt = None,
    engine_args: EngineArgsOpt = None,
    weights: o.WOpt = None,
    kv_dtype: o.KVOpt = None,
    save: SaveOpt = None,
    json_: o.JsonOpt = False,
    allow_long_context: o.AllowLongContextOpt = False,
    **shared,
):
    """Stream completions from an OpenAI-compatible server (C in flight, each replaced on completion; --rate:
    Poisson arrivals) and report TTFT, TPOT, ITL and throughput as vLLM bench serve defines them, beside
    llmath's prediction for the deployment given by --engine-args or -H/--gpus/--tp/... (docs/engines.md).

    Examples: llmath bench http://127.0.0.1:8000 --model meta-llama/Llama-3.1-8B -c 32 --prompt 1024 --gen 256 ;
    llmath bench http://127.0.0.1:8000 --model m -c 64 -H h100-sxm --engine-args "vllm serve meta-llama/Llama-3.1-8B"
    """
    from llmath.measure.bench import run

    a = SimpleNamespace(**locals(), **shared)
    cfg = _config(a)
    prediction = None
    if hardware or engine_args:  # before the run: a deployment it cannot predict is refused before any request
        from llmath.measure.bench import predict

        args = _prediction_args(a)
        prediction = predict(cfg, args.pop("hardware"), args.pop("model"), **args)
    show = not json_ and sys.stderr.isatty()
    rep = run(cfg, _progress() if show else None)
    if show:
        print(file=sys.stderr)
    rep.prediction = prediction
    _report(rep, save, json_)


def _report(rep, save: str | None, as_json: bool) -> None:
    """Save, print (JSON or the table), and exit 1 when no request completed."""
    from llmath.measure.bench import comparison

    d = rep.to_dict()
    if save:
        with open(save, "w", encoding="utf-8") as f:
            json.dump(d, f, indent=2)
    if as_json:
        out.emit_json(d)
    else:
        from llmath.output.bench import bench_human

        bench_human(d, comparison(rep))
        if save:
            out.note(f"wrote {save}")
    if rep.completed == 0:
        reasons = "; ".join(rep.notes) or "no request finished"
        out.note(f"error: no request completed ({reasons}); check the URL, --model and the server's log")
        raise typer.Exit(1)


def _config(a: SimpleNamespace):
    """The run's settings; a value that breaks its rule is a usage error (exit code 2)."""
    from llmath.errors import WorkloadError
    from llmath.measure.bench import BenchConfig

    try:
        return BenchConfig(
            a.url, a.model, a.concurrency, a.prompt, a.gen, a.requests or 4 * a.concurrency, a.rate, a.timeout,
            max(a.timeout, 600.0), a.max_seconds,
        )  # fmt: skip
    except WorkloadError as e:
        raise typer.BadParameter(str(e)) from None


def _progress():
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.25 or done == total:
            last[0] = now
            print(f"\rbench: {done}/{total} requests", end="", file=sys.stderr, flush=True)

    return show


def _prediction_args(a: SimpleNamespace) -> dict:
    """serve()'s arguments for the deployment the flags (or --engine-args) describe."""
    if not a.hardware:
        raise typer.BadParameter("the prediction needs the server's accelerator: add -H NAME", param_hint="-H")
    from llmath.cli.engine import SERVING_DEFAULTS, apply_engine_args

    given = ("model", "gpus", "tp", "pp", "ep", "dp", "weights", "kv_dtype", "engine", "engine_args", "rate")
    ns = SimpleNamespace(**{k: getattr(a, k) for k in given}, concurrency=float(a.concurrency), **SERVING_DEFAULTS)
    ns.hardware = a.hardware
    if a.engine_args:
        apply_engine_args(ns)
    else:
        from llmath.deploy.engine_args import registry_model

        ns.model, note = registry_model(a.model)
        if note:
            out.note(f"note: {note}")
    if ns.spec_method:
        raise typer.BadParameter(
            "speculative decoding needs a measured acceptance: predict it with "
            "'llmath analyze --engine-args ... --acceptance A'",
            param_hint="--engine-args",
        )
    p = o.precision(ns.model, None, ns.weights, None, ns.kv_dtype, None)
    deployment = dict(
        model=ns.model, engine=ns.engine or "vllm", gpus=ns.gpus, tp=ns.tp, pp=ns.pp, ep=ns.ep, dp=ns.dp,
        overlap=a.overlap, weights=ns.weights, kv_dtype=ns.kv_dtype, max_num_seqs=ns.max_num_seqs,
        max_num_batched_tokens=ns.max_num_batched_tokens, gpu_memory_utilization=ns.gpu_memory_utilization,
        cuda_graphs=False if ns.enforce_eager else None, mixed_prefill=ns.mixed_prefill, **ns.engine_settings,
        allow_long_context=a.allow_long_context,
    )  # fmt: skip
    layout = ("gpus", "tp", "pp", "ep", "dp", "overlap")
    kwargs = {k: v for k, v in deployment.items() if k not in ("weights", "kv_dtype", *layout)}
    kwargs["parallel"] = o.parallel_config(SimpleNamespace(**{k: deployment[k] for k in layout}))
    return dict(hardware=a.hardware, precision=p, deployment=deployment, **kwargs)
