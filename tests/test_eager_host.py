"""The host floor of a pass launched eagerly: max(GPU time, launches × host time per eager launch)."""

from dataclasses import replace

import pytest

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.service import serve
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import eager_host_s, efficiency
from llmath.measure.serving_runs import pytorch_backend_settings
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops.table import table

# Llama-3.1-70B's prefill operator list: 80 layers × 14 operators (norm, q, k, v, rotary, attention, o, residual,
# norm, gate, up, act, down, residual) + embedding + final norm + LM head = 1,123. SGLang's LlamaDecoderLayer
# (python/sglang/srt/models/llama.py) launches 9 of them per layer: one qkv_proj GEMM for q, k, v; one gate_up_proj
# GEMM for gate, up; each residual add inside the next RMSNorm's fused add-and-norm (the last in the final norm):
# norm, qkv, rotary, attention, o, norm, gate_up, act, down. 80 × 9 + 3 = 723.
LLAMA70_LISTED, LLAMA70_KERNELS = 80 * 14 + 3, 80 * 9 + 3
# DeepSeek-R1: 3 dense layers × 17 listed (norm, q_a, q_a norm, q_b, kv_a, kv_a norm, rotary, kv_b, attention, o,
# residual, norm, gate, up, act, down, residual), 13 launched (kv_a in q_a's fused GEMM, up in gate's, the two
# residual adds in the norms); 58 MoE layers × 23 listed, launched: the 9 attention-side ones and the FFN norm = 10,
# router 1, top-k 1 + the token sort by expert (fill + align) 2, routed experts w13 GEMM, act, w2 GEMM + the
# top-k sum-reduce = 4, shared gate_up, act, down = 3: 21 (SGLang fused_moe_triton/fused_moe.py); + 3.
DSR1_LISTED, DSR1_KERNELS = 3 * 17 + 58 * 23 + 3, 3 * 13 + 58 * 21 + 3


def _device(model: str, host_s: float, cuda_graphs: bool = True) -> Device:
    hw = get("H100")
    eff = efficiency("expected", hw)
    return Device(resolve(model), hw, Precision(), eff, "flash", cuda_graphs, eager_host_s=host_s)


def test_host_time_is_launches_times_host_time_per_launch():
    assert eager_host_s(table(resolve("llama-3.1-70b"), "prefill"), 1e-4) == pytest.approx(LLAMA70_KERNELS * 1e-4)
    assert eager_host_s(table(resolve("deepseek-r1"), "prefill"), 1e-4) == pytest.approx(DSR1_KERNELS * 1e-4)


def test_fused_operators_launch_less_routed_experts_more():
    # the operator list itself is unchanged: one entry per operator and layer
    assert table(resolve("llama-3.1-70b"), "prefill").kernels.sum() == LLAMA70_LISTED
    assert table(resolve("deepseek-r1"), "prefill").kernels.sum() == DSR1_LISTED
    # a dense layer launches 9 of its 14 operators' kernels, an MoE layer 21 of 23: a dense model's floor per
    # listed operator is the lower one
    assert LLAMA70_KERNELS / LLAMA70_LISTED < DSR1_KERNELS / DSR1_LISTED
    # a LayerNorm model (GPT-2: no fused add-and-norm) keeps its residual adds as launches
    gpt2 = table(resolve("gpt2"), "prefill")
    assert sum(op.launches for op in gpt2.ops if op.component == "residual") == sum(
        1 for op in gpt2.ops if op.component == "residual"
    )


def test_short_prefill_takes_the_host_time_long_one_the_gpu_time():
    # 1 ms per launch: 723 ms of host work, above the GPU time of a 16-token prefill of Llama-3.1-70B
    # (140 GB of BF16 weights at 3.35 TB/s: > 42 ms, < 0.7 s) and below that of a 32k-token one
    # (2 × 70e9 × 32,768 = 4.6e15 FLOPs at 989 TFLOP/s: > 4.6 s).
    floor, none = _device("llama-3.1-70b", 1e-3), _device("llama-3.1-70b", 0.0)
    short = float(floor.iteration(0, 0, 1, 16).time_s)
    assert short == pytest.approx(LLAMA70_KERNELS * 1e-3)
    assert float(none.iteration(0, 0, 1, 16).time_s) < short
    assert float(floor.iteration(0, 0, 1, 32768).time_s) == float(none.iteration(0, 0, 1, 32768).time_s)


def test_decode_is_floored_only_when_it_runs_eagerly():
    graphs, eager = _device("llama-3.1-70b", 1e-3), _device("llama-3.1-70b", 1e-3, cuda_graphs=False)
    # a decode step of 4 sequences replays a graph: no host floor, far below 723 ms
    assert float(graphs.iteration(4, 1024).time_s) < 0.5
    assert float(eager.iteration(4, 1024).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)


def test_moe_prefill_is_floored_and_its_graph_decode_pass_added():
    # DeepSeek-R1 (MLA) runs a prefill pass and a separate decode pass: the prefill pass takes the 1,260 ms host
    # floor, the decode pass of its 4 decoders (graph-replayed) adds its own GPU time
    dev, none = _device("deepseek-r1", 1e-3), _device("deepseek-r1", 0.0)
    assert float(dev.iteration(0, 1024, 1, 64).time_s) == pytest.approx(DSR1_KERNELS * 1e-3)
    decode = float(none.iteration(4, 1024).time_s)
    assert float(dev.iteration(4, 1024, 1, 64).time_s) == pytest.approx(DSR1_KERNELS * 1e-3 + decode)


def test_engine_presets_carry_the_host_time_with_its_source():
    sg = engines.overheads("sglang")
    # sgl-project/sglang#12160: an eager DeepSeek-V3 extend of one token, "forward cost" 82.6 ms,
    # over the 1,260 kernels SGLang launches for its operator list (DeepSeek-V3 has R1's architecture): 65.6 us
    assert sg.eager_host_per_kernel_s == pytest.approx(82.6e-3 / DSR1_KERNELS, rel=1e-3)
    assert "12160" in sg.sources["eager_host_per_kernel_s"]
    assert engines.preset("sglang").eager_host_unit == "launch"
    # vLLM's own value (tests/test_vllm_host.py) is per launch too, not SGLang's
    assert engines.preset("vllm").eager_host_unit == "launch"


def test_an_operator_unit_counts_listed_operators():
    t = table(resolve("llama-3.1-70b"), "prefill")
    assert eager_host_s(t, 1e-4, "operator") == pytest.approx(LLAMA70_LISTED * 1e-4)
    per_launch = _device("llama-3.1-70b", 1e-3)
    per_operator = replace(per_launch, eager_host_unit="operator")
    assert float(per_operator.iteration(0, 0, 1, 16).time_s) == pytest.approx(LLAMA70_LISTED * 1e-3)
    assert float(per_launch.iteration(0, 0, 1, 16).time_s) == pytest.approx(LLAMA70_KERNELS * 1e-3)


def test_an_unknown_unit_is_refused():
    with pytest.raises(WorkloadError, match="eager_host_unit"):
        engines.preset("sglang", eager_host_unit="kernel")


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
    # eager floor 723 launches x 65.6 us = 47.4 ms (TensorRT-LLM's PyTorch backend, eager_prefill=True)
    w = Workload(prompt=64, gen=16, concurrency=1)
    par = ParallelConfig(tp=2)
    kw = {"workload": w, "parallel": par, "engine": "trtllm", "precision": "fp8"}
    graph, eager = serve("llama-3.1-70b", "H100", **kw), serve("llama-3.1-70b", "H100", **kw, eager_prefill=True)
    floor = LLAMA70_KERNELS * engines.overheads("trtllm").eager_host_per_kernel_s
    assert floor == pytest.approx(0.0474, rel=1e-2)
    assert graph.metrics["ttft_s"] < floor
    # one request alone: its TTFT is its prefill pass (TensorRT-LLM's per-request overhead terms are 0)
    assert eager.metrics["ttft_s"] == pytest.approx(floor)
