"""SGLang's host time per eager kernel by device (data/engines.json ``by_device``), from aiconfigurator's timings
of SGLang's DeepSeek-V3 attention module run eagerly (scripts/fit_sglang_eager_host.py)."""

import pytest

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.service import serve
from llmath.hardware import get

# aiconfigurator-core 0.12.0 systems/data/<system>/mla/sglang/*/wideep_context_mla_perf.parquet: the module's
# median time over batch 1 and 1-512 prompt tokens (flat: B200 0.547 ms at 1 token, 0.531 ms at 512), in ms
MODULE_MS = {"h100-sxm": 0.6635, "h200": 0.6094, "b200": 0.5314, "gb200": 0.8684}
# what SGLang launches for that module: fused_qkv_a_proj_with_mqa (q_a_proj and kv_a_proj_with_mqa, one GEMM),
# q_a_layernorm, q_b_proj, kv_a_layernorm, kv_b_proj, o_proj, the rotary embedding and the attention kernel
# (sglang/srt/models/deepseek_v2.py DeepseekV2AttentionMLA)
ATTENTION_KERNELS = 8


@pytest.mark.parametrize("device", sorted(MODULE_MS))
def test_host_time_per_kernel_is_the_module_time_over_its_kernels(device):
    ov = engines.preset("sglang", get(device)).overheads
    assert ov.eager_host_per_kernel_s == pytest.approx(MODULE_MS[device] / 1e3 / ATTENTION_KERNELS, rel=5e-3)
    assert "wideep_context_mla_perf" in ov.sources["eager_host_per_kernel_s"]


def test_devices_without_a_timing_keep_the_sourced_default():
    # sgl-project/sglang#12160: 82.6 ms for an eager DeepSeek-V3 extend over the 1,260 kernels SGLang launches
    for ov in (engines.preset("sglang", get("a100-sxm-80gb")).overheads, engines.overheads("sglang")):
        assert ov.eager_host_per_kernel_s == pytest.approx(82.6e-3 / 1260, rel=1e-3)
    # the B200 timing and that log agree within 1.5% (0.531 ms / 8 = 66.4 against 65.6 us per launch)
    assert engines.preset("sglang", get("b200")).overheads.eager_host_per_kernel_s == pytest.approx(65.6e-6, rel=0.015)


def test_other_engines_keep_their_single_value():
    for name in ("vllm", "trtllm"):
        assert engines.preset(name, get("h200")).overheads == engines.overheads(name)


def test_one_short_deepseek_prompt_on_h200_waits_for_its_host():
    # DeepSeek-R1 on 8 × H200, SGLang, one client, a 64-token prompt: the eager prefill pass is host-bound, its
    # TTFT the 1,260 kernels SGLang launches × 0.609 ms / 8 = 95.9 ms plus the prompt's tokenisation (64 × 2.2 us)
    w = Workload(prompt=64, gen=16, concurrency=1)
    report = serve("deepseek-r1", "h200", workload=w, engine="sglang", parallel=ParallelConfig(tp=8))
    assert report.metrics["ttft_s"] == pytest.approx(1260 * 0.609e-3 / 8 + 64 * 2.2e-6, rel=0.01)
