"""TensorRT-LLM settings the launchers of the measured serving runs wrote (docs/serving-runs.md, "TensorRT-LLM: KV
admission, batch waiting and the launchers' settings"): the KV cache share aiconfigurator's generator and InferenceX's
launch scripts gave the engine, the holds on new prompts (batch waiting, attention-DP balancing) InferenceX's
scripts turned on, and the token budgets they passed. :mod:`llmath.measure.serving_runs` puts them in a run's
``engine_settings``."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

# The share of the memory weights and buffers leave that TensorRT-LLM gave its KV cache
# (``kv_cache_config.free_gpu_memory_fraction``; llmath's ``gpu_memory_utilization`` with ``kv_fraction_of_free``),
# which its GUARANTEED_NO_EVICT admission fills with each request's prompt and output to the end. The collection's
# generator: ``default(0.80)`` in every TensorRT-LLM template (ai-dynamo/aiconfigurator
# generator/config/backend_templates/trtllm/extra_engine_args.1.0.0rc3.yaml.j2 at 71a2b033, the 1.2.0rc6.post1 and
# 1.3.0rc1 templates at 954fb2d6; cli/templates/trtllm/dynamo/extra_engine_args.1.0.0rc3.yaml.j2 at 96102834).
GENERATOR_TRT_KV_FRACTION = 0.80
# InferenceX's TensorRT-LLM launch scripts, by model and system ("*": any): the ``free_gpu_memory_fraction`` they
# write, and from ``from`` the DeepSeek-R1 FP8 B200 script's cases ((ISL, OSL), least CONC, TP or None, fraction).
INFERENCEX_TRT_KV_FRACTION: dict[tuple[str, str], dict[str, Any]] = {
    ("openai/gpt-oss-120b", "*"): {
        "value": 0.85,
        "source": "SemiAnalysisAI/InferenceX benchmarks/gptoss_fp4_b200_trt_slurm.sh and gptoss_fp4_h200_trt_slurm.sh "
        "at 64af5a771b8a14915d907e0dc8abb2af40d9eaf0 (kv_cache_config free_gpu_memory_fraction: 0.85)",
    },
    ("deepseek-ai/DeepSeek-R1", "h200_sxm"): {
        "value": 0.75,
        "source": "SemiAnalysisAI/InferenceX benchmarks/dsr1_fp8_h200_trt_slurm.sh at 64af5a77 and "
        "dsr1_fp8_h200_trt.sh at 06de7c28 (free_gpu_memory_fraction: 0.75)",
    },
    ("deepseek-ai/DeepSeek-R1", "b200_sxm"): {
        "value": 0.8,
        "source": "SemiAnalysisAI/InferenceX benchmarks/dsr1_fp8_b200_trt_slurm.sh, dsr1_fp4_b200_trt_slurm.sh at "
        "64af5a77 (free_gpu_memory_fraction: 0.8); dsr1_fp8_b200_trt.sh from ec7bafaae743babbb160a1c7ee9c2a82feaf3f5f "
        "(2026-01-29, KV_CACHE_FREE_MEM_FRACTION: 0.7 at 1024/8192 from 256 clients, 0.75 at 8192/1024 on TP 4)",
        "fp8_cases": ((1024, 8192, 256, None, 0.7), (8192, 1024, 0, 4, 0.75)),
        "from": "2026-01-29",
    },
}
INFERENCEX = "SemiAnalysisAI/InferenceX"
# TensorRT-LLM's batch waiting (``batch_wait_timeout_iters`` W, ``batch_wait_max_tokens_ratio`` r) as InferenceX's
# launch scripts wrote it, one rule a script family: the (system, precision) pairs it ran, the lengths (ISL, OSL),
# TP below ``tp_below`` (None: any), from ``from_clients`` clients, for rows measured from ``from`` (and, where the
# script's configuration had its own engine image, with that ``image``: the DeepSeek-R1 FP8 B200 MTP configuration,
# image 1.2.0rc6.post3, ran dsr1_fp8_b200_trt_mtp.sh, which sets no batch waiting). TensorRT-LLM applies it only
# without attention-DP (``PyExecutor._waiting_requests``), so no rule holds attention-DP rows.
INFERENCEX_TRT_BATCH_WAIT: tuple[dict[str, Any], ...] = (
    {
        "model": "deepseek-ai/DeepSeek-R1", "cases": (("b200_sxm", "fp8"),), "lengths": (1024, 1024),
        "tp_below": None, "from_clients": 64, "from": "2026-01-29", "image": "tensorrt-llm/release:1.2.0rc6.post2",
        "settings": {"batch_wait_iters": 40, "batch_wait_tokens_ratio": 0.8},
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp8_b200_trt.sh",
                   "commit": "ec7bafaae743babbb160a1c7ee9c2a82feaf3f5f",
                   "setting": "DELAY_BATCHING at ISL = OSL = 1024 from CONC 64: batch_wait_timeout_iters: 40, "
                              "batch_wait_max_tokens_ratio: 0.8"},
    },
    {
        "model": "meta-llama/Llama-3.1-70B", "cases": (("b200_sxm", "fp8"), ("b200_sxm", "fp4"), ("h200_sxm", "fp8")),
        "lengths": (1024, 1024), "tp_below": 8, "from_clients": 0, "from": "2025-09-18",
        "settings": {"batch_wait_iters": 20, "batch_wait_tokens_ratio": 0.9},
        "source": {"repo": INFERENCEX,
                   "path": "benchmarks/70b_fp8_b200_trt_slurm.sh, 70b_fp4_b200_trt_slurm.sh, 70b_fp8_h200_trt_slurm.sh",
                   "commit": "9596d23d74e9e1e4f4bcdb27572c87cafb746a02",
                   "setting": "ISL = OSL = 1024 and TP < 8: batch_wait_max_tokens_ratio: 0.9, "
                              "batch_wait_timeout_iters: 20 (since 1b563c85858422089749ae1411a3301c2f86c862, "
                              "2025-09-18)"},
    },
)  # fmt: skip
# The ``--max_num_tokens`` InferenceX's TensorRT-LLM launch scripts pass where it is a constant (TensorRT-LLM's
# token budget per iteration; llmath's ``max_num_batched_tokens``, 8192 in the preset): by model, for rows measured
# from ``from``. DeepSeek-R1's scripts compute theirs from CONC and ISL (``inferencex_harness.INFERENCEX_TRT_BUDGET``).
INFERENCEX_TRT_MAX_NUM_TOKENS: tuple[dict[str, Any], ...] = (
    {
        "model": "meta-llama/Llama-3.1-70B", "value": 16384, "from": "2025-09-18",
        "source": {"repo": INFERENCEX,
                   "path": "benchmarks/70b_fp8_b200_trt_slurm.sh, 70b_fp4_b200_trt_slurm.sh, 70b_fp8_h200_trt_slurm.sh",
                   "commit": "9596d23d74e9e1e4f4bcdb27572c87cafb746a02",
                   "setting": "trtllm-serve --max_num_tokens 16384 (since 1b563c85, 2025-09-18)"},
    },
    {
        "model": "openai/gpt-oss-120b", "value": 20000, "from": "2025-09-19",
        "source": {"repo": INFERENCEX,
                   "path": "benchmarks/gptoss_fp4_b200_trt_slurm.sh, gptoss_fp4_h200_trt_slurm.sh (to 2026-01-21); "
                           "benchmarks/gptoss_fp4_b200_trt.sh, gptoss_fp4_h200_trt.sh (from b0c4ed21, 2026-01-22)",
                   "commit": "ec912828040791e8ba9b1133a1de51ac63a6f513",
                   "setting": "MAX_NUM_TOKENS=20000 / --max_num_tokens 20000 (since 28e5a01e, 2025-09-19, B200; "
                              "551d81e9, 2025-09-15, H200)"},
    },
)  # fmt: skip
# InferenceX's TensorRT-LLM DeepSeek-R1 rows its MTP configurations (``dsr1-*-trt-mtp``) measured, one rule a sweep:
# those of their own image (1.2.0rc6.post3, 2026-02-05 on), and those of the sweep that added them (#392, merged
# 2026-01-14 22:26 UTC; its perf-changelog entry names only the three ``-trt-mtp`` keys, whose image,
# 1.1.0rc2.post2, the plain configurations ran too: the rows measured that day, 22:26:21Z and their 00:00 copies).
# Their scripts size the token budget for the draft tokens, without the non-MTP scripts' 8192 floor:
# ``--max_num_tokens`` ⌈((k + 1)·B + ISL + 64) / 64⌉·64, k = 3 draft tokens (1 with attention-DP) and
# B = ``--max_batch_size``: CONC, or with attention-DP CONC divided by ``attention_dp_batch_divisor`` (by precision,
# once CONC reaches it; None: by the ranks, the scripts' TP)
INFERENCEX_TRT_MTP_RUNS: tuple[dict[str, Any], ...] = (
    {
        "model": "deepseek-ai/DeepSeek-R1", "image": "tensorrt-llm/release:1.2.0rc6.post3", "from": "2026-02-05",
        "attention_dp_batch_divisor": {"fp8": 8, "fp4": 4},
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp8_b200_trt_mtp.sh, dsr1_fp4_b200_trt_mtp.sh",
                   "commit": "5d517074c1221aaf0cfe66813029c1314a80c8ca (FP8), "
                             "0aae52d4ced7f27fc8c1a8dcb9a500a376683eca (FP4)",
                   "setting": "MAX_BATCH_SIZE, MTP, MAX_NUM_TOKENS=$(( ((MTP+1)*MAX_BATCH_SIZE+ISL+64+63)/64*64 ))"},
    },
    {
        "model": "deepseek-ai/DeepSeek-R1", "measured_on": "2026-01-14", "attention_dp_batch_divisor": None,
        "source": {"repo": INFERENCEX,
                   "path": "perf-changelog.yaml; benchmarks/dsr1_fp8_h200_trt_mtp_slurm.sh, "
                           "dsr1_fp8_b200_trt_mtp_slurm.sh, dsr1_fp4_b200_trt_mtp_slurm.sh",
                   "commit": "bf3456727ff55fdd70fbdc8fcbb8eaf2c70606a3",
                   "setting": "config-keys dsr1-fp4-b200-trt-mtp, dsr1-fp8-b200-trt-mtp, dsr1-fp8-h200-trt-mtp; "
                              "MAX_BATCH_SIZE=$((CONC/TP)) with DP_ATTENTION, MTP=1 there, else 3"},
    },
)  # fmt: skip
MTP_DRAFT_TOKENS = {"plain": 3, "attention_dp": 1}  # the MTP scripts' MTP=3, MTP=1 when DP_ATTENTION=true


# InferenceX's TensorRT-LLM launch scripts turn on attention-DP balancing (``attention_dp_config: enable_balance:
# true``) wherever they run attention-DP: gpt-oss-120b with TensorRT-LLM's other defaults (from 28e5a01e, 2025-09-19),
# DeepSeek-R1 with ``batching_wait_iters: 0``, ``timeout_iters: 60`` (from ec90f3fe, 2025-09-18); before the rows
INFERENCEX_TRT_ADP_BALANCE: dict[str, dict[str, Any]] = {
    "openai/gpt-oss-120b": {
        "settings": {"adp_balance": True},
        "systems": ("b200_sxm",),  # the H200 scripts write no attention_dp_config (gptoss_fp4_h200_trt*.sh)
        "source": "SemiAnalysisAI/InferenceX benchmarks/gptoss_fp4_b200_trt_slurm.sh at "
        "64af5a771b8a14915d907e0dc8abb2af40d9eaf0; gptoss_fp4_h200_trt_slurm.sh at f6a9d0b6, gptoss_fp4_h200_trt.sh "
        "at d8cc8977 (no attention_dp_config)",
    },
    "deepseek-ai/DeepSeek-R1": {
        "settings": {"adp_balance": True, "adp_batching_wait_iters": 0, "adp_timeout_iters": 60},
        "source": "SemiAnalysisAI/InferenceX benchmarks/dsr1_fp8_h200_trt_slurm.sh, dsr1_fp8_b200_trt_slurm.sh, "
        "dsr1_fp4_b200_trt_slurm.sh at 64af5a77; dsr1_*_trt.sh at 06de7c28",
    },
}

# The formats TensorRT-LLM runs a checkpoint in on Hopper (sm90), whatever precision label a row carries: it reads the
# checkpoint's own ``quantization_config``. DeepSeek-R1's FP8 checkpoint is block-scaled (``weight_block_size``
# [128, 128]), which TensorRT-LLM loads as ``QuantAlgo.FP8_BLOCK_SCALES`` (its CUTLASS MoE backend, the InferenceX
# H200 scripts' ``moe_config.backend``, times it in aiconfigurator's ``moe_torch_flow_cutlass`` fp8_block table);
# gpt-oss-120b's MXFP4 experts run ``QuantAlgo.W4A16_MXFP4`` below sm100 (``ModelConfig.get_mxfp4_quant_algo``:
# MXFP8 activations only from sm100, unless ``OVERRIDE_QUANT_ALGO`` is set, which no such launcher sets). The row's
# label (``fp8``: per-tensor W8A8; ``fp4``: NVFP4 W4A4) is replaced by the checkpoint's formats
# (:func:`llmath.measure.serving_runs.precision`, the ``checkpoint_formats`` setting).
TRT_CHECKPOINT_FORMATS: dict[str, dict[str, Any]] = {
    "deepseek-ai/DeepSeek-R1": {
        "labels": ("fp8",), "systems": ("h100_sxm", "h200_sxm"), "runs": "FP8_BLOCK_SCALES",
        "source": "deepseek-ai/DeepSeek-R1-0528 config.json quantization_config (quant_method fp8, weight_block_size "
                  "[128, 128]); NVIDIA/TensorRT-LLM tensorrt_llm/_torch/model_config.py (the checkpoint's quantization "
                  "config as QuantAlgo.FP8_BLOCK_SCALES, whose kv_b_proj/k_b_proj it excludes for the TRTLLM MoE "
                  "backend; through the code index); SemiAnalysisAI/InferenceX "
                  "benchmarks/dsr1_fp8_h200_trt_slurm.sh at e06929c701a09f1f354150682e3c96afab8ebe22 and "
                  "dsr1_fp8_h200_trt.sh at d8cc8977 (MOE_BACKEND=CUTLASS, model deepseek-ai/DeepSeek-R1-0528)",
    },
    "openai/gpt-oss-120b": {
        "labels": ("fp8", "fp4"), "systems": ("h100_sxm", "h200_sxm"), "runs": "W4A16_MXFP4",
        "source": "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/model_config.py ModelConfig.get_mxfp4_quant_algo "
                  "(W4A8_MXFP4_MXFP8 only at get_sm_version() >= 100, else W4A16_MXFP4, unless OVERRIDE_QUANT_ALGO; "
                  "through the code index) and examples/models/core/gpt_oss/README.md (Hopper: bf16 activations, "
                  "mxfp4 weights); SemiAnalysisAI/InferenceX benchmarks/gptoss_fp4_h200_trt_slurm.sh at "
                  "e06929c701a09f1f354150682e3c96afab8ebe22 (no OVERRIDE_QUANT_ALGO)",
    },
}  # fmt: skip

# The grouped-expert kernel InferenceX's TensorRT-LLM scripts picked (``moe_config.backend``), where a per-kernel table
# times it (llmath's ``moe_kernel``: prefill passes, and decode passes too for the kernels of
# ``efficiency_fit.LAUNCHER_MOE_DECODE``): gpt-oss-120b on B200 runs MOE_BACKEND="TRTLLM" in
# every script in force on its rows, which TensorRT-LLM runs over MXFP4 experts with MXFP8 activations from sm100
# (``ModelConfig.get_mxfp4_quant_algo``: W4A8_MXFP4_MXFP8; the scripts set no OVERRIDE_QUANT_ALGO); on H200
# ``moe_config.backend: TRITON``, MXFP4 experts with bf16 activations below sm100 (W4A16_MXFP4), timed by the
# engine's own w4a16_mxfp4 MoE model and launched as ops/launches.py MOE_PATH_LAUNCHES counts it
INFERENCEX_TRT_MOE_KERNEL: dict[tuple[str, str], dict[str, Any]] = {
    ("openai/gpt-oss-120b", "b200_sxm"): {
        "kernel": "trtllm_gen_mxfp8",
        "source": "SemiAnalysisAI/InferenceX benchmarks/gptoss_fp4_b200_trt_slurm.sh at e06929c7, 97f253b5, 06667a51, "
                  "359900b4, a075f2e7 and benchmarks/gptoss_fp4_b200_trt.sh at d7dbd045 (the commits in force from "
                  "2025-11-02 to 2026-02-05: MOE_BACKEND=\"TRTLLM\", no OVERRIDE_QUANT_ALGO); NVIDIA/TensorRT-LLM "
                  "tensorrt_llm/_torch/model_config.py ModelConfig.get_mxfp4_quant_algo",
    },
    ("openai/gpt-oss-120b", "h200_sxm"): {
        "kernel": "trtllm_triton_mxfp4",
        "source": "SemiAnalysisAI/InferenceX benchmarks/gptoss_fp4_h200_trt_slurm.sh at e06929c7 and f6a9d0b6, "
                  "benchmarks/gptoss_fp4_h200_trt.sh at d8cc8977 (moe_config: backend: TRITON; no "
                  "OVERRIDE_QUANT_ALGO); NVIDIA/TensorRT-LLM tensorrt_llm/_torch/model_config.py "
                  "ModelConfig.get_mxfp4_quant_algo (W4A16_MXFP4 below sm100)",
    },
}  # fmt: skip
# DeepSeek-R1 FP4 on B200: the scripts pick MOE_BACKEND="CUTLASS" (NVFP4 experts, W4A4) in some cases, TRTLLM
# otherwise (``trtllm_kernel``: TensorRT-LLM's TRTLLMGenFusedMoE, whose NVFP4 kernel vLLM 0.19.0's B200 table times
# through FlashInfer). The plain scripts to 2026-01-28 from a number of clients by lengths; the MTP scripts (from
# 2026-01-14) and the plain ones from 2026-02-03 wherever the row runs attention-DP
INFERENCEX_TRT_CUTLASS_NVFP4: dict[str, Any] = {
    "model": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "precision": "fp4", "kernel": "trtllm_cutlass_nvfp4",
    "trtllm_kernel": "trtllm_gen_nvfp4",
    "by_clients_until": "2026-01-28", "from_clients": {(1024, 1024): 256, (1024, 8192): 256, (8192, 1024): 33},
    "source": "SemiAnalysisAI/InferenceX benchmarks/dsr1_fp4_b200_trt_slurm.sh at e06929c7, f6a9d0b6 and 008b91a9d "
              "(CUTLASS from CONC 256 at 1k/1k and 1k/8k, above 32 at 8k/1k, TP 4 and 8); "
              "dsr1_fp4_b200_trt_mtp_slurm.sh at 008b91a9d, dsr1_fp4_b200_trt.sh at daa8239f7 and ec9128280, "
              "dsr1_fp4_b200_trt_mtp.sh at ec9128280 "
              "(CUTLASS when DP_ATTENTION is true); MOE_BACKEND=\"TRTLLM\" otherwise in the same scripts, and in "
              "dsr1_fp4_b200_trt_mtp_slurm.sh at bf3456727 and dsr1_fp4_b200_trt_mtp.sh at 0aae52d4c",
}  # fmt: skip
# DeepSeek-R1 FP8 on B200: MOE_BACKEND="DEEPGEMM" (block-scaled FP8 experts) in every script to 2026-01-28; from
# 2026-01-29 the plain script at 1k/8k from 256 clients and the MTP script (image 1.2.0rc6.post3) with attention-DP,
# TRTLLM otherwise (whose block-FP8 kernel no per-kernel table times at DeepSeek's expert shape)
INFERENCEX_TRT_DEEPGEMM_FP8: dict[str, Any] = {
    "model": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "precision": "fp8", "kernel": "trtllm_deepgemm_fp8_block",
    "always_until": "2026-01-28", "plain_from_clients": {(1024, 8192): 256}, "mtp_image": "1.2.0rc6.post3",
    "source": "SemiAnalysisAI/InferenceX benchmarks/dsr1_fp8_b200_trt_slurm.sh at f6a9d0b6 and 008b91a9d, "
              "dsr1_fp8_b200_trt_mtp_slurm.sh at 008b91a9d (MOE_BACKEND=\"DEEPGEMM\"); dsr1_fp8_b200_trt.sh at "
              "ec7bafaae (DEEPGEMM at 1k/8k from CONC 256); dsr1_fp8_b200_trt_mtp.sh at 5d517074c (DEEPGEMM with "
              "DP_ATTENTION)",
}  # fmt: skip
# The rest of those scripts' rows from ec7bafaae (2026-01-29) write MOE_BACKEND="TRTLLM": TensorRT-LLM's
# TensorRT-LLM-generated block-scale MoE (llmath.hardware.efficiency_fit.LAUNCHER_MOE_KERNELS)
TRTLLM_GEN_FP8_BLOCK = "trtllm_gen_fp8_block"
# InferenceX's client sends text prompts (utils/bench_serving/benchmark_serving.py ``sample_random_requests`` decodes
# the drawn token ids; backend_request_func.py posts ``prompt``), which ``trtllm-serve`` tokenizes before it schedules
# the request: its completion handler passes the text to ``LLM.generate_async``, whose ``DefaultInputProcessor``
# calls the Hugging Face tokenizer's ``encode`` (NVIDIA/TensorRT-LLM tensorrt_llm/serve/openai_server.py,
# tensorrt_llm/inputs/registry.py). The time per token is the vLLM and SGLang presets' (data/engines.json
# ``per_prompt_token_s``: the same Hugging Face tokenizers, 2.2 µs per prompt token on one core)
INFERENCEX_TRT_PROMPT_TOKEN_S = 2.2e-6
# Where InferenceX's DeepSeek-R1 B200 scripts turn on TensorRT-LLM's piecewise CUDA graph for context passes
# (``torch_compile_config: enable_piecewise_cuda_graph: true``, ``capture_num_tokens`` 1 … 128 and 256-token steps to
# ``max_num_tokens``): the non-attention parts of a prefill replay from graphs, so the pass is not launched op by op
# (llmath's ``eager_prefill`` off; the attention that stays eager is not counted). One rule a script and image; a
# row matches a case (ISL, OSL, least clients, most clients or None, only without attention-DP) and ``gpus_ep``
# (the script's TP and EP_SIZE) where given
INFERENCEX_TRT_PIECEWISE_PREFILL: tuple[dict[str, Any], ...] = (
    {
        "model": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
        "precision": "fp8", "image": "1.2.0rc6.post2", "from": "2026-01-29",
        "cases": ((1024, 1024, 64, None, False), (1024, 8192, 128, 255, False), (8192, 1024, 64, None, False)),
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp8_b200_trt.sh",
                   "commit": "ec7bafaae743babbb160a1c7ee9c2a82feaf3f5f",
                   "setting": "PIECEWISE_CUDA_GRAPHS=true at 1k/1k and 8k/1k from CONC 64, at 1k/8k from 128 "
                              "below 256"},
    },
    {
        "model": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
        "precision": "fp4", "image": "1.2.0rc6.post2", "from": "2026-02-03", "gpus_ep": (8, 8),
        "cases": ((1024, 1024, 1, None, False),),
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp4_b200_trt.sh",
                   "commit": "6eecc0e66 (unchanged to ec9128280)",
                   "setting": "PIECEWISE_CUDA_GRAPHS=true at 1k/1k with TP 8 and EP_SIZE 8"},
    },
    {
        "model": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
        "precision": "fp8", "image": "1.2.0rc6.post3", "from": "2026-02-05",
        "cases": ((1024, 1024, 5, None, True), (1024, 8192, 9, None, True), (8192, 1024, 17, None, True)),
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp8_b200_trt_mtp.sh",
                   "commit": "5d517074c1221aaf0cfe66813029c1314a80c8ca",
                   "setting": "PIECEWISE_CUDA_GRAPHS=true but with DP_ATTENTION, CONC <= 4 at 1k/1k, <= 8 at 1k/8k, "
                              "<= 16 at 8k/1k"},
    },
    {
        "model": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm",
        "precision": "fp4", "image": "1.2.0rc6.post3", "from": "2026-02-06",
        "cases": ((1024, 1024, 32, 64, False), (1024, 1024, 128, 128, True), (1024, 8192, 64, 64, False)),
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp4_b200_trt_mtp.sh",
                   "commit": "0aae52d4ced7f27fc8c1a8dcb9a500a376683eca",
                   "setting": "PIECEWISE_CUDA_GRAPHS=true at 1k/1k for CONC 32 and 64 and for 128 without "
                              "DP_ATTENTION, at 1k/8k for CONC 64"},
    },
)  # fmt: skip

# The expert parallelism and attention-DP InferenceX's TensorRT-LLM launch scripts chose themselves, from ISL, OSL,
# CONC and TP, until 17d5e204f (2025-11-03) passed them from the configuration instead (``EP_SIZE``, ``DP_ATTENTION``
# in the environment): the rows measured in that window state the configuration's ``moe_ep_size`` 1 and no
# attention-DP. One rule a script: its model, system, precision and the dates it was in force (``from`` its last
# change before 17d5e204f); each case (TP or None, (ISL, OSL), least CONC for EP = TP, least CONC for attention-DP
# or None). With attention-DP the script's TP ranks attend data-parallel (``enable_attention_dp``) with EP = TP
INFERENCEX_TRT_SCRIPT_LAYOUT: tuple[dict[str, Any], ...] = (
    {
        "model": "deepseek-ai/DeepSeek-R1", "system": "h200_sxm", "precision": "fp8",
        "from": "2025-10-29", "until": "2025-11-02",
        "cases": ((None, (1024, 1024), 0, 65), (None, (1024, 8192), 0, 65), (None, (8192, 1024), 0, 33)),
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp8_h200_trt_slurm.sh",
                   "commit": "e06929c701a09f1f354150682e3c96afab8ebe22 (unchanged since 9596d23d, 2025-10-29)",
                   "setting": "EP_SIZE=\"$TP\"; DP_ATTENTION=true for CONC > 64 at 1k/1k and 1k/8k, > 32 at 8k/1k"},
    },
    {
        "model": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "precision": "fp8",
        "from": "2025-10-29", "until": "2025-11-02",
        "cases": ((None, (1024, 1024), 0, 33), (None, (1024, 8192), 0, 65), (None, (8192, 1024), 0, 65)),
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp8_b200_trt_slurm.sh",
                   "commit": "e06929c701a09f1f354150682e3c96afab8ebe22 (unchanged since 9596d23d, 2025-10-29)",
                   "setting": "EP_SIZE=\"$TP\"; DP_ATTENTION=true for CONC > 32 at 1k/1k, > 64 at 1k/8k and 8k/1k"},
    },
    {
        "model": "deepseek-ai/DeepSeek-R1", "system": "b200_sxm", "precision": "fp4",
        "from": "2025-10-29", "until": "2025-11-02",
        "cases": ((4, (1024, 1024), 33, 256), (4, (1024, 8192), 33, 256), (4, (8192, 1024), 33, 33),
                  (8, (1024, 1024), 9, 256), (8, (1024, 8192), 17, 256), (8, (8192, 1024), 33, 33)),
        "source": {"repo": INFERENCEX, "path": "benchmarks/dsr1_fp4_b200_trt_slurm.sh",
                   "commit": "e06929c701a09f1f354150682e3c96afab8ebe22 (unchanged since 9596d23d, 2025-10-29)",
                   "setting": "EP_SIZE=\"1\", =\"$TP\" on TP 4 for CONC > 32, on TP 8 for CONC > 8 (1k/1k), > 16 "
                              "(1k/8k), > 32 (8k/1k); DP_ATTENTION=true for CONC >= 256 at 1k prompts, > 32 at 8k/1k"},
    },
    {
        "model": "openai/gpt-oss-120b", "system": "b200_sxm", "precision": "fp4",
        "from": "2025-10-20", "until": "2025-11-02",
        "cases": ((None, (1024, 1024), 256, 256), (None, (1024, 8192), 256, 256), (None, (8192, 1024), 256, 256)),
        "source": {"repo": INFERENCEX, "path": "benchmarks/gptoss_fp4_b200_trt_slurm.sh",
                   "commit": "e06929c701a09f1f354150682e3c96afab8ebe22 (unchanged since ac1998a5, 2025-10-20)",
                   "setting": "EP_SIZE=\"1\"; EP_SIZE=\"$TP\" and DP_ATTENTION=true for CONC >= 256"},
    },
    {
        "model": "openai/gpt-oss-120b", "system": "h200_sxm", "precision": "fp4",
        "from": "2025-10-29", "until": "2025-11-02",
        "cases": ((None, (1024, 1024), 0, None), (None, (1024, 8192), 0, None), (None, (8192, 1024), 0, None)),
        "source": {"repo": INFERENCEX, "path": "benchmarks/gptoss_fp4_h200_trt_slurm.sh",
                   "commit": "e06929c701a09f1f354150682e3c96afab8ebe22 (unchanged since 9596d23d, 2025-10-29)",
                   "setting": "trtllm-serve --ep_size=$TP; enable_attention_dp: false"},
    },
)  # fmt: skip


def _whole(v: str) -> int:
    """A layout field as a count (empty or 0: 1, as :mod:`.serving_runs` reads it)."""
    v = (v or "").strip()
    return max(int(float(v)), 1) if v and float(v) > 0 else 1


def launcher_trt_settings(r: dict[str, str], concurrency: int, dp: int, inferencex: bool) -> dict[str, Any]:
    """Every setting of this module an aggregated TensorRT-LLM row of InferenceX's launch scripts ran with."""
    share = kv_fraction(r, concurrency, inferencex)
    out: dict[str, Any] = {} if share is None else {"gpu_memory_utilization": share}
    out.update(token_budget(r, concurrency, dp, inferencex))
    out.update(checkpoint_formats(r))
    out.update(moe_kernel(r, concurrency, dp, inferencex))
    if r["backend"] == "trtllm" and inferencex:
        out["prompt_token_s"] = INFERENCEX_TRT_PROMPT_TOKEN_S
    return {**out, **batch_wait(r, concurrency, inferencex), **adp_balance(r, dp, inferencex)}


def moe_kernel(r: dict[str, str], concurrency: int, dp: int, inferencex: bool) -> dict[str, Any]:
    """``moe_kernel`` as InferenceX's TensorRT-LLM script for the row picked it (:data:`INFERENCEX_TRT_MOE_KERNEL`;
    :data:`INFERENCEX_TRT_CUTLASS_NVFP4` by its date, lengths, clients and ``dp`` attention-DP ranks), for its
    TensorRT-LLM rows; empty elsewhere."""
    if r["backend"] != "trtllm" or not inferencex:
        return {}
    rule = INFERENCEX_TRT_MOE_KERNEL.get((r["model_path"], r["system"]))
    if rule is not None:
        return {"moe_kernel": rule["kernel"]}
    measured = _measured(r)
    if measured and _deepgemm_fp8(r, measured, concurrency, dp):
        return {"moe_kernel": INFERENCEX_TRT_DEEPGEMM_FP8["kernel"]}
    if measured and _trtllm_gen_fp8(r, measured):
        return {"moe_kernel": TRTLLM_GEN_FP8_BLOCK}
    c = INFERENCEX_TRT_CUTLASS_NVFP4
    if (r["model_path"], r["system"], r["precision"]) != (c["model"], c["system"], c["precision"]) or not measured:
        return {}
    if mtp_run(r, inferencex) is None and measured <= c["by_clients_until"]:
        least = c["from_clients"].get((int(r["isl"]), int(r["osl"])))
        cutlass = least is not None and concurrency >= least
    else:
        cutlass = dp > 1
    return {"moe_kernel": c["kernel"] if cutlass else c["trtllm_kernel"]}


def _trtllm_gen_fp8(r: dict[str, str], measured: str) -> bool:
    """Whether the row's script ran the TRTLLM MoE backend (:data:`TRTLLM_GEN_FP8_BLOCK`; the DeepGEMM cases
    checked first)."""
    g = INFERENCEX_TRT_DEEPGEMM_FP8
    return (r["model_path"], r["system"], r["precision"]) == (g["model"], g["system"], g["precision"]) and (
        measured > g["always_until"]
    )


def _deepgemm_fp8(r: dict[str, str], measured: str, concurrency: int, dp: int) -> bool:
    """Whether the row's script ran DeepGEMM's MoE (:data:`INFERENCEX_TRT_DEEPGEMM_FP8`)."""
    g = INFERENCEX_TRT_DEEPGEMM_FP8
    if (r["model_path"], r["system"], r["precision"]) != (g["model"], g["system"], g["precision"]):
        return False
    if measured <= g["always_until"]:
        return True
    if _image(r).endswith(g["mtp_image"]):
        return dp > 1
    least = g["plain_from_clients"].get((int(r["isl"]), int(r["osl"])))
    return least is not None and concurrency >= least


def checkpoint_formats(r: dict[str, str]) -> dict[str, Any]:
    """``{"checkpoint_formats": True}`` for an aggregated TensorRT-LLM row whose model, precision label and system
    a rule of :data:`TRT_CHECKPOINT_FORMATS` names (the engine runs the checkpoint's own formats there); empty
    elsewhere."""
    rule = TRT_CHECKPOINT_FORMATS.get(r["model_path"])
    if rule is None or r["backend"] != "trtllm" or r["system"] not in rule["systems"]:
        return {}
    return {"checkpoint_formats": True} if r["precision"] in rule["labels"] else {}


def kv_fraction(r: dict[str, str], concurrency: int, inferencex: bool) -> float | None:
    """The KV share (``free_gpu_memory_fraction``) InferenceX's TensorRT-LLM launch script for the row's model and
    system wrote (:data:`INFERENCEX_TRT_KV_FRACTION`), for its aggregated TensorRT-LLM rows; ``None`` elsewhere."""
    notes = r.get("source_notes", "")
    rule = INFERENCEX_TRT_KV_FRACTION.get((r["model_path"], r["system"]))
    rule = rule or INFERENCEX_TRT_KV_FRACTION.get((r["model_path"], "*"))
    if rule is None or r["backend"] != "trtllm" or not inferencex:
        return None
    measured = re.search(r"measured=(\d{4}-\d\d-\d\d)", notes)
    if r["precision"] == "fp8" and measured is not None and measured.group(1) >= rule.get("from", "9999"):
        lengths, tp_size = (int(r["isl"]), int(r["osl"])), _whole(r["tp_size"])
        for isl, osl, least, tp, value in rule["fp8_cases"]:
            if lengths == (isl, osl) and concurrency >= least and tp in (None, tp_size):
                return value
    return rule["value"]


def _measured(r: dict[str, str]) -> str | None:
    """The row's ``measured=`` date (YYYY-MM-DD), or None."""
    found = re.search(r"measured=(\d{4}-\d\d-\d\d)", r.get("source_notes", ""))
    return None if found is None else found.group(1)


def _image(r: dict[str, str]) -> str:
    """The row's ``image=`` (its engine container), or ''."""
    found = re.search(r"(^|; )image=(\S+)", r.get("source_notes", ""))
    return "" if found is None else found.group(2)


def batch_wait(r: dict[str, str], concurrency: int, inferencex: bool) -> dict[str, Any]:
    """TensorRT-LLM's batch waiting as InferenceX's launch script set it for the row: the first rule of
    :data:`INFERENCEX_TRT_BATCH_WAIT` whose model, system and precision, lengths, TP, clients and date it matches,
    without attention-DP (TensorRT-LLM skips batch waiting there); empty elsewhere."""
    measured, tp = _measured(r), _whole(r["tp_size"])
    if r["backend"] != "trtllm" or not inferencex or measured is None or _whole(r["attention_dp_size"]) > 1:
        return {}
    lengths, case = (int(r["isl"]), int(r["osl"])), (r["system"], r["precision"])
    for rule in INFERENCEX_TRT_BATCH_WAIT:
        if r["model_path"] != rule["model"] or case not in rule["cases"] or lengths != rule["lengths"]:
            continue
        if measured < rule["from"] or concurrency < rule["from_clients"] or tp >= (rule["tp_below"] or tp + 1):
            continue
        if _image(r).endswith(rule.get("image", "")):
            return dict(rule["settings"])
    return {}


def mtp_run(r: dict[str, str], inferencex: bool) -> dict[str, Any] | None:
    """The rule of :data:`INFERENCEX_TRT_MTP_RUNS` an aggregated InferenceX TensorRT-LLM row of the rule's model was
    measured under (by its image or its date), or None: the row ran a plain configuration, or is not InferenceX's."""
    measured, image = _measured(r), _image(r)
    if r["backend"] != "trtllm" or measured is None or not inferencex:
        return None
    for rule in INFERENCEX_TRT_MTP_RUNS:
        if r["model_path"] != rule["model"]:
            continue
        if "image" in rule and image.endswith(rule["image"]) and measured >= rule["from"]:
            return rule
        if measured == rule.get("measured_on"):
            return rule
    return None


def token_budget(r: dict[str, str], concurrency: int, dp: int, inferencex: bool) -> dict[str, Any]:
    """The ``--max_num_tokens`` InferenceX's TensorRT-LLM launch script for the row passed, as
    ``max_num_batched_tokens``: its model's constant (:data:`INFERENCEX_TRT_MAX_NUM_TOKENS`), or the DeepSeek-R1 MTP
    scripts' (:data:`INFERENCEX_TRT_MTP_RUNS`, with ``dp`` attention-DP ranks); empty elsewhere."""
    measured, mtp = _measured(r), mtp_run(r, inferencex)
    if r["backend"] != "trtllm" or not inferencex or measured is None:
        return {}
    if mtp is not None:
        divisors = mtp["attention_dp_batch_divisor"]
        divisor = (dp if divisors is None else divisors[r["precision"]]) if dp > 1 else 1
        batch = concurrency // divisor if concurrency >= divisor else concurrency
        draft = MTP_DRAFT_TOKENS["attention_dp" if dp > 1 else "plain"]
        return {"max_num_batched_tokens": ((draft + 1) * batch + int(r["isl"]) + 64 + 63) // 64 * 64}
    for rule in INFERENCEX_TRT_MAX_NUM_TOKENS:
        if r["model_path"] == rule["model"] and measured >= rule["from"]:
            return {"max_num_batched_tokens": rule["value"]}
    return {}


def adp_balance(r: dict[str, str], dp: int, inferencex: bool) -> dict[str, Any]:
    """TensorRT-LLM's attention-DP balancing as InferenceX's launch scripts set it (:data:`INFERENCEX_TRT_ADP_BALANCE`)
    for its aggregated TensorRT-LLM rows that run attention-DP; empty elsewhere."""
    rule = INFERENCEX_TRT_ADP_BALANCE.get(r["model_path"])
    if rule is None or r["backend"] != "trtllm" or dp <= 1 or not inferencex:
        return {}
    if r["system"] not in rule.get("systems", (r["system"],)):
        return {}
    return dict(rule["settings"])


def piecewise_prefill(r: dict[str, str], concurrency: int, gpus: int, ep: int, dp: int, inferencex: bool) -> dict:
    """``{"eager_prefill": False}`` for an InferenceX TensorRT-LLM row whose script turned the piecewise CUDA graph
    on (:data:`INFERENCEX_TRT_PIECEWISE_PREFILL`: its model, system, precision, image and date, then a case of
    its lengths, clients, ``dp`` attention-DP ranks and, where the rule names them, ``gpus`` and ``ep``); empty
    elsewhere."""
    measured = _measured(r)
    if r["backend"] != "trtllm" or not inferencex or measured is None:
        return {}
    lengths = (int(r["isl"]), int(r["osl"]))
    for rule in INFERENCEX_TRT_PIECEWISE_PREFILL:
        if (r["model_path"], r["system"], r["precision"]) != (rule["model"], rule["system"], rule["precision"]):
            continue
        if measured < rule["from"] or not _image(r).endswith(rule["image"]):
            continue
        if rule.get("gpus_ep", (gpus, ep)) != (gpus, ep):
            return {}
        for isl, osl, least, most, without_adp in rule["cases"]:
            if lengths == (isl, osl) and least <= concurrency <= (most or concurrency) and not (without_adp and dp > 1):
                return {"eager_prefill": False}
        return {}
    return {}


def script_layout(r: dict[str, str], concurrency: int, inferencex: bool) -> tuple[int, int] | None:
    """(EP, attention-DP ranks) InferenceX's TensorRT-LLM launch script chose for the row
    (:data:`INFERENCEX_TRT_SCRIPT_LAYOUT`: its model, system, precision and date, then the case of its TP, lengths and
    ``concurrency``), the script's TP being the row's ``tp_size``; None where no rule holds the row."""
    measured = _measured(r)
    if r["backend"] != "trtllm" or not inferencex or measured is None:
        return None
    tp, lengths = _whole(r["tp_size"]), (int(r["isl"]), int(r["osl"]))
    for rule in INFERENCEX_TRT_SCRIPT_LAYOUT:
        if (r["model_path"], r["system"], r["precision"]) != (rule["model"], rule["system"], rule["precision"]):
            continue
        if not rule["from"] <= measured <= rule["until"]:
            continue
        for case_tp, case_lengths, ep_from, adp_from in rule["cases"]:
            if case_lengths == lengths and case_tp in (None, tp):
                ep = tp if concurrency >= ep_from else 1
                return ep, tp if adp_from is not None and concurrency >= adp_from else 1
    return None


def with_script_layout(r: dict[str, str], lay: Any, concurrency: int, inferencex: bool, assumed: list[str]) -> Any:
    """The aggregated layout ``lay`` (``tp``, ``dp``, ``ep``) with the EP and attention-DP InferenceX's TensorRT-LLM
    launch script chose itself (:func:`script_layout`) in place of the stated ones (EP 1, no attention-DP), the
    script's TP ranks attending data-parallel where it turned attention-DP on; ``assumed`` says so. Any other row's
    layout is returned as it is."""
    chosen = script_layout(r, concurrency, inferencex)
    if chosen is None or lay.dp > 1 or lay.ep > 1 or chosen == (lay.ep, lay.dp):
        return lay
    ep, dp = chosen
    adp = f" and attention-DP {dp}" if dp > 1 else ""
    assumed.append(f"EP {ep}{adp} as InferenceX's launch script chose them from ISL, OSL and CONC (stated: EP 1)")
    return replace(lay, tp=lay.tp // dp, dp=dp, ep=ep)
