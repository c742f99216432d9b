"""The passes an engine runs without a CUDA graph: the largest pass it replays from one, and the host time per
launch of the others (re-exported by :mod:`.serving`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmath.deploy.engine_config import EngineConfig


def graph_tokens(eng: EngineConfig) -> int:
    """The largest pass, in scheduled tokens, ``eng`` replays from a CUDA graph (0: no limit): vLLM's default
    ``max_cudagraph_capture_size`` is ``min(2 × max_num_seqs, 512)``, a launcher's value replaces it."""
    if eng.cuda_graph_tokens_per_seq:
        return min(eng.cuda_graph_tokens_per_seq * eng.max_num_seqs, eng.cuda_graph_max_tokens)
    return eng.cuda_graph_max_tokens


def eager_host_time(eng: EngineConfig, graph: int) -> float:
    """The engine's host seconds per launch of a pass without a CUDA graph (0 where none runs so): with
    ``eager_prefill``, × ``flat_graph_host_factor`` (the flattened compiled graph); else the passes above the
    largest capture size ``graph`` run the split one."""
    if eng.eager_prefill:
        return eng.overheads.eager_host_per_kernel_s * eng.flat_graph_host_factor
    return eng.overheads.eager_host_per_kernel_s if graph else 0.0


def decode_graph_cap(eng: EngineConfig) -> tuple[int, float]:
    """(the largest decode step, in requests, ``eng`` replays from a CUDA graph; the host seconds per launch of a
    larger one): SGLang's ``CudaGraphRunner.can_run`` replays a decode batch only when its size is at most the
    largest captured (``--cuda-graph-max-bs``), TensorRT-LLM's PyTorch backend likewise for a generation batch above
    ``cuda_graph_config.max_batch_size``; a larger step runs its kernels from Python, the floor a pass without a graph
    takes (:func:`eager_host_time` as for a pass above the capture size). (0, 0.0): no cap, or graphs off."""
    if not (eng.cuda_graphs and eng.decode_graph_max_batch):
        return 0, 0.0
    return eng.decode_graph_max_batch, eager_host_time(eng, 1)
