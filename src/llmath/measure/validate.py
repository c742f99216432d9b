"""Measured vs predicted: time a real model on the machine at hand, or compare with published numbers.

:func:`validate_model` builds a model from its config with random weights (transformers, eager
attention: what runs on CPU), times prefills over several prompt lengths and single decode steps at
several batches and contexts (warm-up, medians of repeats), predicts the same scenarios with
:func:`llmath.pass_report.stage_report` on a calibrated profile (or a registry accelerator) with the
``expected`` efficiency, and reports the ratio. It also profiles one prefill and one decode step with
``torch.profiler`` and groups the time by operator class (matmul, attention, norm, elementwise) next
to llmath's operator list grouped the same way.

:func:`validate_published` (:mod:`llmath.measure.published`, re-exported here) compares llmath's
``expected`` predictions with the published serving measurements of ``data/published.json``. Nothing is
fitted to those points. :mod:`llmath.measure.subject` picks and builds the model timed.

Nothing here prints except progress lines on stderr when ``progress=True``.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any

from llmath.errors import HardwareError, WorkloadError
from llmath.measure.published import err_summary, validate_published
from llmath.measure.subject import _fit_layers, _model_config, _resolve_hardware, _tiny_variant, build_model

__all__ = ["CLASSES", "build_model", "validate_model", "validate_published"]

CLASSES = ("matmul", "attention", "norm", "elementwise")

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
    mm_now = 2 * g["m"] * g["n"] * g["k"] / _med(time_call(partial(torch.mm, a, b), device, 5, 1))
    del a, b
    c = raw["copy"]
    src = torch.ones(c["elements"], device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    bw_now = c["bytes_moved"] / _med(time_call(partial(dst.copy_, src), device, 5, 1))
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
    ``hardware``: a profile dict / file from :func:`llmath.measure.calibrate.calibrate`, a registry accelerator,
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
    from llmath.measure.calibrate import Progress, _torch, check_device, cpu_busy_fraction, load_average, torch_dtype

    torch = _torch()
    device = check_device(device)
    dtype = dtype.lower() if isinstance(dtype, str) else dtype
    torch_dtype(dtype)
    if model is None and not quick:
        raise WorkloadError("validate_model needs a model (a registry name or config.json), or quick=True")
    shapes = _shapes(quick, prompts, batches, contexts)
    r = _subject(model, quick, device, dtype, shapes)
    r.hw, prof, hw_how = _hardware(hardware, device, dtype, quick, progress)
    cal_threads = (r.hw.measured.get("raw") or {}).get("threads") if isinstance(r.hw.measured, dict) else None
    drift = r.start(torch)
    n_steps = 2 + len(shapes["prompts"]) + len(shapes["contexts"]) * len(shapes["batches"]) + 2
    r.progress = Progress(progress, "validate", n_steps)
    load_before, busy_before = load_average(), cpu_busy_fraction(0.3)
    r.build()
    with torch.inference_mode():
        prefill_rows = _time_prefill(r)
        ctxs = sorted(shapes["contexts"], reverse=True)
        decode_rows, base = _time_decode(r, ctxs)
        breakdown = _profile_breakdown(r, base, ctxs[0])
    r.model = base = None  # free the model before returning
    notes = _notes(r, drift, cal_threads)
    busy_after = cpu_busy_fraction(0.3)
    busy = max([b for b in (busy_before, busy_after) if b is not None], default=None)
    if busy is not None and busy > 0.2:
        notes.append(
            f"other processes kept {busy:.0%} of the CPUs busy around the run: timings on a busy machine "
            "are inflated and noisy, multi-threaded kernels most of all"
        )
    return {
        **_header(r, hw_how, prof if hardware is None else None),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "other_processes_cpu_busy": {"before": busy_before, "after": busy_after},
        "prefill": prefill_rows,
        "decode": decode_rows,
        "breakdown": breakdown,
        "summary": _summary(prefill_rows, decode_rows, drift),
        "drift": drift,
        "notes": notes,
    }


def _shapes(quick: bool, prompts, batches, contexts) -> dict[str, Any]:
    """The shapes timed: the quick or full defaults, with the given overrides checked."""
    shapes = dict(QUICK if quick else FULL)
    for k, v in (("prompts", prompts), ("batches", batches), ("contexts", contexts)):
        if v is not None:
            vals = tuple(int(x) for x in v)
            if not vals or any(x < 1 for x in vals):
                raise WorkloadError(f"{k}={v!r} must be a non-empty list of integers >= 1")
            shapes[k] = vals
    return shapes


@dataclass
class _Run:
    """One validation run: the model (spec, config, torch model), the hardware and its prediction settings."""

    name: str
    source: str
    variant: str | None
    cfg: dict[str, Any]
    spec: Any  # ModelSpec
    device: str
    dtype: str
    shapes: dict[str, Any]
    hw: Any = None
    hw_now: Any = None  # the profile scaled by the drift measured now (None: no drift measured)
    eff: Any = None
    prec: Any = None
    torch: Any = None
    progress: Any = None
    model: Any = None
    gen: Any = None

    def start(self, torch: Any) -> dict[str, Any] | None:
        """Efficiency, precision and machine drift for the prediction; returns the drift."""
        from llmath.hardware.roofline import efficiency
        from llmath.model.dtypes import Precision

        self.torch = torch
        self.eff = efficiency("expected", self.hw)
        self.prec = Precision.uniform(self.dtype)
        drift = machine_drift(self.hw, self.device, self.dtype)
        self.hw_now = _drifted(self.hw, drift) if drift else None
        return drift

    def build(self) -> None:
        from llmath.ops.params import param_report

        self.progress.step(
            f"building {self.name} ({param_report(self.spec).total:,} parameters, {self.dtype}, random weights)"
        )
        self.model = build_model(self.cfg, self.device, self.dtype)
        self.gen = self.torch.Generator().manual_seed(0)

    def ids(self, b: int, t: int) -> Any:
        return self.torch.randint(0, self.spec.vocab_size, (b, t), generator=self.gen).to(self.device)

    def forward(self, ids: Any, cache: Any = None) -> Any:
        """One forward with logits for the last position only (a fresh cache when ``cache`` is None)."""
        if cache is None:
            return self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        return self.model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)

    def predict(self, stage: str, sc: Any, hw: Any = None) -> Any:
        from llmath import pass_report

        return pass_report.stage_report(self.spec, stage, sc, "eager", self.prec, hw or self.hw, self.eff)

    def row(self, keys: dict[str, Any], ts: list[float], stage: str, sc: Any) -> dict[str, Any]:
        """Measured vs predicted for one scenario (and the drift-corrected prediction when measured)."""
        row = {**keys, **_row(ts, self.predict(stage, sc))}
        if self.hw_now is not None:
            p = self.predict(stage, sc, self.hw_now).time_s
            row["predicted_drift_s"] = p
            row["error_drift"] = (p - row["measured_s"]) / row["measured_s"]
        return row

    def step(self, what: str, row: dict[str, Any]) -> None:
        self.progress.step(
            f"{what}: {row['measured_s'] * 1e3:.1f} ms measured, {row['predicted_s'] * 1e3:.1f} ms predicted"
        )


def _subject(model, quick: bool, device: str, dtype: str, shapes: Mapping[str, Any]) -> _Run:
    """The model to time (a tiny variant with ``quick``, else cut to the layers that fit) and its spec."""
    from llmath.model.hf import spec_from_config

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
    return _Run(name, source, variant, cfg, spec, device, dtype, dict(shapes))


def _hardware(hardware, device: str, dtype: str, quick: bool, progress: bool):
    """(Hardware, profile dict or None, how it was obtained); the hardware must list ``dtype``'s peak."""
    hw, prof, hw_how = _resolve_hardware(hardware, device, dtype, quick, progress)
    try:
        hw.peak(dtype)
    except HardwareError:
        raise HardwareError(
            f"hardware {hw.name!r} has no {dtype} peak (it lists {', '.join(sorted(hw.peak_flops_per_s))}); "
            f"calibrate that dtype: llmath calibrate --dtype {dtype}"
        ) from None
    return hw, prof, hw_how


def _time_prefill(r: _Run) -> list[dict[str, Any]]:
    """Prefill: B = 1, several prompt lengths, a fresh cache each time."""
    from llmath.ops import Scenario

    rows = []
    for P in sorted(r.shapes["prompts"]):
        x = r.ids(1, P)
        ts = _timed(lambda x=x: r.forward(x), r.device, r.shapes["prefill_repeats"], r.shapes["warmup"])
        rows.append(r.row({"batch": 1, "prompt": P}, ts, "prefill", Scenario(1, P, 0)))
        r.step(f"prefill P={P}", rows[-1])
    return rows


def _time_decode(r: _Run, ctxs: list[int]) -> tuple[list[dict[str, Any]], Any]:
    """Decode: one prefill builds the cache; each step runs on a copy replicated over the batch and is
    cropped back to the context after each timed repeat. Returns the rows and the base cache."""
    from llmath.ops import Scenario

    base = r.forward(r.ids(1, ctxs[0])).past_key_values
    rows = []
    for S in ctxs:
        crop_to(base, S)
        for B in sorted(r.shapes["batches"]):
            cache = copy.deepcopy(base)
            if B > 1:
                cache.batch_repeat_interleave(B)
            tok = r.ids(B, 1)
            ts = _timed(
                lambda tok=tok, cache=cache: r.forward(tok, cache),
                r.device,
                r.shapes["decode_repeats"],
                r.shapes["warmup"],
                reset=lambda cache=cache, S=S: crop_to(cache, S),
            )
            rows.append(r.row({"batch": B, "context": S}, ts, "decode", Scenario(B, 1, S)))
            del cache
            r.step(f"decode B={B} S={S}", rows[-1])
    return rows, base


def _profile_breakdown(r: _Run, base: Any, S: int) -> dict[str, Any]:
    """Where the time went, by operator class: one prefill (the middle prompt) and one decode step at S."""
    from llmath.ops import Scenario

    Pp = sorted(r.shapes["prompts"])[len(r.shapes["prompts"]) // 2]
    x = r.ids(1, Pp)
    meas = profile_classes(r.model, lambda: r.forward(x), r.device)
    pred = _llmath_classes(r.predict("prefill", Scenario(1, Pp, 0)))
    out = {"prefill": {"batch": 1, "prompt": Pp, "classes": _breakdown(meas, pred)}}
    r.progress.step(f"profiled prefill P={Pp}")
    crop_to(base, S)
    tok = r.ids(1, 1)
    meas = profile_classes(r.model, lambda: r.forward(tok, base), r.device)
    pred = _llmath_classes(r.predict("decode", Scenario(1, 1, S)))
    out["decode"] = {"batch": 1, "context": S, "classes": _breakdown(meas, pred)}
    r.progress.step(f"profiled decode B=1 S={S}")
    return out


def _notes(r: _Run, drift: Mapping[str, Any] | None, cal_threads: int | None) -> list[str]:
    spec, threads = r.spec, r.torch.get_num_threads()
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
    if r.variant:
        notes.append(r.variant)
    if cal_threads is not None and cal_threads != threads:
        notes.append(
            f"the profile was measured with {cal_threads} torch threads, this run used {threads}: "
            "pass the same threads to both"
        )
    return notes


def _summary(prefill_rows: list[dict[str, Any]], decode_rows: list[dict[str, Any]], drift) -> dict[str, Any]:
    """Error summaries per group (drift-corrected ones too when drift was measured)."""
    b1 = [r for r in decode_rows if r["batch"] == 1]
    corrected = (
        {"prefill_drift_corrected": err_summary(prefill_rows, "error_drift"),
         "decode_batch1_drift_corrected": err_summary(b1, "error_drift")}
        if drift
        else {}
    )  # fmt: skip
    return {
        "prefill": err_summary(prefill_rows),
        **corrected,
        "decode_batch1": err_summary(b1),
        "decode_batched": err_summary([r for r in decode_rows if r["batch"] > 1]),
    }


def _header(r: _Run, hw_how: str, calibration: dict[str, Any] | None) -> dict[str, Any]:
    """What was timed, on what, predicted how."""
    from llmath.ops.params import param_report

    hw, spec = r.hw, r.spec
    return {
        "model": r.name,
        "model_source": r.source,
        "variant": r.variant,
        "params": param_report(spec).total,
        "layers": spec.n_layers,
        "device": r.device,
        "dtype": r.dtype,
        "attention": "eager",
        "hardware": hw.name,
        "hardware_source": hw.source,
        "hardware_how": hw_how,
        "hardware_summary": {
            "peak_flops_per_s": hw.peak(r.dtype),
            "memory_bandwidth_bytes_per_s": hw.memory_bandwidth_bytes_per_s,
            "vector_flops_per_s": hw.vector_peak,
        },
        "efficiency": {k: (list(map(list, v)) if k == "skinny_rows" else v) for k, v in asdict(r.eff).items()},
        "calibration": calibration,
        "torch": r.torch.__version__,
        "threads": r.torch.get_num_threads(),
    }
