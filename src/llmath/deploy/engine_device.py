"""A replica as an engine runs it: the :class:`~llmath.deploy.step.Device` whose iteration cost carries the engine's
launch and host terms. :func:`llmath.serve` (``llmath analyze``) and the planner's aggregated layouts (``llmath
plan``) build their devices here, so a planner row is ``serve`` on its layout at its concurrency.

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
from llmath.hardware.kernels import launcher_moe_kernel

if TYPE_CHECKING:
    from llmath.deploy.engine_config import EngineConfig
    from llmath.deploy.layout import Layout
    from llmath.hardware import Hardware
    from llmath.hardware.roofline import Efficiency
    from llmath.model.dtypes import Precision
    from llmath.model.spec import ModelSpec


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
