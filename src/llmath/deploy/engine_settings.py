"""The engine settings of a command line beyond its layout, formats and limits: how it captures CUDA graphs, when
its scheduler takes requests in, whether it overlaps scheduling with the GPU, and how long it holds prompts back.

Each function maps an engine's own flag or config key to :class:`llmath.deploy.serving.EngineConfig` fields (the
``engine_settings`` of a :class:`~llmath.deploy.engine_args.Deployment`), with the rule's source in
``data/engine_flags.json`` (``engine_settings``); a value llmath cannot model raises
:class:`~llmath.deploy.engine_args.EngineArgsError`. The measured-run launchers (:mod:`llmath.measure`) map the
settings their scripts passed through the same functions.
"""

from __future__ import annotations

import json
from typing import Any

from llmath.deploy.engine_args import EngineArgsError

# vLLM's cudagraph_mode (vllm/config/compilation.py CUDAGraphMode): the decode-only and the mixed/prefill routine.
# FULL_AND_PIECEWISE and PIECEWISE are what the preset models (piecewise graphs for passes that prefill up to the
# largest capture size; llmath does not floor decode-only passes of PIECEWISE, data/engines.json
# piecewise_host_per_layer_s); FULL_DECODE_ONLY runs every pass that prefills without a graph; NONE captures none.
VLLM_GRAPH_MODES = ("NONE", "PIECEWISE", "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")
# vLLM's optimization levels (-O0 … -O3): the cudagraph_mode each level defaults to (vllm/config/vllm.py
# OPTIMIZATION_LEVEL_00 … 03; docs/design/optimization_levels.md)
VLLM_LEVEL_MODES = {0: "NONE", 1: "PIECEWISE", 2: "FULL_AND_PIECEWISE", 3: "FULL_AND_PIECEWISE"}
# SGLang's --max-prefill-tokens when not given (python/sglang/srt/server_args.py ServerArgs.max_prefill_tokens)
SGLANG_MAX_PREFILL_TOKENS_DEFAULT = 16384
# SGLang's --piecewise-cuda-graph-max-tokens when not given (ServerArgs.piecewise_cuda_graph_max_tokens; the
# ServerArgs SGLang servers log at start-up print piecewise_cuda_graph_max_tokens=8192 beside
# enable_piecewise_cuda_graph=False)
SGLANG_PIECEWISE_MAX_TOKENS_DEFAULT = 8192
# SGLang's environ.py SGLANG_INIT_NEW_TOKEN_RATIO and SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR (data/engines.json
# new_token_reserve: their product, 0.098, is the preset's)
SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
# TensorRT-LLM's scheduler_config.capacity_scheduler_policy as llmath's kv_admission: GUARANTEED_NO_EVICT admits a
# request only with room for its whole KV; MAX_UTILIZATION admits on the KV in use and pauses requests when it runs out
TRTLLM_CAPACITY_POLICIES = {"GUARANTEED_NO_EVICT": "reserve", "MAX_UTILIZATION": "on_demand"}


def vllm_graph_mode(mode: str, splitting_ops: Any = None) -> dict[str, Any]:
    """EngineConfig fields of vLLM's ``cudagraph_mode``: ``FULL_DECODE_ONLY`` sets ``eager_prefill`` (its prefill
    passes run the compiled model without replay: one flattened graph with ``splitting_ops: []``, the preset's
    ``flat_graph_host_factor``; the split graph, factor 1, without); ``NONE`` turns graphs off. ``FULL`` (mixed
    batches replayed from full graphs) is refused: llmath has no such pass."""
    mode = str(mode).upper()
    if mode == "FULL_DECODE_ONLY":
        split = {} if splitting_ops == [] else {"flat_graph_host_factor": 1.0}
        return {"eager_prefill": True, **split}
    if mode == "NONE":
        return {"cuda_graphs": False}
    if mode in VLLM_GRAPH_MODES:
        return {}
    raise EngineArgsError(
        f"--engine-args: cudagraph_mode {mode!r} is not one llmath models (mixed and prefill passes replayed from"
        f" full graphs are not); use one of {', '.join(VLLM_GRAPH_MODES)}"
    )


def vllm_capture_size(largest: Any, where: str) -> dict[str, Any]:
    """EngineConfig fields of vLLM's largest CUDA-graph capture size (``max_cudagraph_capture_size``, or the largest
    of ``cudagraph_capture_sizes``): a pass of more scheduled tokens runs without a graph."""
    if isinstance(largest, bool) or not isinstance(largest, int) or largest < 1:
        raise EngineArgsError(f"--engine-args: {where} {largest!r} must be a whole number of tokens >= 1")
    return {"cuda_graph_max_tokens": largest, "cuda_graph_tokens_per_seq": 0}


def vllm_async(on: bool) -> dict[str, Any]:
    """``replacement_lag`` of vLLM's async scheduling: two steps in flight (EngineCore's batch queue), so a follow-up
    request joins the step after the one queued; off: the next step."""
    return {"replacement_lag": 2 if on else 1}


def vllm_settings(items: dict[str, str | None], dotted: dict[str, str]) -> tuple[dict[str, Any], bool]:
    """(EngineConfig fields, eager) of a vLLM command line's ``--compilation-config`` / ``-O`` (JSON, a level, or
    ``-O.key=value``), capture-size and async-scheduling flags; eager: cudagraph_mode NONE."""
    cc = _compilation(items.get("--compilation-config"), dotted)
    out: dict[str, Any] = {}
    mode = cc.get("cudagraph_mode")
    if "level" in cc and mode is None:
        if cc["level"] not in VLLM_LEVEL_MODES or isinstance(cc["level"], bool):
            raise EngineArgsError(
                f"--engine-args: -O {cc['level']!r} is not a vLLM optimization level; use 0, 1, 2 or 3"
            )
        mode = VLLM_LEVEL_MODES[cc["level"]]
    if mode is not None:
        out.update(vllm_graph_mode(mode, cc.get("splitting_ops")))
    sizes = {k: v for k, v in _capture_sizes(items, cc).items() if v is not None}
    if len(set(sizes.values())) > 1:
        raise EngineArgsError(f"--engine-args: {' and '.join(sizes)} set the largest capture size twice; keep one")
    for where, largest in sizes.items():
        out.update(vllm_capture_size(largest, where))
    async_on = switch(items, "--async-scheduling")
    if async_on is not None:
        out.update(vllm_async(async_on))
    chunked = switch(items, "--enable-chunked-prefill")
    if chunked is not None:
        out["chunked_prefill"] = chunked
    eager = out.pop("cuda_graphs", True) is False
    return out, eager


def switch(items: dict[str, str | None], on: str) -> bool | None:
    """The state vLLM's boolean flag ``on`` (``--x``, negated ``--no-x``) sets: True, False, or None where neither is
    given; both given conflict."""
    off = "--no-" + on.removeprefix("--")
    if on in items and off in items:
        raise EngineArgsError(f"--engine-args: {on} and {off} conflict; keep one")
    return True if on in items else False if off in items else None


def _compilation(text: str | None, dotted: dict[str, str]) -> dict[str, Any]:
    """``--compilation-config`` as a mapping: a JSON object, or an optimization level (``-O3``: ``level`` 3), with
    the ``-O.key=value`` items over it."""
    cc: dict[str, Any] = {}
    if text is not None:
        if text.strip().isdigit():
            cc = {"level": int(text)}
        else:
            try:
                cc = json.loads(text)
            except ValueError:
                cc = None  # type: ignore[assignment]
            if not isinstance(cc, dict):
                raise EngineArgsError(
                    f"--engine-args: --compilation-config {text[:60]!r} is not a JSON object or a level 0-3"
                )
    for key, value in dotted.items():
        try:
            cc[key] = json.loads(value)
        except ValueError:
            cc[key] = value
    return cc


def _capture_sizes(items: dict[str, str | None], cc: dict[str, Any]) -> dict[str, Any]:
    """The largest capture size each spelling sets (None where absent)."""
    listed = cc.get("cudagraph_capture_sizes")
    whole = isinstance(listed, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in listed)
    if listed is not None and (not whole or not listed):
        raise EngineArgsError("--engine-args: cudagraph_capture_sizes must be a non-empty list of token counts")
    out = {
        "max_cudagraph_capture_size": cc.get("max_cudagraph_capture_size"),
        "cudagraph_capture_sizes": max(listed) if listed else None,
    }
    for flag in ("--max-cudagraph-capture-size", "--cuda-graph-sizes", "--cudagraph-capture-sizes"):
        value = items.get(flag)
        if value is not None:
            numbers = _listed_numbers(value)
            if not numbers:
                raise EngineArgsError(f"--engine-args: {flag} {value!r} must be a number of tokens")
            out[flag] = max(numbers)
    return out


def _listed_numbers(text: str) -> list[int]:
    """The whole numbers of a flag value or flow-style YAML list: ``2048``, ``1 2 4``, ``[1, 2, 4]``."""
    words = text.replace("[", " ").replace("]", " ").replace(",", " ").split()
    return [int(w) for w in words if w.isdigit()]


def sglang_prefill_budget(chunk: int | None, max_prefill: int | None) -> int | None:
    """New tokens one SGLang prefill batch takes: its ``PrefillAdder`` stops at the smaller of
    ``--chunked-prefill-size`` and ``--max-prefill-tokens`` (default :data:`SGLANG_MAX_PREFILL_TOKENS_DEFAULT`);
    None where neither is known (the device's chunk default applies)."""
    if chunk is None:
        return max_prefill
    return min(chunk, SGLANG_MAX_PREFILL_TOKENS_DEFAULT if max_prefill is None else max_prefill)


def sglang_settings(items: dict[str, str | None], number) -> dict[str, Any]:
    """EngineConfig fields of SGLang's ``--scheduler-recv-interval``, ``--disable-overlap-schedule`` and
    ``--enable-piecewise-cuda-graph`` (prefill passes of at most ``--piecewise-cuda-graph-max-tokens`` replay piecewise
    graphs: ``eager_prefill`` off, larger ones run eagerly)."""
    out: dict[str, Any] = {}
    if "--enable-piecewise-cuda-graph" in items:
        largest = number(items, "--piecewise-cuda-graph-max-tokens", int) or SGLANG_PIECEWISE_MAX_TOKENS_DEFAULT
        out.update({"eager_prefill": False, "cuda_graph_max_tokens": largest, "cuda_graph_tokens_per_seq": 0})
    recv = number(items, "--scheduler-recv-interval", int)
    if recv is not None:
        out["recv_interval"] = recv
    if "--disable-overlap-schedule" in items:
        out.update({"replacement_lag": 1, "overlap_scheduler": False})
    if items.get("--chunked-prefill-size") == "-1":  # chunking off: every prompt prefilled whole
        out["chunked_prefill"] = False
    conservativeness = items.get("--schedule-conservativeness")
    if conservativeness is not None:
        out["new_token_reserve"] = sglang_new_token_reserve(conservativeness)
    return out


def sglang_new_token_reserve(conservativeness: str) -> float:
    """``new_token_reserve`` of SGLang's ``--schedule-conservativeness`` c: the floor its ``new_token_ratio`` decays to,
    min(min(0.7·c, 1) × 0.14, 1) (``Scheduler``: init_new_token_ratio = min(SGLANG_INIT_NEW_TOKEN_RATIO · c, 1),
    min_new_token_ratio = min(init × SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, 1); 0.098 at SGLang's default c = 1)."""
    try:
        c = float(conservativeness)
    except ValueError:
        c = -1.0
    if not 0 <= c < 1e6:
        raise EngineArgsError(f"--engine-args: --schedule-conservativeness {conservativeness!r} must be a number >= 0")
    return min(min(SGLANG_INIT_NEW_TOKEN_RATIO * c, 1.0) * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)


def trtllm_graph_batch(config: dict[str, Any]) -> tuple[int | None, bool]:
    """(the largest decode batch captured, graphs on) of TensorRT-LLM's ``cuda_graph_config``: ``null`` turns CUDA
    graphs off; ``max_batch_size``, or the largest of ``batch_sizes``, bounds the batches replayed (None: not given,
    the engine's default list, which llmath does not check)."""
    if "cuda_graph_config" not in config:
        return None, True
    cg = config["cuda_graph_config"]
    if cg is None:
        return None, False
    if not isinstance(cg, dict):
        raise EngineArgsError("--engine-args: cuda_graph_config must be a mapping (max_batch_size, ...) or null")
    sizes = cg.get("batch_sizes")
    if isinstance(sizes, str):  # flow style: [1, 2, 4]
        sizes = _listed_numbers(sizes) or None
    largest = cg.get("max_batch_size") or (max(sizes) if sizes else None)
    if largest is not None and (isinstance(largest, bool) or not isinstance(largest, int) or largest < 1):
        raise EngineArgsError(f"--engine-args: cuda_graph_config.max_batch_size {largest!r} must be an integer >= 1")
    return largest, True


def trtllm_settings(config: dict[str, Any], items: dict[str, str | None]) -> dict[str, Any]:
    """EngineConfig fields of TensorRT-LLM's LLM-API YAML: ``disable_overlap_scheduler``, batch waiting
    (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``; a ``batch_wait_timeout_ms`` is refused),
    ``attention_dp_config`` (``enable_balance``, ``timeout_iters``, ``batching_wait_iters``),
    ``enable_chunked_prefill`` (also a serve flag) and ``moe_config.backend`` (:data:`TRTLLM_MOE_BACKEND_KERNELS`)."""
    out: dict[str, Any] = {}
    if "disable_overlap_scheduler" in config:
        off = _bool(config["disable_overlap_scheduler"], "disable_overlap_scheduler")
        out.update({"overlap_scheduler": not off, "replacement_lag": 1 if off else 2})
    if config.get("batch_wait_timeout_ms"):
        raise EngineArgsError(
            f"--engine-args: batch_wait_timeout_ms {config['batch_wait_timeout_ms']!r}: llmath models batch waiting"
            " in iterations only; use batch_wait_timeout_iters"
        )
    if "batch_wait_timeout_iters" in config:
        out["batch_wait_iters"] = _whole(config["batch_wait_timeout_iters"], "batch_wait_timeout_iters")
    if "batch_wait_max_tokens_ratio" in config:
        ratio = config["batch_wait_max_tokens_ratio"]
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
            raise EngineArgsError(f"--engine-args: batch_wait_max_tokens_ratio {ratio!r} must be in [0, 1]")
        out["batch_wait_tokens_ratio"] = float(ratio)
    adp = config.get("attention_dp_config")
    if adp is not None:
        out.update(_adp(adp))
    policy = (config.get("scheduler_config") or {}).get("capacity_scheduler_policy")
    if policy is not None:
        if policy not in TRTLLM_CAPACITY_POLICIES:
            raise EngineArgsError(
                f"--engine-args: scheduler_config.capacity_scheduler_policy {policy!r} is not one llmath models; use"
                f" {' or '.join(TRTLLM_CAPACITY_POLICIES)}"
            )
        out["kv_admission"] = TRTLLM_CAPACITY_POLICIES[policy]
    chunked = config.get("enable_chunked_prefill")
    if chunked is not None or "--enable_chunked_prefill" in items:
        out["chunked_prefill"] = True if chunked is None else _bool(chunked, "enable_chunked_prefill")
    backend = trtllm_moe_backend(config)
    if backend in TRTLLM_MOE_BACKEND_KERNELS:
        out["moe_kernel"] = TRTLLM_MOE_BACKEND_KERNELS[backend]
    return out


# The values TensorRT-LLM's ``MoeConfig.backend`` takes: a pydantic ``Literal`` (tensorrt_llm/llmapi/llm_args.py), so
# any other string, a lower-case one included, fails the LLM-API config's validation. The union over its releases:
# AUTO, CUTLASS, CUTEDSL, TRTLLM, DEEPGEMM, DENSEGEMM, VANILLA, TRITON, MARLIN, MEGAMOE_DEEPGEMM, MEGAMOE_CUTEDSL at
# NVIDIA/TensorRT-LLM 0004396720054fd8e205cbf616f21f0b57c6b412 (and the 1.3.0rc27 reference,
# https://nvidia.github.io/TensorRT-LLM/1.3.0rc27/llm-api/reference/MoeConfig.html); CUTEDSL_FC12 added in 1.4.0rc4
# (https://nvidia.github.io/TensorRT-LLM/1.4.0rc4/llm-api/reference/MoeConfig.html); WIDEEP in the earlier releases'
# Literal (CUTLASS, CUTEDSL, WIDEEP, TRTLLM, DEEPGEMM, VANILLA, then TRITON and AUTO), the backend the DeepSeek-R1
# recipe names for GB200 NVL72 at EP > 8 (https://nvidia.github.io/TensorRT-LLM/deployment-guide/
# quick-start-recipe-for-deepseek-r1-on-trtllm.html)
TRTLLM_MOE_BACKENDS = (
    "AUTO", "CUTLASS", "CUTEDSL", "CUTEDSL_FC12", "WIDEEP", "TRTLLM", "DEEPGEMM", "DENSEGEMM", "VANILLA", "TRITON",
    "MARLIN", "MEGAMOE_DEEPGEMM", "MEGAMOE_CUTEDSL",
)  # fmt: skip


def trtllm_moe_backend(config: dict[str, Any]) -> str | None:
    """``moe_config.backend`` of TensorRT-LLM's LLM-API YAML (None: not given), refused where TensorRT-LLM refuses
    it (:data:`TRTLLM_MOE_BACKENDS`)."""
    moe = config.get("moe_config")
    if moe is None:
        return None
    if not isinstance(moe, dict):
        raise EngineArgsError(f"--engine-args: moe_config {moe!r} must be a mapping (backend, ...)")
    backend = moe.get("backend")
    if backend is None or backend in TRTLLM_MOE_BACKENDS:
        return backend
    hint = f"; TensorRT-LLM spells it {backend.upper()!r}" if str(backend).upper() in TRTLLM_MOE_BACKENDS else ""
    raise EngineArgsError(
        f"--engine-args: moe_config.backend {backend!r} is not a TensorRT-LLM MoE backend (MoeConfig.backend takes"
        f" {', '.join(TRTLLM_MOE_BACKENDS)}){hint}; fix the --config file or leave the key out (AUTO)"
    )


def trtllm_moe_backend_note(config: dict[str, Any]) -> str | None:
    """A note where the YAML names a MoE backend whose kernel path llmath does not model (None: AUTO, none given
    or one of :data:`TRTLLM_MOE_BACKEND_KERNELS`)."""
    backend = trtllm_moe_backend(config)
    if backend in (None, "AUTO") or backend in TRTLLM_MOE_BACKEND_KERNELS:
        return None
    return (
        f"moe_config.backend {backend}: llmath has no kernel path of its own for this backend and times the experts"
        " with the engine's default MoE kernel for the checkpoint's format"
    )


# ``moe_config.backend`` values whose kernel path llmath names whatever the checkpoint (``EngineConfig.moe_kernel``):
# TensorRT-LLM's Triton MoE runs on sm90 only, and the one checkpoint format InferenceX runs on it is MXFP4
# (W4A16_MXFP4: fused_moe_triton.py TritonMXFP4FusedMoEMethod, whose launches ops/launches.py MOE_PATH_LAUNCHES
# counts; the backend's unquantised and FP8 methods, for other checkpoints, launch a number not read, and take the
# MXFP4 method's count). The other backends' kernel
# depends on the checkpoint's format (TRTLLM: MXFP8, block-FP8 or NVFP4) and is left at the engine's default
TRTLLM_MOE_BACKEND_KERNELS = {"TRITON": "trtllm_triton_mxfp4"}


def _adp(adp: Any) -> dict[str, Any]:
    if not isinstance(adp, dict):
        raise EngineArgsError(
            "--engine-args: attention_dp_config must be a mapping (enable_balance, timeout_iters, ...)"
        )
    out: dict[str, Any] = {}
    if "enable_balance" in adp:
        out["adp_balance"] = _bool(adp["enable_balance"], "attention_dp_config.enable_balance")
    for field_name, key in ADP_KEYS.items():
        if key in adp and field_name != "adp_balance":
            out[field_name] = _whole(adp[key], f"attention_dp_config.{key}")
    return out


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise EngineArgsError(f"--engine-args: {key} {value!r} must be true or false")
    return value


def _whole(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EngineArgsError(f"--engine-args: {key} {value!r} must be a whole number of iterations >= 0")
    return value


# ---- writing ---------------------------------------------------------------------------------------------


def _left_out(engine: str, settings: dict[str, Any], written: set[str]) -> list[str]:
    rest = sorted(set(settings) - written)
    return [f"{engine} has no flag for {', '.join(f'{k}={settings[k]}' for k in rest)}: left out"] if rest else []


def emit_vllm_settings(settings: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(flags, notes) that write ``settings`` on vLLM's command line (:func:`vllm_settings` reads them back)."""
    argv: list[str] = []
    written = {"flat_graph_host_factor"} if settings.get("eager_prefill") else set()
    if settings.get("eager_prefill"):
        cc: dict[str, Any] = {"cudagraph_mode": "FULL_DECODE_ONLY"}
        if settings.get("flat_graph_host_factor") != 1.0:
            cc["splitting_ops"] = []
        argv += ["--compilation-config", json.dumps(cc, separators=(",", ":"))]
    written |= {"eager_prefill"} if settings.get("eager_prefill") is not None else set()
    if settings.get("cuda_graph_max_tokens") and not settings.get("cuda_graph_tokens_per_seq"):
        argv += ["--max-cudagraph-capture-size", str(settings["cuda_graph_max_tokens"])]
        written |= {"cuda_graph_max_tokens", "cuda_graph_tokens_per_seq"}
    if settings.get("replacement_lag") in (1, 2):
        argv.append("--async-scheduling" if settings["replacement_lag"] == 2 else "--no-async-scheduling")
        written.add("replacement_lag")
    if "chunked_prefill" in settings:
        argv.append("--enable-chunked-prefill" if settings["chunked_prefill"] else "--no-enable-chunked-prefill")
        written.add("chunked_prefill")
    return argv, _left_out("vLLM", settings, written)


def emit_sglang_settings(settings: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(flags, notes) that write ``settings`` on SGLang's command line (:func:`sglang_settings` reads them back)."""
    argv: list[str] = []
    written = {"eager_prefill"} if settings.get("eager_prefill") is True else set()  # SGLang's default
    written |= {"chunked_prefill"} if "chunked_prefill" in settings else set()  # the chunk size's -1 (the caller's)
    if settings.get("eager_prefill") is False:
        argv.append("--enable-piecewise-cuda-graph")
        largest = settings.get("cuda_graph_max_tokens") if not settings.get("cuda_graph_tokens_per_seq") else None
        argv += ["--piecewise-cuda-graph-max-tokens", str(largest or SGLANG_PIECEWISE_MAX_TOKENS_DEFAULT)]
        written |= {"eager_prefill", "cuda_graph_max_tokens", "cuda_graph_tokens_per_seq"}
    if settings.get("recv_interval") is not None:
        argv += ["--scheduler-recv-interval", str(settings["recv_interval"])]
        written.add("recv_interval")
    overlap_off = settings.get("replacement_lag") == 1 or settings.get("overlap_scheduler") is False
    if overlap_off:
        argv.append("--disable-overlap-schedule")
    if overlap_off or settings.get("replacement_lag") == 2:
        written |= {"replacement_lag", "overlap_scheduler"}
    if "new_token_reserve" in settings:
        c = settings["new_token_reserve"] / (SGLANG_INIT_NEW_TOKEN_RATIO * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR)
        argv += ["--schedule-conservativeness", f"{c:.6g}"]
        written.add("new_token_reserve")
    return argv, _left_out("SGLang", settings, written)


def emit_trtllm_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(LLM-API YAML keys, notes) that write ``settings`` (:func:`trtllm_settings` reads them back)."""
    config: dict[str, Any] = {}
    written: set[str] = set()
    if "overlap_scheduler" in settings or "replacement_lag" in settings:
        off = settings.get("overlap_scheduler") is False or settings.get("replacement_lag") == 1
        config["disable_overlap_scheduler"] = off
        written |= {"overlap_scheduler", "replacement_lag"}
    for field_name, key in (("batch_wait_iters", "batch_wait_timeout_iters"),
                            ("batch_wait_tokens_ratio", "batch_wait_max_tokens_ratio")):  # fmt: skip
        if field_name in settings:
            config[key] = settings[field_name]
            written.add(field_name)
    adp = {key: settings[name] for name, key in ADP_KEYS.items() if name in settings}
    if adp:
        config["attention_dp_config"] = adp
        written |= {name for name in ADP_KEYS if name in settings}
    if "chunked_prefill" in settings:
        config["enable_chunked_prefill"] = settings["chunked_prefill"]
        written.add("chunked_prefill")
    backend = {v: k for k, v in TRTLLM_MOE_BACKEND_KERNELS.items()}.get(settings.get("moe_kernel", ""))
    if backend:
        config["moe_config"] = {"backend": backend}
        written.add("moe_kernel")
    policy = {v: k for k, v in TRTLLM_CAPACITY_POLICIES.items()}.get(settings.get("kv_admission", ""))
    if policy:
        config["scheduler_config"] = {"capacity_scheduler_policy": policy}
        written.add("kv_admission")
    return config, _left_out("TensorRT-LLM", settings, written)


ADP_KEYS = {"adp_balance": "enable_balance", "adp_timeout_iters": "timeout_iters",
            "adp_batching_wait_iters": "batching_wait_iters"}  # fmt: skip
