"""Kernel-time models fitted to public per-kernel GPU measurements (``data/efficiency_fit.json``).

Every roofline class (``gemm``, ``attn_context``, ``attn_decode``, ``moe``) has one model form with nine
coefficients per measured device and format, ``[c, h1, p1, h2, p2, mem, hm, pm, t0]``::

    sat(x; h, p) = 1 / (1 + (h / x)^p)                 rises from 0 to 1; ≈ (x / h)^p well below h
    ηc = c · sat(x1; h1, p1) · sat(x2; h2, p2)         fraction of the dense datasheet matmul peak
    ηm = mem · sat(xm; hm, pm)                         fraction of the datasheet memory bandwidth
    t  = t0 + max(FLOPs / (peak · ηc), bytes / (bandwidth · ηm))

``t0`` is the per-kernel overhead (launch and tail, in seconds). The features per class:

* ``gemm``: x1 = m (token rows), x2 = n·k (weight size), xm = bytes. A kernel computes whole tiles of T rows
  (:func:`tile_rows`, by architecture), so its compute fraction is at least the tile's share of real rows at
  the large-GEMM fraction, ``c · sat(x2) · m / (T · ⌈m / T⌉)`` (:func:`tile_share`): at a few rows the kernel
  (a GEMV or split-K GEMM) is bound by the bytes it streams, on every device.
* ``attn_context`` (causal, flash): x1 = S (context), x2 = B·H·S (query rows × heads), xm = bytes.
* ``attn_decode``: x1 = B·H (query rows), x2 = S + 1 (positions read), xm = bytes (mostly the KV cache);
  its compute term is at the vector (CUDA-core) peak, not the tensor peak (:func:`peak_for`).
* ``moe`` (grouped expert GEMMs, gated): x1 = tokens per expert, x2 = hidden · inter, xm = bytes; the same
  tile floor as ``gemm`` (an expert's rows are padded to one tile): at a few tokens per expert the grouped
  GEMM streams the weights of the experts hit.

Collectives (``all_reduce``, ``all_gather``, ``custom_all_reduce``) are ``t = α + bytes / β`` per rank count.

The returned fractions never exceed 1 (``c``, ``mem`` ≤ 1 and ``sat`` < 1), so the fitted kernel time never
beats the datasheet roofline. Devices without measurements inherit by the rule in :func:`resolve`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

import numpy as np

from llmath.errors import UnknownNameError, WorkloadError
from llmath.ops.mla import absorbed_flops_per_head
from llmath.ops.routing import experts_hit

ROOFLINE_CLASSES = ("gemm", "attn_context", "attn_decode", "moe", "attn_mla_context")
COLLECTIVES = ("all_reduce", "all_gather", "custom_all_reduce")
# formats the tables measure; fp16 runs at the bf16 tensor rate on every fitted device
FORMAT_ALIASES = {"fp16": "bf16", "bf16": "bf16", "fp8": "fp8"}
# experts stored in a format whose grouped kernel the tables time apart (``moe`` fits keyed by it): block-scaled
# FP8 (one scale per 128 × 128 block) runs other kernels than per-tensor FP8, slower at prefill sizes
# (NVFP4: no device-wide fit; the key of TensorRT-LLM's CUTLASS kernel, engine_moe_kernel)
MOE_STORAGE = {"fp8-block": "fp8_block", "fp8_block": "fp8_block", "w4a16_mxfp4": "w4a16_mxfp4",
               "w4a8_mxfp4_mxfp8": "w4a8_mxfp4_mxfp8", "nvfp4": "nvfp4"}  # fmt: skip
MOE_STORAGE_RUNS = {"fp8_block": "fp8"}  # the format such a kernel computes and streams its weights in
# 4-bit float experts (MXFP4, NVFP4) dequantised into a 16-bit grouped GEMM where the device has no fp4 peak
# (Hopper): the weight-only kernel the tables time as ``w4a16_mxfp4`` (aiconfigurator-core ``sdk/common.py``:
# "native data format for gpt oss", GPT-OSS's triton_kernels MXFP4 path), computing at the bf16 peak and
# streaming MXFP4 weights: 32 e2m1 values + one e8m0 scale = 17 bytes per 32 (OCP MX v1.0)
MOE_WEIGHT_ONLY = {"w4a16_mxfp4": "bf16"}
# the engines that serve with that kernel: TensorRT-LLM's PyTorch flow (the tables' ``moe_torch_flow``). vLLM on
# Hopper runs gpt-oss's MXFP4 experts with Marlin (InferenceX's H100 and H200 vLLM launchers), which the tables
# time only at another expert shape: its decode keeps the GEMM models (docs/efficiency.md, scripts/fit_launcher_moe.py)
MOE_WEIGHT_ONLY_ENGINES = {"w4a16_mxfp4": ("trtllm",)}
# grouped-expert kernels a launcher picks, by the format key their tables time them under, and the format their MMA
# runs in (its peak): MXFP4 weights dequantised into bf16 (vLLM's Marlin), MXFP4 weights × MXFP8 activations
# (FlashInfer's TensorRT-LLM-generated MoE: tcgen05 kind::mxf8f6f4, the fp8 rate)
# (PTX ISA, "TensorCore 5th Generation"), block-scaled FP8 (vLLM's Triton fused MoE: FP8 MMA); and the family of the
# experts' stored format each applies to
LAUNCHER_MOE_RUNS = {"w4a16_mxfp4": "bf16", "w4a8_mxfp4_mxfp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
LAUNCHER_MOE_STORED = {"w4a16_mxfp4": "fp4", "w4a8_mxfp4_mxfp8": "fp4", "fp8_block": "fp8", "nvfp4": "fp4"}
# the kernels by name (EngineConfig.moe_kernel): vLLM's Marlin MoE (VLLM_MXFP4_USE_MARLIN=1 on Hopper), FlashInfer's
# MXFP4 × MXFP8 MoE (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 on Blackwell), vLLM's Triton block-FP8 MoE (what
# VLLM_USE_FLASHINFER_MOE_FP8=0 with VLLM_MOE_USE_DEEP_GEMM=0 leaves), TensorRT-LLM's TRTLLM-gen MoE over MXFP4
# experts with MXFP8 activations (moe_config.backend TRTLLM on sm100: W4A8_MXFP4_MXFP8), its CUTLASS MoE over NVFP4
# experts (moe_config.backend CUTLASS, W4A4 NVFP4), its DeepGEMM MoE over block-FP8 experts (backend DEEPGEMM) and
# its TensorRT-LLM-generated block-scale MoE (backend TRTLLM on B200, the kernel FlashInfer wraps as
# trtllm_fp8_block_scale_moe, timed in vLLM's B200 table: TensorRT-LLM's own times only DEEPGEMM there) and the same
# backend over NVFP4 experts (FlashInfer's trtllm_fp4_block_scale_moe, timed in vLLM 0.19.0's B200 table: TensorRT-LLM's
# own times only its CUTLASS NVFP4 MoE); their fits: engine_moe_kernel. TensorRT-LLM's Triton MoE over MXFP4 experts
# with bf16 activations (moe_config.backend TRITON on sm90: W4A16_MXFP4) has no such fit (the engine's own
# w4a16_mxfp4 MoE model times it); the name counts its launches (ops/launches.py MOE_PATH_LAUNCHES)
LAUNCHER_MOE_KERNELS = (
    "marlin", "flashinfer_mxfp8", "triton_fp8_block", "trtllm_gen_mxfp8", "trtllm_cutlass_nvfp4",
    "trtllm_deepgemm_fp8_block", "trtllm_gen_fp8_block", "trtllm_gen_nvfp4", "vllm_deepgemm_fp8_block",
    "trtllm_triton_mxfp4",
)  # fmt: skip
# kernels that pad each local expert to a row alignment whatever the routing, by that alignment
# (hardware/aligned_moe.py): vLLM 0.12.0's DeepGEMM contiguous MoE (128, DeepGEMM's
# get_mk_alignment_for_contiguous_layout)
ALIGNED_MOE_KERNELS = {"vllm_deepgemm_fp8_block": 128}
# launcher kernels whose tables time the served models' own expert shapes (MiniMax-M2.5's in vLLM's Triton table;
# the TensorRT-LLM-generated kernels at ten and eleven shapes; DeepSeek-R1's in TensorRT-LLM's CUTLASS NVFP4 and
# DeepGEMM block-FP8 tables): they time decode passes too, not only prefill
LAUNCHER_MOE_DECODE = (
    "triton_fp8_block", "trtllm_gen_fp8_block", "trtllm_cutlass_nvfp4", "trtllm_deepgemm_fp8_block", "trtllm_gen_nvfp4",
)  # fmt: skip
# each engine's own grouped block-FP8 MoE kernel, by the engine-default kernel its per-kernel tables time (the
# kernels the aiconfigurator-core 0.12.0 collectors ran each engine's FP8 MoE layer with: vLLM 0.24.0 FlashInfer's
# TensorRT-LLM MoE on B200 and its Triton experts on Hopper, SGLang 0.5.14 FlashInfer's TensorRT-LLM MoE on B200
# and its Triton fused MoE on Hopper); an engine or device without one keeps the ``moe`` ``fp8_block`` fit
# (TensorRT-LLM's DeepGEMM on B200, its CUTLASS MoE on Hopper). Fits: engine_moe_kernel (scripts/fit_launcher_moe.py)
ENGINE_FP8_BLOCK_MOE = {
    "vllm": ("trtllm_gen_fp8_block", "vllm_triton_fp8_block"),
    "sglang": ("sglang_flashinfer_fp8_block", "sglang_triton_fp8_block"),
}
# each engine's own grouped NVFP4 MoE kernel where its per-kernel tables time it: vLLM's NVFP4 MoE oracle
# (vllm/model_executor/layers/fused_moe/oracle/nvfp4.py, select_nvfp4_moe_backend, vllm-project/vllm edd45a17c7e3
# and 01362014633d) tries FlashInfer's TensorRT-LLM-generated MoE first (its monolithic kernel before the modular
# one), which vLLM 0.24.0's and 0.19.0's B200 tables time; SGLang runs the same FlashInfer kernel
# (trtllm_fp4_block_scale_moe) for DeepSeek-V3 and Qwen3 MoE checkpoints in modelopt_fp4 on sm100, its MoE runner
# "auto" set to flashinfer_trtllm (python/sglang/srt/server_args.py; layers/quantization/modelopt_quant.py
# ModelOptNvFp4FusedMoEMethod.apply, layers/moe/moe_runner/flashinfer_trtllm.py, sglang 0.5.9 wheel), which SGLang
# 0.5.14's B200 table times; fits: engine_moe_kernel (scripts/fit_launcher_moe.py)
ENGINE_NVFP4_MOE = {"vllm": ("vllm_flashinfer_nvfp4",), "sglang": ("sglang_flashinfer_nvfp4",)}
# the engines whose MoE kernel of a format spends a time per token of the layer on every expert-parallel rank
# (``moe_ep_token``, fitted per engine to its own table by scripts/fit_moe_ep_token.py): TensorRT-LLM's weight-only
# MXFP4 MoE on Hopper; SGLang's FlashInfer NVFP4 MoE, whose rank under EP (no all-to-all dispatcher: every rank gets
# every token) takes the EP-1 time over EP plus ~10 ns per token of the layer in SGLang 0.5.14's B200 table under a
# plain top-k router and ~0.14 µs under DeepSeek-R1's grouped one; and vLLM's, the same FlashInfer kernel (monolithic
# under TP + EP, modular under DP + EP: trtllm_nvfp4_moe.py, TrtLlmNvFp4ExpertsMonolithic._supports_parallel_config),
# ~9 ns per token of the layer in vLLM 0.24.0's B200 table at MiniMax-M2.5's shape, ~0.15 µs at DeepSeek-R1's (grouped)
MOE_EP_TOKEN_ENGINES = {"w4a16_mxfp4": ("trtllm",), "nvfp4": ("sglang", "vllm")}
# NVFP4: 16 e2m1 values + one e4m3 scale = 9 bytes per 16 (NVIDIA's NVFP4, docs/formats.md)
BYTES = {"bf16": 2, "fp8": 1, "fp8_block": 1, "w4a16_mxfp4": 17 / 32, "w4a8_mxfp4_mxfp8": 17 / 32, "nvfp4": 9 / 16}
# Rows of one tensor-core GEMM tile: Hopper's wgmma instructions are m64 (PTX ISA, "Asynchronous Warpgroup
# Level Matrix Multiply-Accumulate") and datacenter Blackwell's tcgen05.mma has M = 64 or 128 (PTX ISA,
# "TensorCore 5th Generation"); Volta to Ada and consumer Blackwell (GeForce, RTX PRO, GB10) issue mma.sync of
# 16 rows (PTX ISA, "Matrix shape": m16n8k16). A GEMM of m rows computes ⌈m / T⌉ tiles; fewer rows never take
# longer than one tile.
TILE_ROWS = {"hopper": 64, "blackwell": 64, "blackwell-ultra": 64}
MMA_SYNC_ROWS = 16
TILED_CLASSES = ("gemm", "moe")


@lru_cache(maxsize=1)
def data() -> dict:
    """The fitted coefficients, their provenance and the inheritance tables."""
    return json.loads((resources.files("llmath") / "data" / "efficiency_fit.json").read_text())


def sat(x, h, p):
    """1 / (1 + (h / x)^p): 0 → 1 as x grows past h."""
    return sat_positive(np.maximum(np.asarray(x, dtype=float), 1e-30), h, p)


def sat_positive(x: np.ndarray, h, p):
    """:func:`sat` of a float array already ≥ 1e-30 (rows, at least one): the same values, two array passes
    fewer (the roofline asks per serving iteration)."""
    return 1.0 / (1.0 + (h / x) ** p)


def tile_rows(arch: str) -> int:
    """Rows of one tensor-core tile on an NVIDIA architecture (``TILE_ROWS``; mma.sync's 16 otherwise)."""
    return TILE_ROWS.get(arch, MMA_SYNC_ROWS)


def tile_share(rows, tile: int):
    """m / (tile · ⌈m / tile⌉): the share of the computed tile rows that are real rows (1 at whole tiles)."""
    return tile_share_positive(np.maximum(np.asarray(rows, dtype=float), 1e-30), tile)


def tile_share_positive(r: np.ndarray, tile: int):
    """:func:`tile_share` of a float array already ≥ 1e-30. Rows within ``WHOLE_TILE_SLACK`` tiles above a whole
    tile count fill that many: a token count that is whole but summed from fractional terms (a mean iteration's
    decoders plus its chunks × their mean size) lands an ulp either side of it depending on how numpy evaluated the
    terms (one concurrency or an array of them), and must not start a new tile."""
    return r / (tile * np.maximum(np.ceil(r / tile - WHOLE_TILE_SLACK), 1.0))


WHOLE_TILE_SLACK = 1e-9  # tiles: far above the float error of a token count (~1e-16 relative), far below a row


def fractions(coef, x1, x2, xm, tile: int = 0):
    """(ηc, ηm, t0) of one coefficient vector at the features; ``tile`` (rows; GEMM and MoE classes, x1 the
    rows of one GEMM; 0: none): ηc is at least the large-GEMM fraction on the tile's real rows."""
    return fractions_at(coef, x1, sat(x2, coef[3], coef[4]), xm, tile)


def fractions_at(coef, x1, s2, xm, tile: int = 0):
    """:func:`fractions` with the second feature's saturation ``s2`` = sat(x2; h2, p2) given (a caller whose x2
    is fixed computes it once)."""
    c, h1, p1, _, _, mem, hm, pm, t0 = coef
    s1 = sat(x1, h1, p1)
    if tile:
        s1 = np.maximum(s1, tile_share(x1, tile))
    return c * s1 * s2, mem * sat(xm, hm, pm), t0


def model_time(coef, x1, x2, xm, flops, bytes_, peak, bandwidth, tile: int = 0):
    """Kernel seconds of the model form (see the module docstring)."""
    ec, em, t0 = fractions(coef, x1, x2, xm, tile)
    return t0 + np.maximum(np.asarray(flops) / (peak * ec), np.asarray(bytes_) / (bandwidth * em))


# ---- shape → (x1, x2, xm, FLOPs, bytes) per class ----------------------------------------------------


def gemm_cost(m, n, k, fmt: str):
    """A (m×k)·(k×n) GEMM: 2·m·n·k FLOPs; reads A and B in ``fmt`` once, writes C in 16-bit."""
    b = BYTES[fmt]
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    bytes_ = b * (m * k + k * n) + 2 * m * n
    return m, n * k, bytes_, 2 * m * n * k, bytes_


def attn_context_cost(batch, context, heads, kv_heads, head_dim, fmt: str, kv_fmt: str):
    """Causal flash attention over S new tokens: S(S+1)/2 pairs × 2 products × 2 FLOPs × H·d per sequence;
    Q read and O written in ``fmt`` (O in 16-bit), K and V read once in ``kv_fmt``."""
    B, S, H, K, d = (np.asarray(v, dtype=float) for v in (batch, context, heads, kv_heads, head_dim))
    flops = 2 * B * H * d * S * (S + 1)
    bytes_ = B * S * H * d * (BYTES[fmt] + 2) + 2 * B * S * K * d * BYTES[kv_fmt]
    return S, B * H * S, bytes_, flops, bytes_


def attn_decode_cost(batch, context, heads, kv_heads, head_dim, kv_fmt: str):
    """One query token per sequence attending S + 1 positions: 4·B·H·d·(S+1) FLOPs; reads K and V of the
    S + 1 positions in ``kv_fmt`` and Q, writes O (16-bit)."""
    B, S, H, K, d = (np.asarray(v, dtype=float) for v in (batch, context, heads, kv_heads, head_dim))
    u = S + 1
    flops = 4 * B * H * d * u
    bytes_ = 2 * B * u * K * d * BYTES[kv_fmt] + 2 * 2 * B * H * d
    return B * H, u, bytes_, flops, bytes_


def mla_decode_cost(batch, context, heads, latent: int, rope: int, kv_fmt: str):
    """Multi-head latent attention's absorbed decode kernel: one query token per sequence and head attending S + 1
    cached positions of ``latent`` + ``rope`` values, scores over latent + rope and values over the latent,
    2·(2·latent + rope) FLOPs per head per position (16-bit products); reads the cache in ``kv_fmt``, the queries
    (16-bit) and writes the outputs (16-bit)."""
    B, S, H = (np.asarray(v, dtype=float) for v in (batch, context, heads))
    u, w = S + 1, latent + rope
    flops = B * H * u * absorbed_flops_per_head(latent, rope)
    bytes_ = B * u * w * BYTES[kv_fmt] + 2 * B * H * (w + latent)
    return B * H, u, bytes_, flops, bytes_


def mla_context_cost(batch, context, heads, qk_dim, v_dim, fmt: str, kv_fmt: str):
    """Multi-head latent attention's prefill over S new tokens, heads decompressed: S(S+1)/2 causal pairs × H ×
    2·(qk + v) FLOPs per sequence; Q read in ``fmt`` and O written (16-bit), each head's K (qk) and V (v) read
    once in ``kv_fmt``."""
    B, S, H, q, v = (np.asarray(x, dtype=float) for x in (batch, context, heads, qk_dim, v_dim))
    flops = B * H * S * (S + 1) * (q + v)
    bytes_ = mla_context_bytes(B, S, H, q, v, fmt, kv_fmt)
    return S, B * H * S, bytes_, flops, bytes_


def mla_context_bytes(B, S, H, q, v, fmt: str, kv_fmt: str):
    """:func:`mla_context_cost`'s bytes alone (its memory feature): the same arithmetic, float arrays or numbers."""
    bsh = B * S * H
    return bsh * (q * BYTES[fmt] + v * 2) + bsh * (q + v) * BYTES[kv_fmt]


def moe_cost(tokens, hidden, inter, topk, experts, fmt: str, routing: str | None = None):
    """Gated expert MLPs (gate, up, down: 3·hidden·inter weights each) over T tokens routed to top-k of E
    experts: 6·T·k·hidden·inter FLOPs; weights of the experts hit, in ``fmt``; the T·k routed activations read
    and written in 16-bit (in, intermediate, out). Experts hit: E·(1 − (1 − 1/E)^(T·k)) (the T·k routed picks
    independent and uniform: the form the shipped ``moe`` fits use), or under ``routing`` one of
    :data:`llmath.ops.routing.ROUTINGS` (``balanced``: min(E, T·k); ``power_law``: aiconfigurator's skewed rows)."""
    T, h, i, k, E = (np.asarray(v, dtype=float) for v in (tokens, hidden, inter, topk, experts))
    bytes_ = moe_bytes(T, h, i, k, E, fmt, routing)
    return T * k / E, h * i, bytes_, 6 * T * k * h * i, bytes_


def moe_bytes(T, h, i, k, E, fmt: str, routing: str | None = None):
    """:func:`moe_cost`'s bytes alone (its memory feature): ``T`` a float array, the sizes float arrays or
    numbers (the same arithmetic)."""
    picks = T * k
    hit = E * (1 - (1 - 1 / E) ** picks) if routing is None else _experts_hit(T, k, E, routing)
    return hit * 3 * h * i * BYTES[fmt] + picks * (2 * h + 2 * i) * 2


def _experts_hit(T, k, E, routing: str):
    """:func:`llmath.ops.routing.experts_hit` over arrays of (top-k, experts) too (a table's rows)."""
    if k.ndim == 0 and E.ndim == 0:
        return experts_hit(T, int(E), int(k), routing)
    T, k, E = np.broadcast_arrays(T, k, E)
    hit = np.empty(T.shape)
    for kk, ee in {(int(a), int(b)) for a, b in zip(k.ravel(), E.ravel(), strict=True)}:
        sel = (k == kk) & (E == ee)
        hit[sel] = experts_hit(T[sel], ee, kk, routing)
    return hit


COST: dict[str, Callable[..., tuple]] = {
    "gemm": gemm_cost,
    "attn_context": attn_context_cost,
    "attn_decode": attn_decode_cost,
    "moe": moe_cost,
    "attn_mla_context": mla_context_cost,
}


# ---- devices without measurements -------------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """Which measured device supplies ``device``'s coefficients, and the rule that chose it."""

    device: str
    measured_on: str | None
    rule: str


@cache
def resolve(device: str) -> Resolved:
    """The measured device whose fractions ``device`` uses, at ``device``'s own peaks (once per name: the fits
    are read once, :func:`data`).

    Rule, in order: (1) ``measured``: the device has fits. (2) ``same-arch``: another device of the same
    architecture (``arch`` table) has fits: the architecture's ``reference`` device. (3) ``nearest-arch``:
    same vendor, its architecture unmeasured: the reference of the nearest measured architecture in
    ``arch_order`` (release order; the older one on a tie). (4) ``none``: no fit (other vendors, CPUs,
    Apple); the caller keeps its scalar defaults.
    """
    d = data()
    fits = d["devices"]
    if device in fits:
        return Resolved(device, device, "measured")
    arch = d["arch"].get(device)
    refs = d["arch_reference"]
    if arch is None:
        return Resolved(device, None, "none")
    if arch in refs:
        return Resolved(device, refs[arch], f"same-arch: {refs[arch]} ({arch})")
    order = d["arch_order"]
    i = order.index(arch)
    measured = sorted((abs(order.index(a) - i), order.index(a), a) for a in refs)
    a = measured[0][2]
    return Resolved(device, refs[a], f"nearest-arch: {refs[a]} ({a} for {arch})")


def device_tile(device: str) -> int:
    """Tile rows of a registry device's architecture (:func:`tile_rows`); 16 for a name not in the registry."""
    from llmath.hardware.registry import get, names

    return tile_rows(get(device).arch) if device in names() else MMA_SYNC_ROWS


def coefficients(device: str, cls: str, fmt: str) -> tuple[list[float] | None, Resolved]:
    """The coefficient vector for ``cls`` in ``fmt`` on ``device`` (``None`` where no fit applies)."""
    if cls not in ROOFLINE_CLASSES:
        raise UnknownNameError(f"efficiency class {cls!r} is not one of {', '.join(ROOFLINE_CLASSES)}")
    r = resolve(device)
    f = FORMAT_ALIASES.get(fmt) or (MOE_STORAGE.get(fmt) if cls == "moe" else None)
    if r.measured_on is None or f is None:
        return None, r
    entry = data()["devices"][r.measured_on].get(cls, {}).get(f)
    return (entry["coef"] if entry else None), r


@dataclass(frozen=True)
class Fit:
    """Fitted fractions at one shape: ``compute`` of the matmul peak, ``memory`` of the bandwidth, the
    per-kernel ``overhead_s``, and which rule supplied them."""

    compute: float
    memory: float
    overhead_s: float
    rule: str
    measured_on: str


def evaluate(device: str, cls: str, fmt: str, x1: float, x2: float, xm: float) -> Fit | None:
    """The fitted fractions of ``cls`` in ``fmt`` at features (x1, x2, xm) on ``device``; ``None`` without a
    fit (rule ``none``, or a format the device's tables do not measure)."""
    coef, r = coefficients(device, cls, fmt)
    if coef is None:
        return None
    if min(x1, x2, xm) <= 0:
        raise WorkloadError(f"efficiency features ({x1}, {x2}, {xm}) must be > 0")
    ec, em, t0 = fractions(coef, x1, x2, xm, device_tile(device) if cls in TILED_CLASSES else 0)
    return Fit(float(ec), float(em), float(t0), r.rule, r.measured_on or "")


def fit_format(cls: str, shape: dict) -> str:
    """The format a class's fits are keyed by: the KV-cache format for decode attention, else ``fmt``."""
    return shape["kv_fmt"] if cls == "attn_decode" else shape["fmt"]


def kernel_time(device: str, cls: str, peak: float, bandwidth: float, **shape) -> float | None:
    """Predicted seconds of one kernel of ``cls`` with ``shape`` (the arguments of its ``*_cost``
    function, formats included) at ``peak`` FLOP/s and ``bandwidth`` bytes/s (``device``'s datasheet)."""
    key = fit_format(cls, shape)
    runs = {**shape, "fmt": MOE_STORAGE_RUNS.get(key, key)} if cls == "moe" else shape
    x1, x2, xm, flops, bytes_ = COST[cls](**runs)
    fit = evaluate(device, cls, key, float(x1), float(x2), float(xm))
    if fit is None:
        return None
    return fit.overhead_s + max(float(flops) / (peak * fit.compute), float(bytes_) / (bandwidth * fit.memory))


def peak_for(cls: str, hw, fmt: str) -> float:
    """The peak a class's compute term is fitted against: the dense matmul peak of ``fmt``, except decode
    attention, which runs on the CUDA cores (the vector peak), and MLA prefill attention, whose products run in
    16-bit whatever the KV cache's format (every context MLA row: ``mla_dtype`` bfloat16)."""
    if cls == "attn_mla_context":
        return hw.peak("bf16")
    runs = MOE_STORAGE_RUNS.get(fmt) or MOE_WEIGHT_ONLY.get(fmt, fmt)
    return hw.vector_peak if cls == "attn_decode" else hw.peak(FORMAT_ALIASES.get(fmt, runs))


def kernel_time_on(hw, cls: str, **shape) -> float | None:
    """:func:`kernel_time` on a :class:`llmath.hardware.Hardware` at its own datasheet peaks."""
    peak = peak_for(cls, hw, fit_format(cls, shape))
    return kernel_time(hw.name, cls, peak, hw.memory_bandwidth_bytes_per_s, **shape)


def collective_time(device: str, op: str, ranks: int, bytes_: float) -> tuple[float, str] | None:
    """(seconds, rule) of a collective of ``bytes_`` per rank over ``ranks`` GPUs: α + bytes / β of the
    measured rank count (``None`` where the device, by its rule, or the rank count has no fit)."""
    coef = collective_coef(device, op, ranks)
    if coef is None:
        return None
    alpha, beta = coef
    return alpha + bytes_ / beta, resolve(device).rule


def collective_coef(device: str, op: str, ranks: int) -> tuple[float, float] | None:
    """(α s, β bytes/s) of :func:`collective_time`'s fit (``None`` where it has none)."""
    if op not in COLLECTIVES:
        raise UnknownNameError(f"collective {op!r} is not one of {', '.join(COLLECTIVES)}")
    r = resolve(device)
    if r.measured_on is None:
        return None
    entry = data()["devices"][r.measured_on].get(op, {}).get(str(int(ranks)))
    if entry is None:
        return None
    alpha, beta = entry["coef"]
    return alpha, beta


def fp8_static_gemm_overhead(device: str) -> tuple[float, float] | None:
    """(per-kernel seconds, quantiser seconds) of an FP8 weight GEMM whose input arrives already quantised.

    The fp8 GEMM fit's ``t0`` is fitted to kernels that quantise their bf16 input *dynamically*: the source
    collector (aiconfigurator ``collector/trtllm/collect_gemm.py``) loads FP8 weights without an input scale,
    so TensorRT-LLM's ``Linear`` runs ``quantize_e4m3_per_tensor`` (an amax pass, then scale-and-cast) before
    the scaled GEMM (``FP8QDQLinearMethod.apply``). The same package measures both quantiser pieces
    (``collector/trtllm/collect_computescale.py``: ``compute_scale`` = dynamic − static, ``scale_matrix`` = the
    static scale-and-cast); their small-activation medians are ``fp8_quantize`` in the data
    (``scripts/fit_quantize.py``). Engines with a calibrated scale run no amax pass, and fuse the scale-and-cast
    into the kernel that produces the activation: TensorRT fuses a trailing Quantize layer into the preceding
    layer (TensorRT developer guide, "Explicit Quantization", Q/DQ fusion), and TensorRT-LLM's ``apply`` skips
    quantisation when its input is already FP8. So both pieces are taken off the fp8 ``t0``, never below the bf16
    GEMM's ``t0``. ``None`` without the fits (rule of :func:`resolve`)."""
    r = resolve(device)
    if r.measured_on is None:
        return None
    dev = data()["devices"][r.measured_on].get("gemm", {})
    q = data().get("fp8_quantize", {}).get("devices", {}).get(r.measured_on)
    if q is None or "fp8" not in dev or "bf16" not in dev:
        return None
    quant = float(q["compute_scale_s"]) + float(q["static_quantize_s"])
    return max(float(dev["fp8"]["coef"][8]) - quant, float(dev["bf16"]["coef"][8])), quant


def fp8_decode_gemm(device: str) -> list[float] | None:
    """GEMM-form coefficients of an FP8 weight GEMM in a decode step on ``device`` (its measured device, rule of
    :func:`resolve`): fitted by ``scripts/fit_decode_gemm.py`` to the fp8 GEMM rows of at most 64 tokens less the
    activation quantiser each row's kernel ran (the package times both at the same m, k), i.e. the kernel an engine
    runs on an input quantised upstream. ``None`` where the device's tables have no such fit."""
    e = data().get("fp8_decode_gemm", {}).get("devices", {}).get(resolve(device).measured_on or "")
    return [float(v) for v in e["coef"]] if e else None


DEFAULT_FP4_ENGINE = "vllm"  # llmath's default engine (llmath.hardware.kernels.DEFAULT_ENGINE)


def fp4_gemm(device: str, engine: str = DEFAULT_FP4_ENGINE) -> tuple[float, float, float, float] | None:
    """(per-kernel seconds, fraction of the bandwidth, reduction elements per second, large-GEMM share of the
    dense FP4 peak) of ``engine``'s NVFP4 weight GEMM on ``device`` (its measured device, rule of
    :func:`resolve`), fitted to the engine's own per-kernel table by ``scripts/fit_fp4_gemm.py``:
    ``t = t0 + max(k / rate, bytes / (bandwidth · mem))`` over the rows of at most 64 tokens, the share over the
    larger ones. ``None`` where the device has no NVFP4 tables, the engine has no table, or its table does not
    time what the engine serves with (the entry's ``why``: TensorRT-LLM's untuned tactic)."""
    r = resolve(device)
    e = data().get("fp4_gemm", {}).get("devices", {}).get(r.measured_on or "", {}).get(engine)
    if not (e and e["applied"]):
        return None
    return float(e["t0_s"]), float(e["mem"]), float(e["kloop_per_s"]), float(e["compute"])


def engine_moe_kernel(device: str, kernel: str, fmt: str) -> list[float] | None:
    """The ``moe`` coefficients of the grouped-expert ``kernel`` an engine's launcher picked (``marlin``: vLLM's
    Marlin MoE under ``VLLM_MXFP4_USE_MARLIN``) over ``fmt`` experts on ``device`` (its measured device, rule of
    :func:`resolve`), fitted to that kernel's per-kernel table by ``scripts/fit_launcher_moe.py``; ``None``
    where no table times it."""
    r = resolve(device)
    e = data().get("engine_moe_kernel", {}).get("devices", {}).get(r.measured_on or "", {}).get(kernel, {})
    entry = e.get(fmt)
    return entry["coef"] if entry else None


def moe_ep_token(device: str, fmt: str, engine: str, grouped: bool = False) -> float | None:
    """Seconds per token of the layer one expert-parallel rank of ``engine``'s ``fmt`` MoE kernel spends beyond its
    share on ``device`` (its measured device, rule of :func:`resolve`), fitted to ``engine``'s own table by
    ``scripts/fit_moe_ep_token.py`` (:mod:`llmath.hardware.moe_ep_token`): under a plain top-k router, or with
    ``grouped`` under a grouped top-k one (the value fitted to grouped-routed rows; the plain one where the
    table times none); ``None`` where no table of ``engine`` times the kernel under EP."""
    r = resolve(device)
    e = data().get("moe_ep_token", {}).get("devices", {}).get(r.measured_on or "", {}).get(engine, {}).get(fmt)
    if not e:
        return None
    return float(e["s_per_token_grouped"] if grouped and "s_per_token_grouped" in e else e["s_per_token"])


def engine_nvfp4_moe(device: str, engine: str) -> list[float] | None:
    """``engine``'s own NVFP4 MoE coefficients on ``device`` (:data:`ENGINE_NVFP4_MOE`); ``None`` where there is
    none (the experts keep the GEMM models)."""
    kernels = ENGINE_NVFP4_MOE.get(engine, ())
    return next((c for k in kernels if (c := engine_moe_kernel(device, k, "nvfp4")) is not None), None)


def engine_fp8_block_moe(device: str, engine: str) -> list[float] | None:
    """``engine``'s own block-FP8 MoE coefficients on ``device`` (:data:`ENGINE_FP8_BLOCK_MOE`, the first of its
    kernels fitted there); ``None`` where there is none (the ``moe`` ``fp8_block`` fit applies)."""
    kernels = ENGINE_FP8_BLOCK_MOE.get(engine, ())
    return next((c for k in kernels if (c := engine_moe_kernel(device, k, "fp8_block")) is not None), None)


def engine_attn_decode(device: str, engine: str, kv_fmt: str) -> list[float] | None:
    """``engine``'s own ``attn_decode`` coefficients over a ``kv_fmt`` KV cache on ``device`` (its measured
    device, rule of :func:`resolve`), fitted to that engine's decode-attention table by
    ``scripts/fit_engine_attention.py`` (vLLM's and SGLang's FlashAttention-3 over an fp8 cache on Hopper);
    ``None`` where there is none (the TensorRT-LLM fit applies)."""
    r = resolve(device)
    e = data().get("engine_attn_decode", {}).get("devices", {}).get(r.measured_on or "", {}).get(engine, {})
    entry = e.get(FORMAT_ALIASES.get(kv_fmt, kv_fmt))
    return entry["coef"] if entry else None


def engine_mla_decode(device: str, engine: str, kv_fmt: str) -> list[float] | None:
    """``engine``'s own MLA decode-kernel coefficients over a ``kv_fmt`` cache on ``device`` (its measured device,
    rule of :func:`resolve`), fitted to that engine's MLA generation table by ``scripts/fit_mla_decode.py``
    (``attn_mla_decode``: the ``attn_decode`` form with its context and bytes saturations held at 1, so the
    fractions follow the query rows alone); ``None`` where there is none (the roofline's scalar fractions)."""
    r = resolve(device)
    e = data().get("engine_mla_decode", {}).get("devices", {}).get(r.measured_on or "", {}).get(engine, {})
    entry = e.get(FORMAT_ALIASES.get(kv_fmt, kv_fmt))
    return entry["coef"] if entry else None
