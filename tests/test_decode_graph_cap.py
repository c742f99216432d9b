"""A decode step of more requests than an engine's decode CUDA-graph cap runs without a graph and takes the per-launch
host floor of a pass launched from Python; steps at or below the cap replay a graph and are unchanged.

SGLang (sgl-project/sglang python/sglang/srt/model_executor/cuda_graph_runner.py, ``CudaGraphRunner.can_run``): a
decode batch replays a graph only if its size is at most the largest captured (``--cuda-graph-max-bs``), else the
model runner runs it eagerly. TensorRT-LLM's PyTorch backend (``cuda_graph_config.max_batch_size``,
tensorrt_llm/llmapi/llm_args.py ``CudaGraphConfig``): generation batches above it run without a graph. Both caps count
requests; a speculative verify step's draft tokens ride on each request.
"""

from __future__ import annotations

import json

import pytest

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.engine_args import yaml_subset
from llmath.deploy.engine_read import parse
from llmath.deploy.graph_passes import decode_graph_cap
from llmath.deploy.service import serve
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from tests.helpers import run_cli

# Llama-3-8B's decode pass: 32 layers, the module code launching 9 kernels per layer (norm, one QKV GEMM, rotary,
# attention, o, norm, one gate-up GEMM, activation, down: the residual adds run inside the RMSNorms) + embedding,
# final norm and LM head = 32 × 9 + 3 = 291 launches (ops/launches.py).
LLAMA3_8B_LAUNCHES = 32 * 9 + 3
HOST_S = 65.6e-6  # per launch: TensorRT-LLM's eager_host_per_kernel_s (data/engines.json)


def _device(cap: int) -> Device:
    hw = get("H100")
    return Device(resolve("llama-3-8b"), hw, Precision(), efficiency("expected", hw), "flash", True, None, 0,
                  decode_graph_requests=cap, decode_eager_host_s=HOST_S)  # fmt: skip


def test_a_decode_step_above_the_cap_takes_the_eager_floor_and_one_at_or_below_it_is_unchanged():
    free, capped = _device(0), _device(32)
    ctx = 1024.0
    # 64 requests > 32: the step runs eagerly, 291 launches × 65.6 us = 19.09 ms, above its GPU time (16 GB of BF16
    # weights + 64 requests × 1,025 positions × 128 KiB of KV (32 layers × 8 KV heads × 128 × 2 × 2 bytes) = 24.6 GB,
    # 7.3 ms at H100's 3.35 TB/s peak)
    gpu = float(free.iteration(64, ctx).time_s)
    assert gpu < 0.8 * LLAMA3_8B_LAUNCHES * HOST_S
    assert float(capped.iteration(64, ctx).time_s) == pytest.approx(LLAMA3_8B_LAUNCHES * HOST_S, rel=1e-9)
    # at and below the cap: the graph replays, the step's time is the uncapped device's
    for batch in (1, 16, 32):
        assert float(capped.iteration(batch, ctx).time_s) == float(free.iteration(batch, ctx).time_s)
    # a verify step counts requests, not tokens: 16 requests × 4 tokens replay, 40 × 4 run eagerly
    assert float(capped.verify(16, 4, ctx).time_s) == float(free.verify(16, 4, ctx).time_s)
    assert float(capped.verify(40, 4, ctx).time_s) == pytest.approx(LLAMA3_8B_LAUNCHES * HOST_S, rel=1e-9)
    # a step that prefills keeps its own rule (TensorRT-LLM's preset: no prefill floor)
    assert float(capped.iteration(64, ctx, 1, 512).time_s) == float(free.iteration(64, ctx, 1, 512).time_s)


def test_serving_tpot_above_the_cap_rises_by_the_eager_floor_and_is_unchanged_at_or_below_it():
    # 64 clients of 1k/1k on one H100 under TensorRT-LLM's preset: decode steps hold 64 requests (minus the one
    # prefilling); with a cap of 32 each is floored at 291 × 65.6 us = 19.09 ms, above the graph-replayed step
    def tpot(cap: int, concurrency: int = 64) -> float:
        w = Workload(prompt=1024, gen=1024, concurrency=concurrency)
        rep = serve("llama-3-8b", "h100-sxm", workload=w, engine="trtllm", decode_graph_max_batch=cap)
        return rep.to_dict()["tpot_s"]

    floor = LLAMA3_8B_LAUNCHES * HOST_S
    assert tpot(0) < 0.8 * floor
    assert floor <= tpot(32) <= 1.1 * floor
    assert tpot(64) == tpot(0) and tpot(128) == tpot(0)  # every step within the cap
    assert tpot(16, concurrency=16) == tpot(0, concurrency=16)


def test_the_cap_is_an_engine_setting_of_requests_and_graphs_off_has_none():
    h100 = get("H100")
    assert decode_graph_cap(engines.preset("sglang", h100)) == (0, 0.0)  # no cap stated
    assert decode_graph_cap(engines.preset("trtllm", h100, decode_graph_max_batch=32)) == (32, HOST_S)
    assert decode_graph_cap(engines.preset("trtllm", h100, decode_graph_max_batch=32, cuda_graphs=False)) == (0, 0.0)
    with pytest.raises(WorkloadError, match="decode_graph_max_batch=-1 must be >= 0"):
        engines.preset("sglang", h100, decode_graph_max_batch=-1)


def test_engine_args_with_a_graph_cap_below_the_running_requests_are_modelled(capsys):
    # the former refusal: 256 clients on a server capturing decode graphs up to 64 requests (SGLang's
    # CudaGraphRunner.can_run runs the larger batches eagerly): modelled, and slower than the uncapped server
    sglang = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B"
    assert parse(sglang + " --cuda-graph-max-bs 64").deployment.decode_graph_batch == 64

    def tpot(text: str, concurrency: str = "256") -> float:
        args = ("analyze", "-H", "h100-sxm", "-c", concurrency, "--json", "--engine-args", text)
        code, out, err = run_cli(capsys, *args)
        assert code == 0, err
        return json.loads(out)["tpot_s"]

    assert tpot(sglang + " --cuda-graph-max-bs 64") > tpot(sglang)
    assert tpot(sglang + " --cuda-graph-max-bs 64", "64") == tpot(sglang, "64")  # every batch within the cap
    # TensorRT-LLM's cuda_graph_config.max_batch_size reads into the same setting
    trt = parse("trtllm-serve meta-llama/Llama-3.1-8B", yaml_subset("cuda_graph_config:\n  max_batch_size: 32\n"))
    assert (trt.deployment.decode_graph_batch, trt.deployment.enforce_eager) == (32, False)
