"""The formats TensorRT-LLM runs DeepSeek-R1's and gpt-oss-120b's checkpoints in on Hopper, whatever precision label
a measured row carries (``measure.trt_launchers.TRT_CHECKPOINT_FORMATS``), and the grouped-expert kernel its
launchers picked on Blackwell (``INFERENCEX_TRT_MOE_KERNEL``)."""

import pytest

from llmath import hardware
from llmath.deploy import engines
from llmath.errors import WorkloadError
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.kernels import launcher_moe_kernel
from llmath.hardware.roofline import efficiency
from llmath.measure.serving_runs import engine_settings, precision, to_run
from llmath.measure.trt_launchers import checkpoint_formats, moe_kernel, piecewise_prefill


def _row(**kw) -> dict:
    r = dict(id="r", backend="trtllm", backend_version="", model_path="deepseek-ai/DeepSeek-R1", system="h200_sxm",
             precision="fp8", mode="agg", isl="1024", osl="1024", gemm_quant_mode="fp8", moe_quant_mode="fp8",
             batch_size="4", tp_size="8", pp_size="1", attention_dp_size="", moe_tp_size="1", moe_ep_size="8",
             silicon_ttft_ms="300", silicon_tpot_ms="14",
             source_notes="model=x; silicon_concurrency=4; measured=2026-01-28T00:00:00Z; wip=False")  # fmt: skip
    r.update({k: str(v) for k, v in kw.items()})
    return r


def _gptoss(**kw) -> dict:
    base = dict(model_path="openai/gpt-oss-120b", precision="fp4", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4",
                tp_size=1, moe_ep_size=1)  # fmt: skip
    return _row(**{**base, **kw})


def test_deepseek_r1_fp8_on_hopper_runs_its_block_scaled_checkpoint():
    # deepseek-ai/DeepSeek-R1(-0528) config.json: quantization_config quant_method fp8, weight_block_size [128, 128]:
    # block-scaled FP8 weights (FP8_BLOCK_SCALES in TensorRT-LLM), not the label's per-tensor W8A8
    run = to_run(_row())
    p = precision(run)
    assert p.weights == "fp8-block" and p.act_quant == "fp8" and p.kv == "fp8"
    assert "checkpoint_formats" not in engine_settings(run)  # a format setting, not an engine one
    assert precision(to_run(_row(system="h100_sxm"))).weights == "fp8-block"


def test_gpt_oss_on_hopper_runs_weight_only_mxfp4_experts():
    # TensorRT-LLM ModelConfig.get_mxfp4_quant_algo: below sm100 W4A16_MXFP4 (MXFP4 experts, bf16 activations);
    # the checkpoint's modules_to_not_convert keep attention, router, embeddings and LM head in bf16
    for system, label in (("h200_sxm", "fp4"), ("h100_sxm", "fp8")):
        p = precision(to_run(_gptoss(system=system, precision=label, gemm_quant_mode=label, moe_quant_mode=label)))
        assert p.weight_format("experts") == "mxfp4"
        assert p.act_quant is None and p.activations == "bf16"
        assert p.weight_format("attention") == "bf16"


def test_the_rule_leaves_other_engines_systems_and_labels_alone():
    assert checkpoint_formats(_row(system="b200_sxm")) == {}  # Blackwell: not this rule
    assert checkpoint_formats(_gptoss(system="b200_sxm")) == {}  # sm100: W4A8_MXFP4_MXFP8, another format
    assert checkpoint_formats(_row(backend="vllm")) == {}
    assert checkpoint_formats(_row(precision="fp4")) == {}  # an NVFP4 checkpoint of DeepSeek-R1 is another model
    assert checkpoint_formats(_row(model_path="meta-llama/Llama-3.1-70B")) == {}
    p = precision(to_run(_row(system="b200_sxm")))
    # the label's FP8 over the checkpoint's 128 × 128 blocks (deepseek-ai/DeepSeek-R1 config.json weight_block_size)
    assert p.weights == "fp8-block" and p.act_quant == "fp8"
    # the rule applies to rows of any launcher: TensorRT-LLM, not the script, picks the format from the checkpoint
    assert checkpoint_formats(_row(source_notes="silicon_concurrency=4")) == {"checkpoint_formats": True}


def test_gpt_oss_b200_rows_prefill_with_tensorrt_llms_mxfp8_moe_kernel():
    # every InferenceX gpt-oss B200 TensorRT-LLM script sets MOE_BACKEND="TRTLLM"; TensorRT-LLM runs it as
    # W4A8_MXFP4_MXFP8 from sm100 (ModelConfig.get_mxfp4_quant_algo)
    row = _gptoss(system="b200_sxm")
    assert moe_kernel(row, 4, 1, True) == {"moe_kernel": "trtllm_gen_mxfp8"}
    assert engine_settings(to_run(row))["moe_kernel"] == "trtllm_gen_mxfp8"
    assert moe_kernel(row, 4, 1, False) == {}  # another launcher: not read
    # H200: the TRITON backend (gptoss_fp4_h200_trt_slurm.sh), W4A16 (above), its path named for its launches
    assert moe_kernel(_gptoss(), 4, 1, True) == {"moe_kernel": "trtllm_triton_mxfp4"}
    # a DeepSeek-R1 FP8 B200 row of 2026-01-28: DEEPGEMM, as every FP8 B200 script to that date set (below)
    assert moe_kernel(_row(system="b200_sxm"), 4, 1, True) == {"moe_kernel": "trtllm_deepgemm_fp8_block"}


# aiconfigurator-core 0.12.0, b200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet, kernel_source moe_torch_flow,
# w4a8_mxfp4_mxfp8, gpt-oss-120b's experts (hidden 2880, inter 2880, 128 experts, top-4), balanced, moe-TP = EP = 1
@pytest.mark.parametrize("tokens, ms", [(1024, 0.311872), (8192, 0.884320)])  # rows 31257, 31263
def test_trtllm_gen_mxfp8_fit_reproduces_its_table_at_gpt_oss_shape(tokens, ms):
    hw = hardware.get("b200")
    entry = ef.data()["engine_moe_kernel"]["devices"]["b200"]["trtllm_gen_mxfp8"]["w4a8_mxfp4_mxfp8"]
    x = ef.moe_cost(tokens, 2880, 2880, 4, 128, "w4a8_mxfp4_mxfp8", routing="balanced")
    t = ef.model_time(entry["coef"], *x, hw.peak("fp8"), hw.memory_bandwidth_bytes_per_s, ef.device_tile("b200"))
    assert float(t) == pytest.approx(ms * 1e-3, rel=entry["held_out"]["p90_abs_err"])
    # picked, it replaces the prefill experts' model on B200 and nowhere else
    base = efficiency("expected", hw)
    got = launcher_moe_kernel(base, hw, "trtllm_gen_mxfp8")
    assert got.fit("moe_prefill", "w4a8_mxfp4_mxfp8") == tuple(entry["coef"])
    h200 = hardware.get("h200")
    assert launcher_moe_kernel(efficiency("expected", h200), h200, "trtllm_gen_mxfp8") == efficiency("expected", h200)


# the same table, kernel_source moe_torch_flow_cutlass, nvfp4, DeepSeek-R1's experts (hidden 7168, inter 2048, 256
# experts, top-8), balanced, EP 1: (tokens, moe-TP, ms)
@pytest.mark.parametrize(
    "tokens, tp, ms", [(1024, 1, 1.180176), (8192, 1, 2.622027), (1024, 8, 0.404832), (8192, 8, 1.454064)]
)  # rows 190881, 190887, 99237, 99250
def test_trtllm_cutlass_nvfp4_fit_reproduces_its_table_at_deepseek_shape(tokens, tp, ms):
    hw = hardware.get("b200")
    entry = ef.data()["engine_moe_kernel"]["devices"]["b200"]["trtllm_cutlass_nvfp4"]["nvfp4"]
    x = ef.moe_cost(tokens, 7168, 2048 / tp, 8, 256, "nvfp4", routing="balanced")
    t = ef.model_time(entry["coef"], *x, hw.peak("fp4"), hw.memory_bandwidth_bytes_per_s, ef.device_tile("b200"))
    assert ef.BYTES["nvfp4"] == 9 / 16  # 16 e2m1 values (8 bytes) + one e4m3 scale per 16
    assert float(t) == pytest.approx(ms * 1e-3, rel=entry["held_out"]["p90_abs_err"])


# the kernels' tables at decode sizes, DeepSeek-R1's experts, moe-TP 8, EP 1, balanced: (kernel, format, peak, tokens,
# ms)
@pytest.mark.parametrize(
    "kernel, fmt, peak, tokens, ms",
    [
        ("trtllm_cutlass_nvfp4", "nvfp4", "fp4", 16, 0.186112),  # row 99218 (moe_torch_flow_cutlass)
        ("trtllm_cutlass_nvfp4", "nvfp4", "fp4", 64, 0.302997),  # row 99223
        ("trtllm_deepgemm_fp8_block", "fp8_block", "fp8", 16, 0.261424),  # row 171930 (deepgemm)
        ("trtllm_deepgemm_fp8_block", "fp8_block", "fp8", 64, 0.424517),  # row 171934
        # TensorRT-LLM's TRTLLM backend over NVFP4 experts, timed through FlashInfer in vLLM 0.19.0's B200 table
        # (vllm_flashinfer_trtllm_moe_fp4)
        ("trtllm_gen_nvfp4", "nvfp4", "fp4", 16, 0.089125),  # row 26266
        ("trtllm_gen_nvfp4", "nvfp4", "fp4", 64, 0.154203),  # row 26269
    ],
)
def test_deepseek_launcher_kernels_time_decode_passes_at_their_own_shape(kernel, fmt, peak, tokens, ms):
    # their tables time DeepSeek-R1's own experts down to decode token counts: the fit holds there and replaces the
    # decode passes' model (class moe) as well as the prefill one's
    hw = hardware.get("b200")
    entry = ef.data()["engine_moe_kernel"]["devices"]["b200"][kernel][fmt]
    x = ef.moe_cost(tokens, 7168, 2048 / 8, 8, 256, fmt, routing="balanced")
    t = ef.model_time(entry["coef"], *x, hw.peak(peak), hw.memory_bandwidth_bytes_per_s, ef.device_tile("b200"))
    assert float(t) == pytest.approx(ms * 1e-3, rel=entry["held_out"]["p90_abs_err"])
    got = launcher_moe_kernel(efficiency("expected", hw), hw, kernel)
    assert got.fit("moe", fmt) == got.fit("moe_prefill", fmt) == tuple(entry["coef"])


def _dsr1_fp4(measured: str, **kw) -> dict:
    notes = f"model=x; silicon_concurrency=4; measured={measured}T00:00:00Z; wip=False"
    base = dict(system="b200_sxm", precision="fp4", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4", source_notes=notes)
    return _row(**{**base, **kw})


def test_deepseek_fp4_b200_rows_take_cutlass_where_the_scripts_picked_it():
    cutlass, trtllm = {"moe_kernel": "trtllm_cutlass_nvfp4"}, {"moe_kernel": "trtllm_gen_nvfp4"}
    # dsr1_fp4_b200_trt_slurm.sh at e06929c7 / f6a9d0b6: CUTLASS from CONC 256 at 1k/1k and 1k/8k, above 32 at 8k/1k,
    # MOE_BACKEND="TRTLLM" below
    assert moe_kernel(_dsr1_fp4("2025-12-15"), 256, 1, True) == cutlass
    assert moe_kernel(_dsr1_fp4("2025-12-15"), 128, 1, True) == trtllm
    assert moe_kernel(_dsr1_fp4("2025-11-02", isl=8192), 64, 1, True) == cutlass
    assert moe_kernel(_dsr1_fp4("2025-11-02", isl=8192), 32, 1, True) == trtllm
    # dsr1_fp4_b200_trt.sh at daa8239f7 (2026-02-03): CUTLASS when DP_ATTENTION is true, TRTLLM otherwise
    assert moe_kernel(_dsr1_fp4("2026-02-03"), 256, 8, True) == cutlass
    assert moe_kernel(_dsr1_fp4("2026-02-03"), 256, 1, True) == trtllm
    # outside InferenceX's launchers: no rule
    assert moe_kernel(_dsr1_fp4("2026-02-03"), 256, 1, False) == {}
    # the FP8 scripts: not this rule (dsr1_fp8_b200_trt.sh at ec7bafaae: TRTLLM at 1k/1k)
    assert moe_kernel(_dsr1_fp4("2026-02-03", precision="fp8"), 256, 8, True) == {"moe_kernel": "trtllm_gen_fp8_block"}


def _dsr1_b200(precision: str, image: str, measured: str, **kw) -> dict:
    notes = (f"model=x; silicon_concurrency=4; measured={measured}T00:00:00Z; wip=False; "
             f"image=nvcr.io#nvidia/tensorrt-llm/release:{image}")  # fmt: skip
    base = dict(system="b200_sxm", precision=precision, source_notes=notes)
    return _row(**{**base, **kw})


def test_deepseek_b200_rows_with_the_piecewise_prefill_graph_run_no_eager_prefill():
    off = {"eager_prefill": False}
    # dsr1_fp8_b200_trt.sh at ec7bafaae (image 1.2.0rc6.post2): PIECEWISE_CUDA_GRAPHS from CONC 64 at 1k/1k and 8k/1k,
    # at 1k/8k from 128 below 256 (256 runs the DEEPGEMM branch instead)
    fp8 = _dsr1_b200("fp8", "1.2.0rc6.post2", "2026-01-29")
    assert piecewise_prefill(fp8, 64, 8, 1, 1, True) == off
    assert piecewise_prefill(fp8, 32, 8, 1, 1, True) == {}
    assert piecewise_prefill(_dsr1_b200("fp8", "1.2.0rc6.post2", "2026-01-29", osl=8192), 256, 8, 8, 8, True) == {}
    # dsr1_fp4_b200_trt.sh at 6eecc0e66: 1k/1k with TP 8 and EP_SIZE 8 only
    fp4 = _dsr1_b200("fp4", "1.2.0rc6.post2", "2026-02-03")
    assert piecewise_prefill(fp4, 4, 8, 8, 1, True) == off
    assert piecewise_prefill(fp4, 4, 8, 1, 1, True) == {}
    # dsr1_fp8_b200_trt_mtp.sh at 5d517074c (1.2.0rc6.post3): on above 4 clients at 1k/1k, off with attention-DP
    mtp = _dsr1_b200("fp8", "1.2.0rc6.post3", "2026-02-05")
    assert piecewise_prefill(mtp, 8, 8, 1, 1, True) == off
    assert piecewise_prefill(mtp, 4, 8, 1, 1, True) == {}
    assert piecewise_prefill(mtp, 256, 8, 8, 8, True) == {}
    # dsr1_fp4_b200_trt_mtp.sh at 0aae52d4c: 1k/1k at 32 and 64 clients, 128 without attention-DP
    mtp4 = _dsr1_b200("fp4", "1.2.0rc6.post3", "2026-02-06")
    assert piecewise_prefill(mtp4, 64, 8, 8, 1, True) == off
    assert piecewise_prefill(mtp4, 128, 8, 8, 8, True) == {}
    assert piecewise_prefill(mtp4, 16, 8, 8, 1, True) == {}
    # earlier images, other systems, other launchers: the PyTorch backend's eager prefill stays
    assert piecewise_prefill(_dsr1_b200("fp8", "1.1.0rc2.post2", "2026-01-14"), 64, 8, 1, 1, True) == {}
    assert piecewise_prefill(fp8, 64, 8, 1, 1, False) == {}
    assert dict(to_run(fp8).engine_settings)["eager_prefill"] is True  # 4 clients: no graph
    assert dict(to_run(_dsr1_b200("fp8", "1.2.0rc6.post2", "2026-01-29", batch_size=64,
                                  source_notes=fp8["source_notes"].replace("concurrency=4", "concurrency=64")))
                .engine_settings)["eager_prefill"] is False  # fmt: skip


def test_inferencex_trtllm_rows_tokenize_their_text_prompts_in_the_server():
    # InferenceX's client posts text (utils/bench_serving); trtllm-serve's DefaultInputProcessor encodes it with the
    # Hugging Face tokenizer before scheduling: 2.2 µs per token, the vLLM and SGLang presets' rate
    run = to_run(_gptoss(system="b200_sxm"))
    assert engine_settings(run)["prompt_token_s"] == 2.2e-6
    assert "prompt_token_s" not in engine_settings(to_run(_gptoss(system="b200_sxm", source_notes="x=1")))
    eng = engines.preset("trtllm", prompt_token_s=2.2e-6)
    assert eng.overheads.request_s(8192) == pytest.approx(8192 * 2.2e-6)  # 18.0 ms for an 8k prompt
    assert engines.preset("trtllm").overheads.per_prompt_token_s == 0.0  # trtllm-bench passes token ids
    with pytest.raises(WorkloadError, match="prompt_token_s=0.5"):
        engines.preset("trtllm", prompt_token_s=0.5)


# the same table, kernel_source deepgemm, fp8_block, DeepSeek-R1's experts, balanced, EP 1: (tokens, moe-TP, ms);
# 1,024 tokens at moe-TP 8 (0.510917 ms, row 171946) the fit puts 34% low, past its held-out p90 (docs/serving.md)
@pytest.mark.parametrize("tokens, tp, ms", [(1024, 1, 2.029435), (8192, 1, 3.370635), (8192, 8, 1.438053)])
def test_trtllm_deepgemm_fit_reproduces_its_table_at_deepseek_shape(tokens, tp, ms):  # rows 72559, 72567, 171957
    hw = hardware.get("b200")
    entry = ef.data()["engine_moe_kernel"]["devices"]["b200"]["trtllm_deepgemm_fp8_block"]["fp8_block"]
    x = ef.moe_cost(tokens, 7168, 2048 / tp, 8, 256, "fp8_block", routing="balanced")
    t = ef.model_time(entry["coef"], *x, hw.peak("fp8"), hw.memory_bandwidth_bytes_per_s, ef.device_tile("b200"))
    assert float(t) == pytest.approx(ms * 1e-3, rel=entry["held_out"]["p90_abs_err"])


def test_deepseek_fp8_b200_rows_take_deepgemm_where_the_scripts_picked_it():
    deepgemm = {"moe_kernel": "trtllm_deepgemm_fp8_block"}
    # every FP8 B200 script to 2026-01-28 (dsr1_fp8_b200_trt_slurm.sh at f6a9d0b6, 008b91a9d): DEEPGEMM
    assert moe_kernel(_dsr1_b200("fp8", "1.1.0rc2.post2", "2026-01-14"), 4, 1, True) == deepgemm
    # dsr1_fp8_b200_trt.sh at ec7bafaae: at 1k/8k from 256 clients only
    plain = _dsr1_b200("fp8", "1.2.0rc6.post2", "2026-01-29", osl=8192)
    assert moe_kernel(plain, 256, 8, True) == deepgemm
    assert moe_kernel(plain, 128, 1, True) == {"moe_kernel": "trtllm_gen_fp8_block"}  # TRTLLM below 256
    # dsr1_fp8_b200_trt_mtp.sh at 5d517074c: with attention-DP only
    mtp = _dsr1_b200("fp8", "1.2.0rc6.post3", "2026-02-05")
    assert moe_kernel(mtp, 256, 8, True) == deepgemm
    assert moe_kernel(mtp, 64, 1, True) == {"moe_kernel": "trtllm_gen_fp8_block"}  # TRTLLM without attention-DP
