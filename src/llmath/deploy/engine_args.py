"""A deployment as a serving engine's own command line: write it (:func:`emit`) and read it back (:func:`parse`).

The flag that carries each setting, and every flag each engine documents for its OpenAI-compatible server,
are data (``data/engine_flags.json``), each read from the engine's source or documentation at a named
commit. A :class:`Deployment` holds what llmath models of a running engine: the parallel layout in
llmath's terms (``tp`` attention/dense tensor parallel, ``pp`` stages, ``dp`` replicas, ``ep`` expert
parallel; ``tp·pp·dp`` GPUs), the weight and KV-cache formats, the scheduler limits (``max_num_seqs`` per
replica, ``max_num_batched_tokens``, ``gpu_memory_utilization``) and speculative decoding.

How each engine spells a layout (the sources are in the data file):
- vLLM: ``--tensor-parallel-size tp --pipeline-parallel-size pp --data-parallel-size dp``; experts either
  shard with tensor parallelism (``ep = 1``) or spread over all ``tp·dp`` ranks with
  ``--enable-expert-parallel`` (``ep = tp·dp``); no other expert degree is expressible.
- SGLang: ``--tp-size`` counts every GPU of a replica group: with ``--enable-dp-attention`` (written for
  MoE models with ``dp > 1``) attention runs ``tp-size / dp-size`` ways inside each of ``dp-size``
  replicas, so llmath's ``tp`` is ``tp-size / dp-size``; without it ``--dp-size`` replicas of
  ``--tp-size`` GPUs each. ``--ep-size`` is the expert degree.
- TensorRT-LLM: ``--tp_size`` ranks; ``enable_attention_dp`` in the ``--config`` YAML gives each rank its
  own attention (llmath ``tp = 1``, ``dp = tp_size``); dense replicas are separate servers
  (:attr:`EngineCommand.instances`). The weight format is the checkpoint's (no flag), the KV format is
  ``kv_cache_config.dtype``.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from llmath.errors import WorkloadError

if TYPE_CHECKING:
    from llmath.deploy.layout import ParallelConfig

ENGINES = ("vllm", "sglang", "trtllm")  # commands llmath writes (--emit) and reads (--engine-args)
EMIT_ENGINES = (*ENGINES, "llama.cpp")  # commands llmath writes: llama-server too (:mod:`.engine_llamacpp`)


class EngineArgsError(WorkloadError):
    """An engine command line that cannot be read or written: conflicting flags, a layout the engine cannot
    express. A usage error (exit code 2) at the command line."""


@lru_cache(maxsize=1)
def flags_data() -> dict[str, Any]:
    """``data/engine_flags.json``: per engine, its documented flags and the flag of each setting."""
    return json.loads((resources.files("llmath") / "data" / "engine_flags.json").read_text())["engines"]


def engine_data(engine: str) -> dict[str, Any]:
    if engine not in EMIT_ENGINES:
        raise EngineArgsError(f"--emit {engine!r} is not an engine llmath writes; use one of {', '.join(EMIT_ENGINES)}")
    return flags_data()[engine]


def documented(engine: str) -> frozenset[str]:
    """Every flag the engine documents for its server, with its short aliases."""
    d = engine_data(engine)
    return frozenset(d["documented"]) | frozenset(d["aliases"])


def flag(engine: str, setting: str) -> str:
    return engine_data(engine)["settings"][setting]["flag"]


@dataclass(frozen=True)
class Deployment:
    """What llmath models of a running engine (see the module docstring for the layout's meaning)."""

    model: str
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    weights: str | None = None  # llmath format name; None: the checkpoint's
    dtype: str | None = None  # 16/32-bit compute format; None: the checkpoint's
    kv_dtype: str | None = None  # None: the activations' format
    max_num_seqs: int | None = None  # per replica
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    enforce_eager: bool = False
    spec_method: str | None = None  # draft | eagle | mtp
    spec_tokens: int | None = None
    draft_model: str | None = None
    mixed_prefill: bool | None = None  # prefill chunks ride in decode iterations; None: the engine's default
    max_prefill_tokens: int | None = None  # SGLang's --max-prefill-tokens (the budget is the smaller with the chunk)
    decode_graph_batch: int | None = None  # the largest decode batch captured in a CUDA graph; None: the engine's
    # EngineConfig fields the command sets beyond these (:mod:`llmath.deploy.engine_settings`): graphs, polling, ...
    engine_settings: dict[str, Any] = field(default_factory=dict)
    request_tokens: int | None = None  # one request's tokens against the context (llama.cpp's slots size by it)
    attention: str = "flash"  # flash | eager (llama.cpp's --flash-attn)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"gpus": self.gpus}


@dataclass
class EngineCommand:
    """One engine server's command (``argv``), its config file where the engine takes one (``config``,
    written to ``config_file``), how many such servers the deployment runs side by side, and notes."""

    engine: str
    argv: list[str]
    config: dict[str, Any] | None = None
    config_file: str | None = None
    instances: int = 1
    notes: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # environment variables the command runs with

    def flags(self) -> list[str]:
        """The flags of ``argv`` after the engine's command (``--name`` and ``-x`` tokens), without values."""
        skip = len(engine_data(self.engine)["command"])
        return [t.split("=", 1)[0] for t in self.argv[skip:] if _is_flag(t)]

    def shell(self) -> str:
        """The command line, its environment variables first (``NAME=value vllm serve ...``)."""
        return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in self.env.items()), shlex.join(self.argv)])

    def config_text(self) -> str | None:
        return None if self.config is None else yaml_text(self.config)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "command": self.shell(),
            "argv": self.argv,
            "config_file": self.config_file,
            "config": self.config,
            "instances": self.instances,
            "notes": self.notes,
            "env": self.env,
        }


def _is_flag(token: str) -> bool:
    """``--name``/``-x`` (a negative number such as ``-1`` is a value)."""
    return token.startswith("-") and len(token) > 1 and not token[1].isdigit() and token[1] != "."


def yaml_text(d: dict[str, Any], indent: int = 0) -> str:
    """Nested mappings of scalars as block YAML (the subset :func:`yaml_subset` reads)."""
    lines = []
    for k, v in d.items():
        if isinstance(v, dict):
            lines.append(f"{' ' * indent}{k}:")
            lines.append(yaml_text(v, indent + 2).rstrip("\n"))
        else:
            text = "null" if v is None else json.dumps(v) if isinstance(v, (bool, str)) else v
            lines.append(f"{' ' * indent}{k}: {text}")
    return "\n".join(lines) + "\n"


def yaml_subset(text: str, where: str = "config") -> dict[str, Any]:
    """Read block YAML of nested mappings with scalar values (what TensorRT-LLM's LLM-API files hold for the
    settings llmath reads); anything else (lists, flow style, anchors) is refused with the line."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        ind = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        if not sep or key.startswith(("-", "[", "{", "&", "*")):
            raise EngineArgsError(f"{where} line {n}: {raw.strip()!r} is not a 'key: value' mapping line llmath reads")
        while stack[-1][0] >= ind:
            stack.pop()
        parent = stack[-1][1]
        if value.strip():
            parent[key.strip()] = _scalar(value.strip())
        else:
            child: dict[str, Any] = {}
            parent[key.strip()] = child
            stack.append((ind, child))
    return root


def _scalar(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip("\"'")


# ---- writing ---------------------------------------------------------------------------------------------


def emit(engine: str, dep: Deployment, moe: bool) -> EngineCommand:
    """The command that runs ``dep`` on ``engine`` (``moe``: the model has routed experts, which decides
    how SGLang and TensorRT-LLM spell ``dp``)."""
    d = engine_data(engine)
    from llmath.deploy.engine_llamacpp import emit_llamacpp

    writer = {"vllm": _emit_vllm, "sglang": _emit_sglang, "trtllm": _emit_trtllm, "llama.cpp": emit_llamacpp}[engine]
    cmd = writer(d, dep, moe)
    stray = [f for f in cmd.flags() if f not in documented(engine)]
    if stray:  # the data and the writer disagree: a bug, never a user error
        raise AssertionError(f"{engine}: emitted flags {stray} are not in data/engine_flags.json's documented list")
    return cmd


def _common(engine: str, dep: Deployment) -> list[str]:
    """Scheduler, format and eager flags shared by the writers (each engine's spelling)."""
    v = engine_data(engine)["values"]
    out: list[str] = []
    if dep.weights and dep.weights not in ("bf16", "fp16", "fp32") and engine != "trtllm":
        q = v["weights"].get(dep.weights)
        if q is None:
            raise EngineArgsError(
                f"weights {dep.weights!r}: {engine} has no --quantization method for it; serve a checkpoint in that"
                f" format or use one of {', '.join(v['weights'])}"
            )
        out += [flag(engine, "weights"), q]
    if dep.dtype and engine != "trtllm":
        out += [flag(engine, "dtype"), v["dtype"][dep.dtype]]
    if dep.kv_dtype and engine != "trtllm":
        kv = v["kv_dtype"].get(dep.kv_dtype)
        if kv is None:
            raise EngineArgsError(f"--kv-dtype {dep.kv_dtype!r}: {engine} stores KV as {', '.join(v['kv_dtype'])}")
        out += [flag(engine, "kv_dtype"), kv]
    for key in ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization"):
        val = getattr(dep, key)
        if val is not None:
            out += [flag(engine, key), f"{val:g}" if isinstance(val, float) else str(val)]
    if dep.enforce_eager and engine != "trtllm":
        out.append(flag(engine, "enforce_eager"))
    return out


def _prefill_first_note(engine: str, dep: Deployment) -> list[str]:
    """vLLM and TensorRT-LLM always put prefill chunks in the decoding requests' iterations: no flag runs them
    first (``data/engines.json``, their ``mixed_prefill`` sources)."""
    if dep.mixed_prefill is False:
        return [f"{engine} runs prefill chunks alongside decoding; prefill-first has no flag: left out"]
    return []


def _emit_vllm(d: dict, dep: Deployment, moe: bool) -> EngineCommand:
    argv = [*d["command"], dep.model, "--tensor-parallel-size", str(dep.tp)]
    if dep.pp > 1:
        argv += ["--pipeline-parallel-size", str(dep.pp)]
    if dep.dp > 1:
        argv += ["--data-parallel-size", str(dep.dp)]
    if dep.ep == dep.tp * dep.dp and dep.ep > 1:
        argv.append("--enable-expert-parallel")
    elif dep.ep != 1:
        raise EngineArgsError(
            f"ep={dep.ep}: vLLM spreads experts over all tp·dp = {dep.tp * dep.dp} ranks (--enable-expert-parallel)"
            " or shards them by tensor parallelism (ep=1); pin --ep 1 or --ep tp·dp"
        )
    argv += _common("vllm", dep)
    if dep.spec_method:
        spec: dict[str, Any] = {"method": d["values"]["spec_method"][dep.spec_method]}
        spec["num_speculative_tokens"] = dep.spec_tokens
        if dep.draft_model:
            spec["model"] = dep.draft_model
        argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    from llmath.deploy.engine_settings import emit_vllm_settings

    flags, notes = emit_vllm_settings(dep.engine_settings)
    if dep.decode_graph_batch:
        batch = dep.decode_graph_batch
        notes.append(f"vLLM's capture sizes count tokens, not decode requests: decode_graph_batch={batch} left out")
    return EngineCommand("vllm", argv + flags, notes=_prefill_first_note("vLLM", dep) + notes)


def _sglang_server_wide(dep: Deployment, attention_dp: bool) -> Deployment:
    """``dep`` with its running-request cap as one SGLang server under attention DP takes it: the whole server's,
    which each of the ``dp`` attention ranks divides by ``dp`` (``TpModelWorker`` in SGLang's
    ``managers/tp_worker.py``); ``Deployment.max_num_seqs`` is per rank."""
    if not attention_dp or dep.max_num_seqs is None:
        return dep
    return replace(dep, max_num_seqs=dep.max_num_seqs * dep.dp)


def _emit_sglang(d: dict, dep: Deployment, moe: bool) -> EngineCommand:
    attention_dp = moe and dep.dp > 1
    tp_size = dep.tp * dep.dp if attention_dp else dep.tp
    argv = [*d["command"], "--model-path", dep.model, "--tp-size", str(tp_size)]
    if dep.pp > 1:
        argv += ["--pp-size", str(dep.pp)]
    if dep.dp > 1:
        argv += ["--dp-size", str(dep.dp)]
    if attention_dp:
        argv.append("--enable-dp-attention")
    if dep.ep > 1:
        argv += ["--ep-size", str(dep.ep)]
    whole = dep.engine_settings.get("chunked_prefill") is False  # --chunked-prefill-size -1: no chunking
    argv += _common(
        "sglang", _sglang_server_wide(replace(dep, max_num_batched_tokens=None) if whole else dep, attention_dp)
    )
    if whole:
        argv += ["--chunked-prefill-size", "-1"]
    if dep.spec_method:
        argv += ["--speculative-algorithm", d["values"]["spec_method"][dep.spec_method]]
        argv += ["--speculative-num-steps", str(dep.spec_tokens), "--speculative-eagle-topk", "1"]
        argv += ["--speculative-num-draft-tokens", str((dep.spec_tokens or 0) + 1)]
        if dep.draft_model:
            argv += ["--speculative-draft-model-path", dep.draft_model]
    if dep.mixed_prefill:
        argv.append(flag("sglang", "mixed_prefill"))
    from llmath.deploy.engine_settings import SGLANG_MAX_PREFILL_TOKENS_DEFAULT, emit_sglang_settings

    budget = dep.max_num_batched_tokens or 0
    if dep.max_prefill_tokens or budget > SGLANG_MAX_PREFILL_TOKENS_DEFAULT or (whole and budget):  # the smaller binds
        argv += ["--max-prefill-tokens", str(dep.max_prefill_tokens or budget)]
    if dep.decode_graph_batch:
        argv += ["--cuda-graph-max-bs", str(dep.decode_graph_batch)]
    flags, notes = emit_sglang_settings(dep.engine_settings)
    return EngineCommand("sglang", argv + flags, notes=notes)


def _emit_trtllm(d: dict, dep: Deployment, moe: bool) -> EngineCommand:
    attention_dp = moe and dep.dp > 1 and dep.tp == 1
    instances = 1 if attention_dp else dep.dp
    if instances > 1 and dep.ep > dep.tp:
        raise EngineArgsError(
            f"tp={dep.tp} dp={dep.dp} ep={dep.ep}: TensorRT-LLM's attention DP gives every rank its own attention"
            " (tp=1); with tp > 1 the replicas are separate servers and experts cannot span them; pin --tp 1"
        )
    ranks = dep.dp if attention_dp else dep.tp
    argv = [*d["command"], dep.model, "--tp_size", str(ranks)]
    if dep.pp > 1:
        argv += ["--pp_size", str(dep.pp)]
    if dep.ep > 1:
        argv += ["--ep_size", str(dep.ep)]
    argv += _common("trtllm", dep)
    config: dict[str, Any] = {}
    if attention_dp:
        config["enable_attention_dp"] = True
    if dep.kv_dtype:
        kv = d["values"]["kv_dtype"].get(dep.kv_dtype)
        if kv is None:
            raise EngineArgsError(f"--kv-dtype {dep.kv_dtype!r}: TensorRT-LLM's kv_cache_config.dtype is auto or fp8")
        config["kv_cache_config"] = {"dtype": kv}
    if dep.spec_method:
        config["speculative_config"] = _trtllm_spec(d, dep)
    from llmath.deploy.engine_settings import emit_trtllm_settings

    keys, notes = emit_trtllm_settings(dep.engine_settings)
    config.update(keys)
    if dep.enforce_eager:  # no CUDA graphs (TorchLlmArgs.cuda_graph_config None)
        config["cuda_graph_config"] = None
    elif dep.decode_graph_batch:
        config["cuda_graph_config"] = {"max_batch_size": dep.decode_graph_batch}
    cmd = EngineCommand("trtllm", argv, instances=instances, notes=notes)
    if config:
        cmd.config, cmd.config_file = config, "llmath-llm-api.yaml"
        argv += ["--config", cmd.config_file]
    cmd.notes += _prefill_first_note("TensorRT-LLM", dep)
    if dep.weights and dep.weights not in ("bf16", "fp16", "fp32"):
        cmd.notes.append(f"TensorRT-LLM reads the weight format from the checkpoint: serve a {dep.weights} checkpoint")
    if instances > 1:
        cmd.notes.append(f"run {instances} such servers side by side (one per replica) behind a load balancer")
    return cmd


def _trtllm_spec(d: dict, dep: Deployment) -> dict[str, Any]:
    kind = d["values"]["spec_method"][dep.spec_method]
    if kind == "MTP":
        return {"decoding_type": kind, "num_nextn_predict_layers": dep.spec_tokens}
    spec: dict[str, Any] = {"decoding_type": kind, "max_draft_len": dep.spec_tokens}
    if dep.draft_model:
        spec["speculative_model"] = dep.draft_model
    return spec


def per_replica(concurrency: float, dp: int) -> int:
    """The running-request cap of one replica that serves its share of ``concurrency`` at once."""
    return max(1, math.ceil(concurrency / dp - 1e-9))


# ---- llmath names <-> engine names ---------------------------------------------------------------------

FINE_TUNE_SUFFIXES = ("-Instruct", "-instruct", "-Chat", "-chat", "-it")


def hub_id(model: str) -> str:
    """The hub repository of a bundled model (what an engine loads), else ``model`` as given."""
    from llmath.model.registry import index, lookup

    name = lookup(model)
    return index()[name].get("repo") or model if name else model


def registry_model(model: str) -> tuple[str, str | None]:
    """(the model llmath analyses for an engine's model id, a note). A fine-tune id (``-Instruct``,
    ``-Chat``, ``-it``) whose base model is bundled reads as that base: a fine-tune keeps its base model's
    config.json, so every size llmath computes is the same."""
    from llmath.model.registry import lookup

    if lookup(model):
        return model, None
    for suffix in FINE_TUNE_SUFFIXES:
        if model.endswith(suffix) and lookup(model[: -len(suffix)]):
            base = model[: -len(suffix)]
            return base, f"{model}: sized as its bundled base model {base} (a fine-tune keeps the base's config.json)"
    return model, None


def from_plan(best: dict[str, Any], model: str, hw, engine: str, kv_dtype: str | None = None) -> Deployment:
    """The deployment of a plan row (``PlanResult.best``): its layout and weights, its concurrency as the
    per-replica running cap, and the engine preset's token budget and memory fraction on ``hw``."""
    from llmath.deploy import engines

    if best.get("mode") != "aggregated":
        raise EngineArgsError(
            "--emit writes one aggregated engine; the best configuration is disaggregated (prefill and decode"
            " pools): drop --disagg to plan an aggregated one"
        )
    eng = engines.preset(engine, hw, tp=int(best["tp"]))
    dp = int(best["dp"])
    weights = best.get("weights")
    sd = best.get("speculation") or {}  # a speculating row: its method, k and draft model
    return Deployment(
        model=hub_id(model),
        tp=int(best["tp"]),
        pp=int(best["pp"]),
        dp=dp,
        ep=int(best["ep"]),
        weights=None if weights in (None, "bf16") else weights,
        kv_dtype=kv_dtype,
        max_num_seqs=per_replica(float(best["concurrency"]), dp),
        max_num_batched_tokens=eng.max_num_batched_tokens,
        gpu_memory_utilization=eng.gpu_memory_utilization,
        spec_method=sd.get("method"),
        spec_tokens=sd.get("k"),
        draft_model=sd.get("draft_model"),
    )


def deployment_for(
    model: str,
    hardware: str,
    engine: str,
    *,
    parallel: ParallelConfig,
    weights: str | None = None,
    kv_dtype: str | None = None,
    concurrency: float | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    gpu_memory_utilization: float | None = None,
    enforce_eager: bool = False,
    speculation: tuple[str | None, int, str | None] = (None, 0, None),
    mixed_prefill: bool | None = None,
    engine_settings: dict[str, Any] | None = None,
):
    """(spec, the :class:`Deployment` of analyze's settings): the layout ``parallel`` asks for, fitted to the model, the
    concurrency as the per-replica running cap unless ``max_num_seqs`` is given, the engine preset's budget
    and memory fraction on ``hardware`` unless given."""
    from llmath.deploy import engines
    from llmath.hardware import get
    from llmath.model.registry import resolve

    engine_data(engine)
    spec = resolve(model)
    lay = parallel.requested(spec)
    tp, pp, dp, ep = (lay.tp, lay.pp, lay.dp, lay.ep) if lay else (1, 1, 1, 1)
    eng = engines.preset(engine, get(hardware), tp=tp)
    if max_num_seqs is None and concurrency is not None:
        max_num_seqs = per_replica(concurrency, dp)
    method, k, draft = speculation
    settings = dict(engine_settings or {})
    graph_batch = settings.pop("decode_graph_max_batch", None) or None  # written as the engine's own decode cap
    dep = Deployment(
        model=hub_id(model),
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        weights=None if weights in (None, "bf16") else weights,
        kv_dtype=kv_dtype,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens or eng.max_num_batched_tokens,
        gpu_memory_utilization=gpu_memory_utilization or eng.gpu_memory_utilization,
        enforce_eager=enforce_eager,
        spec_method=method,
        spec_tokens=k if method else None,
        draft_model=draft if method else None,
        mixed_prefill=mixed_prefill,
        engine_settings=settings,
        decode_graph_batch=graph_batch,
    )
    return spec, dep
