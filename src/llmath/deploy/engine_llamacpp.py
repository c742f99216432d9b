"""A deployment as llama.cpp's ``llama-server`` command (``--emit llama.cpp``).

Each flag's name, meaning and default are in ``data/engine_flags.json`` (``llama.cpp``: its server README, which
llama.cpp generates from ``common/arg.cpp``). What the command sets:

* ``-m``: a GGUF file (llama.cpp loads no safetensors checkpoint); a model given as a ``.gguf`` path is written as
  given, another as ``<name>.gguf``, a placeholder for its GGUF conversion, noted;
* ``--parallel``: the slots, one running request each: the running cap per server (the concurrency);
* ``--ctx-size``: the slots × one request's tokens (prompt + the longest output, as the engines count a request
  against the context: :func:`llmath.deploy.context_limit.request_tokens`); with ``--parallel`` given the slots
  divide the context, ``ctx-size / parallel`` positions each;
* ``--n-gpu-layers all``: every layer on the GPU, as llmath times it; ``--flash-attn on`` (``off`` for eager);
* ``--cache-type-k`` / ``--cache-type-v``: a KV cache format other than the default f16, in llama.cpp's name;
* ``--batch-size`` (the token budget of a step, the preset's 2048 unless given) and ``--ubatch-size`` (the
  physical batch, llama.cpp's default 512, at most the budget).

llmath models one GPU per server for llama.cpp: a layout splitting a server over GPUs (``--split-mode``: layer,
row, or the experimental tensor split) is refused, as is speculative decoding; ``dp`` replicas are separate servers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmath.deploy.engine_args import EngineArgsError, EngineCommand

if TYPE_CHECKING:
    from llmath.deploy.engine_args import Deployment

ENGINE = "llama.cpp"
DEFAULT_SLOTS = 1  # data/engines.json llama.cpp max_num_seqs: common.h n_parallel = 1


def refuse_layout(dep: Deployment) -> None:
    """One GPU per server: tensor, pipeline or expert parallelism inside a server is refused, with what to do."""
    split = {k: v for k, v in (("tp", dep.tp), ("pp", dep.pp), ("ep", dep.ep)) if v > 1}
    if split:
        given = " ".join(f"{k}={v}" for k, v in split.items())
        raise EngineArgsError(
            f"llama.cpp: {given}: llmath writes llama-server for one GPU per server (its --split-mode layouts"
            " are not modelled); use --tp 1 --pp 1 --ep 1, with --dp N for N servers"
        )
    if dep.spec_method:
        raise EngineArgsError(
            f"llama.cpp: speculative decoding ({dep.spec_method}) is not written for llama-server; drop --spec-method"
        )


def gguf_path(model: str) -> tuple[str, list[str]]:
    """The ``-m`` value: a ``.gguf`` path as given, else a placeholder named after the model (noted)."""
    if model.lower().endswith(".gguf"):
        return model, []
    path = model.rstrip("/").split("/")[-1] + ".gguf"
    return path, [f"-m {path}: a GGUF conversion of {model} (llama.cpp's convert_hf_to_gguf.py) in the weight format"]


def _kv_type(values: dict[str, Any], kv_dtype: str) -> str:
    kv = values["kv_dtype"].get(kv_dtype)
    if kv is None:
        raise EngineArgsError(
            f"--kv-dtype {kv_dtype!r}: llama.cpp stores KV as {', '.join(values['kv_dtype'])}; pick one of them"
        )
    return kv


def emit_llamacpp(d: dict[str, Any], dep: Deployment, moe: bool) -> EngineCommand:
    """``llama-server`` running ``dep`` (see the module docstring); ``moe`` changes nothing here."""
    refuse_layout(dep)
    s, v = d["settings"], d["values"]
    model, notes = gguf_path(dep.model)
    slots = dep.max_num_seqs or DEFAULT_SLOTS
    argv = [*d["command"], s["model"]["flag"], model, s["max_num_seqs"]["flag"], str(slots)]
    if dep.request_tokens:
        argv += [s["context"]["flag"], str(slots * dep.request_tokens)]
    argv += [s["gpu_layers"]["flag"], "all", s["flash_attention"]["flag"], "off" if dep.attention == "eager" else "on"]
    if dep.kv_dtype and dep.kv_dtype != "fp16":
        kv = _kv_type(v, dep.kv_dtype)
        argv += [s["kv_dtype"]["flag"], kv, s["kv_dtype"]["flag_v"], kv]
    if dep.max_num_batched_tokens:
        ubatch = min(int(v["ubatch_size"]["value"]), dep.max_num_batched_tokens)
        argv += [s["max_num_batched_tokens"]["flag"], str(dep.max_num_batched_tokens)]
        argv += [s["ubatch"]["flag"], str(ubatch)]
    return EngineCommand(ENGINE, argv, instances=dep.dp, notes=notes + _left_out(dep))


def _left_out(dep: Deployment) -> list[str]:
    """What the deployment sets that llama-server has no flag for, or takes from elsewhere."""
    notes = []
    if dep.weights:
        notes.append(f"llama.cpp reads the weight format from the GGUF file: convert to a {dep.weights} GGUF")
    if dep.gpu_memory_utilization not in (None, 1.0):
        notes.append(
            f"llama.cpp has no memory fraction: gpu_memory_utilization={dep.gpu_memory_utilization:g} left out"
        )
    if dep.enforce_eager or dep.engine_settings or dep.decode_graph_batch:
        notes.append("llama.cpp's CUDA graphs and engine settings have no flag here: left out")
    if dep.mixed_prefill is False:
        notes.append(
            "llama.cpp batches prompt pieces with decoding slots (continuous batching); prefill-first: left out"
        )
    if dep.dp > 1:
        notes.append(f"run {dep.dp} such servers side by side (one per GPU) behind a load balancer")
    return notes
