"""Grids and side-by-side: ``sweep``, ``compare``, and ``estimates`` (closed-form rules of thumb vs exact counts)."""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Annotated

import typer

from llmath import output as out
from llmath.cli import options as o
from llmath.cli.app import app
from llmath.errors import WorkloadError


@app.command()
@o.with_options(attention=o.FORMAT_OPTIONS, plot=o.LAYOUT_OPTIONS)
def sweep(
    model: o.ModelArg,
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="Accelerator.")] = "h100-sxm",
    batch: Annotated[
        str, typer.Option("--batch", "-b", help="List '1,2,4' or range '1:256:x2' / '128:4096:+128'.", callback=o.axis)
    ] = "1",
    prompt: Annotated[str, typer.Option("--prompt", "-p", help="List or range.", callback=o.axis)] = "512",
    gen: Annotated[str, typer.Option("--gen", "-n", help="List or range.", callback=o.axis)] = "128",
    attention: o.AttOpt = o.Att.flash,
    efficiency: o.EffOpt = o.Eff.expected,
    plot: Annotated[
        str | None, typer.Option("--plot", help="Latency and throughput vs the swept axis (PNG/SVG).")
    ] = None,
    json_: o.JsonOpt = False,
    csv: o.CsvOpt = False,
    **shared,
):
    """Evaluate a grid of batch × prompt × gen in one vectorised call: TTFT, TPOT, throughput, memory.

    Example: llmath sweep llama-3-8b -H h100-sxm --batch 1:256:x2 --prompt 1024 --gen 256 --csv
    """
    from llmath.sweep import parse_axis, run_sweep

    a = SimpleNamespace(**shared)
    p = o.precision(model, a.dtype, a.weights, a.activations, a.kv_dtype, a.group_size, a.ssm_state_dtype)
    axes = {
        "batch": parse_axis("--batch", batch),
        "prompt": parse_axis("--prompt", prompt),
        "gen": parse_axis("--gen", gen),
    }
    rows = run_sweep(model, hardware, axes, attention.value, p, efficiency.value, o.parallel_config(a))
    if plot:
        from llmath.plots import sweep_plot

        sweep_plot(rows, axes, plot, f"{model} on {hardware}: latency and throughput vs the swept axis")
    if json_:
        out.emit_json({"model": model, "hardware": hardware, "rows": rows})
    elif csv:
        out.rows_csv(rows)
    else:
        out.emit_rows(rows, False, title=f"{model} on {hardware}", columns=list(rows[0]) if rows else [])
        if plot:
            out.note(f"wrote {plot}")


@app.command()
@o.with_options(efficiency=o.LAYOUT_OPTIONS)
def compare(
    models_: Annotated[list[str], typer.Argument(metavar="MODEL...", help="One or more models.")],
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="Comma-separated accelerators.")] = "h100-sxm",
    batch: o.BatchOpt = 1,
    prompt: o.PromptOpt = 512,
    gen: o.GenOpt = 128,
    attention: o.AttOpt = o.Att.flash,
    dtype: o.DtypeOpt = None,
    efficiency: o.EffOpt = o.Eff.expected,
    json_: o.JsonOpt = False,
    csv: o.CsvOpt = False,
    **shared,
):
    """Several models and/or accelerators side by side.

    Example: llmath compare llama-3-8b mistral-7b-v0.1 qwen3-8b -H h100-sxm,a100-sxm-80gb -b 8
    """
    hws = [x.strip() for x in hardware.split(",") if x.strip()]
    if not hws:
        raise WorkloadError(f"--hardware={hardware!r} names no accelerator; e.g. -H h100-sxm,a100-sxm-80gb")
    a = SimpleNamespace(**locals(), **shared)
    rows = [_compare_row(m, h, a) for m in models_ for h in hws]
    if json_:
        out.emit_json({"rows": rows})
    elif csv:
        out.rows_csv(rows)
    else:
        out.emit_rows(rows, False, title="Comparison", columns=list(rows[0]))


def _compare_row(model: str, hw: str, a: SimpleNamespace) -> dict:
    """One row of ``compare``: ``model`` on accelerator ``hw`` with the command's workload ``a``."""
    from llmath.analysis import analyze as run
    from llmath.deploy.workload import Workload

    r = run(
        model,
        hw,
        workload=Workload(batch=a.batch, prompt=a.prompt, gen=a.gen),
        attention=a.attention.value,
        precision=o.precision(model, a.dtype, None, None, None, None),
        efficiency_mode=a.efficiency.value,
        parallel=o.parallel_config(a),
    )
    return {
        "model": r.model,
        "hardware": hw,
        "params": r.params.total,
        "kv_bytes_per_token": r.kv_cache["bytes_per_token"],
        "ttft_s": r.generation["ttft_s"],
        "tpot_s": r.generation["tpot_s"],
        "throughput_tok_s": r.generation["throughput_tok_s"],
        "memory_GB": r.memory.total_bytes / 1e9,
        "fits": r.memory.fits,
        **({"layout": _layout_text(r.parallel)} if r.parallel else {}),
    }


def _layout_text(par: dict) -> str:
    return f"tp{par['tp']} pp{par['pp']} dp{par['dp']} ep{par['ep']}"


ContextOpt = Annotated[
    str, typer.Option("--context", help="Contexts for per-token FLOPs (list or range).", callback=o.axis)
]


@app.command()
def estimates(
    model: o.ModelArg = "llama-7b",
    context: ContextOpt = "128,2048,32768",
    prompt: o.PromptOpt = 512,
    gen: o.GenOpt = 4096,
    batch: o.BatchOpt = 1,
    json_: o.JsonOpt = False,
):
    """The closed-form rules of thumb against the exact counts of a real model: FLOPs per generated token
    24·L·d² + 4·L·d·N, the N = 6d crossover, batch prefill vs a token loop, and how arithmetic intensity moves
    over a generation (the parameter rules 12·L·d² … are in `llmath params`; derivations: docs/estimates.md).

    Example: llmath estimates llama-7b --context 128,4096,65536
    """
    from llmath.estimates import estimates_report
    from llmath.model.registry import resolve
    from llmath.sweep import parse_axis

    rep = estimates_report(resolve(model), parse_axis("--context", context), prompt, gen, batch)
    if json_:
        out.emit_json(rep)
    else:
        out.estimates_human(rep)


@app.command("seeds", hidden=True)
@functools.wraps(estimates)
def seeds(**kwargs):
    """Deprecated name of `llmath estimates`: the same options, the same output, and a note on stderr."""
    out.note("note: `llmath seeds` is a deprecated name of `llmath estimates` (the same output)")
    estimates(**kwargs)
