"""Measuring this machine: ``calibrate`` and ``validate`` (measured vs predicted)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from llmath import output as out
from llmath.cli.app import app
from llmath.cli.options import JsonOpt, ints
from llmath.errors import WorkloadError


@app.command()
def calibrate(
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    out_file: Annotated[str, typer.Option("--out", help="Where to write the hardware profile.")] = "profile.json",
    dtype: Annotated[str, typer.Option("--dtype", help="Dtypes to measure, comma-separated.")] = "fp32",
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes, few repeats (seconds).")] = False,
    threads: Annotated[
        int | None, typer.Option("--threads", help="torch threads (default: all cores).", callback=ints(1, 4096))
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
        int | None, typer.Option("--threads", help="torch threads (default: all cores).", callback=ints(1, 4096))
    ] = None,
    json_: JsonOpt = False,
    serving: Annotated[
        bool, typer.Option("--serving", help="With --published: the concurrency/offline rows, served by engines.")
    ] = False,
    runs: Annotated[
        str | None, typer.Option("--runs", help="A CSV of measured serving runs (serving_runs.csv's format).")
    ] = None,
    by: Annotated[
        str, typer.Option("--by", help="With --runs: groupings (engine,system,model,concurrency,lengths,mode).")
    ] = "engine,system,model,concurrency,lengths,mode",
    harness_lengths: Annotated[
        bool,
        typer.Option(
            "--harness-lengths/--fixed-lengths",
            help="With --runs: InferenceX rows with the lengths its client draws (uniform in [0.8·L, L], its"
            " clients out of step; the default), or with the fixed lengths the columns state.",
        ),
    ] = True,
):
    """Measured vs predicted: time a real model here, or compare with published measurements.

    Examples: llmath validate --published ; llmath validate llama-3.2-1b --hardware cpu.json --device cpu ;
    llmath validate --runs serving_runs.csv --by engine,system
    """
    if runs is not None:
        _validate_runs(runs, by, json_, harness_lengths)
        return
    if published:
        _validate_published(serving, json_)
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


def _validate_runs(runs: str, by: str, json_: bool, harness_lengths: bool = True) -> None:
    """``validate --runs``: every row of a measured-runs CSV predicted, errors by group."""
    from pathlib import Path

    from llmath.measure.serving_runs import KEYS, validate_runs

    keys = tuple(k.strip() for k in by.split(",") if k.strip())
    if bad := [k for k in keys if k not in KEYS]:
        why = f"{','.join(bad)} is not a grouping; use any of {','.join(KEYS)}"
        raise typer.BadParameter(why, param_hint="--by")
    if not Path(runs).is_file():
        why = f"{runs!r}: no such file; give a CSV in serving_runs.csv's format"
        raise typer.BadParameter(why, param_hint="--runs")
    rep = validate_runs(runs, keys, harness_lengths=harness_lengths)
    if json_:
        out.emit_json(rep)
    else:
        from llmath.output.validation import runs_human

        runs_human(rep)


def _validate_published(serving: bool, json_: bool) -> None:
    """``validate --published [--serving]``: the published rows, static or served by engines."""
    if serving:
        from llmath.measure.serving_validation import validate_serving

        rep = validate_serving()
        if json_:
            out.emit_json(rep)
        else:
            from llmath.output.serving import serving_validation_human

            serving_validation_human(rep)
        return
    from llmath.measure.validate import validate_published

    rep = validate_published()
    if json_:
        out.emit_json(rep)
    else:
        from llmath.output.validation import published_human

        published_human(rep)
