"""Engine command lines at the CLI: ``--emit vllm|sglang|trtllm|llama.cpp`` (plan, analyze) and ``--engine-args``
(analyze).

Thin: :mod:`llmath.deploy.engine_args` writes and :mod:`llmath.deploy.engine_read` reads; this module maps
their errors to usage errors (exit code 2), prints a command, and folds a read command into analyze's
arguments.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from llmath import output as out

if TYPE_CHECKING:  # the library core loads only when a command uses it (tests/test_cli_lazy.py)
    from llmath.deploy.engine_args import EngineArgsError


def _engine_name(value: str | None) -> str | None:
    if value is None:  # the option's default: no need to load the engine writers
        return None
    from llmath.deploy.engine_args import EMIT_ENGINES

    if value not in EMIT_ENGINES:
        raise typer.BadParameter(f"{value!r} is not an engine llmath writes; use one of {', '.join(EMIT_ENGINES)}")
    return value


EmitOpt = Annotated[
    str | None,
    typer.Option(
        "--emit",
        callback=_engine_name,
        help="Print the engine command (and config file) that runs this deployment: vllm | sglang | trtllm | "
        "llama.cpp (flags as each engine documents them; docs/engines.md).",
    ),
]
EngineArgsOpt = Annotated[
    str | None,
    typer.Option(
        "--engine-args",
        help="An engine's own command line, quoted: 'vllm serve MODEL --tensor-parallel-size 8 ...', "
        "'python -m sglang.launch_server ...' or 'trtllm-serve MODEL ... [--config FILE]': its model, layout, "
        "formats and scheduler limits (docs/engines.md).",
    ),
]


def usage(e: EngineArgsError, option: str) -> typer.BadParameter:
    return typer.BadParameter(str(e).removeprefix(f"{option}: "), param_hint=option)


def print_command(cmd, as_json: bool) -> None:
    """The command (stdout); its config file's text after it; notes on stderr."""
    if as_json:
        out.emit_json(cmd.to_dict())
        return
    print(cmd.shell())
    text = cmd.config_text()
    if text:
        print(f"# {cmd.config_file}:")
        print(text, end="")
    for n in cmd.notes:
        out.note(f"note: {n}")


def long_context(cmd, spec, workload, allow: bool):
    """``cmd`` as it must be started to accept ``workload``'s requests: unchanged within ``spec``'s context;
    past it refused (the serving estimates' rule), or with ``allow`` (``--allow-long-context``) started with the
    engine's longer length limit (:mod:`llmath.deploy.engine_length`)."""
    from llmath.deploy.context_limit import engine_length, long_context_notes
    from llmath.deploy.engine_length import with_length_limit

    long_context_notes(spec, workload, allow, cmd.engine)
    tokens = engine_length(spec, workload, cmd.engine)
    if tokens is None or cmd.engine == "llama.cpp":  # llama-server's --ctx-size already holds the requests
        return cmd
    return with_length_limit(cmd, spec, tokens)


def for_requests(dep, spec, workload, attention: str = "flash"):
    """``dep`` with one request's tokens against the context (``workload``'s prompt + its longest output, as
    :func:`llmath.deploy.context_limit.request_tokens` counts them) and the attention it runs."""
    from dataclasses import replace

    from llmath.deploy.context_limit import request_tokens

    return replace(dep, request_tokens=request_tokens(spec, workload.prompt, workload.longest_gen), attention=attention)


def emit_plan(res: dict, engine: str, hw_name: str, kv_dtype: str | None, as_json: bool, workload=None) -> None:
    """``plan --emit``: the best configuration as ``engine``'s command (for ``workload``'s lengths: plan has
    refused requests past the context unless ``--allow-long-context``)."""
    from llmath.deploy.engine_args import EngineArgsError, emit, from_plan
    from llmath.hardware import get
    from llmath.model.registry import resolve

    if res.get("best") is None:
        raise typer.BadParameter(
            "no configuration meets the targets, so there is nothing to emit; relax --ttft-ms/--tpot-ms or add --gpus",
            param_hint="--emit",
        )
    try:
        spec = resolve(res["model"])
        own = (res.get("formats") or {}).get("from") == "checkpoint"  # the engine reads the checkpoint's formats itself
        best = res["best"] | ({"weights": None} if own else {})
        dep = from_plan(best, res["model"], get(hw_name), engine, kv_dtype)
        if workload is not None:
            dep = for_requests(dep, spec, workload)
        cmd = emit(engine, dep, spec.moe is not None)
    except EngineArgsError as e:
        raise usage(e, "--emit") from None
    if workload is not None:
        cmd = long_context(cmd, spec, workload, True)
    timed = res.get("engine")
    if timed and timed != cmd.engine:
        cmd.notes.append(f"the plan timed this layout under {timed}; {cmd.engine} runs it with its own scheduler and"
                         f" kernels, so its times differ: plan with --engine {cmd.engine} for them")  # fmt: skip
    print_command(cmd, as_json)


def read_engine_args(text: str):
    """The :class:`~llmath.deploy.engine_read.EngineRead` of ``text`` (TensorRT-LLM's ``--config`` file read
    when it exists); unknown flags named in one warning line on stderr."""
    from llmath.deploy.engine_args import EngineArgsError, yaml_subset
    from llmath.deploy.engine_read import parse, split_command

    try:
        engine, tokens = split_command(text)
        config = None
        if engine == "trtllm":
            config = _trtllm_config(tokens, yaml_subset)
        read = parse(text, config)
    except EngineArgsError as e:
        raise usage(e, "--engine-args") from None
    if read.unknown:
        out.note(f"warning: --engine-args: {read.engine} does not document {', '.join(read.unknown)} (ignored)")
    for n in read.notes:
        out.note(f"note: {n}")
    return read


def _trtllm_config(tokens: list[str], reader) -> dict | None:
    path = None
    for i, t in enumerate(tokens):
        name, eq, val = t.partition("=")
        if name in ("--config", "--extra_llm_api_options"):
            path = val if eq else (tokens[i + 1] if i + 1 < len(tokens) else None)
    if path is None:
        return None
    if not os.path.isfile(path):
        from llmath.deploy.engine_args import EngineArgsError

        raise EngineArgsError(f"--engine-args: the --config file {path!r} does not exist; give its path")
    with open(path, encoding="utf-8") as f:
        return reader(f.read(), path)


SETTINGS = ("tp", "pp", "dp", "ep", "weights", "kv_dtype", "max_num_seqs", "max_num_batched_tokens")


def apply_engine_args(a: SimpleNamespace) -> None:
    """Fold ``a.engine_args`` into analyze's arguments ``a``: the engine's model, layout, formats, scheduler
    limits and speculation; a flag also given to llmath with another value is a usage error."""
    from llmath.deploy.engine_args import registry_model

    read = read_engine_args(a.engine_args)
    dep = read.deployment
    model, note = registry_model(dep.model)
    if note:
        out.note(f"note: {note}")
    a.model, a.gpus = model, None
    values = {k: getattr(dep, k) for k in SETTINGS} | {
        "gpu_memory_utilization": dep.gpu_memory_utilization,
        "spec_method": dep.spec_method,
        "draft_model": dep.draft_model,
        "mixed_prefill": dep.mixed_prefill,
        "engine": read.engine,
    }
    if dep.weights is None and dep.dtype:
        values["weights"] = dep.dtype
    if dep.max_prefill_tokens is not None:  # SGLang's --max-prefill-tokens without a chunk size
        values["max_num_batched_tokens"] = _sglang_budget(a, dep)
    taken = []
    for key, value in values.items():
        mine = getattr(a, key, None)
        if value is None or mine == value:
            continue
        if mine is not None:
            flag = "--" + key.replace("_", "-")
            raise typer.BadParameter(f"{flag} {mine} conflicts with the engine's {value}; drop one", param_hint=flag)
        setattr(a, key, value)
        taken.append(key)
    if dep.spec_tokens and dep.spec_tokens != a.spec_tokens:
        a.spec_tokens = dep.spec_tokens
        taken.append("spec_tokens")
    if dep.enforce_eager and not a.enforce_eager:
        a.enforce_eager = True
        taken.append("enforce_eager")
    a.engine_settings = dict(dep.engine_settings)
    if dep.decode_graph_batch and not dep.enforce_eager:  # larger decode steps run eagerly (EngineConfig)
        a.engine_settings["decode_graph_max_batch"] = dep.decode_graph_batch
    if a.engine_settings:
        taken.append("engine_settings")
    static = a.concurrency is None and a.rate is None and not getattr(a, "emit", None)
    if static and set(taken) & set(SERVING_DEFAULTS):
        for key in set(taken) & set(SERVING_DEFAULTS):
            setattr(a, key, SERVING_DEFAULTS[key])
        out.note(
            "note: --engine-args: scheduler limits, speculation and engine settings apply with --concurrency C"
            " or --rate R"
        )


def _sglang_budget(a: SimpleNamespace, dep) -> int:
    """SGLang's prefill budget under ``--max-prefill-tokens`` without ``--chunked-prefill-size``: the smaller of it
    and the device's chunk default (``data/engines.json``)."""
    from llmath.deploy import engines
    from llmath.deploy.engine_settings import sglang_prefill_budget
    from llmath.hardware import get

    chunk = engines.preset("sglang", get(a.hardware), tp=dep.tp).max_num_batched_tokens
    return cast(int, sglang_prefill_budget(chunk, dep.max_prefill_tokens))


SERVING_DEFAULTS: dict[str, Any] = {  # what a static batch leaves at analyze's defaults
    "max_num_seqs": None,
    "max_num_batched_tokens": None,
    "gpu_memory_utilization": None,
    "spec_method": None,
    "spec_tokens": 3,
    "draft_model": None,
    "enforce_eager": False,
    "mixed_prefill": None,
    "engine_settings": {},
}


def emit_analyze(a: SimpleNamespace) -> None:
    """``analyze --emit``: the deployment analyze's arguments describe, as the engine's command."""
    from llmath.cli.options import gen_dist, parallel_config
    from llmath.deploy.engine_args import EngineArgsError, deployment_for, emit
    from llmath.deploy.workload import Workload

    try:
        spec, dep = deployment_for(
            a.model,
            a.hardware,
            a.emit,
            parallel=parallel_config(a, overlap="none"),
            weights=a.weights,  # a checkpoint's own format needs no flag: the engine reads its quantization_config
            kv_dtype=a.kv_dtype,
            concurrency=a.concurrency,
            max_num_seqs=a.max_num_seqs,
            max_num_batched_tokens=a.max_num_batched_tokens,
            gpu_memory_utilization=a.gpu_memory_utilization,
            enforce_eager=a.enforce_eager,
            speculation=(a.spec_method, a.spec_tokens, a.draft_model),
            mixed_prefill=a.mixed_prefill,
            engine_settings=getattr(a, "engine_settings", None),
        )
        work = Workload(prompt=a.prompt, gen=a.gen, gen_dist=gen_dist(a.gen_dist))
        cmd = emit(a.emit, for_requests(dep, spec, work, a.attention.value), spec.moe is not None)
    except EngineArgsError as e:
        raise usage(e, "--emit") from None
    print_command(long_context(cmd, spec, work, a.allow_long_context), a.json_)
