"""The kernel class an engine runs a quantised weight format in on a device (``data/format_kernels.json``).

A checkpoint or ``--weights`` states the weights' format; the engine and the device decide the GEMM's input
format. vLLM, SGLang and TensorRT-LLM run FP8 weights as W8A8 where the tensor cores have fp8 (Ada, Hopper,
Blackwell, MI300) and as FP8 Marlin W8A16 elsewhere; NVFP4 as W4A4 on Blackwell and FP4 Marlin W4A16 elsewhere;
AWQ/GPTQ as Marlin W4A16; MXFP4 (gpt-oss) as MXFP4 × MXFP8 on datacenter Blackwell under SGLang and
TensorRT-LLM, W4A16 under vLLM and on other devices. Each rule carries its source. An explicit activations
format (``--activations``, ``--dtype``, a Precision built by the caller, a checkpoint's own ``act_quant``)
is never changed.

Where an engine's own matrix-multiplication op was timed on a device (``mul_mat`` in the JSON: llama.cpp's
``test-backend-ops``), its weight GEMMs run at that measured rate there, and on parts of the same architecture
at the same fraction of their dense peak where the entry says the rate transfers (:func:`engine_efficiency`).
The rate replaces the compute fraction of a fitted GEMM model too: those were fitted to other engines' kernels.

Engines also differ in how they accumulate 16-bit GEMMs: llama.cpp on NVIDIA accumulates in FP16, which
GeForce parts run at twice the FP32-accumulate rate the registry lists (``accumulate`` in the JSON, each
device's FP16-accumulate figure from its architecture whitepaper); :func:`engine_hardware` applies it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from importlib import resources
from typing import Any

from llmath.errors import WorkloadError
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.efficiency import Efficiency, efficiency
from llmath.hardware.execution import executed
from llmath.hardware.registry import Hardware
from llmath.hardware.registry import get as get_hardware
from llmath.model import formats as fmt
from llmath.model.dtypes import Precision

DEFAULT_ENGINE = "vllm"


@lru_cache(maxsize=1)
def data() -> dict:
    return json.loads((resources.files("llmath") / "data" / "format_kernels.json").read_text())


def check_engine(engine: str) -> str:
    """``engine`` if it is one the rules know, else a usage error naming them."""
    names = data()["engines"]
    if not isinstance(engine, str) or engine not in names:
        raise WorkloadError(f"engine={engine!r} is not one of {', '.join(names)}; e.g. --engine vllm")
    return engine


def _matches(rule: dict, weights: str, engine: str, hw: Hardware) -> bool:
    return (
        weights in rule["weights"]
        and engine in rule["engines"]
        and ("needs_peak" not in rule or rule["needs_peak"] in hw.peak_flops_per_s)
        and ("vendors" not in rule or hw.vendor in rule["vendors"])
        and ("archs" not in rule or hw.arch in rule["archs"])
    )


def rule_for(weights: str, engine: str, hw: Hardware) -> dict | None:
    """The first rule of ``data/format_kernels.json`` for ``weights`` under ``engine`` on ``hw``."""
    return next((r for r in data()["rules"] if _matches(r, weights, engine, hw)), None)


def accumulate_rule(hw: Hardware, engine: str) -> dict | None:
    """The ``accumulate`` rule giving ``engine`` another 16-bit tensor rate on ``hw``, or None."""
    rules = data().get("accumulate", {}).get("rules", [])
    return next(
        (
            r
            for r in rules
            if engine in r["engines"] and hw.vendor in r["vendors"] and hw.name in r["fp16_accumulate_flops_per_s"]
        ),
        None,
    )


def engine_hardware(hw: Hardware | None, engine: str = DEFAULT_ENGINE) -> Hardware | None:
    """``hw`` with the tensor rate ``engine``'s 16-bit GEMMs run at: the FP16-accumulate figure where the
    engine accumulates in FP16 and the device runs that faster than FP32 accumulation (GeForce); else ``hw``."""
    rule = accumulate_rule(hw, engine) if hw is not None else None
    if hw is None or rule is None:
        return hw
    rate = float(rule["fp16_accumulate_flops_per_s"][hw.name][0])
    peaks = dict(hw.peak_flops_per_s) | {rule["dtype"]: max(rate, hw.peak_flops_per_s.get(rule["dtype"], 0.0))}
    return replace(hw, peak_flops_per_s=peaks)


def _implied(p: Precision) -> bool:
    """Whether the GEMM-input format is left to the engine: the weights' format was declared (checkpoint or
    flag) and neither the activations nor a GEMM-input format were."""
    src = dict(p.sources)
    return p.act_quant is None and "weights" in src and "activations" not in src


def engine_precision(p: Precision, hw: Hardware | None, engine: str = DEFAULT_ENGINE) -> Precision:
    """``p`` with the GEMM-input format ``engine`` runs its declared weights with on ``hw`` (see the module)."""
    check_engine(engine)
    if hw is None or not _implied(p):
        return p
    rule = rule_for(p.weights, engine, hw)
    if rule is None or rule["activations"] is None:
        return p
    src = dict(p.sources) | {"act_quant": f"{engine} on {hw.name}: {rule['kernel']}"}
    return replace(p, act_quant=rule["activations"], sources=src)


def as_run(p: Precision, hw: Hardware | None, engine: str = DEFAULT_ENGINE) -> tuple[Precision, Hardware | None]:
    """``p`` and ``hw`` as ``engine`` runs them: :func:`engine_precision` and :func:`engine_hardware`."""
    return engine_precision(p, hw, engine), engine_hardware(hw, engine)


def kernel_report(p: Precision, hw: Hardware | None, engine: str = DEFAULT_ENGINE) -> dict[str, Any]:
    """The ``precision.kernel`` entry of ``analyze --json``: the default weights' GEMM class (W·A· bits of the
    weights and of the format the GEMM runs in), the engine, and why (the rule and its source, a checkpoint's
    stated GEMM inputs, a flag, or a device fallback)."""
    asked = p.compute
    runs = executed(hw, asked)[0] if hw is not None else asked
    wbits = int(fmt.get(p.weights).bits)
    out: dict[str, Any] = {"class": f"W{wbits}A{fmt.WIDTH[runs]}", "weights": p.weights, "runs_in": runs}
    out["engine"] = engine
    src = dict(p.sources)
    rule = rule_for(p.weights, engine, hw) if hw is not None else None
    if "act_quant" in src:
        out["why"] = src["act_quant"]
    elif "activations" in src:
        out["why"] = f"activations {p.activations} ({src['activations']})"
    elif rule is not None and _implied(p):
        out["why"] = f"{engine} on {hw.name if hw else '?'}: {rule['kernel']}"
    else:
        out["why"] = "formats as given"
    if runs != asked:
        out["why"] += f"; {asked} GEMMs run in {runs} on {hw.name if hw else '?'} (no {asked} peak)"
    out["source"] = rule["source"] if rule is not None else None
    acc = accumulate_rule(hw, engine) if hw is not None else None
    if acc is not None and hw is not None:
        rate, src = acc["fp16_accumulate_flops_per_s"][hw.name]
        out["accumulate"] = {"dtype": acc["dtype"], "kernel": acc["kernel"], "kernel_source": acc["source"]}
        out["accumulate"] |= {"flops_per_s": rate, "source": src}
    return out


def _mul_mat_entry(hw: Hardware, engine: str) -> tuple[dict, str] | None:
    """(``mul_mat`` entry, device it was measured on) that applies to ``hw`` under ``engine``: one measured on
    ``hw`` itself, else one whose ``transfer`` names ``hw``'s architecture (the same kernels, picked by the
    same architecture check, on a sibling part of the vendor)."""
    rates = [r for r in data().get("mul_mat", {}).get("rates", []) if engine in r["engines"]]
    own = next((r for r in rates if hw.name in r["devices"]), None)
    if own is not None:
        return own, hw.name
    for r in rates:
        t = r.get("transfer")
        if t is not None and hw.arch == t["arch"] and hw.vendor == get_hardware(r["devices"][0]).vendor:
            return r, r["devices"][0]
    return None


def mul_mat_rate(hw: Hardware, engine: str, weights: str, runs: str = "fp16") -> tuple[float, str, str] | None:
    """(FLOP/s, measured line and how it applies, source) of ``engine``'s matrix-multiplication op for
    ``weights`` on ``hw`` at a prompt's token columns, from ``mul_mat`` in the JSON; a quantised format not
    measured there takes the rate of the entry's ``other_quantised`` format. On a sibling of the measured part
    (``transfer``) the rate is the same fraction of the dense ``runs`` peak, each part's as ``engine`` runs it
    (:func:`engine_hardware`). ``None`` where neither the device nor its architecture was measured."""
    got = _mul_mat_entry(hw, engine)
    if got is None:
        return None
    r, ref = got
    rates = r["tflops"]
    key = weights if weights in rates else None
    if key is None and fmt.get(weights).compute is None and fmt.get(weights).bits < 16:
        key = r.get("other_quantised")
    if key is None:
        return None
    tflops, line = rates[key]
    if ref == hw.name:
        return float(tflops) * 1e12, line, r["source"]
    measured = get_hardware(ref)
    mine, theirs = engine_hardware(hw, engine) or hw, engine_hardware(measured, engine) or measured
    if runs not in theirs.peak_flops_per_s or runs not in mine.peak_flops_per_s:
        return None
    share = float(tflops) * 1e12 / theirs.peak_flops_per_s[runs]
    arch = r["transfer"]["arch"]
    how = f"{line} on {ref}: {100 * share:.1f}% of its dense {runs} peak, carried to {hw.name} ({arch})"
    return share * mine.peak_flops_per_s[runs], how, r["source"]


def mul_mat_stream(hw: Hardware, engine: str, weights: str) -> tuple[float, str, str] | None:
    """(fraction of the bandwidth, measured line and how it applies, source) at which ``engine``'s one-token
    mat-vec op streams ``weights`` on ``hw``, from ``mul_mat.streams`` in the JSON; ``None`` where not measured."""
    for r in data().get("mul_mat", {}).get("streams", []):
        if engine in r["engines"] and hw.name in r["devices"] and weights in r["formats"]:
            return float(r["fraction"]), f"{r['line']} on {r['measured_on']}", r["source"]
    return None


def engine_efficiency(eff: Efficiency, hw: Hardware | None, p: Precision, engine: str = DEFAULT_ENGINE) -> Efficiency:
    """``eff`` with the weight GEMMs' compute rate ``engine``'s measured op reaches on ``hw`` or its
    architecture (:func:`mul_mat_rate`) as ``engine_matmul``, at every row count; a fitted GEMM model keeps its
    memory fraction and per-kernel time (it was fitted to another engine's kernels, whose compute rate the
    measurement replaces); and, where the engine's one-token mat-vec op was measured (:func:`mul_mat_stream`),
    the weight GEMMs' stream fraction as ``engine_stream``. ``eff`` unchanged where nothing was measured or the
    mode is not ``expected``."""
    if hw is None or eff.name != "expected":
        return eff
    runs = executed(hw, p.compute)[0]
    got = mul_mat_rate(hw, engine, p.weights, runs) if runs in hw.peak_flops_per_s else None
    if got is not None:
        rate, line, source = got
        rule = f"{eff.rule}; weight GEMMs at {engine}'s measured rate on {hw.name}: {line} ({source})"
        eff = replace(eff, engine_matmul=min(1.0, rate / hw.peak_flops_per_s[runs]), rule=rule)
    stream = mul_mat_stream(hw, engine, p.weights)
    if stream is not None:
        frac, line, source = stream
        rule = f"{eff.rule}; weight streams at {engine}'s measured mat-vec fraction {frac:.3f}: {line} ({source})"
        eff = replace(eff, engine_stream=frac, rule=rule)
    return eff


# Engines that load a layer's q, k, v projections, and a gated FFN's gate and up, as one weight matrix each and run
# them as one GEMM (docs/efficiency.md, "Fused projections in decode steps"): vLLM ``QKVParallelLinear`` /
# ``MergedColumnParallelLinear``, SGLang the same, TensorRT-LLM ``WeightMode.FUSED_QKV_LINEAR`` /
# ``FUSED_GATE_UP_LINEAR``. llama.cpp multiplies by ``wq``, ``wk`` and ``wv`` one at a time (``src/llama-model.cpp``,
# ``build_lora_mm(model.layers[il].wq, cur)`` ...): not fused.
FUSED_PROJECTION_ENGINES = ("vllm", "sglang", "trtllm")


def engine_fp4_gemm(eff: Efficiency, hw: Hardware | None, engine: str = DEFAULT_ENGINE) -> Efficiency:
    """``eff`` with ``engine``'s own NVFP4 GEMM model on ``hw`` (:func:`llmath.hardware.efficiency_fit.fp4_gemm`,
    fitted to that engine's per-kernel table) where ``eff`` has one (a fitted device that runs fp4); none (the
    general fractions) for an engine whose table does not time what it serves with; without the decode passes'
    fused projections (``fused_gemms``) for an engine outside :data:`FUSED_PROJECTION_ENGINES`; and, where ``eff``
    has the
    fitted MoE models, the weight-only 4-bit MoE kernel's fit for the engines that run it
    (:data:`llmath.hardware.efficiency_fit.MOE_WEIGHT_ONLY_ENGINES`)."""
    if hw is None:
        return eff
    eff = _engine_kernels(eff, hw, engine)
    if eff.fused_gemms and engine not in FUSED_PROJECTION_ENGINES:
        eff = replace(eff, fused_gemms=False)
    if eff.fp4_gemm is None:
        return eff
    return replace(eff, fp4_gemm=ef.fp4_gemm(hw.name, engine))


def _engine_kernels(eff: Efficiency, hw: Hardware, engine: str) -> Efficiency:
    """``eff`` with the ``moe`` fits of the weight-only kernels ``engine`` serves with on ``hw``, of its own
    block-FP8 and NVFP4 MoE kernels (:func:`_engine_fp8_block_moe`, :func:`_engine_nvfp4_moe`) and the time per token
    under expert parallelism of the kernels that spend one (class ``moe_ep_token``: under a plain and under a
    grouped top-k router, by
    :data:`llmath.hardware.efficiency_fit.MOE_EP_TOKEN_ENGINES`: :mod:`llmath.hardware.moe_ep_token`), where
    ``eff`` carries fitted MoE models (not ``ideal``, a calibrated profile or a given matmul fraction); and with
    ``engine``'s own fp8-KV decode-attention fit in place of
    TensorRT-LLM's where one was fitted (:func:`llmath.hardware.efficiency_fit.engine_attn_decode`); and, with the
    fitted MoE models, ``engine``'s own MLA decode kernel's fits (:func:`_engine_mla_decode`)."""
    fits = eff.kernel_fits
    own = ef.engine_attn_decode(hw.name, engine, "fp8")
    if own is not None and any(k[:2] == ("attn_decode", "fp8") for k in fits):
        fits = tuple(("attn_decode", "fp8", tuple(own)) if k[:2] == ("attn_decode", "fp8") else k for k in fits)
    if any(cls == "moe" for cls, _, _ in fits):
        fits = _engine_fp8_block_moe(fits, hw, engine)
        fits = _engine_nvfp4_moe(fits, hw, engine)
        have = {(cls, f) for cls, f, _ in fits}
        fits += tuple(
            ("moe", f, tuple(c))
            for f, engines in ef.MOE_WEIGHT_ONLY_ENGINES.items()
            if engine in engines and ("moe", f) not in have and (c := ef.coefficients(hw.name, "moe", f)[0]) is not None
        )
        fits += tuple(
            ("moe_ep_token", f, (s, ef.moe_ep_token(hw.name, f, engine, grouped=True) or s))
            for f, engines in ef.MOE_EP_TOKEN_ENGINES.items()
            if engine in engines
            and ("moe_ep_token", f) not in have
            and (s := ef.moe_ep_token(hw.name, f, engine)) is not None
        )
        fits += _engine_mla_decode(fits, hw, engine)
    return replace(eff, kernel_fits=fits) if fits != eff.kernel_fits else eff


def _engine_mla_decode(fits: tuple, hw: Hardware, engine: str) -> tuple:
    """``engine``'s own MLA decode-kernel fits on ``hw`` (class ``attn_mla_decode``, by KV format:
    :func:`llmath.hardware.efficiency_fit.engine_mla_decode`) not already in ``fits``; none where its table was
    not fitted (the absorbed decode attention keeps the roofline's scalar fractions)."""
    have = {(cls, f) for cls, f, _ in fits}
    return tuple(
        ("attn_mla_decode", kv, tuple(c))
        for kv in ("bf16", "fp8")
        if ("attn_mla_decode", kv) not in have and (c := ef.engine_mla_decode(hw.name, engine, kv)) is not None
    )


def _engine_fp8_block_moe(fits: tuple, hw: Hardware, engine: str) -> tuple:
    """``fits`` with ``engine``'s own block-FP8 MoE kernel's ``moe`` fit on ``hw`` in place of the device's
    (:func:`llmath.hardware.efficiency_fit.engine_fp8_block_moe`), in prefill and decode alike."""
    own = ef.engine_fp8_block_moe(hw.name, engine)
    if own is None:
        return fits
    kept = tuple(k for k in fits if k[:2] != ("moe", "fp8_block"))
    return kept + (("moe", "fp8_block", tuple(own)),)


def _engine_nvfp4_moe(fits: tuple, hw: Hardware, engine: str) -> tuple:
    """``fits`` with ``engine``'s own NVFP4 MoE kernel's ``moe`` fit on ``hw``
    (:func:`llmath.hardware.efficiency_fit.engine_nvfp4_moe`), in prefill and decode alike: its tables time the
    kernel at the served models' expert shapes."""
    own = ef.engine_nvfp4_moe(hw.name, engine)
    if own is None:
        return fits
    return tuple(k for k in fits if k[:2] != ("moe", "nvfp4")) + (("moe", "nvfp4", tuple(own)),)


def launcher_moe_kernel(eff: Efficiency, hw: Hardware | None, kernel: str, decode: bool = False) -> Efficiency:
    """``eff`` with the grouped-expert ``kernel`` a launcher picked (``EngineConfig.moe_kernel``, one of
    :data:`llmath.hardware.efficiency_fit.LAUNCHER_MOE_KERNELS`) for the prefill passes' routed experts (class
    ``moe_prefill``), for each format whose per-kernel table times that kernel on ``hw``
    (:func:`llmath.hardware.efficiency_fit.engine_moe_kernel`), where ``eff`` carries fitted MoE models; ``eff``
    unchanged for an empty ``kernel``, no device, or no such table. Decode keeps the engine's default model (the
    tables time these kernels at other expert shapes, whose per-layer time and small-batch memory terms do not carry
    over: docs/efficiency.md, "MoE kernels as InferenceX's vLLM launchers pick them"), except for the kernels of
    :data:`llmath.hardware.efficiency_fit.LAUNCHER_MOE_DECODE`, whose fits replace the ``moe`` one too. A kernel
    over 4-bit float experts (MXFP4) drops the engine's own NVFP4 MoE fit (:func:`_engine_nvfp4_moe`) and that
    kernel's time per token under EP: the launcher's kernel runs every pass, so decode keeps the GEMM models there.
    ``decode``: the kernel's fit times the decode passes as well, whatever the kernel (a server configured with it
    runs it in every pass, and its table times the served model's expert shape)."""
    if not kernel or hw is None or not any(cls == "moe" for cls, _, _ in eff.kernel_fits):
        return eff
    if kernel in ef.ALIGNED_MOE_KERNELS:  # every pass, timed by the GEMM model at padded rows (hardware/aligned_moe.py)
        return replace(eff, moe_aligned_rows=ef.ALIGNED_MOE_KERNELS[kernel])
    got = {f: tuple(c) for f in ef.LAUNCHER_MOE_RUNS if (c := ef.engine_moe_kernel(hw.name, kernel, f)) is not None}
    if not got:
        return eff
    classes = ("moe_prefill", "moe") if decode or kernel in ef.LAUNCHER_MOE_DECODE else ("moe_prefill",)
    kept = tuple(k for k in eff.kernel_fits if not (k[0] in classes and k[1] in got))
    if any(ef.LAUNCHER_MOE_STORED[f] == "fp4" for f in got):  # 4-bit experts: the engine's NVFP4 kernel does not run
        kept = tuple(k for k in kept if k[:2] not in (("moe", "nvfp4"), ("moe_ep_token", "nvfp4")))
    return replace(eff, kernel_fits=kept + tuple((c, f, fit) for c in classes for f, fit in got.items()))


def run_efficiency(mode, hw: Hardware | None, p: Precision, engine: str, overrides: dict) -> Efficiency | None:
    """The efficiency ``mode`` on ``hw`` with ``overrides``, and ``engine``'s measured GEMM rate there where the
    mode is ``expected`` and no matmul fraction was given (:func:`engine_efficiency`); ``None`` without a device."""
    if hw is None:
        return None
    eff = engine_fp4_gemm(efficiency(mode, hw, **overrides), hw, engine)
    if mode != "expected" or overrides.get("matmul") is not None:
        return eff
    return engine_efficiency(eff, hw, p, engine)
