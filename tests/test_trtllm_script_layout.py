"""The expert parallelism and attention-DP InferenceX's TensorRT-LLM launch scripts chose themselves before
17d5e204f (2025-11-03), read in place of the rows' stated EP 1."""

from llmath.measure.run_record import Layout
from llmath.measure.trt_launchers import INFERENCEX_TRT_SCRIPT_LAYOUT, script_layout, with_script_layout

NOTES = "model=x; measured=2025-11-02T10:00:00Z; image=nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2"


def _row(model: str, system: str, precision: str, tp: int, isl: int, osl: int, notes: str = NOTES) -> dict:
    return {"backend": "trtllm", "model_path": model, "system": system, "precision": precision,
            "tp_size": str(tp), "isl": str(isl), "osl": str(osl), "source_notes": notes}  # fmt: skip


def test_deepseek_h200_script_runs_ep_tp_and_attention_dp_above_its_thresholds():
    # benchmarks/dsr1_fp8_h200_trt_slurm.sh at e06929c7: EP_SIZE="$TP" always; DP_ATTENTION=true when CONC > 32 at
    # 8k/1k and CONC > 64 at 1k/1k and 1k/8k
    r = _row("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", 8, 8192, 1024)
    assert script_layout(r, 32, True) == (8, 1)
    assert script_layout(r, 33, True) == (8, 8)
    r1k = _row("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", 8, 1024, 1024)
    assert script_layout(r1k, 4, True) == (8, 1)
    assert script_layout(r1k, 64, True) == (8, 1)
    assert script_layout(r1k, 65, True) == (8, 8)


def test_deepseek_fp4_b200_script_cases_by_tp():
    # benchmarks/dsr1_fp4_b200_trt_slurm.sh at e06929c7: EP_SIZE="1" unless, on TP 8, CONC > 8 (1k/1k), > 16 (1k/8k),
    # > 32 (8k/1k), on TP 4 CONC > 32; DP_ATTENTION=true for CONC >= 256 with 1k prompts, CONC > 32 at 8k/1k
    tp8 = _row("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp4", 8, 1024, 1024)
    assert script_layout(tp8, 8, True) == (1, 1)
    assert script_layout(tp8, 16, True) == (8, 1)
    assert script_layout(tp8, 128, True) == (8, 1)
    assert script_layout(tp8, 256, True) == (8, 8)
    assert script_layout(_row("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp4", 8, 1024, 8192), 16, True) == (1, 1)
    tp4 = _row("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp4", 4, 8192, 1024)
    assert script_layout(tp4, 32, True) == (1, 1)
    assert script_layout(tp4, 64, True) == (4, 4)
    # the FP8 script: EP_SIZE="$TP" always, DP_ATTENTION=true for CONC > 32 at 1k/1k
    assert script_layout(_row("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8", 8, 1024, 1024), 33, True) == (8, 8)


def test_gpt_oss_scripts():
    # gptoss_fp4_h200_trt_slurm.sh at e06929c7: trtllm-serve --ep_size=$TP, enable_attention_dp: false;
    # gptoss_fp4_b200_trt_slurm.sh: EP_SIZE="$TP" and DP_ATTENTION=true only from CONC 256
    assert script_layout(_row("openai/gpt-oss-120b", "h200_sxm", "fp4", 2, 1024, 1024), 64, True) == (2, 1)
    b200 = _row("openai/gpt-oss-120b", "b200_sxm", "fp4", 8, 1024, 1024)
    assert script_layout(b200, 128, True) == (1, 1)
    assert script_layout(b200, 256, True) == (8, 8)


def test_rows_outside_the_scripts_window_keep_their_stated_layout():
    later = NOTES.replace("2025-11-02", "2025-11-03")  # 17d5e204f passes EP_SIZE and DP_ATTENTION from the config
    assert script_layout(_row("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", 8, 1024, 1024, later), 4, True) is None
    assert script_layout(_row("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", 8, 1024, 1024), 4, False) is None
    vllm = {**_row("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", 8, 1024, 1024), "backend": "vllm"}
    assert script_layout(vllm, 4, True) is None
    assert script_layout(_row("meta-llama/Llama-3.1-70B", "h200_sxm", "fp8", 8, 1024, 1024), 4, True) is None


def test_the_run_reads_the_scripts_layout_and_says_so():
    r = _row("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", 8, 8192, 1024)
    assumed: list[str] = []
    # 8 GPUs: the script's TP 8 ranks attend data-parallel (attention-DP 8, TP 1) with EP 8
    assert with_script_layout(r, Layout(8, 1, 1, 1), 64, True, assumed) == Layout(1, 1, 8, 8)
    assert assumed and "attention-DP 8" in assumed[0]
    # a stated EP or attention-DP is kept
    assert with_script_layout(r, Layout(1, 1, 8, 8), 64, True, []) == Layout(1, 1, 8, 8)
    assert all("source" in rule and rule["from"] <= rule["until"] for rule in INFERENCEX_TRT_SCRIPT_LAYOUT)
