"""vLLM passes above the largest CUDA-graph capture size run without a graph and take the host floor; the InferenceX
launchers ran async scheduling (two steps in flight).

vLLM's rule (vllm-project/vllm 002284db4c87, vllm/config/compilation.py, ``max_cudagraph_capture_size``): "If not
specified, max_cudagraph_capture_size is set to min(max_num_seqs*2, 512) by default"; a batch of more scheduled
tokens runs without a graph. The launchers' values are read off SemiAnalysisAI/InferenceX's scripts (commits named
in ``llmath.measure.vllm_launchers``).
"""

from __future__ import annotations

import pytest
from test_serving_runs import _row

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.service import serve
from llmath.deploy.serving import graph_tokens
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.measure.vllm_launchers import launcher_vllm_settings
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

# Llama-3.1-70B's prefill operator list: 80 layers × 14 kernels + embedding, final norm, LM head = 1,123
# (tests/test_eager_host.py spells the 14 out).
LLAMA70_KERNELS = 80 * 14 + 3
# MiniMax-M2.5: 62 layers × 17 kernels (the 11 attention-side ones, norm, router, top-k, routed gate/up, act, down
# ... as gpt-oss's MoE layer) + 3 = 1,057.
MINIMAX_KERNELS = 62 * 17 + 3
IX = "model=x; silicon_concurrency={c}; measured={d}T00:00:00.000Z; wip=False"


def _settings(**kw) -> dict:
    return launcher_vllm_settings(_row(backend="vllm", **kw), True)


def test_vllm_default_capture_size_is_twice_the_sequence_cap_at_most_512():
    h200 = get("H200")
    assert graph_tokens(engines.preset("vllm", h200)) == 512  # min(2 × 1024, 512)
    assert graph_tokens(engines.preset("vllm", h200, max_num_seqs=4)) == 8  # min(2 × 4, 512)
    assert graph_tokens(engines.preset("vllm", h200, max_num_seqs=256)) == 512  # min(512, 512)
    given = engines.preset("vllm", h200, cuda_graph_max_tokens=2048, cuda_graph_tokens_per_seq=0)
    assert graph_tokens(given) == 2048
    for other in ("sglang", "trtllm"):  # no such limit stated: 0
        assert graph_tokens(engines.preset(other, h200)) == 0
    with pytest.raises(WorkloadError, match="cuda_graph_max_tokens"):
        engines.preset("vllm", h200, cuda_graph_max_tokens=-1)


def _device(graph: int, host_s: float = 1e-3, cuda_graphs: bool = True) -> Device:
    hw = get("H100")
    # vLLM's host time is per listed operator (its preset's eager_host_unit)
    return Device(resolve("llama-3.1-70b"), hw, Precision(), efficiency("expected", hw), "flash", cuda_graphs, None, 0,
                  host_s, graph, "operator")  # fmt: skip


def test_only_passes_above_the_capture_size_take_the_host_floor():
    # 1 ms per kernel: a floor of 1,123 ms, above the GPU time of a 600-token Llama-3.1-70B prefill on one H100
    # (2 × 70e9 × 600 = 8.4e13 FLOPs at 989 TFLOP/s = 85 ms; 140 GB of BF16 weights at 3.35 TB/s = 42 ms)
    dev, none = _device(512), _device(512, 0.0)
    assert float(dev.iteration(0, 0, 1, 600).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)
    # 500 tokens: at most the capture size, replayed from a graph: its GPU time, below the floor
    assert float(dev.iteration(0, 0, 1, 500).time_s) == float(none.iteration(0, 0, 1, 500).time_s) < 0.5
    # a mixed pass of 3 decode tokens and a 510-token chunk: 513 tokens, one above 512
    assert float(dev.iteration(3, 1024, 1, 510).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)
    # decode-only passes: 4 sequences replay a graph; 600 (above 512) do not
    assert float(dev.iteration(4, 1024).time_s) < 0.5
    assert float(dev.iteration(600, 1024).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)


def test_without_cuda_graphs_every_pass_is_eager_whatever_its_size():
    # enforce-eager: no graph at any size, so a 16-token prefill and a 4-sequence decode step take the floor too
    dev = _device(512, cuda_graphs=False)
    assert float(dev.iteration(0, 0, 1, 16).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)
    assert float(dev.iteration(4, 1024).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)


def test_without_a_capture_size_every_prefill_pass_is_eager():
    # graph_tokens 0 keeps eager_prefill's reading: every pass that prefills is floored, decode-only ones are not
    dev = _device(0)
    assert float(dev.iteration(0, 0, 1, 16).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)
    assert float(dev.iteration(4, 1024).time_s) < 0.5


def test_minimax_1k_prompt_on_vllm_defaults_runs_without_a_graph():
    # vLLM's preset on H200 (max_num_seqs 1024): capture size 512, so a 1,024-token prompt's pass has no graph and
    # takes at least 1,057 kernels × 59.5 us (data/engines.json vllm eager_host_per_kernel_s) = 62.9 ms; with the
    # capture size 2048 the MiniMax-M2.5 B200 launchers pass, the same pass replays a graph and is shorter
    work = Workload(prompt=1024, gen=64, concurrency=1)
    run = dict(workload=work, engine="vllm", parallel=ParallelConfig(tp=8))
    eager = serve("MiniMaxAI/MiniMax-M2.5", "H200", **run).metrics["ttft_s"]
    graph = serve("MiniMaxAI/MiniMax-M2.5", "H200", **run, cuda_graph_max_tokens=2048, cuda_graph_tokens_per_seq=0)
    floor = MINIMAX_KERNELS * 59.5e-6
    assert eager >= floor > graph.metrics["ttft_s"]


def test_launchers_capture_sizes():
    minimax = dict(model_path="MiniMaxAI/MiniMax-M2.5", precision="fp8", tp_size=4, moe_ep_size=1)
    # MiniMax-M2.5 B200 FP8: --max-cudagraph-capture-size 2048 from bddbf403 (2026-04-03); vLLM's default before
    got = _settings(system="b200_sxm", source_notes=IX.format(c=4, d="2026-04-03"), **minimax)
    assert (got["cuda_graph_max_tokens"], got["cuda_graph_tokens_per_seq"]) == (2048, 0)
    assert "cuda_graph_max_tokens" not in _settings(system="b200_sxm", source_notes=IX.format(c=4, d="2026-03-20"),
                                                    **minimax)  # fmt: skip
    # MiniMax-M2.5 H200: no size, no sequence cap: the preset's rule (512)
    assert "cuda_graph_max_tokens" not in _settings(system="h200_sxm", source_notes=IX.format(c=4, d="2026-03-27"),
                                                    **minimax)  # fmt: skip
    # gpt-oss-120b: cuda-graph-sizes / max-cudagraph-capture-size 2048 on every system
    oss = dict(model_path="openai/gpt-oss-120b", tp_size=1, moe_ep_size=1)
    for system in ("h100_sxm", "h200_sxm", "b200_sxm"):
        got = _settings(system=system, source_notes=IX.format(c=4, d="2026-03-27"), **oss)
        assert got["cuda_graph_max_tokens"] == 2048
    # Llama-3.1-70B H100 and H200: --max-num-seqs $CONC and no size: min(2 × CONC, 512)
    llama = dict(model_path="meta-llama/Llama-3.1-70B", precision="fp8", tp_size=8, moe_ep_size=1)
    for conc, size in ((4, 8), (64, 128), (512, 512)):
        got = _settings(system="h100_sxm", source_notes=IX.format(c=conc, d="2025-10-29"), **llama)
        assert got["cuda_graph_max_tokens"] == size


def test_every_dated_inferencex_vllm_row_runs_async_scheduling():
    # async-scheduling: true in the 2025 Llama-3.1-70B and gpt-oss-120b scripts (9596d23d); vLLM's default from
    # v0.14.0 for the later images (InferenceX d2c2acb19): a follow-up joins step n + 3, two steps already scheduled
    for model, system, day in (("meta-llama/Llama-3.1-70B", "h100_sxm", "2025-10-29"),
                               ("openai/gpt-oss-120b", "b200_sxm", "2026-02-25"),
                               ("MiniMaxAI/MiniMax-M2.5", "h200_sxm", "2026-03-27")):  # fmt: skip
        got = _settings(model_path=model, system=system, source_notes=IX.format(c=4, d=day), tp_size=8)
        assert got["replacement_lag"] == 2
    # a row without a measured date takes no launcher setting
    assert "replacement_lag" not in _settings(model_path="openai/gpt-oss-120b", system="b200_sxm", source_notes="x")
    # vLLM's own preset keeps one step in flight (its synchronous EngineCore.step)
    assert engines.preset("vllm", get("H200")).replacement_lag == 1
