"""A replica as an engine runs it: the :class:`~llmath.deploy.step.Device` whose iteration cost carries the engine's
hardware, precision, launch and host terms. :func:`llmath.serve` (``llmath analyze``),
:func:`llmath.deploy.disagg.serve_disaggregated` (``llmath analyze --disagg``) and the planner (``llmath plan``, its
aggregated layouts, its disaggregated grid and its finalists) build their devices here, so a planner row is
``serve`` or ``serve_disaggregated`` on its layout at its concurrency.

:func:`engine_terms` gives the device, the formats and the efficiency as the engine runs them on it (every path);
:func:`engine_device` an aggregated replica with the engine's launch and host terms; :func:`pool_device` one
disaggregated pool's replica.

From the engine's settings (:class:`~llmath.deploy.engine_config.EngineConfig`): the largest pass replayed from a
CUDA graph and the host time per launch of the others (:mod:`.graph_passes`; ``eager_prefill``: every pass that
prefills runs eagerly), the piecewise graphs' per-attention-call floor of a pass that prefills (graphs on and
prefill not eager), the per-routed-expert-layer term of a pass that prefills, the decode capture cap and the host
time per step (:mod:`.host_step`); and the grouped-expert kernel a launcher picked, in the efficiency
(:func:`llmath.hardware.kernels.launcher_moe_kernel`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmath.deploy.graph_passes import decode_graph_cap, eager_host_time, graph_tokens
from llmath.deploy.host_step import engine_host_step
from llmath.deploy.step import Device
from llmath.hardware.kernels import engine_fp4_gemm, engine_hardware, engine_precision, launcher_moe_kernel
from llmath.hardware.roofline import efficiency

if TYPE_CHECKING:
    from llmath.deploy.engine_config import EngineConfig
    from llmath.deploy.layout import Layout
    from llmath.hardware import Hardware
    from llmath.hardware.roofline import Efficiency
    from llmath.model.dtypes import Precision
    from llmath.model.spec import ModelSpec


def engine_terms(hw: Hardware, p: Precision, engine: str, mode: str) -> tuple[Hardware, Precision, Efficiency]:
    """(device, formats, efficiency) as ``engine`` runs ``p`` on ``hw``: a declared quantised weight format in the
    engine's kernel on ``hw`` (:func:`llmath.hardware.kernels.engine_precision`: NVFP4 as W4A4 on Blackwell ...),
    the tensor rate the engine's 16-bit GEMMs accumulate at (:func:`llmath.hardware.kernels.engine_hardware`:
    llama.cpp's FP16 accumulation on GeForce), and efficiency ``mode``'s efficiency on that device with the
    engine's own GEMM and MoE kernels (:func:`llmath.hardware.kernels.engine_fp4_gemm`). Applying it twice gives
    the same: the engine's kernel is then stated and the faster rate already listed."""
    p = engine_precision(p, hw, engine)
    run_hw = engine_hardware(hw, engine) or hw
    return run_hw, p, engine_fp4_gemm(efficiency(mode, run_hw), run_hw, engine)


def engine_device(
    spec: ModelSpec,
    hw: Hardware,
    p: Precision,
    eff: Efficiency,
    eng: EngineConfig,
    attention: str = "flash",
    layout: Layout | None = None,
    source: int = 0,
) -> Device:
    """One replica of ``spec`` on ``layout`` (None: one GPU) as ``eng`` runs it (module doc); ``eff``: the
    hardware's efficiency with the engine's own GEMM kernels (:func:`llmath.hardware.kernels.engine_fp4_gemm`),
    before the launcher's grouped-expert kernel; ``source``: an encoder-decoder model's source tokens per request."""
    eff = launcher_moe_kernel(eff, hw, eng.moe_kernel)
    graph = 0 if eng.eager_prefill else graph_tokens(eng)  # passes above it run eagerly; eager_prefill: all
    piecewise = eng.overheads.piecewise_host_per_layer_s if eng.cuda_graphs and not eng.eager_prefill else 0.0
    cap, cap_host = decode_graph_cap(eng)  # decode steps of more requests run eagerly
    return Device(
        spec, hw, p, eff, attention, eng.cuda_graphs, layout, source, eager_host_time(eng, graph), graph,
        eng.eager_host_unit, host_step=engine_host_step(eng, eff), piecewise_host_s=piecewise,
        moe_prefill_host_s=eng.overheads.moe_prefill_host_per_layer_s, decode_graph_requests=cap,
        decode_eager_host_s=cap_host, moe_path=eng.moe_kernel,
    )  # fmt: skip


def pool_device(
    spec: ModelSpec,
    hw: Hardware,
    p: Precision,
    eff: Efficiency,
    eng: EngineConfig,
    layout: Layout | None,
    eager: bool = False,
    moe_kernel: str = "",
    attention: str = "flash",
) -> Device:
    """One disaggregated pool's replica of ``spec`` on ``layout`` as ``eng`` (the pool's engine at its TP degree)
    runs it, ``hw``, ``p`` and ``eff`` as :func:`engine_terms` gives them: ``eager``: its passes are launched
    without a CUDA graph, each at least its kernels × the engine's ``eager_host_per_kernel_s``
    (:func:`llmath.hardware.roofline.eager_host_s`); ``moe_kernel``: the grouped-expert kernel its servers were
    configured with, timing its prefill and decode passes (:func:`llmath.hardware.kernels.launcher_moe_kernel`; "":
    the engine's default). :func:`llmath.deploy.disagg.serve_disaggregated`'s pools and the planner's grid."""
    host = eng.overheads.eager_host_per_kernel_s if eager else 0.0
    eff = launcher_moe_kernel(eff, hw, moe_kernel, decode=True)  # the pool's servers run it in every pass
    return Device(spec, hw, p, eff, attention, eng.cuda_graphs, layout, eager_host_s=host, moe_path=moe_kernel)
