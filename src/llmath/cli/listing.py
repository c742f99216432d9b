"""Listing commands: ``models``, ``hardware``, ``params`` and the per-operator table ``ops``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Annotated

import typer

from llmath import output as out
from llmath import validation as val
from llmath.cli import options as o
from llmath.cli.app import app
from llmath.errors import WorkloadError


@app.command()
def models(json_: o.JsonOpt = False):
    """List the bundled models grouped by family (family, name, model_type, exact parameters, source).

    Example: llmath models
    """
    from llmath.model import registry
    from llmath.ops.params import param_report

    rows = []
    for family, names in registry.by_family().items():
        for n in names:
            s = registry.spec(n)
            rows.append(
                {
                    "family": family,
                    "name": n,
                    "model_type": s.model_type,
                    "params": param_report(s).total,
                    "source": registry.info(n).get("source", ""),
                }
            )
    cols = ["family", "name", "model_type", "params", "source"]
    out.emit_rows(rows, json_, title="Bundled models by family", columns=cols)


@app.command("hardware")
def hardware_cmd(json_: o.JsonOpt = False):
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
def params(model: o.ModelArg, json_: o.JsonOpt = False):
    """Exact parameter counts by component, per layer, active per token, and the closed-form estimates (12·L·d² …).

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
@o.with_options(attention=o.FORMAT_OPTIONS)
def ops(
    model: o.ModelArg,
    stage: Annotated[
        o.StageOpt, typer.Option("--stage", help="prefill, decode (one step) or encoder (encoder-decoder models).")
    ] = o.StageOpt.prefill,
    batch: o.BatchOpt = 1,
    prompt: o.PromptOpt = 512,
    context: Annotated[
        int | None,
        typer.Option("--context", "-s", help="Decode: cached positions S (default: the prompt).", callback=o.TOKENS0),
    ] = None,
    prefix: Annotated[
        int, typer.Option("--prefix", help="Prefill: cached prefix before the prompt.", callback=o.TOKENS0)
    ] = 0,
    attention: o.AttOpt = o.Att.flash,
    decoder_prompt: o.DecPromptOpt = 1,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Add roofline times on this accelerator.")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show each formula with its numbers substituted.")] = False,
    json_: o.JsonOpt = False,
    csv: o.CsvOpt = False,
    **shared,
):
    """Per-operator FLOPs, bytes by class and arithmetic intensity of one prefill or decode step.

    Encoder-decoder models: --prompt is the source length; --stage encoder is the encoder pass, prefill the
    decoder's first pass over --decoder-prompt tokens, decode a step at decoder context --context (default
    --decoder-prompt); both cross-attend the --prompt cached source positions.

    Examples: llmath ops llama-3-8b --stage decode --batch 16 --prompt 4096 --explain ;
    llmath ops transformer-base --stage encoder --prompt 128
    """
    _ops(SimpleNamespace(**locals(), **shared))


def _ops(a: SimpleNamespace) -> None:
    from llmath.estimates import context_warnings
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency
    from llmath.model.registry import resolve
    from llmath.pass_report import stage_report

    spec = resolve(a.model)
    p = o.precision(a.model, a.dtype, a.weights, a.activations, a.kv_dtype, a.group_size, a.ssm_state_dtype)
    sc = _scenario(spec, a)
    for msg in context_warnings(spec, sc.S0 + sc.T):
        out.note(f"warning: {msg}")
    hw = get(a.hardware) if a.hardware else None
    eff = efficiency("expected", hw) if hw else None
    rep = stage_report(spec, a.stage.value, sc, a.attention.value, p, hw, eff)
    if a.json_:
        scen = {"B": sc.B, "T": sc.T, "S0": sc.S0} | ({"src": sc.src} if spec.is_encoder_decoder else {})
        out.emit_json({"model": spec.name, "scenario": scen, **rep.to_dict()})
    elif a.csv:
        out.ops_csv(rep)
    else:
        out.ops_human(spec, rep, sc, a.attention.value, a.explain)


def _scenario(spec, a: SimpleNamespace):
    """The scenario of ``ops``' stage: prefill after --prefix, or a decode step at --context."""
    from llmath.ops import Scenario

    for name, v, lo in (
        ("--batch", a.batch, 1), ("--prompt", a.prompt, 1), ("--prefix", a.prefix, 0),
        ("--decoder-prompt", a.decoder_prompt, 1),
    ):  # fmt: skip
        if v < lo:
            raise WorkloadError(f"{name}={v} must be an integer >= {lo}; {val.next_step(name)}")
    if spec.is_encoder_decoder:
        return _encdec_scenario(spec.name, a.stage.value, a.batch, a.prompt, a.decoder_prompt, a.context, a.prefix)
    if a.stage == o.StageOpt.encoder:
        raise WorkloadError(f"--stage encoder: {spec.name!r} is a decoder-only model; use prefill or decode")
    if a.decoder_prompt != 1:
        raise WorkloadError(
            f"--decoder-prompt {a.decoder_prompt}: {spec.name!r} is a decoder-only model; drop it and give --prompt"
        )
    if a.stage == o.StageOpt.prefill:
        if a.context is not None:
            raise WorkloadError("--context applies to --stage decode; for a prefill after a cached prefix use --prefix")
        return Scenario(a.batch, a.prompt, a.prefix)
    if a.prefix:
        raise WorkloadError("--prefix applies to --stage prefill; a decode step's cache is --context")
    S = a.prompt if a.context is None else a.context
    if S < 0:
        raise WorkloadError(f"--context={S} must be >= 0; {val.next_step('context')}")
    return Scenario(a.batch, 1, S)


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
        raise WorkloadError(f"--context={S} must be >= 0; {val.next_step('context')}")
    return Scenario(B, 1, S, src=P)
