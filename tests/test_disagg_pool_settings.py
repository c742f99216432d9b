"""Each disaggregated pool as its servers run it: the grouped-expert kernel they were configured with, and the KV cache
each decode rank receives."""

import pytest
from test_disagg_recipes import _inferencex

from llmath import Precision, Workload
from llmath.deploy.disagg import serve_disaggregated
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.service import serve
from llmath.errors import LayoutError, UsageError
from llmath.measure.serving_runs import to_run

B200_FP8_IMAGE = "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2"


def test_the_b200_fp8_recipes_moe_backend_follows_the_pools_expert_split():
    # ishandhanani/srt-slurm at fe2cd905, recipes/trtllm/b200-fp8/1k1k/stp/ctx1_gen3_tp8_batch1024_eplb0_mtp0_*.yaml:
    # the context servers (attention-DP, moe_expert_parallel_size 8) set moe_config.backend DEEPGEMM, the generation
    # servers (TP 8, moe_expert_parallel_size 1) TRTLLM
    row = _inferencex(4, "2026-03-18T00:00:00.000Z", B200_FP8_IMAGE, system="b200_sxm", backend_version="0.8.1.post2",
                      prefill_tp_size=8, prefill_moe_ep_size=8, decode_tp_size=8, decode_moe_ep_size=8)  # fmt: skip
    settings = dict(to_run(row).engine_settings)
    assert settings["prefill_moe_kernel"] == "trtllm_deepgemm_fp8_block"
    assert settings["decode_moe_kernel"] == "trtllm_gen_fp8_block"


def test_other_pools_keep_the_engines_kernel():
    # the H100 recipes' servers run CUTLASS (the engine's Hopper default): no kernel is set
    h100 = _inferencex(6, "2026-02-08T01:24:15Z", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post3")
    assert not any(k.endswith("moe_kernel") for k, _ in to_run(h100).engine_settings)


def test_a_decode_pools_kernel_times_its_step_as_the_aggregated_server_does():
    # one client on TP 8: the decode pool's step is the aggregated server's decode step at batch 1, with the same
    # grouped-expert kernel in both
    w = Workload(prompt=1024, gen=1024, concurrency=1)
    kernel = "trtllm_gen_fp8_block"
    pools = dict(prefill={"tp": 8}, decode={"tp": 8})
    plain = serve_disaggregated("deepseek-r1", "b200", workload=w, engine="trtllm", **pools)
    own = serve_disaggregated("deepseek-r1", "b200", workload=w, engine="trtllm", moe_kernels={"decode": kernel},
                              **pools)  # fmt: skip
    agg = serve("deepseek-r1", "b200", workload=w, engine="trtllm", parallel=ParallelConfig(tp=8), moe_kernel=kernel)
    assert own["tpot_s"] == pytest.approx(agg.metrics["tpot_s"], rel=1e-6)
    assert own["tpot_s"] != pytest.approx(plain["tpot_s"], rel=1e-3)
    assert own["prefill_pass_s"] == pytest.approx(plain["prefill_pass_s"], rel=1e-12)  # the prefill pool's default


def test_unknown_moe_kernels_are_refused():
    w = Workload(prompt=1024, gen=1024, concurrency=1)
    pools = dict(prefill={"tp": 8}, decode={"tp": 8})
    with pytest.raises(LayoutError, match="moe_kernels\\['decode'\\]='nope'"):
        serve_disaggregated("deepseek-r1", "b200", workload=w, moe_kernels={"decode": "nope"}, **pools)
    with pytest.raises(LayoutError, match="not a pool"):
        serve_disaggregated("deepseek-r1", "b200", workload=w, moe_kernels={"middle": "marlin"}, **pools)
    with pytest.raises(LayoutError, match="must be a dict"):
        serve_disaggregated("deepseek-r1", "b200", workload=w, moe_kernels="marlin", **pools)


def test_the_kv_transfer_sends_each_decode_rank_what_its_cache_holds():
    # DeepSeek-R1's MLA caches 512 + 64 = 576 values per token and layer, over 61 layers, in BF16 (the checkpoint's
    # KV format): 1024 · 61 · 576 · 2 = 71,958,528 bytes a prompt. Every tensor-parallel decode rank holds the whole
    # latent cache; an attention-DP rank holds its own requests'. B200 boxes are 8 GPUs, so 16 GPUs reach each other
    # over the scale-out network: one 400 Gb/s NIC a GPU, 50 GB/s
    w = Workload(prompt=1024, gen=1024, concurrency=1)
    whole = 1024 * 61 * 576 * 2

    def kv(prefill, decode):
        return serve_disaggregated("deepseek-r1", "b200", workload=w, engine="trtllm", prefill=prefill,
                                   decode=decode)["kv_transfer_s"]  # fmt: skip

    # one attention-DP prefill rank holds the prompt and sends it to each of the 8 TP decode ranks
    assert kv({"dp": 8, "ep": 8}, {"tp": 8}) == pytest.approx(8 * whole / 50e9, rel=1e-9)
    # 8 TP prefill ranks each send an eighth to each of 8 receivers: one receiver's whole cache over its link
    assert kv({"tp": 8}, {"tp": 8}) == pytest.approx(whole / 50e9, rel=1e-9)
    # to an attention-DP decode pool: one rank receives it
    assert kv({"dp": 8, "ep": 8}, {"dp": 8, "ep": 8}) == pytest.approx(whole / 50e9, rel=1e-9)


def test_a_decode_pools_kernel_times_its_decode_steps():
    # the FP4 recipes' attention-DP generation servers set moe_config.backend CUTLASS (connorcarpenter15/srt-slurm
    # 5a156f6b recipes/trtllm/b200-fp4/1k1k/stp/ctx1_gen5_dep8_batch32_eplb0_mtp0.yaml), which TensorRT-LLM's B200
    # table times at DeepSeek-R1's shape, EP 8, at 0.282 ms for 256 tokens against 0.153 ms for the TRTLLM-generated
    # kernel (1.84×; aiconfigurator-core 0.12.0 b200_sxm/moe/trtllm/1.3.0rc20): its decode step is slower, by less
    # than that ratio (the experts are part of the step), and the prefill pool does not move
    p = Precision(weights="nvfp4", act_quant="nvfp4", kv="fp8")
    w = Workload(prompt=1024, gen=1024, concurrency=2048)
    kw = dict(workload=w, engine="trtllm", prefill={"dp": 4, "ep": 4}, decode={"dp": 8, "ep": 8}, precision=p)
    plain = serve_disaggregated("deepseek-r1", "b200", **kw)
    cutlass = serve_disaggregated("deepseek-r1", "b200", moe_kernels={"decode": "trtllm_cutlass_nvfp4"}, **kw)
    assert 1.0 < cutlass["tpot_s"] / plain["tpot_s"] < 1.84
    assert cutlass["prefill_pass_s"] == plain["prefill_pass_s"]


def test_a_dtype_name_as_precision_means_that_dtype_everywhere():
    # llmath.serve takes precision="fp8" as Precision.uniform("fp8") (weights, activations and KV cache in FP8);
    # the disaggregated entry point takes it the same way, and refuses a name that is not a dtype in one line.
    args = dict(workload=Workload(prompt=1024, gen=128, concurrency=8), prefill=dict(tp=1), decode=dict(tp=1))
    by_name = serve_disaggregated("llama-3.1-8b", "h100-sxm", precision="fp8", **args)
    explicit = serve_disaggregated("llama-3.1-8b", "h100-sxm", precision=Precision.uniform("fp8"), **args)
    assert (by_name["ttft_s"], by_name["tpot_s"]) == (explicit["ttft_s"], explicit["tpot_s"])
    with pytest.raises(UsageError, match="fp9") as bad:
        serve_disaggregated("llama-3.1-8b", "h100-sxm", precision="fp9", **args)
    assert "\n" not in str(bad.value)
