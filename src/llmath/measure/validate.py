"""Measured vs predicted: time a real model on the machine at hand, or compare with published numbers.

:func:`validate_model` builds a model from its config with random weights (transformers, eager
attention: what runs on CPU), times prefills over several prompt lengths and single decode steps at
several batches and contexts (warm-up, medians of repeats), predicts the same scenarios with
:func:`llmath.analysis.stage_report` on a calibrated profile (or a registry accelerator) with the
``expected`` efficiency, and reports the ratio. It also profiles one prefill and one decode step with
``torch.profiler`` and groups the time by operator class (matmul, attention, norm, elementwise) next
to llmath's operator list grouped the same way.

:func:`validate_published` compares llmath's ``expected`` predictions with the published serving
measurements of ``data/published.json``. Nothing is fitted to those points.

Nothing here prints except progress lines on stderr when ``progress=True``.
"""

from __future__ import annotations

import copy
import json
import math
import re
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from importlib import resources
from pathlib import Path
from typing import Any

from llmath.errors import ConfigError, HardwareError, LLMathError, WorkloadError

CLASSES = ("matmul", "attention", "norm", "elementwise")

# a tiny Llama-shaped model for quick runs (seconds on a laptop CPU)
TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 704,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": 2048,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "rope_theta": 10000.0,
    "attention_bias": False,
    "mlp_bias": False,
}
_SHRINKABLE = ("llama", "mistral", "qwen2", "qwen3")

FULL = {
    "prompts": (32, 128, 256, 512),
    "batches": (1, 4, 16),
    "contexts": (128, 512),
    "prefill_repeats": 3,
    "decode_repeats": 5,
    "warmup": 1,
}
QUICK = {
    "prompts": (16, 256),
    "batches": (1, 4),
    "contexts": (64,),
    "prefill_repeats": 5,
    "decode_repeats": 5,
    "warmup": 2,
}


# ---- model and hardware ------------------------------------------------------------------------------


def _model_config(model) -> tuple[str, dict[str, Any], str]:
    """(name, config.json dict, source) from a registry name, a config.json path or a dict."""
    from llmath.model import registry
    from llmath.model.hf import read_config

    if model is None:
        return "tiny-llama", dict(TINY_LLAMA), "llmath built-in tiny Llama config"
    if isinstance(model, Mapping):
        cfg = dict(model)
        return str(cfg.get("_name_or_path") or cfg.get("model_type") or "config"), cfg, "config dict"
    if not isinstance(model, str):
        raise WorkloadError(f"model={model!r} must be a registry name, a config.json path or a config dict")
    if model in registry.index():
        return model, registry.config(model), registry.info(model).get("source", "")
    p = Path(model)
    if p.suffix == ".json" or p.is_dir() or p.exists():
        cfg = read_config(p)
        stem = p.parent.name if p.name == "config.json" else (p.name if p.is_dir() else p.stem)
        return stem, cfg, str(p)
    raise registry.unknown_model(model)


def _with_layers(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    out = copy.deepcopy(dict(cfg))
    for k in ("num_hidden_layers", "n_layer", "num_layers"):
        if k in out:
            out[k] = n
    if isinstance(out.get("layer_types"), list):
        out["layer_types"] = out["layer_types"][:n]
    return out


def _n_layers(cfg: Mapping[str, Any]) -> int | None:
    for k in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(cfg.get(k), int):
            return cfg[k]
    return None


def _tiny_variant(name: str, cfg: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
    """The model's own architecture at tiny sizes (Llama-like types), else the built-in tiny Llama."""
    if cfg.get("model_type") in _SHRINKABLE and all(
        k in cfg for k in ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size")
    ):
        out = _with_layers(cfg, 2)
        for k in (
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "vocab_size",
            "tie_word_embeddings",
        ):
            if k in TINY_LLAMA:
                out[k] = TINY_LLAMA[k]
        out.pop("rope_scaling", None)
        out["max_position_embeddings"] = TINY_LLAMA["max_position_embeddings"]
        out.pop("sliding_window", None)
        out["use_sliding_window"] = False
        return f"{name} (tiny: 2 layers, hidden 256)", out, "its config at tiny sizes"
    return "tiny-llama", dict(TINY_LLAMA), f"built-in tiny Llama (quick run; {name}'s type is not shrunk)"


def _resolve_hardware(hardware, device: str, dtype: str, quick: bool, progress: bool):
    """(Hardware, profile dict or None, how it was obtained)."""
    from llmath import hardware as hwmod
    from llmath.measure.calibrate import calibrate

    if hardware is None:
        prof = calibrate(device=device, dtypes=[dtype], quick=quick, progress=progress)
        return hwmod.from_dict(prof, "calibration"), prof, "calibrated now (no --hardware given)"
    if isinstance(hardware, hwmod.Hardware):
        return hardware, None, "given"
    if isinstance(hardware, Mapping):
        return hwmod.from_dict(dict(hardware), "hardware profile"), dict(hardware), "given profile"
    if isinstance(hardware, str | Path):
        h = hwmod.get(str(hardware))
        return h, None, f"{hardware}"
    raise HardwareError(f"hardware={hardware!r} must be a profile dict, a file path or a registry name")


def _fit_layers(
    cfg: dict[str, Any], name: str, device: str, dtype: str, max_batch: int, max_ctx: int, max_prompt: int
) -> tuple[dict[str, Any], str | None]:
    """The config, with fewer layers if the whole model would not fit in 60% of the free memory."""
    from llmath.analysis import activation_peak_bytes, kv_cache_bytes
    from llmath.measure.calibrate import available_memory_bytes
    from llmath.model.dtypes import Precision
    from llmath.model.hf import spec_from_config
    from llmath.ops.params import param_report

    p = Precision.uniform(dtype)
    budget = 0.6 * available_memory_bytes(device)

    def need(c):
        s = spec_from_config(c, name=name)
        w = param_report(s).total * p.weight_bytes
        kv = kv_cache_bytes(s, max_batch, max_ctx + 2, p, layout="transformers") * 2  # a copy while growing
        act = float(activation_peak_bytes(s, 1, max_prompt, "eager", p)) * 4  # fp32 softmax, temporaries
        return w + kv + act

    L = _n_layers(cfg)
    if need(cfg) <= budget:
        return cfg, None
    if L is None or L <= 1:
        raise WorkloadError(
            f"{name} needs about {need(cfg) / 1e9:.1f} GB in {dtype} but {budget / 1e9:.1f} GB is available; "
            "pick a smaller model or --quick"
        )
    n = L
    while n > 1 and need(_with_layers(cfg, n)) > budget:
        n -= 1
    c = _with_layers(cfg, n)
    if need(c) > budget:
        raise WorkloadError(
            f"{name} does not fit even with 1 layer ({need(c) / 1e9:.1f} GB > {budget / 1e9:.1f} GB available in "
            f"{dtype}); pick a smaller model or --quick"
        )
    return c, f"{L} layers do not fit in {budget / 1e9:.1f} GB (60% of free memory): timed with {n} of {L} layers"


def build_model(cfg: Mapping[str, Any], device: str, dtype: str):
    """A transformers causal LM with random weights, eager attention, eval mode, on ``device``."""
    from llmath.measure.calibrate import _torch, torch_dtype
    from llmath.measure.oracle import hf_config

    torch = _torch()
    try:
        import transformers
    except ImportError:
        raise LLMathError("validate needs transformers: pip install 'llmath[oracle]'") from None
    try:
        config = hf_config(cfg)
    except (ValueError, KeyError) as e:
        raise ConfigError(f"transformers cannot build this config ({e}); pass a decoder-only config.json") from None
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(
            config, attn_implementation="eager", dtype=torch_dtype(dtype)
        )
    return model.eval()


# ---- timing -------------------------------------------------------------------------------------------


def _timed(fn, device: str, repeats: int, warmup: int, reset=None) -> list[float]:
    from llmath.measure.calibrate import sync

    for _ in range(warmup):
        fn()
        if reset:
            reset()
    out = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        out.append(time.perf_counter() - t0)
        if reset:
            reset()
    return out


def crop_to(cache, positions: int) -> None:
    """Cut a transformers cache back to ``positions`` positions (crop takes the count to remove)."""
    n = cache.get_seq_length()
    if n > positions:
        cache.crop(positions - n)


def _module_class(mod) -> str | None:
    import torch

    n = type(mod).__name__
    if isinstance(mod, torch.nn.Linear):
        return "matmul"
    if "Norm" in n:
        return "norm"
    if "Attention" in n or "Rotary" in n:
        return "attention"
    return "elementwise"


def profile_classes(model, fn, device: str) -> dict[str, float]:
    """Seconds of one call of ``fn`` by operator class, from torch.profiler.

    Every module's forward is bracketed by a ``llmath::<class>`` range; each profiled op's self time
    goes to the class of its innermost range (Linear → matmul; *Norm → norm; *Attention/*Rotary →
    attention; anything else, e.g. MLP activation, residual adds, embedding, masks → elementwise).
    CPU self time on CPU; device self time on CUDA.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    stack: list = []
    handles = []

    def pre(mod, args):
        rf = record_function(f"llmath::{_module_class(mod)}")
        rf.__enter__()
        stack.append(rf)

    def post(mod, args, out):
        stack.pop().__exit__(None, None, None)

    for m in model.modules():
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    try:
        with profile(activities=acts) as prof:
            fn()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
    finally:
        for h in handles:
            h.remove()
        while stack:
            stack.pop().__exit__(None, None, None)
    out = dict.fromkeys(CLASSES, 0.0)
    cuda = device.startswith("cuda")
    for ev in prof.events():
        cls = None
        e = ev
        while e is not None:
            if e.name.startswith("llmath::"):
                cls = e.name.split("::", 1)[1]
                break
            e = e.cpu_parent
        if cls is None:
            continue
        t = ev.self_device_time_total if cuda else ev.self_cpu_time_total
        out[cls] += float(t) * 1e-6
    return out


def _llmath_classes(rep) -> dict[str, float]:
    out = dict.fromkeys(CLASSES, 0.0)
    for r in rep.ops:
        if r.kind == "matmul" and r.bytes.get("weight", 0) > 0:
            c = "matmul"
        elif r.component == "attention":
            c = "attention"
        elif r.component == "norm":
            c = "norm"
        else:
            c = "elementwise"
        out[c] += r.time_s or 0.0
    return out


def _breakdown(measured: dict[str, float], predicted: dict[str, float]) -> list[dict[str, Any]]:
    mt, pt = sum(measured.values()) or 1.0, sum(predicted.values()) or 1.0
    return [
        {
            "class": c,
            "measured_s": measured[c],
            "measured_share": measured[c] / mt,
            "predicted_s": predicted[c],
            "predicted_share": predicted[c] / pt,
        }
        for c in CLASSES
    ]


def _err_summary(rows: Sequence[Mapping[str, Any]], key: str = "error") -> dict[str, Any]:
    errs = [r[key] for r in rows if r.get(key) is not None and math.isfinite(r[key])]
    if not errs:
        return {"n": 0, "median_abs_error": None, "worst_error": None}
    worst = max(errs, key=abs)
    return {
        "n": len(errs),
        "median_abs_error": float(statistics.median(abs(e) for e in errs)),
        "worst_error": float(worst),
        "worst_abs_error": abs(float(worst)),
    }


def machine_drift(hw, device: str, dtype: str) -> dict[str, Any] | None:
    """Re-measure, now, one GEMM and the copy that the profile measured (same sizes, same dtype), and give
    now / then. ``None`` when ``hw`` is not a calibrated profile of this dtype.

    A shared machine's speed moves between runs (on the 2-vCPU VM of docs/validation.md the square-GEMM rate
    moved 128 -> 170 GFLOP/s minutes apart); the ratio says how far the machine is from its profile while
    the model is timed. It is reported beside the plain prediction, never folded into it silently.
    """
    from llmath.measure.calibrate import _med, _torch, sync, time_call, torch_dtype

    raw = (hw.measured or {}).get("raw") if isinstance(hw.measured, dict) else None
    if not raw or "copy" not in raw:
        return None
    gemms = [g for g in raw.get("gemm", []) if g.get("dtype") == dtype]
    if not gemms:
        return None
    torch = _torch()
    g = gemms[len(gemms) // 2]
    tdt = torch_dtype(dtype)
    a = torch.randn(g["m"], g["k"], device=device, dtype=tdt)
    b = torch.randn(g["k"], g["n"], device=device, dtype=tdt)
    mm_now = 2 * g["m"] * g["n"] * g["k"] / _med(time_call(lambda a=a, b=b: torch.mm(a, b), device, 5, 1))
    del a, b
    c = raw["copy"]
    src = torch.ones(c["elements"], device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    bw_now = c["bytes_moved"] / _med(time_call(lambda d=dst, s_=src: d.copy_(s_), device, 5, 1))
    del src, dst
    sync(device)
    return {
        "matmul_then": g["flops_per_s"],
        "matmul_now": mm_now,
        "matmul": mm_now / g["flops_per_s"],
        "copy_then": c["bytes_per_s"],
        "copy_now": bw_now,
        "copy": bw_now / c["bytes_per_s"],
        "shape": [g["m"], g["n"], g["k"]],
    }


def _drifted(hw, drift: Mapping[str, Any]):
    """The profile with its ceilings scaled by the drift measured now (fractions unchanged)."""
    return replace(
        hw,
        peak_flops_per_s={k: v * drift["matmul"] for k, v in hw.peak_flops_per_s.items()},
        vector_flops_per_s=(hw.vector_flops_per_s or hw.vector_peak) * drift["matmul"],
        memory_bandwidth_bytes_per_s=hw.memory_bandwidth_bytes_per_s * drift["copy"],
    )


def _row(measured: list[float], rep) -> dict[str, Any]:
    m = float(statistics.median(measured))
    p = float(rep.time_s)
    return {
        "measured_s": m,
        "measured_min_s": float(min(measured)),
        "measured_max_s": float(max(measured)),
        "repeats": len(measured),
        "times_s": measured,
        "predicted_s": p,
        "predicted_compute_s": rep.compute_s,
        "predicted_memory_s": rep.memory_s,
        "bound": rep.bound,
        "ratio": p / m,
        "error": (p - m) / m,
    }


def validate_model(
    model=None,
    hardware=None,
    device: str = "cpu",
    dtype: str = "fp32",
    quick: bool = False,
    progress: bool = True,
    *,
    prompts: Sequence[int] | None = None,
    batches: Sequence[int] | None = None,
    contexts: Sequence[int] | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """Time ``model`` here and compare with llmath's prediction, stage by stage and by operator class.

    ``model``: registry name, config.json path or config dict (``None`` with ``quick``: a tiny Llama).
    ``hardware``: a profile dict / file from :func:`llmath.calibrate.calibrate`, a registry accelerator,
    or ``None`` to calibrate now. ``quick``: a 2-layer, hidden-256 variant and two shapes (seconds).
    ``prompts``/``batches``/``contexts`` override the shapes timed; ``threads`` the torch threads (as
    the calibration used: ``None`` keeps torch's default).
    """
    from llmath.measure.calibrate import _torch, set_threads

    old = set_threads(threads)
    try:
        return _validate_model(model, hardware, device, dtype, quick, progress, prompts, batches, contexts, threads)
    finally:
        if old is not None:
            _torch().set_num_threads(old)


def _validate_model(model, hardware, device, dtype, quick, progress, prompts, batches, contexts, threads):
    from llmath import analysis
    from llmath.hardware.roofline import efficiency
    from llmath.measure.calibrate import Progress, _torch, check_device, cpu_busy_fraction, load_average, torch_dtype
    from llmath.model.dtypes import Precision
    from llmath.model.hf import spec_from_config
    from llmath.ops import Scenario
    from llmath.ops.params import param_report

    torch = _torch()
    device = check_device(device)
    dtype = dtype.lower() if isinstance(dtype, str) else dtype
    torch_dtype(dtype)
    if model is None and not quick:
        raise WorkloadError("validate_model needs a model (a registry name or config.json), or quick=True")
    shapes = dict(QUICK if quick else FULL)
    for k, v in (("prompts", prompts), ("batches", batches), ("contexts", contexts)):
        if v is not None:
            vals = tuple(int(x) for x in v)
            if not vals or any(x < 1 for x in vals):
                raise WorkloadError(f"{k}={v!r} must be a non-empty list of integers >= 1")
            shapes[k] = vals

    name, cfg, source = _model_config(model)
    variant = None
    if quick:
        name, cfg, variant = _tiny_variant(name, cfg)
    else:
        cfg, variant = _fit_layers(
            cfg, name, device, dtype, max(shapes["batches"]), max(shapes["contexts"]), max(shapes["prompts"])
        )
    spec = spec_from_config(cfg, name=name, source=source)
    if spec.is_encoder_decoder:
        raise WorkloadError(f"{name!r} is an encoder-decoder model; validate times decoder-only models")
    top = max(shapes["contexts"]) + 2
    if spec.max_positions and top > spec.max_positions:
        raise WorkloadError(
            f"context {top} exceeds {name}'s max_position_embeddings={spec.max_positions}; pass shorter contexts"
        )

    hw, prof, hw_how = _resolve_hardware(hardware, device, dtype, quick, progress)
    cal_threads = (hw.measured.get("raw") or {}).get("threads") if isinstance(hw.measured, dict) else None
    try:
        hw.peak(dtype)
    except HardwareError:
        raise HardwareError(
            f"hardware {hw.name!r} has no {dtype} peak (it lists {', '.join(sorted(hw.peak_flops_per_s))}); "
            f"calibrate that dtype: llmath calibrate --dtype {dtype}"
        ) from None
    eff = efficiency("expected", hw)
    prec = Precision.uniform(dtype)
    drift = machine_drift(hw, device, dtype)
    hw_now = _drifted(hw, drift) if drift else None

    def with_drift(row: dict[str, Any], stage: str, sc) -> dict[str, Any]:
        if hw_now is not None:
            p = analysis.stage_report(spec, stage, sc, "eager", prec, hw_now, eff).time_s
            row["predicted_drift_s"] = p
            row["error_drift"] = (p - row["measured_s"]) / row["measured_s"]
        return row

    n_steps = 2 + len(shapes["prompts"]) + len(shapes["contexts"]) * len(shapes["batches"]) + 2
    pr = Progress(progress, "validate", n_steps)
    load_before = load_average()
    busy_before = cpu_busy_fraction(0.3)
    pr.step(f"building {name} ({param_report(spec).total:,} parameters, {dtype}, random weights)")
    m = build_model(cfg, device, dtype)
    vocab = spec.vocab_size
    gen = torch.Generator().manual_seed(0)

    def ids(b, t):
        return torch.randint(0, vocab, (b, t), generator=gen).to(device)

    wu = shapes["warmup"]
    prefill_rows, decode_rows = [], []
    with torch.inference_mode():
        # -- prefill: B = 1, several prompt lengths ------------------------------------------------
        for P in sorted(shapes["prompts"]):
            x = ids(1, P)
            ts = _timed(
                lambda x=x: m(input_ids=x, use_cache=True, logits_to_keep=1), device, shapes["prefill_repeats"], wu
            )
            rep = analysis.stage_report(spec, "prefill", Scenario(1, P, 0), "eager", prec, hw, eff)
            prefill_rows.append(with_drift({"batch": 1, "prompt": P, **_row(ts, rep)}, "prefill", Scenario(1, P, 0)))
            pr.step(
                f"prefill P={P}: {statistics.median(ts) * 1e3:.1f} ms measured, {rep.time_s * 1e3:.1f} ms predicted"
            )

        # -- decode: a prefill builds the cache, then single-token steps --------------------------------
        ctxs = sorted(shapes["contexts"], reverse=True)
        base = m(input_ids=ids(1, ctxs[0]), use_cache=True, logits_to_keep=1).past_key_values
        for S in ctxs:
            crop_to(base, S)
            for B in sorted(shapes["batches"]):
                cache = copy.deepcopy(base)
                if B > 1:
                    cache.batch_repeat_interleave(B)
                tok = ids(B, 1)
                ts = _timed(
                    lambda tok=tok, cache=cache: m(
                        input_ids=tok, past_key_values=cache, use_cache=True, logits_to_keep=1
                    ),
                    device,
                    shapes["decode_repeats"],
                    wu,
                    reset=lambda cache=cache, S=S: crop_to(cache, S),
                )
                rep = analysis.stage_report(spec, "decode", Scenario(B, 1, S), "eager", prec, hw, eff)
                decode_rows.append(with_drift({"batch": B, "context": S, **_row(ts, rep)}, "decode", Scenario(B, 1, S)))
                del cache
                pr.step(
                    f"decode B={B} S={S}: {statistics.median(ts) * 1e3:.1f} ms measured, "
                    f"{rep.time_s * 1e3:.1f} ms predicted"
                )

        # -- where the time went, by operator class --------------------------------------------------
        Pp = sorted(shapes["prompts"])[len(shapes["prompts"]) // 2]
        x = ids(1, Pp)
        meas = profile_classes(m, lambda: m(input_ids=x, use_cache=True, logits_to_keep=1), device)
        rep = analysis.stage_report(spec, "prefill", Scenario(1, Pp, 0), "eager", prec, hw, eff)
        breakdown = {"prefill": {"batch": 1, "prompt": Pp, "classes": _breakdown(meas, _llmath_classes(rep))}}
        pr.step(f"profiled prefill P={Pp}")
        S = ctxs[0]
        crop_to(base, S)
        tok = ids(1, 1)
        meas = profile_classes(
            m, lambda: m(input_ids=tok, past_key_values=base, use_cache=True, logits_to_keep=1), device
        )
        rep = analysis.stage_report(spec, "decode", Scenario(1, 1, S), "eager", prec, hw, eff)
        breakdown["decode"] = {"batch": 1, "context": S, "classes": _breakdown(meas, _llmath_classes(rep))}
        pr.step(f"profiled decode B=1 S={S}")
    m = base = None  # free the model before returning

    notes = [
        "random weights; transformers eager attention; logits for the last position only (logits_to_keep=1)",
        "prefill: B = 1, a fresh cache each time; decode: the cache is built by one prefill, replicated over the "
        "batch, and cropped back to the context after each timed step",
        "measured = median of the timed repeats after warm-up; predicted = llmath stage_report(attention='eager') "
        "with the 'expected' efficiency of the hardware",
    ]
    if spec.n_kv_heads != spec.n_heads:
        notes.append(
            f"GQA ({spec.n_heads} query / {spec.n_kv_heads} KV heads): transformers' eager attention copies K/V "
            "to all query heads (repeat_kv) every step; llmath's eager operator list counts that copy"
        )
    notes.append(
        "transformers' DynamicCache appends with torch.cat, copying each layer's whole cache every decode "
        "step; llmath's eager operator list counts that copy (attn.cache_append)"
    )
    if drift:
        notes.append(
            f"machine drift, measured now against the profile: matmul {drift['matmul']:.2f}x, copy "
            f"{drift['copy']:.2f}x; predicted_drift_s uses the profile's ceilings scaled by them"
        )
    if variant:
        notes.append(variant)
    if cal_threads is not None and cal_threads != torch.get_num_threads():
        notes.append(
            f"the profile was measured with {cal_threads} torch threads, this run used "
            f"{torch.get_num_threads()}: pass the same threads to both"
        )
    busy_after = cpu_busy_fraction(0.3)
    busy = max([b for b in (busy_before, busy_after) if b is not None], default=None)
    if busy is not None and busy > 0.2:
        notes.append(
            f"other processes kept {busy:.0%} of the CPUs busy around the run: timings on a busy machine "
            "are inflated and noisy, multi-threaded kernels most of all"
        )
    groups = {
        "prefill": _err_summary(prefill_rows),
        **(
            {
                "prefill_drift_corrected": _err_summary(prefill_rows, "error_drift"),
                "decode_batch1_drift_corrected": _err_summary(
                    [r for r in decode_rows if r["batch"] == 1], "error_drift"
                ),
            }
            if drift
            else {}
        ),
        "decode_batch1": _err_summary([r for r in decode_rows if r["batch"] == 1]),
        "decode_batched": _err_summary([r for r in decode_rows if r["batch"] > 1]),
    }
    return {
        "model": name,
        "model_source": source,
        "variant": variant,
        "params": param_report(spec).total,
        "layers": spec.n_layers,
        "device": device,
        "dtype": dtype,
        "attention": "eager",
        "hardware": hw.name,
        "hardware_source": hw.source,
        "hardware_how": hw_how,
        "hardware_summary": {
            "peak_flops_per_s": hw.peak(dtype),
            "memory_bandwidth_bytes_per_s": hw.memory_bandwidth_bytes_per_s,
            "vector_flops_per_s": hw.vector_peak,
        },
        "efficiency": {k: (list(map(list, v)) if k == "skinny_rows" else v) for k, v in asdict(eff).items()},
        "calibration": prof if hardware is None else None,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "other_processes_cpu_busy": {"before": busy_before, "after": busy_after},
        "prefill": prefill_rows,
        "decode": decode_rows,
        "breakdown": breakdown,
        "summary": groups,
        "drift": drift,
        "notes": notes,
    }


# ---- published measurements ---------------------------------------------------------------------------

_METRIC_KEY = {
    "ttft_s": "ttft_s",
    "tpot_s": "tpot_s",
    "throughput_tok_s": "throughput_tok_s",
    "e2e_s": "e2e_s",
    "prefill_tok_s": "prefill_tok_s",
}


def _published_rows(path: str | Path | None) -> list[dict[str, Any]]:
    if path is None:
        text = (resources.files("llmath") / "data" / "published.json").read_text()
        where = "data/published.json"
    else:
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"{p}: no such published-results file")
        text, where = p.read_text(), str(p)
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: cannot parse ({e}); fix the file") from None
    rows = d.get("results") if isinstance(d, dict) else None
    if not isinstance(rows, list):
        raise ConfigError(f"{where}: expected an object with a 'results' list (schema 1)")
    return rows


def _precision_for(r: Mapping[str, Any]):
    """(Precision, assumptions) for a published row; a weights dtype llmath lacks raises WorkloadError."""
    from llmath.model.dtypes import BITS, Precision

    w = str(r.get("weights_dtype") or "").lower()
    if w not in BITS:
        raise WorkloadError(f"weights dtype {r.get('weights_dtype')!r} is not one llmath models")
    assumed = []
    kv = r.get("kv_dtype")
    if w in ("int8", "int4"):
        act = kv if kv in ("bf16", "fp16") else "bf16"
        assumed.append(f"{w} weight-only: matmuls in {act}")
    else:
        act = w
    if kv is None:
        kv = w if w in ("fp32", "bf16", "fp16") else "fp16"
        assumed.append(f"KV dtype not stated: {kv}")
    return Precision(weights=w, activations=act, kv=kv), assumed


def _layout_for(r: Mapping[str, Any]) -> dict[str, int]:
    """The layout a multi-GPU row states ("TP=4", "tensor parallel 8" in its notes), else TP = n_devices;
    experts TP-sharded (ep = 1) as the engines of these rows ran them. One device: no layout."""
    n = int(r.get("n_devices") or 1)
    if n == 1:
        return {}
    m = re.search(r"\b(?:TP\s*=?\s*|tensor[- ]parallel(?:ism)?\s*(?:=\s*)?)(\d+)", str(r.get("notes") or ""))
    tp = int(m.group(1)) if m else n
    return {"gpus": n, "tp": tp, "ep": 1}


def validate_published(path: str | Path | None = None) -> dict[str, Any]:
    """llmath's ``expected`` prediction for every usable row of the published measurements.

    Usable: model and hardware in llmath's registries (multi-GPU rows on the layout they state), a stated
    batch, prompt and output length, and a dtype llmath models. Every other row is listed under ``skipped``
    with its reason. Attention is ``flash`` (the serving engines' fused kernels).
    """
    import warnings

    from llmath import hardware as hwmod
    from llmath.analysis import analyze
    from llmath.model import registry

    rows, skipped = [], []
    for r in _published_rows(path):
        rid = r.get("id", "?")

        def skip(reason, r=r, rid=rid):
            skipped.append(
                {
                    "id": rid,
                    "model": r.get("model"),
                    "hardware": r.get("hardware"),
                    "metric": r.get("metric"),
                    "reason": reason,
                }
            )

        if r.get("metric") not in _METRIC_KEY:
            skip(f"metric {r.get('metric')!r} is not one llmath predicts")
            continue
        if r.get("value") is None:
            skip("no value in the source")
            continue
        if r.get("model") not in registry.index():
            skip(f"model {r.get('model')!r} is not in llmath's registry")
            continue
        if r.get("hardware") not in hwmod.names():
            skip(f"hardware {r.get('hardware')!r} is not in llmath's registry")
            continue
        if r.get("batch") is None:
            skip("batch not stated (the runtime chose it, or in-flight batching)")
            continue
        if r.get("prompt") is None or r.get("gen") is None:
            skip("prompt or output length not stated")
            continue
        try:
            prec, assumed = _precision_for(r)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a = analyze(
                    r["model"],
                    r["hardware"],
                    batch=int(r["batch"]),
                    prompt=int(r["prompt"]),
                    gen=int(r["gen"]),
                    attention="flash",
                    precision=prec,
                    **_layout_for(r),
                )
        except LLMathError as e:
            skip(str(e))
            continue
        key = _METRIC_KEY[r["metric"]]
        if key == "throughput_tok_s" and r.get("per_device") and a.parallel:
            key = "throughput_tok_s_per_gpu"
        pred = float(a.generation[key])
        meas = float(r["value"])
        rows.append(
            {
                "id": rid,
                "framework": r.get("framework"),
                "model": r["model"],
                "hardware": r["hardware"],
                "batch": r["batch"],
                "prompt": r["prompt"],
                "gen": r["gen"],
                "layout": {k: a.parallel[k] for k in ("tp", "pp", "dp", "ep")} if a.parallel else None,
                "weights": prec.weights,
                "activations": prec.activations,
                "kv_dtype": prec.kv,
                "metric": r["metric"],
                "measured": meas,
                "predicted": pred,
                "ratio": pred / meas,
                "error": (pred - meas) / meas,
                "assumptions": assumed,
                "source": r.get("source"),
            }
        )
    by_metric = {}
    for metric in sorted({r["metric"] for r in rows}):
        by_metric[metric] = _err_summary([r for r in rows if r["metric"] == metric])
    return {
        "efficiency": "expected",
        "attention": "flash",
        "rows": rows,
        "skipped": skipped,
        "summary": {"overall": _err_summary(rows), "by_metric": by_metric},
        "notes": [
            "error = (predicted - measured) / measured; ratio = predicted / measured",
            "nothing in llmath is fitted to these points",
        ],
    }
