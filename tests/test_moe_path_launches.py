"""The eager floor of a pass counts a routed-expert layer as the MoE kernel path the engine runs launches it."""

import pytest

from llmath.deploy.cost import rank_table
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import eager_host_s, efficiency
from llmath.measure.trt_launchers import moe_kernel
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops.launches import MOE_PATH_LAUNCHES, pass_launches
from llmath.ops.table import table

GPT_OSS = "openai/gpt-oss-120b"
TRITON = "trtllm_triton_mxfp4"
# gpt-oss-120b (config.json: num_hidden_layers 36, every layer a routed-expert one) as llmath's operators launch
# it (ops/launches.py LAUNCHES, SGLang's counts): per layer the two norms (each residual add inside them) 2; attention
# 5 (the fused qkv projection, rotary, sinks, the attention kernel, o); router 1; top-k with the token sort 3;
# experts 4 (the gate-up GEMM, the activation, the down GEMM and the top-k sum) = 15; + embedding, final norm and
# LM head 3: 36 × 15 + 3 = 543.
GPT_OSS_LAUNCHES = 36 * (2 + 5 + 1 + 3 + 4) + 3
# TensorRT-LLM's Triton MoE path (moe_config.backend TRITON, fused_moe_triton.py TritonMXFP4FusedMoEMethod.apply):
# router 1, routing 4 (_topk_forward, _sum_bitmatrix_rows, _combined_routing_memset, _combined_routing_compute),
# the activation's pad to 128 columns 2, the first matmul_ogs 1, the second with its fused scatter 5 = 13 a layer
# in place of llmath's 1 + 3 + 4; at EP > 1 TritonEPRouter.prune_routing_ep's 3 more. EP 1: 36 × (2 + 5 + 13) + 3
# = 723; EP 4: 36 × (2 + 5 + 16) + 3 = 831.
TRITON_EP1 = 36 * (2 + 5 + (1 + 4 + 2 + 1 + 5)) + 3
TRITON_EP4 = 36 * (2 + 5 + (1 + 4 + 2 + 1 + 5) + 3) + 3


def _rank(tp: int, ep: int):
    spec = resolve(GPT_OSS)
    lay = make_layout(spec, ParallelConfig(None, tp, 1, ep, 1))
    return spec, lay, rank_table(spec, "prefill", "flash", lay, 0)


@pytest.mark.parametrize(("tp", "ep", "expected"), [(1, 1, TRITON_EP1), (4, 4, TRITON_EP4), (4, 1, TRITON_EP1)])
def test_triton_path_launches_of_gpt_oss(tp, ep, expected):
    _, lay, t = _rank(tp, ep)
    assert t.launches == GPT_OSS_LAUNCHES  # the operators' own count, whatever the layout
    assert pass_launches(t, TRITON, lay.ep) == expected
    assert eager_host_s(t, 1e-4, "launch", TRITON, lay.ep) == pytest.approx(expected * 1e-4)


@pytest.mark.parametrize("path", ["", "trtllm_cutlass_nvfp4", "trtllm_gen_mxfp8", "trtllm_deepgemm_fp8_block"])
def test_other_paths_keep_the_operators_count(path):
    _, lay, t = _rank(4, 4)
    assert path not in MOE_PATH_LAUNCHES
    assert pass_launches(t, path, lay.ep) == GPT_OSS_LAUNCHES
    assert eager_host_s(t, 1e-4, "launch", path, lay.ep) == pytest.approx(GPT_OSS_LAUNCHES * 1e-4)


def test_a_dense_model_has_no_routed_layer_to_recount():
    llama = table(resolve("llama-3.1-8b"), "prefill")
    assert pass_launches(llama, TRITON, 4) == llama.launches


@pytest.mark.parametrize(("tp", "ep", "expected"), [(1, 1, TRITON_EP1), (4, 4, TRITON_EP4)])
def test_a_short_eager_pass_takes_the_paths_launches(tp, ep, expected):
    # 1 ms a launch: 723 or 831 ms of host work, far above the GPU time of a 16-token prefill of gpt-oss-120b on
    # H200 (about 65 GB of MXFP4 weights at 4.8 TB/s: < 20 ms), so the pass lasts the host's time
    spec, lay, _ = _rank(tp, ep)
    hw = get("H200")
    args = (spec, hw, Precision(), efficiency("expected", hw), "flash", True, lay)
    triton = Device(*args, eager_host_s=1e-3, moe_path=TRITON)
    default = Device(*args, eager_host_s=1e-3)
    assert float(triton.iteration(0, 0, 1, 16).time_s) == pytest.approx(expected * 1e-3)
    assert float(default.iteration(0, 0, 1, 16).time_s) == pytest.approx(GPT_OSS_LAUNCHES * 1e-3)


def test_inferencex_h200_gpt_oss_rows_run_the_triton_path():
    # gptoss_fp4_h200_trt_slurm.sh / gptoss_fp4_h200_trt.sh: moe_config backend TRITON; the B200 scripts: TRTLLM
    row = dict(backend="trtllm", model_path=GPT_OSS, system="h200_sxm", precision="fp4", isl="1024", osl="1024")
    assert moe_kernel(row, 16, 1, inferencex=True) == {"moe_kernel": TRITON}
    assert moe_kernel(dict(row, system="b200_sxm"), 16, 1, inferencex=True) == {"moe_kernel": "trtllm_gen_mxfp8"}
    assert moe_kernel(row, 16, 1, inferencex=False) == {}
