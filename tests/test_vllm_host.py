"""vLLM's own host times: passes run from the compiled graph without replay (split at attention, or flattened) and
passes that replay piecewise CUDA graphs, each attention call launched eagerly between two replays."""

import pytest

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.service import serve
from llmath.deploy.serving import eager_host_time
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency, piecewise_host_s
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops.table import table

# Llama-3.1-70B: 80 decoder layers, one attention call each (its config.json: num_hidden_layers 80)
LLAMA70_LAYERS = 80


def _device(piecewise_s: float, graph_tokens: int = 0, eager_s: float = 0.0) -> Device:
    hw = get("H100")
    return Device(
        resolve("llama-3.1-70b"), hw, Precision(), efficiency("expected", hw), "flash", True,
        eager_host_s=eager_s, graph_tokens=graph_tokens, piecewise_host_s=piecewise_s,
    )  # fmt: skip


def test_vllm_presets_carry_their_own_sourced_host_times():
    ov, eng = engines.overheads("vllm"), engines.preset("vllm")
    # vllm-project/vllm#25444: 10 requests of 1,024 in / 128 out on Qwen3-Coder-30B-A3B (48 layers), 4.07 req/s
    # PIECEWISE against 5.98 FULL_AND_PIECEWISE: (10/4.07 - 10/5.98) s = 0.785 s over ~127 decode steps = 6.18 ms a
    # step, / 48 layers = 128.7 us of host time per piecewise layer
    assert ov.piecewise_host_per_layer_s == pytest.approx((10 / 4.07 - 10 / 5.98) / 127 / 48, rel=0.01)
    assert "25444" in ov.sources["piecewise_host_per_layer_s"]
    # vllm-project/vllm#20050: the flattened graph run eagerly is "about 2x slower on the cpu side"
    assert eng.flat_graph_host_factor == 2.0
    assert "20050" in eng.sources["flat_graph_host_factor"]
    # per launch, below #20050's profiled split graph: ~28 ms over Qwen2.5-7B's 28 x 9 + 3 = 255 launches = 110 us
    assert eng.eager_host_unit == "launch"
    assert 0 < ov.eager_host_per_kernel_s < 28e-3 / (28 * 9 + 3)
    # other engines replay no piecewise graph and run no flattened compiled one
    assert engines.overheads("sglang").piecewise_host_per_layer_s == 0.0
    assert engines.preset("trtllm").flat_graph_host_factor == 1.0


def test_the_flattened_graph_takes_the_factor_the_split_one_does_not():
    eng = engines.preset("vllm", get("H100"))
    per_launch = eng.overheads.eager_host_per_kernel_s
    assert eager_host_time(eng, 512) == per_launch  # passes above the capture size: the split graph
    assert eager_host_time(eng, 0) == 0.0  # graphs at every size: no pass without one
    flat = engines.preset("vllm", get("H100"), eager_prefill=True)
    assert eager_host_time(flat, 0) == pytest.approx(2 * per_launch)


def test_piecewise_host_time_is_attention_calls_times_the_per_call_time():
    assert piecewise_host_s(table(resolve("llama-3.1-70b"), "prefill"), 1e-3) == pytest.approx(LLAMA70_LAYERS * 1e-3)


def test_a_short_prefill_replaying_piecewise_graphs_is_floored_a_long_one_is_not():
    # 1 ms per attention call: 80 ms of host work; a 16-token Llama-3.1-70B prefill on one H100 takes the longer of
    # that and its GPU time (140 GB of BF16 weights at 3.35 TB/s: > 42 ms)
    floored, plain = _device(1e-3), _device(0.0)
    short = float(floored.iteration(0, 0, 1, 16).time_s)
    assert short == pytest.approx(max(LLAMA70_LAYERS * 1e-3, float(plain.iteration(0, 0, 1, 16).time_s)))
    assert short >= LLAMA70_LAYERS * 1e-3
    # a 32k-token prefill (2 x 70e9 x 32,768 = 4.6e15 FLOPs at 989 TFLOP/s: > 4.6 s) is GPU-bound
    assert float(floored.iteration(0, 0, 1, 32768).time_s) == float(plain.iteration(0, 0, 1, 32768).time_s)
    # a decode-only step replays a full graph (FULL_AND_PIECEWISE): no piecewise floor
    assert float(floored.iteration(4, 100).time_s) == float(plain.iteration(4, 100).time_s)


def test_a_pass_above_the_capture_size_takes_the_eager_floor_not_the_piecewise_one():
    # 600 tokens > 512: no graph, its launches x 1 us (723 us); 16 tokens <= 512: piecewise, 80 x 1 ms
    dev = _device(1e-3, graph_tokens=512, eager_s=1e-6)
    plain = _device(0.0, graph_tokens=512, eager_s=1e-6)
    assert float(dev.iteration(0, 0, 1, 600).time_s) == float(plain.iteration(0, 0, 1, 600).time_s)
    assert float(dev.iteration(0, 0, 1, 16).time_s) == pytest.approx(LLAMA70_LAYERS * 1e-3)


def test_a_served_short_prompt_meets_the_piecewise_floor():
    # Llama-3.1-70B on 8 x H100, one 32-token prompt: vLLM replays piecewise graphs (32 <= 512 tokens); its TTFT
    # is at least the 80 attention calls x 129 us = 10.3 ms of host time
    kw = {"workload": Workload(prompt=32, gen=8, concurrency=1), "parallel": ParallelConfig(tp=8), "engine": "vllm"}
    report = serve("llama-3.1-70b", "H100", **kw)
    assert report.metrics["ttft_s"] >= LLAMA70_LAYERS * 1.29e-4


def test_a_flattening_factor_below_one_is_refused():
    with pytest.raises(WorkloadError, match="flat_graph_host_factor"):
        EngineConfig(flat_graph_host_factor=0.5)
