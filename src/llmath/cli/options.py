"""The options the commands share: ``Annotated`` types with their help text and validation callbacks.

Each numeric option is checked by :mod:`llmath.validation` as it is parsed (a usage error, exit code 2);
the helpers at the end turn option values into library inputs (precision, hardware, serving knobs).
"""

from __future__ import annotations

import inspect
import typing
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from llmath import validation as val
from llmath.errors import LLMathError, WorkloadError

if TYPE_CHECKING:
    from llmath.deploy.layout import ParallelConfig


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


def ints(lo: int, hi: int):
    """An option callback: an integer in [lo, hi] (a usage error otherwise)."""

    def check(param: typer.CallbackParam, value):
        why = None if value is None else val.int_rule(value, lo, hi)
        if why:
            raise typer.BadParameter(f"{value!r} {why}; {val.next_step(str(param.name))}")
        return value

    return check


def floats(lo: float | None, hi: float | None, lo_open: bool = False):
    """An option callback: a finite number in the range (NaN and ±inf are refused)."""

    def check(param: typer.CallbackParam, value):
        why = None if value is None else val.float_rule(value, lo, hi, lo_open=lo_open)
        if why:
            raise typer.BadParameter(f"{value!r} {why}; {val.next_step(str(param.name))}")
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


def axis(param: typer.CallbackParam, value):
    """A sweep axis: a list or a range of integers (see llmath.validation.parse_range)."""
    from llmath.sweep import parse_axis

    try:
        parse_axis(f"--{param.name}", value)
    except LLMathError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def _format_option(flag: str, role: str, help: str):
    """An optional format name for ``role``, checked as it is parsed."""
    return Annotated[str | None, typer.Option(flag, callback=_format(role), help=help)]


def _degree_option(flag: str, help: str):
    """An optional parallel degree in [1, 2**16]."""
    return Annotated[int | None, typer.Option(flag, help=help, callback=DEGREE)]


TOKENS = ints(1, val.MAX_TOKENS)
TOKENS0 = ints(0, val.MAX_TOKENS)
DEGREE = ints(1, 1 << 16)
FRACTION = floats(0, 1, True)
DEVICE_RATE = floats(1e-6, 1e9)  # TFLOP/s, GB/s, GB of a custom device (hardware.registry MIN_FLAG, MAX_FLAG)
ModelArg = Annotated[
    str,
    typer.Argument(help="Registry name or hub id (see 'llmath models'), a hub id to fetch, a config.json or a .gguf."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object for scripts.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print CSV rows.")]
AllowLongContextOpt = Annotated[
    bool,
    typer.Option(
        "--allow-long-context",
        help="Serving: time requests whose prompt + gen pass the engine's maximum model length (as the engine derives"
        " it from the config), which it refuses by default; the figures then extrapolate, and --emit raises the"
        " engine's limit (docs/context.md).",
    ),
]
BatchOpt = Annotated[
    int, typer.Option("--batch", "-b", help="Sequences in the batch (B).", callback=ints(1, val.MAX_BATCH))
]
PromptOpt = Annotated[int, typer.Option("--prompt", "-p", help="Prompt tokens per sequence (P).", callback=TOKENS)]
GenOpt = Annotated[int, typer.Option("--gen", "-n", help="Generated tokens per sequence (N).", callback=TOKENS)]
AttOpt = Annotated[Att, typer.Option("--attention", help="eager: what transformers executes; flash: serving kernels.")]
EffOpt = Annotated[Eff, typer.Option("--efficiency")]
DtypeOpt = _format_option(
    "--dtype",
    "activations",
    "Weights, activations and KV cache (replaces the checkpoint's formats; default: what the checkpoint "
    "states, else bf16): fp32|bf16|fp16|fp8|int8|nvfp4|mxfp4 (docs/formats.md).",
)
WOpt = _format_option(
    "--weights",
    "weights",
    "Weights format: bf16|fp16|fp8|fp8-block|int8|int4|awq|gptq|nvfp4|mxfp4|nf4|q4_0|q8_0|q4_k_m|... "
    "(quantised formats keep embedding/LM head/router in 16 bit; docs/formats.md).",
)
AOpt = _format_option("--activations", "activations", "Activations format: fp32|bf16|fp16|fp8|int8|nvfp4|mxfp4.")
KVOpt = _format_option("--kv-dtype", "kv", "KV-cache format: bf16|fp16|fp32|fp8|nvfp4|int8|q8_0|q4_0.")
SSMOpt = _format_option(
    "--ssm-state-dtype",
    "kv",
    "SSM state format of Mamba / Mamba-2 / Gated DeltaNet layers (vLLM --mamba-ssm-cache-dtype): fp32|bf16|fp16 "
    "(default: the config's mamba_ssm_cache_dtype, else the KV-cache format).",
)
GroupOpt = Annotated[
    int | None,
    typer.Option(
        "--group-size", help="Group size of int8/int4/awq/gptq scales (default 128).", callback=ints(1, 1 << 20)
    ),
]
DecPromptOpt = Annotated[
    int,
    typer.Option(
        "--decoder-prompt",
        callback=TOKENS,
        help="Encoder-decoder models: decoder tokens in its prefill (default 1, the start token); "
        "--prompt is then the source length.",
    ),
]
ImagesOpt = Annotated[
    int,
    typer.Option(
        "--images",
        callback=TOKENS0,
        help="Images per request (Llama 3.2 Vision): the vision encoder pass joins the TTFT and the "
        "cross-attention layers run over tiles·(patches+1) vision tokens each (default 0: text only).",
    ),
]
GpusOpt = _degree_option("--gpus", "GPUs in the deployment (tp·pp·dp); alone: dense TP=N, MoE its usual.")
TpOpt = _degree_option("--tp", "Tensor-parallel degree (attention and dense layers).")
PpOpt = _degree_option("--pp", "Pipeline-parallel stages.")
EpOpt = _degree_option("--ep", "Expert-parallel degree (MoE; divides tp·dp).")
DpOpt = _degree_option("--dp", "Data-parallel (attention-DP) replicas; --batch is split.")
OverlapOpt = Annotated[
    str, typer.Option("--overlap", help="none, or tbo: two-batch overlap hides the MoE all-to-all (needs --ep).")
]


def option_group(defaults: dict | None = None, **types) -> tuple:
    """An option group for :func:`with_options`: ``name=type`` in order, each defaulting to None unless
    ``defaults`` names its default."""
    return tuple((name, kind, (defaults or {}).get(name)) for name, kind in types.items())


FORMAT_OPTIONS = option_group(
    dtype=DtypeOpt, weights=WOpt, activations=AOpt, kv_dtype=KVOpt, ssm_state_dtype=SSMOpt, group_size=GroupOpt
)
LAYOUT_OPTIONS = option_group(
    {"overlap": "none"}, gpus=GpusOpt, tp=TpOpt, pp=PpOpt, ep=EpOpt, dp=DpOpt, overlap=OverlapOpt
)


def with_options(**after: tuple):
    """Option groups declared once: ``@with_options(attention=FORMAT_OPTIONS)`` adds ``(name, type, default)``
    options to a command's signature right after its ``attention`` parameter (``--help`` lists them there);
    the command receives them in its ``**shared`` keyword arguments. Put it below ``@app.command()``."""

    def wrap(fn):
        hints = typing.get_type_hints(fn, include_extras=True)
        params = []
        for p in inspect.signature(fn).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                continue
            params.append(p.replace(annotation=hints[p.name]))
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
            params += [inspect.Parameter(n, kind, default=d, annotation=a) for n, a, d in after.get(p.name, ())]
        fn.__signature__ = inspect.Signature(params)
        fn.__annotations__ = {q.name: q.annotation for q in params}
        return fn

    return wrap


def parallel_config(a, overlap: str | None = None) -> ParallelConfig:
    """The deployment layout flags of a command's arguments ``a`` as the one parallel config the library takes
    (``parallel=``; validated once, :class:`llmath.deploy.layout.ParallelConfig`)."""
    from llmath.deploy.layout import ParallelConfig

    return ParallelConfig(a.gpus, a.tp, a.pp, a.ep, a.dp, str(overlap or getattr(a, "overlap", None) or "none"))


def precision(model, dtype: str | None, weights: str | None, activations: str | None, kv: str | None, group, ssm=None):
    """The checkpoint's formats with the flags overriding them (see llmath.model.checkpoint.precision_for)."""
    from llmath.model.checkpoint import precision_for

    return precision_for(model, dtype, weights, activations, kv, group, ssm)


def gen_dist(text: str | None) -> tuple[tuple[int, float], ...]:
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


def speculation(method: str | None, k: int, acceptance: float | None, draft: str | None):
    if method is None:
        return None
    from llmath.deploy.speculative import METHODS, Speculation

    if method not in METHODS:  # named before the missing --acceptance
        raise WorkloadError(
            f"speculative method {method!r} must be one of {', '.join(METHODS)}; e.g. --spec-method eagle"
        )
    if acceptance is None:
        raise WorkloadError(
            f"--spec-method needs --acceptance (mean tokens per verify round, 1 … k+1, as measured) for {method};"
            " add it, e.g. --acceptance 2.5"
        )

    return Speculation(method, k, acceptance, draft)


def served_request(a, p) -> dict:
    """The keywords a served analysis shares across modes (aggregated ``serve`` and ``serve_disaggregated``): the
    model, the device from ``-H`` and the custom-device flags at precision ``p``, the workload and formats, the
    speculation."""
    return {
        "model": a.model,
        "hardware": device(a.hardware, a.peak_tflops, a.bandwidth_gbs, a.memory_gb, p.compute),
        "workload": served_workload(a),
        "precision": p,
        "speculation": speculation(a.spec_method, a.spec_tokens, a.acceptance, a.draft_model),
        "allow_long_context": a.allow_long_context,
    }


def served_workload(a):
    """The serving :class:`~llmath.deploy.workload.Workload` of the flags: --prompt, --gen, the load
    (--concurrency or --rate, --arrival), --prefix-hit, --gen-dist and --prompts-per-client."""
    from llmath.deploy.workload import Workload

    return Workload(
        prompt=a.prompt, gen=a.gen, concurrency=a.concurrency, rate=a.rate, arrival=a.arrival,
        prefix_hit=a.prefix_hit, gen_dist=gen_dist(a.gen_dist),
        **({"prompts_per_client": a.prompts_per_client} if a.prompts_per_client else {}),
    )  # fmt: skip


def static_workload(a):
    """The static-batch :class:`~llmath.deploy.workload.Workload` of the flags: --batch, --prompt, --gen,
    --prefix, --decoder-prompt and --images."""
    from llmath.deploy.workload import Workload

    return Workload(batch=a.batch, prompt=a.prompt, gen=a.gen, prefix=a.prefix, decoder_prompt=a.decoder_prompt,
                    images=a.images)  # fmt: skip


def device(
    name: str | None,
    peak_tflops: float | None,
    bandwidth_gbs: float | None,
    memory_gb: float | None,
    compute_dtype: str,
):
    from llmath import hardware

    flags = (peak_tflops, bandwidth_gbs, memory_gb)
    if any(v is not None for v in flags):
        if peak_tflops is None or bandwidth_gbs is None or memory_gb is None:
            raise WorkloadError(
                "a custom device needs all of --peak-tflops, --bandwidth-gbs and --memory-gb; add the missing ones,"
                " or pick a known accelerator with -H"
            )
        return hardware.custom(peak_tflops, bandwidth_gbs, memory_gb, dtype=compute_dtype)
    return hardware.get(name) if name else None


# speculative decoding's options, shared by analyze and plan (plan imports no other command's module)
SpecMethodOpt = Annotated[str | None, typer.Option("--spec-method", help="Speculative decoding: draft | eagle | mtp.")]
SpecTokensOpt = Annotated[int, typer.Option("--spec-tokens", help="Draft tokens k per verify round.")]
AcceptanceOpt = Annotated[
    float | None, typer.Option("--acceptance", help="Mean tokens a round yields (1 … k+1), as measured.")
]
DraftOpt = Annotated[str | None, typer.Option("--draft-model", help="Draft model for --spec-method draft.")]
SPECULATION_OPTIONS = option_group(
    {"spec_tokens": 3},
    spec_method=SpecMethodOpt,
    spec_tokens=SpecTokensOpt,
    acceptance=AcceptanceOpt,
    draft_model=DraftOpt,
)
