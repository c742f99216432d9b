"""A serving engine's scheduler and memory settings (:class:`EngineConfig`, names as vLLM spells them), validated
once where they are built; the presets that fill them from each engine's sourced defaults are
:mod:`llmath.deploy.engines`, the model that reads them :mod:`llmath.deploy.serving`."""

from __future__ import annotations

from dataclasses import dataclass, field

from llmath.deploy.admission_reserve import check_reserve
from llmath.deploy.overheads import Overheads
from llmath.errors import WorkloadError
from llmath.hardware.efficiency_fit import LAUNCHER_MOE_KERNELS
from llmath.hardware.roofline import EAGER_HOST_UNITS


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler and memory settings of a serving engine (names as vLLM spells them).

    ``max_num_batched_tokens``: token budget per iteration (None: unbounded, one whole prompt per iteration);
    ``chunked_prefill``: split prompts over iterations within the budget; ``max_num_seqs``: resident
    sequence cap; ``gpu_memory_utilization``: fraction of device memory the engine takes for weights,
    activations, CUDA graphs and the KV pool (the pool is what is left); ``kv_pool_tokens``: a fixed pool in
    positions instead (llama.cpp's ``n_ctx``); ``cuda_graph_bytes``: memory kept for captured graphs;
    ``cuda_graphs``: decode iterations replay graphs (per-kernel overhead of a graph launch);
    ``kv_fraction_of_free``: the fraction applies to the memory left after weights and buffers (TensorRT-LLM's
    ``free_gpu_memory_fraction``) rather than to the whole device (vLLM's ``gpu_memory_utilization``);
    ``memory_from_driver``: the share is of the capacity the driver reports (``Hardware.reported_memory_bytes``,
    where stated), not of the vendor's label (SGLang reads ``torch.cuda.mem_get_info`` at start-up);
    ``kv_admission``: ``reserve`` admits a request only with room for its final KV (TensorRT-LLM's
    GUARANTEED_NO_EVICT), ``on_demand`` allocates KV blocks as tokens arrive (vLLM's paged blocks, SGLang's
    pool with retraction), so the pool holds requests at their mean size over a lifetime, P + (G − 1)/2.
    ``new_token_reserve`` / ``new_token_reserve_clip``: admission also holds back this fraction of each running
    request's remaining output, clipped to that many tokens (SGLang's ``new_token_ratio``; :mod:`.admission_reserve`).
    ``replacement_lag``: iterations already scheduled when a request sent in reply to a finished one
    arrives (1: the next iteration is scheduled as soon as the last one's outputs are processed; 2 with an
    overlap scheduler, which schedules iteration n + 2 before it sends iteration n's outputs).
    ``lag_from_arrival``: the engine takes requests in only at a pass's top and keeps ``replacement_lag`` − 1
    passes queued behind the one in flight (vLLM's batch queue, TensorRT-LLM's and SGLang's overlap loops), so
    a request whose front end outlasts a pass waits for those too: ⌈o_req / τ⌉ + lag − 1 passes from its send
    rather than max(lag, ⌈o_req / τ⌉).
    ``mixed_prefill``: prefill chunks ride in the decoding requests' iterations (vLLM, TensorRT-LLM); False:
    prefill-first, a batch of prompts runs alone while the decoding requests wait (SGLang without
    ``--enable-mixed-chunk``; the closed loop of :mod:`.closed_loop` and the simulation model it).
    ``recv_interval``: the scheduler takes new requests in only every this many decode iterations (an iteration
    that prefills counts as the whole interval; SGLang's ``--scheduler-recv-interval``, default 1): a request
    that arrives while the others decode waits for the next poll (the staggered loop of :mod:`.closed_loop`).
    ``batch_wait_iters`` / ``batch_wait_tokens_ratio``: TensorRT-LLM's batch waiting (``batch_wait_timeout_iters``,
    ``batch_wait_max_tokens_ratio``; both 0, off, by default): while others decode, prompts are held until they and
    the decoding tokens reach the ratio × the token budget, or for that many iterations (the staggered loop).
    ``adp_balance`` / ``adp_timeout_iters`` / ``adp_batching_wait_iters``: TensorRT-LLM's attention-DP balancing
    (``attention_dp_config``): prompts wait until every attention-DP rank has one, then that many iterations more.
    ``eager_prefill``: every pass that prefills is launched op by op from Python (no CUDA graph): it takes the
    longer of its GPU time and its kernels × ``overheads.eager_host_per_kernel_s`` (:class:`.step.Device`),
    ``eager_host_unit`` saying what that time is per: ``launch`` (the module code's launches, ops/launches.py) or
    ``operator`` (a listed operator).
    ``flat_graph_host_factor``: the host time per launch of an ``eager_prefill`` pass over the engine's value for a
    pass that runs its compiled graph split at attention without replay (vLLM's ``FULL_DECODE_ONLY`` with
    ``splitting_ops: []`` runs one flattened graph; 1: the same).
    ``cuda_graph_max_tokens`` / ``cuda_graph_tokens_per_seq``: the largest pass (scheduled tokens) replayed from a
    CUDA graph, prefill passes included, is ``min(cuda_graph_tokens_per_seq × max_num_seqs, cuda_graph_max_tokens)``
    where the per-sequence factor is set, else ``cuda_graph_max_tokens`` (0: no limit); a larger pass runs without a
    graph and takes the host floor of ``eager_prefill`` (:func:`llmath.deploy.graph_passes.graph_tokens`; vLLM's
    ``max_cudagraph_capture_size``).
    ``decode_graph_max_batch``: the largest decode step, in requests, replayed from a CUDA graph (SGLang's
    ``--cuda-graph-max-bs``, TensorRT-LLM's ``cuda_graph_config.max_batch_size``: both count requests, a speculative
    verify step's draft tokens riding on each); a decode step of more requests runs without a graph and takes the
    per-launch host floor of a pass without one (:func:`llmath.deploy.graph_passes.decode_graph_cap`); 0: no such cap.
    ``overlap_scheduler``: the engine launches a step's GPU work before processing the previous step's results
    (TensorRT-LLM's overlap scheduler), so its host time per step (``overheads.host_step_s`` and
    ``host_step_per_request_s``) is hidden up to the GPU's time rather than added to it (:mod:`.host_step`).
    ``moe_kernel``: a launcher's MoE kernel (:data:`llmath.hardware.efficiency_fit.LAUNCHER_MOE_KERNELS`; "": default).
    ``prompt_token_s``: the server's tokenisation per prompt token where a launcher sends text to an engine whose
    preset takes token ids (TensorRT-LLM's ``trtllm-serve``); it sets ``overheads.per_prompt_token_s`` (None: the
    preset's).
    ``overheads``: the engine's time outside the kernels (:mod:`llmath.deploy.overheads`), added to every
    iteration and request under ``expected`` efficiency (not ``ideal``).
    """

    name: str = "generic"
    max_num_batched_tokens: int | None = 8192
    chunked_prefill: bool = True
    max_num_seqs: int = 256
    gpu_memory_utilization: float = 0.9
    kv_pool_tokens: int | None = None
    cuda_graphs: bool = True
    cuda_graph_bytes: float = 0.0
    kv_fraction_of_free: bool = False
    memory_from_driver: bool = False
    kv_admission: str = "on_demand"
    new_token_reserve: float = 0.0
    new_token_reserve_clip: int = 0
    replacement_lag: int = 1
    lag_from_arrival: bool = False
    mixed_prefill: bool = True
    recv_interval: int = 1
    batch_wait_iters: int = 0
    batch_wait_tokens_ratio: float = 0.0
    adp_balance: bool = False
    adp_timeout_iters: int = 50
    adp_batching_wait_iters: int = 10
    eager_prefill: bool = False
    cuda_graph_max_tokens: int = 0
    cuda_graph_tokens_per_seq: int = 0
    decode_graph_max_batch: int = 0
    eager_host_unit: str = "launch"
    flat_graph_host_factor: float = 1.0
    moe_kernel: str = ""
    overlap_scheduler: bool = True
    prompt_token_s: float | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    overheads: Overheads = field(default_factory=Overheads)

    def __post_init__(self) -> None:
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < 1:
            raise WorkloadError(f"max_num_batched_tokens={self.max_num_batched_tokens} must be >= 1 (or unset)")
        if self.moe_kernel and self.moe_kernel not in LAUNCHER_MOE_KERNELS:
            raise WorkloadError(f"moe_kernel={self.moe_kernel!r}: not a known MoE kernel; use {LAUNCHER_MOE_KERNELS}")
        if self.max_num_seqs < 1:
            raise WorkloadError(f"max_num_seqs={self.max_num_seqs} must be >= 1")
        if self.prompt_token_s is not None and not 0 <= self.prompt_token_s < 1e-3:
            raise WorkloadError(f"prompt_token_s={self.prompt_token_s!r} must be seconds per token in [0, 1e-3)")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise WorkloadError(f"gpu_memory_utilization={self.gpu_memory_utilization} must be in (0, 1]")
        if self.kv_pool_tokens is not None and self.kv_pool_tokens < 1:
            raise WorkloadError(f"kv_pool_tokens={self.kv_pool_tokens} must be >= 1")
        if self.kv_admission not in ("reserve", "on_demand"):
            raise WorkloadError(f"kv_admission={self.kv_admission!r} must be 'reserve' or 'on_demand'")
        check_reserve(self.new_token_reserve, self.new_token_reserve_clip)
        if self.replacement_lag not in (0, 1, 2):
            raise WorkloadError(f"replacement_lag={self.replacement_lag} must be 0, 1 or 2 iterations")
        if not (isinstance(self.recv_interval, int) and self.recv_interval >= 1):
            raise WorkloadError(f"recv_interval={self.recv_interval!r} must be a whole number of iterations >= 1")
        if not (isinstance(self.batch_wait_iters, int) and self.batch_wait_iters >= 0):
            raise WorkloadError(f"batch_wait_iters={self.batch_wait_iters!r} must be a whole number of iterations >= 0")
        if min(self.adp_timeout_iters, self.adp_batching_wait_iters) < 0:
            raise WorkloadError("adp_timeout_iters and adp_batching_wait_iters must be >= 0 iterations")
        if not 0 <= self.batch_wait_tokens_ratio <= 1:
            raise WorkloadError(f"batch_wait_tokens_ratio={self.batch_wait_tokens_ratio!r} must be in [0, 1]")
        if self.cuda_graph_bytes < 0:
            raise WorkloadError(f"cuda_graph_bytes={self.cuda_graph_bytes} must be >= 0")
        if self.eager_host_unit not in EAGER_HOST_UNITS:
            raise WorkloadError(f"eager_host_unit={self.eager_host_unit!r} must be one of {EAGER_HOST_UNITS}")
        if not 1 <= self.flat_graph_host_factor <= 10:
            raise WorkloadError(f"flat_graph_host_factor={self.flat_graph_host_factor!r} must be in [1, 10]")
        if min(self.cuda_graph_max_tokens, self.cuda_graph_tokens_per_seq) < 0:
            raise WorkloadError("cuda_graph_max_tokens and cuda_graph_tokens_per_seq must be >= 0 (0: no limit)")
        if self.decode_graph_max_batch < 0:
            raise WorkloadError(f"decode_graph_max_batch={self.decode_graph_max_batch} must be >= 0 (0: no cap)")
