"""The host floor of a pass launched eagerly: max(GPU time, kernels × host time per eager kernel)."""

import pytest

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.service import serve
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import eager_host_s, efficiency
from llmath.measure.serving_runs import pytorch_backend_settings
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops.table import table

# Llama-3.1-70B's prefill operator list: 80 layers × 14 kernels (norm, q, k, v, rotary, attention, o, residual,
# norm, gate, up, act, down, residual) + embedding + final norm + LM head = 1,120 + 3 = 1,123.
LLAMA70_KERNELS = 80 * 14 + 3
# DeepSeek-R1: 3 dense layers × 17 (norm, q_a, q_a norm, q_b, kv_a, kv_a norm, rotary, kv_b, attention, o,
# residual, norm, gate, up, act, down, residual) + 58 MoE layers × 23 (the 12 attention-side kernels, norm,
# router, top-k, routed gate/up/act/down, shared gate/up/act/down, residual) + 3 = 51 + 1,334 + 3 = 1,388.
DSR1_KERNELS = 3 * 17 + 58 * 23 + 3


def _device(model: str, host_s: float, cuda_graphs: bool = True) -> Device:
    hw = get("H100")
    eff = efficiency("expected", hw)
    return Device(resolve(model), hw, Precision(), eff, "flash", cuda_graphs, eager_host_s=host_s)


def test_host_time_is_kernels_times_host_time_per_kernel():
    assert eager_host_s(table(resolve("llama-3.1-70b"), "prefill"), 1e-4) == pytest.approx(LLAMA70_KERNELS * 1e-4)
    assert eager_host_s(table(resolve("deepseek-r1"), "prefill"), 1e-4) == pytest.approx(DSR1_KERNELS * 1e-4)


def test_short_prefill_takes_the_host_time_long_one_the_gpu_time():
    # 1 ms per kernel: 1,123 ms of host work, above the GPU time of a 16-token prefill of Llama-3.1-70B
    # (140 GB of BF16 weights at 3.35 TB/s: > 42 ms, < 1.1 s) and below that of a 32k-token one
    # (2 × 70e9 × 32,768 = 4.6e15 FLOPs at 989 TFLOP/s: > 4.6 s).
    floor, none = _device("llama-3.1-70b", 1e-3), _device("llama-3.1-70b", 0.0)
    short = float(floor.iteration(0, 0, 1, 16).time_s)
    assert short == pytest.approx(LLAMA70_KERNELS * 1e-3)
    assert float(none.iteration(0, 0, 1, 16).time_s) < short
    assert float(floor.iteration(0, 0, 1, 32768).time_s) == float(none.iteration(0, 0, 1, 32768).time_s)


def test_decode_is_floored_only_when_it_runs_eagerly():
    graphs, eager = _device("llama-3.1-70b", 1e-3), _device("llama-3.1-70b", 1e-3, cuda_graphs=False)
    # a decode step of 4 sequences replays a graph: no host floor, far below 1,123 ms
    assert float(graphs.iteration(4, 1024).time_s) < 0.5
    assert float(eager.iteration(4, 1024).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)


def test_moe_prefill_is_floored_and_its_graph_decode_pass_added():
    # DeepSeek-R1 (MLA) runs a prefill pass and a separate decode pass: the prefill pass takes the 1,388 ms host
    # floor, the decode pass of its 4 decoders (graph-replayed) adds its own GPU time
    dev, none = _device("deepseek-r1", 1e-3), _device("deepseek-r1", 0.0)
    assert float(dev.iteration(0, 1024, 1, 64).time_s) == pytest.approx(DSR1_KERNELS * 1e-3)
    decode = float(none.iteration(4, 1024).time_s)
    assert float(dev.iteration(4, 1024, 1, 64).time_s) == pytest.approx(DSR1_KERNELS * 1e-3 + decode)


def test_engine_presets_carry_the_host_time_with_its_source():
    sg = engines.overheads("sglang")
    # sgl-project/sglang#12160: an eager DeepSeek-V3 extend of one token, "forward cost" 82.6 ms,
    # over the 1,388 kernels of its operator list (DeepSeek-V3 has R1's architecture): 59.5 us
    assert sg.eager_host_per_kernel_s == pytest.approx(82.6e-3 / DSR1_KERNELS, rel=1e-3)
    assert "12160" in sg.sources["eager_host_per_kernel_s"]
    # vLLM borrows SGLang's value, stated as borrowed; its preset never applies it (piecewise prefill graphs)
    vllm = engines.overheads("vllm")
    assert vllm.eager_host_per_kernel_s == sg.eager_host_per_kernel_s
    assert "borrowed" in vllm.sources["eager_host_per_kernel_s"]


def test_only_engines_that_prefill_eagerly_get_the_floor_by_default():
    # SGLang: no piecewise prefill graph unless --enable-piecewise-cuda-graph; the TensorRT-LLM preset is its
    # TensorRT engine backend (built engines); vLLM replays piecewise graphs
    assert engines.preset("sglang").eager_prefill
    assert not engines.preset("trtllm").eager_prefill
    assert not engines.preset("vllm").eager_prefill


def test_trtllm_pytorch_backend_rows_prefill_eagerly():
    ix = {"backend": "trtllm", "backend_version": "0.8.1.post1"}
    assert pytorch_backend_settings(ix, inferencex=True) == {"eager_prefill": True}  # trtllm-serve, PyTorch options
    assert pytorch_backend_settings({"backend": "trtllm", "backend_version": "1.0.0rc3"}, False) == {
        "eager_prefill": True
    }  # the PyTorch backend is the default from 1.0
    assert pytorch_backend_settings({"backend": "trtllm", "backend_version": "0.19.0"}, False) == {}
    assert pytorch_backend_settings({"backend": "sglang", "backend_version": "0.5.9"}, True) == {}


def test_serving_ttft_rises_by_the_floor_at_one_short_request():
    # one request of 64 tokens on Llama-3.1-70B (2 x H100, FP8): the GPU prefill is a few tens of ms and the
    # eager floor 1,123 kernels x 59.5 us = 66.8 ms (TensorRT-LLM's PyTorch backend, eager_prefill=True)
    w = Workload(prompt=64, gen=16, concurrency=1)
    par = ParallelConfig(tp=2)
    kw = {"workload": w, "parallel": par, "engine": "trtllm", "precision": "fp8"}
    graph, eager = serve("llama-3.1-70b", "H100", **kw), serve("llama-3.1-70b", "H100", **kw, eager_prefill=True)
    floor = LLAMA70_KERNELS * engines.overheads("trtllm").eager_host_per_kernel_s
    assert floor == pytest.approx(0.0668, rel=1e-2)
    assert graph.metrics["ttft_s"] < floor
    # one request alone: its TTFT is its prefill pass (TensorRT-LLM's per-request overhead terms are 0)
    assert eager.metrics["ttft_s"] == pytest.approx(floor)
