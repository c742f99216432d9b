"""Read a serving engine's own command line into a :class:`~llmath.deploy.engine_args.Deployment`.

``vllm serve MODEL ...``, ``python -m sglang.launch_server --model-path MODEL ...`` and ``trtllm-serve MODEL
... [--config FILE]`` are read with the flags and spellings of ``data/engine_flags.json``; the layout rules
are those :mod:`llmath.deploy.engine_args` writes. Flags the engine does not document are returned in
``unknown`` (the command line warns in one line); a setting given twice with different values, an
SGLang ``--tp-size`` that ``--dp-size`` does not divide under ``--enable-dp-attention``, or a value llmath
cannot model (an unknown quantisation method, n-gram speculation) raises :class:`EngineArgsError`.

A flag takes the next token as its value unless that token is itself a flag or the flag is a switch
(``--enable-*``, ``--disable-*``, ``--no-*``, ``--enforce-eager``, ``--trust-remote-code``, ...).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from llmath.deploy.engine_args import Deployment, EngineArgsError, _is_flag, documented, engine_data
from llmath.deploy.engine_settings import (
    sglang_prefill_budget,
    sglang_settings,
    switch,
    trtllm_graph_batch,
    trtllm_moe_backend_note,
    trtllm_settings,
    vllm_settings,
)

SWITCH_PREFIXES = ("--enable-", "--disable-", "--no-", "--enable_", "--disable_", "--skip-", "--skip_")
SWITCHES = frozenset(
    {"--enforce-eager", "--trust-remote-code", "--trust_remote_code", "--headless", "--is-embedding"}
    | {"--stream-output", "--log-requests", "--show-time-cost", "--allow-auto-truncate", "--fully-sharded-loras"}
)
PREFIXES = {
    ("vllm", "serve"): "vllm",
    ("python", "-m", "sglang.launch_server"): "sglang",
    ("python3", "-m", "sglang.launch_server"): "sglang",
    ("trtllm-serve", "serve"): "trtllm",
    ("trtllm-serve",): "trtllm",
}


@dataclass
class EngineRead:
    """What a command line says: the engine, the deployment, the flags it does not document, notes."""

    engine: str
    deployment: Deployment
    unknown: list[str] = field(default_factory=list)
    config_file: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "deployment": self.deployment.to_dict(),
            "unknown_flags": self.unknown,
            "config_file": self.config_file,
            "notes": self.notes,
        }


def split_command(text: str) -> tuple[str, list[str]]:
    """(engine, the tokens after the engine's command)."""
    try:
        tokens = shlex.split(text)
    except ValueError as e:
        raise EngineArgsError(f"--engine-args {text[:60]!r}: {e} (quote the whole command once)") from None
    for prefix, engine in PREFIXES.items():
        if tuple(tokens[: len(prefix)]) == prefix:
            return engine, tokens[len(prefix) :]
    raise EngineArgsError(
        f"--engine-args {text[:60]!r} must start with 'vllm serve', 'python -m sglang.launch_server' or 'trtllm-serve'"
    )


def _items(engine: str, tokens: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """{canonical flag: value (None for a switch)} and the positional tokens; a flag given twice with two
    values is a conflict."""
    aliases = engine_data(engine)["aliases"]
    seen: dict[str, str | None] = {}
    spelled: dict[str, str] = {}
    positional: list[str] = []
    i = 0
    while i < len(tokens) and i < 10_000:
        tok = tokens[i]
        i += 1
        if not _is_flag(tok):
            positional.append(tok)
            continue
        name, eq, value = tok.partition("=")
        canon = aliases.get(name, name)
        val: str | None = value if eq else None
        switch = name in SWITCHES or name.startswith(SWITCH_PREFIXES)
        if not eq and not switch and i < len(tokens) and not _is_flag(tokens[i]):
            val = tokens[i]
            i += 1
        if canon in seen and seen[canon] != val:
            raise EngineArgsError(
                f"--engine-args: {spelled[canon]} {seen[canon] or ''} and {name} {val or ''} set {canon} twice"
                " with different values; keep one"
            )
        seen[canon], spelled[canon] = val, name
    return seen, positional


def parse(text: str, config: dict[str, Any] | None = None) -> EngineRead:
    """Read ``text`` (the engine's whole command line). ``config``: the mapping of TensorRT-LLM's ``--config``
    YAML when the caller has read it (see :func:`llmath.deploy.engine_args.yaml_subset`)."""
    engine, tokens = split_command(text)
    if engine == "vllm":
        tokens, config = _vllm_levels(tokens)
    items, positional = _items(engine, tokens)
    known = documented(engine)
    unknown = [f for f in items if f not in known]
    reader = {"vllm": _read_vllm, "sglang": _read_sglang, "trtllm": _read_trtllm}[engine]
    read = reader(items, positional, config)
    read.unknown = unknown
    return read


def _vllm_levels(tokens: list[str]) -> tuple[list[str], dict[str, str]]:
    """vLLM's ``-O3`` as ``-O 3``, and its ``-O.key=value`` / ``--compilation-config.key=value`` items taken out
    (returned as {key: value})."""
    out: list[str] = []
    dotted: dict[str, str] = {}
    for tok in tokens:
        name, eq, value = tok.partition("=")
        head, dot, key = name.partition(".")
        if dot and eq and head in ("-O", "--compilation-config"):
            dotted[key] = value
        elif len(tok) == 3 and tok.startswith("-O") and tok[2].isdigit():
            out += ["-O", tok[2]]
        else:
            out.append(tok)
    return out, dotted


def _number(items: dict, flag: str, kind: type, default: Any = None) -> Any:
    """The value of ``flag`` as a ``kind`` (int: >= 1; float: a fraction in (0, 1]), else ``default``."""
    v = items.get(flag)
    if v is None:
        return default
    try:
        x = kind(v)
    except ValueError:
        raise EngineArgsError(
            f"--engine-args: {flag} {v!r} must be {'an integer' if kind is int else 'a number'}"
        ) from None
    if not (x >= 1 if kind is int else 0 < x <= 1):
        raise EngineArgsError(f"--engine-args: {flag} {x} must be {'>= 1' if kind is int else 'in (0, 1]'}")
    return x


def _int(items: dict, flag: str, default: int | None = None) -> int | None:
    return _number(items, flag, int, default)


def _float(items: dict, flag: str) -> float | None:
    return _number(items, flag, float)


def _lookup(engine: str, table: str, flag: str, value: str | None) -> str | None:
    """The llmath name of an engine's value (``auto``: None); a value llmath does not model is refused."""
    if value is None or value == "auto":
        return None
    values = engine_data(engine)["values"]
    inverse = values.get(f"{table}_read") or {v: k for k, v in values[table].items()}
    if value not in inverse:
        raise EngineArgsError(
            f"--engine-args: {flag} {value!r} is not a format llmath models for {engine}; use one of"
            f" {', '.join(sorted(inverse))} (or auto)"
        )
    return inverse[value]


def _model(items: dict, positional: list[str], flag: str | None) -> str:
    named = items.get(flag) if flag else None
    given = positional[0] if positional else None
    if named and given and named != given:
        raise EngineArgsError(f"--engine-args: the model is given twice ({given!r} and {flag} {named!r}); keep one")
    model = named or given
    if not model:
        raise EngineArgsError("--engine-args names no model (the engine's model argument)")
    return model


def _read_vllm(items: dict, positional: list[str], dotted) -> EngineRead:
    """``dotted``: the ``-O.key=value`` items (:func:`_vllm_levels`)."""
    expert_parallel = switch(items, "--enable-expert-parallel")
    tp = _int(items, "--tensor-parallel-size", 1) or 1
    dp = _int(items, "--data-parallel-size", 1) or 1
    spec = _vllm_spec(items.get("--speculative-config"))
    settings, no_graphs = vllm_settings(items, dotted or {})
    dep = Deployment(
        model=_model(items, positional, "--model"),
        tp=tp,
        pp=_int(items, "--pipeline-parallel-size", 1) or 1,
        dp=dp,
        ep=tp * dp if expert_parallel else 1,
        weights=_lookup("vllm", "weights", "--quantization", items.get("--quantization")),
        dtype=_lookup("vllm", "dtype", "--dtype", items.get("--dtype")),
        kv_dtype=_lookup("vllm", "kv_dtype", "--kv-cache-dtype", items.get("--kv-cache-dtype")),
        max_num_seqs=_int(items, "--max-num-seqs"),
        max_num_batched_tokens=_int(items, "--max-num-batched-tokens"),
        gpu_memory_utilization=_float(items, "--gpu-memory-utilization"),
        enforce_eager="--enforce-eager" in items or no_graphs,
        engine_settings=settings,
        **spec,
    )
    return EngineRead("vllm", dep)


VLLM_METHODS = {"eagle": "eagle", "eagle3": "eagle", "mtp": "mtp", "deepseek_mtp": "mtp", "draft_model": "draft"}


def _vllm_spec(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        spec = json.loads(text)
    except ValueError:
        raise EngineArgsError(f"--engine-args: --speculative-config {text[:60]!r} is not a JSON object") from None
    if not isinstance(spec, dict):
        raise EngineArgsError("--engine-args: --speculative-config must be a JSON object")
    method = spec.get("method") or ("draft_model" if spec.get("model") else None)
    if method not in VLLM_METHODS:
        raise EngineArgsError(
            f"--engine-args: speculative method {method!r} is not one llmath models; use one of"
            f" {', '.join(VLLM_METHODS)}"
        )
    k = spec.get("num_speculative_tokens")
    if not isinstance(k, int) or k < 1:
        raise EngineArgsError("--engine-args: --speculative-config needs num_speculative_tokens >= 1")
    return {"spec_method": VLLM_METHODS[method], "spec_tokens": k, "draft_model": spec.get("model")}


def _read_sglang(items: dict, positional: list[str], config) -> EngineRead:
    tp_size = _int(items, "--tensor-parallel-size", 1) or 1
    dp = _int(items, "--data-parallel-size", 1) or 1
    attention_dp = "--enable-dp-attention" in items
    if attention_dp and tp_size % dp:
        raise EngineArgsError(
            f"--engine-args: --enable-dp-attention needs --dp-size {dp} to divide --tp-size {tp_size}; fix one"
        )
    chunk = items.get("--chunked-prefill-size")
    running = _per_rank(_int(items, "--max-running-requests"), dp if attention_dp else 1)
    max_prefill = _int(items, "--max-prefill-tokens")
    budget = None if chunk == "-1" else _int(items, "--chunked-prefill-size")
    dep = Deployment(
        model=_model(items, positional, "--model-path"),
        tp=tp_size // dp if attention_dp else tp_size,
        pp=_int(items, "--pipeline-parallel-size", 1) or 1,
        dp=dp,
        ep=_int(items, "--expert-parallel-size", 1) or 1,
        weights=_lookup("sglang", "weights", "--quantization", items.get("--quantization")),
        dtype=_lookup("sglang", "dtype", "--dtype", items.get("--dtype")),
        kv_dtype=_lookup("sglang", "kv_dtype", "--kv-cache-dtype", items.get("--kv-cache-dtype")),
        max_num_seqs=running,
        max_num_batched_tokens=sglang_prefill_budget(budget, max_prefill) if budget is not None else None,
        gpu_memory_utilization=_float(items, "--mem-fraction-static"),
        enforce_eager="--disable-cuda-graph" in items,
        mixed_prefill=True if "--enable-mixed-chunk" in items else None,
        max_prefill_tokens=max_prefill if budget is None else None,
        engine_settings=sglang_settings(items, _number),
        decode_graph_batch=_int(items, "--cuda-graph-max-bs"),
        **_sglang_spec(items),
    )
    return EngineRead("sglang", dep)


def _per_rank(server_cap: int | None, ranks: int) -> int | None:
    """SGLang's ``--max-running-requests`` is the server's; under attention DP each of its ``ranks`` schedulers
    runs ``server_cap // ranks`` (``TpModelWorker`` in SGLang's ``managers/tp_worker.py``)."""
    if server_cap is not None and server_cap < ranks:
        raise EngineArgsError(
            f"--engine-args: --max-running-requests {server_cap} is below --dp-size {ranks}: under"
            " --enable-dp-attention each attention rank runs max-running-requests // dp-size; give at least the dp size"
        )
    return None if server_cap is None else server_cap // ranks


SGLANG_METHODS = {"EAGLE": "eagle", "EAGLE3": "eagle", "NEXTN": "mtp", "STANDALONE": "draft"}


def _sglang_spec(items: dict) -> dict[str, Any]:
    algo = items.get("--speculative-algorithm")
    if algo is None:
        return {}
    if algo.upper() not in SGLANG_METHODS:
        raise EngineArgsError(
            f"--engine-args: --speculative-algorithm {algo!r} is not one llmath models; use one of"
            f" {', '.join(SGLANG_METHODS)}"
        )
    steps = _int(items, "--speculative-num-steps")
    if steps is None:
        drafts = _int(items, "--speculative-num-draft-tokens")
        steps = drafts - 1 if drafts and drafts > 1 else None
    if steps is None:
        raise EngineArgsError("--engine-args: --speculative-algorithm needs --speculative-num-steps")
    draft = items.get("--speculative-draft-model-path")
    return {"spec_method": SGLANG_METHODS[algo.upper()], "spec_tokens": steps, "draft_model": draft}


def _read_trtllm(items: dict, positional: list[str], config) -> EngineRead:
    config = config or {}
    stray = sorted(set(config) - set(engine_data("trtllm")["config_keys"]))
    items = _with_config_values(items, config)
    ranks = _int(items, "--tensor_parallel_size", 1) or 1
    attention_dp = bool(config.get("enable_attention_dp"))
    kv = (config.get("kv_cache_config") or {}).get("dtype")
    graph_batch, graphs = trtllm_graph_batch(config)
    dep = Deployment(
        model=_model(items, positional, None),
        tp=1 if attention_dp else ranks,
        pp=_int(items, "--pipeline_parallel_size", 1) or 1,
        dp=ranks if attention_dp else 1,
        ep=_int(items, "--moe_expert_parallel_size", 1) or 1,
        kv_dtype=_lookup("trtllm", "kv_dtype", "kv_cache_config.dtype", kv),
        max_num_seqs=_int(items, "--max_batch_size"),
        max_num_batched_tokens=_int(items, "--max_num_tokens"),
        gpu_memory_utilization=_float(items, "--free_gpu_memory_fraction"),
        engine_settings=trtllm_settings(config, items),
        decode_graph_batch=graph_batch,
        enforce_eager=not graphs,
        **_trtllm_spec(config.get("speculative_config")),
    )
    read = EngineRead("trtllm", dep, config_file=items.get("--config"))
    if stray:
        read.notes.append(f"config keys llmath does not read: {', '.join(stray)}")
    if note := trtllm_moe_backend_note(config):
        read.notes.append(note)
    return read


# The LLM-API keys of the --config YAML that set what a serve flag sets (trtllm-serve's serve.py applies the YAML over
# the flags: update_llm_args_with_extra_options)
TRTLLM_CONFIG_FLAGS = {
    "tensor_parallel_size": "--tensor_parallel_size",
    "pipeline_parallel_size": "--pipeline_parallel_size",
    "moe_expert_parallel_size": "--moe_expert_parallel_size",
    "max_batch_size": "--max_batch_size",
    "max_num_tokens": "--max_num_tokens",
    "kv_cache_config.free_gpu_memory_fraction": "--free_gpu_memory_fraction",
}


def _with_config_values(items: dict, config: dict) -> dict:
    """``items`` with the values the YAML sets for a serve flag's setting; a flag and a key that disagree conflict."""
    out = dict(items)
    for key, flag_name in TRTLLM_CONFIG_FLAGS.items():
        head, _, sub = key.partition(".")
        value = (config.get(head) or {}).get(sub) if sub else config.get(head)
        if value is None:
            continue
        given = out.get(flag_name)
        if given is not None and _differs(given, value):
            raise EngineArgsError(
                f"--engine-args: {flag_name} {given} and the config's {key}: {value} differ; keep one"
            )
        out[flag_name] = str(value)
    return out


def _differs(text: str, value: Any) -> bool:
    try:
        return float(text) != float(value)
    except (TypeError, ValueError):
        return True


TRTLLM_METHODS = {"MTP": "mtp", "Eagle": "eagle", "Eagle3": "eagle", "Draft_Target": "draft", "DraftTarget": "draft"}


def _trtllm_spec(spec: dict | None) -> dict[str, Any]:
    if not spec:
        return {}
    kind = spec.get("decoding_type")
    if kind not in TRTLLM_METHODS:
        raise EngineArgsError(
            f"--engine-args: speculative_config decoding_type {kind!r} is not one llmath models; use one of"
            f" {', '.join(TRTLLM_METHODS)}"
        )
    k = spec.get("num_nextn_predict_layers") if kind == "MTP" else spec.get("max_draft_len")
    if not isinstance(k, int) or k < 1:
        raise EngineArgsError("--engine-args: speculative_config needs its draft length (>= 1)")
    draft = spec.get("speculative_model") or spec.get("speculative_model_dir")
    return {"spec_method": TRTLLM_METHODS[kind], "spec_tokens": k, "draft_model": draft}
