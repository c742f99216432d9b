"""SGLang settings the launch scripts of InferenceX's aggregated DeepSeek-R1 runs passed (docs/serving-runs.md, "SGLang:
the InferenceX launchers' settings"): every flag of ``sglang.launch_server`` that moves timing, by script, as the
scripts stood from SemiAnalysisAI/InferenceX 6be2c699 (2025-09-23) through 12ba0ae07 (2026-03-25), the dates of the
rows (the values did not change in between; FP8 on B200 gained its TP 4 case in 1d29967c, 2026-01-13).
:mod:`llmath.measure.serving_runs` puts the ones llmath models in a run's ``engine_settings``
(:func:`launcher_sglang_settings`); the rest are kept here with what they do and why they are not modelled."""

from __future__ import annotations

import re
from typing import Any, cast

from llmath.deploy.engine_settings import sglang_prefill_budget

INFERENCEX_NOTES = re.compile(r"(^|; )(wip|workflow_run_id)=")  # as :mod:`.serving_runs` marks its rows
_REPO = "https://github.com/SemiAnalysisAI/InferenceX/blob/12ba0ae07289e3212840f8f59913ddee97b07f73/benchmarks/"
# The scripts, by (model, system, precision): the flags each passes (``tp``: a case by TP; ``lengths``: a case by
# ISL/OSL; ``recv``: ``--scheduler-recv-interval`` as (from CONC, interval at or above, interval below)); ``source``.
INFERENCEX_SGLANG_SCRIPTS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8"): {
        "flags": {"max_running_requests": 128, "cuda_graph_max_bs": 128, "mem_fraction_static": 0.82,
                  "chunked_prefill_size": 32768, "max_prefill_tokens": 32768, "recv": (16, 30, 10),
                  "stream_interval": 30, "attention_backend": "trtllm_mla", "moe_runner_backend": "flashinfer_trtllm",
                  "quantization": "fp8", "kv_cache_dtype": "fp8_e4m3", "disable_radix_cache": True,
                  "enable_flashinfer_allreduce_fusion": True,
                  "env": {"SGL_ENABLE_JIT_DEEPGEMM": "false", "SGLANG_ENABLE_FLASHINFER_GEMM": "true"}},
        "tp": {4: {"max_running_requests": 32, "cuda_graph_max_bs": 32, "mem_fraction_static": 0.95,
                   "chunked_prefill_size": 8192, "max_prefill_tokens": 8192, "recv": (0, 10, 10)}},
        "source": _REPO + "single_node/dsr1_fp8_b200.sh (dsr1_fp8_b200_docker.sh / _slurm.sh before b0c4ed21, "
        "2026-01-22; the TP 4 case from 1d29967c, 2026-01-13)",
    },
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp4"): {
        "flags": {"max_running_requests": 256, "cuda_graph_max_bs": 256, "mem_fraction_static": 0.85,
                  "chunked_prefill_size": 16384, "recv": (16, 30, 10), "stream_interval": 10,
                  "attention_backend": "trtllm_mla", "moe_runner_backend": "flashinfer_trtllm",
                  "quantization": "modelopt_fp4", "kv_cache_dtype": "fp8_e4m3", "disable_radix_cache": True,
                  "enable_symm_mem": True, "enable_flashinfer_allreduce_fusion": True},
        "source": _REPO + "single_node/dsr1_fp4_b200.sh (dsr1_fp4_b200_docker.sh / _slurm.sh before b0c4ed21; "
        "--enable-ep-moe and --enable-flashinfer-trtllm-moe, the same settings, before d8fe8f73, 2025-11-10)",
    },
    ("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8"): {
        "flags": {"max_running_requests": 256, "cuda_graph_max_bs": 256, "mem_fraction_static": 0.82,
                  "chunked_prefill_size": 32768, "max_prefill_tokens": 32768, "stream_interval": 10,
                  "attention_backend": "flashinfer", "disable_radix_cache": True, "decode_log_interval": 1},
        "lengths": {(1024, 1024): {"max_running_requests": 512, "cuda_graph_max_bs": 512}},
        "source": _REPO + "single_node/dsr1_fp8_h200.sh (dsr1_fp8_h200_slurm.sh before b0c4ed21)",
    },
}  # fmt: skip
# The MTP configuration ``dsr1-fp8-b200-sglang-mtp`` ran the same image on the same date as the plain FP8 B200 one
# (.github/configs/nvidia-master.yaml at 12ba0ae0), so its rows carry the same notes; a row is that configuration's
# where its lengths, TP and concurrency lie in the MTP search space and outside the plain one (``spaces``: lengths
# -> TP -> (least, most) clients). Where both ran the point, the row is read as the plain run. The script
# (benchmarks/single_node/dsr1_fp8_b200_mtp.sh): EAGLE with 2 draft steps, 3 draft tokens, top-k 1
# (SGLANG_ENABLE_SPEC_V2=1), 512 requests, a 16384-token prefill, 0.82 of memory, the same polling interval. Its
# rows run those settings; the speculation is not applied: at the published MTP acceptance (2 drafts, 2.48 tokens a
# round, :func:`.disagg_recipes.mtp_speculation`) their TPOT falls far below the measured one (docs/serving.md).
INFERENCEX_SGLANG_MTP: dict[str, Any] = {
    "key": ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8"),
    "image": "lmsysorg/sglang:v0.5.9-cu130",
    "plain_space": {(1024, 1024): {8: (4, 64)}, (1024, 8192): {8: (4, 64)}, (8192, 1024): {8: (4, 4), 4: (4, 32)}},
    "mtp_space": {(1024, 1024): {8: (4, 512)}, (1024, 8192): {8: (4, 512)}, (8192, 1024): {8: (4, 512)}},
    "flags": {"max_running_requests": 512, "cuda_graph_max_bs": 512, "mem_fraction_static": 0.82,
              "chunked_prefill_size": 16384, "max_prefill_tokens": 16384, "recv": (16, 30, 10), "stream_interval": 30,
              "speculative_algorithm": "EAGLE", "speculative_num_steps": 2, "speculative_num_draft_tokens": 3,
              "speculative_eagle_topk": 1, "attention_backend": "trtllm_mla", "moe_runner_backend": "flashinfer_trtllm",
              "fp8_gemm_backend": "flashinfer_trtllm", "quantization": "fp8", "kv_cache_dtype": "fp8_e4m3",
              "disable_radix_cache": True, "enable_flashinfer_allreduce_fusion": True,
              "env": {"SGLANG_ENABLE_JIT_DEEPGEMM": "false", "SGLANG_ENABLE_SPEC_V2": "1"}},
    "source": _REPO + "single_node/dsr1_fp8_b200_mtp.sh; .github/configs/nvidia-master.yaml (dsr1-fp8-b200-sglang, "
    "dsr1-fp8-b200-sglang-mtp) at 12ba0ae07",
}  # fmt: skip
INFERENCEX_SGLANG_FROM = "2025-09-23"  # 6be2c699: the B200 scripts' polling interval and the values above
# SGLang's defaults the scripts leave: ``max_prefill_tokens`` 16384 (python/sglang/srt/server_args.py in the 0.5.9
# wheel, ``ServerArgs.max_prefill_tokens``: :data:`llmath.deploy.engine_settings.SGLANG_MAX_PREFILL_TOKENS_DEFAULT`),
# no mixed chunk, no piecewise (prefill) CUDA graph, overlap on
# What the flags llmath does not model do, read in the SGLang 0.5.9 wheel (python/sglang/srt/...)
NOT_MODELLED: dict[str, str] = {
    "stream_interval": "managers/scheduler_output_processor_mixin.py stream_output_generation: with an interval > 1 "
    "a request's output is sent when len(output_ids) % interval == 1, so the first token leaves with its prefill; "
    "later tokens in chunks of the interval, which moves neither the client's TTFT nor its TPOT (last chunk's time)",
    "cuda_graph_max_bs": "decode batches up to it replay a captured graph; every cap equals max_running_requests",
    "disable_radix_cache": "no prefix reuse: the client's random prompts share none anyway (llmath's prefix_hit 0)",
    "attention_backend": "the MLA kernels (trtllm_mla on B200, flashinfer on H200): llmath's MLA fits are per "
    "device, from aiconfigurator's kernel tables, not per backend",
    "moe_runner_backend": "flashinfer_trtllm: FlashInfer's TensorRT-LLM MoE, which SGLang 0.5.9 also picks by "
    "itself for DeepSeek-V3 checkpoints in fp8 and modelopt_fp4 on sm100 (server_args.py); llmath's SGLang MoE fits on "
    "B200 are SGLang's own tables of that kernel (efficiency_fit.ENGINE_FP8_BLOCK_MOE, ENGINE_NVFP4_MOE, and the NVFP4 "
    "kernel's time per token under EP, MOE_EP_TOKEN_ENGINES; docs/efficiency.md)",
    "env": "SGL_ENABLE_JIT_DEEPGEMM=false, SGLANG_ENABLE_FLASHINFER_GEMM=true: the dense FP8 GEMMs run FlashInfer's "
    "kernels instead of DeepGEMM; llmath's GEMM fit is per device and format. SGLANG_ENABLE_SPEC_V2=1 (MTP): "
    "speculation inside the overlap scheduler, speculation itself not applied",
    "enable_symm_mem": "symmetric-memory all-reduce; llmath's all-reduce is the collective table's",
    "enable_flashinfer_allreduce_fusion": "FlashInfer's all-reduce fused with the following residual add and "
    "RMSNorm: one kernel fewer per layer; llmath's all-reduce is the collective table's and its norms are not "
    "fused away",
    "decode_log_interval": "the H200 script logs every decode iteration (default 40): host work the overlap "
    "scheduler runs while the GPU computes the next batch; no source times it",
    "quantization": "the formats the row's precision columns state (fp8_block, nvfp4), read by serving_runs.precision",
    "kv_cache_dtype": "fp8_e4m3 where passed; llmath gives every FP8 and FP4 row an fp8 cache "
    "(serving_runs.precision). The H200 script passes none, which SGLang reads as the model's dtype for "
    "DeepSeek-R1's fp8 checkpoint, a bf16 cache (model_executor/model_runner.py configure_kv_cache_dtype; "
    "Fp8Config has no kv_cache_quant_algo); not applied: docs/serving.md, 'SGLang: the rows' own signatures'",
    "fp8_gemm_backend": "the MTP script's dense FP8 GEMMs on FlashInfer's TensorRT-LLM kernels; per device and format",
    "speculative_algorithm": "the MTP configuration's EAGLE drafts (with speculative_num_steps, "
    "speculative_num_draft_tokens, speculative_eagle_topk): not applied, the published acceptance puts TPOT far "
    "below the rows' (module comment of INFERENCEX_SGLANG_MTP)",
}
# flags llmath models (:func:`launcher_sglang_settings`); every other flag of a script has its reason in NOT_MODELLED
MODELLED = ("max_running_requests", "chunked_prefill_size", "max_prefill_tokens", "mem_fraction_static", "recv")
SPECULATION_FLAGS = ("speculative_num_steps", "speculative_num_draft_tokens", "speculative_eagle_topk")


def script_flags(r: dict[str, str], concurrency: int) -> dict[str, Any] | None:
    """The flags InferenceX's SGLang launch script passed for an aggregated row (its TP and lengths case; the MTP
    script's for a row of the MTP configuration, :func:`runs_mtp`), or ``None`` for a row no script of
    :data:`INFERENCEX_SGLANG_SCRIPTS` ran (another engine, model or system; measured before
    :data:`INFERENCEX_SGLANG_FROM`; no InferenceX provenance)."""
    script = INFERENCEX_SGLANG_SCRIPTS.get((r["model_path"], r["system"], r["precision"]))
    measured = re.search(r"measured=(\d{4}-\d\d-\d\d)", r.get("source_notes", ""))
    if script is None or r["backend"] != "sglang" or (measured is not None and measured[1] < INFERENCEX_SGLANG_FROM):
        return None
    if runs_mtp(r, concurrency):
        return dict(INFERENCEX_SGLANG_MTP["flags"])
    tp = _whole(r["tp_size"])
    lengths = (int(r["isl"]), int(r["osl"]))
    return {**script["flags"], **script.get("tp", {}).get(tp, {}), **script.get("lengths", {}).get(lengths, {})}


def runs_mtp(r: dict[str, str], concurrency: int) -> bool:
    """Whether the row is a run of InferenceX's SGLang MTP configuration (:data:`INFERENCEX_SGLANG_MTP`): its image,
    and a point of the MTP search space that the plain configuration does not run."""
    rule = INFERENCEX_SGLANG_MTP
    image = re.search(r"(^|; )image=(\S+)", r.get("source_notes", ""))
    if (r["model_path"], r["system"], r["precision"]) != rule["key"] or image is None or image[2] != rule["image"]:
        return False
    lengths, tp = (int(r["isl"]), int(r["osl"])), _whole(r["tp_size"])

    def within(space: dict) -> bool:
        least, most = space.get(lengths, {}).get(tp, (0, -1))
        return least <= concurrency <= most

    return r["backend"] == "sglang" and within(rule["mtp_space"]) and not within(rule["plain_space"])


def _whole(v: str) -> int:
    """A layout field as a count (empty or 0: 1)."""
    v = (v or "").strip()
    return max(int(float(v)), 1) if v and float(v) > 0 else 1


def launcher_sglang_settings(r: dict[str, str], concurrency: int, inferencex: bool) -> dict[str, Any]:
    """The engine settings of :func:`script_flags` llmath models, for an aggregated InferenceX SGLang row: the
    polling interval (``recv_interval``), the prefill batch's token budget (``max_num_batched_tokens`` = the smaller
    of ``--chunked-prefill-size`` and ``--max-prefill-tokens``: SGLang's ``PrefillAdder`` takes new tokens up to both),
    the sequence cap (``max_num_seqs`` = ``--max-running-requests``) and the memory share of weights and KV pool
    (``gpu_memory_utilization`` = ``--mem-fraction-static``). A row run at more clients than the script's cap lets
    in was not run by that script (its configurations' concurrencies stay within the cap): empty, as elsewhere."""
    flags = script_flags(r, concurrency) if inferencex else None
    if flags is None or concurrency > flags["max_running_requests"]:
        return {}
    out: dict[str, Any] = {
        "max_num_batched_tokens": prefill_budget(flags),
        "max_num_seqs": flags["max_running_requests"],
        "gpu_memory_utilization": flags["mem_fraction_static"],
    }  # fmt: skip
    recv = recv_interval(r, concurrency)
    return out if recv is None else {**out, "recv_interval": recv}


def prefill_budget(flags: dict[str, Any]) -> int:
    """New tokens one prefill batch takes under a script's flags: SGLang's ``PrefillAdder`` stops at the smaller of
    ``--chunked-prefill-size`` and ``--max-prefill-tokens`` (default
    :data:`llmath.deploy.engine_settings.SGLANG_MAX_PREFILL_TOKENS_DEFAULT`)."""
    return cast(int, sglang_prefill_budget(flags["chunked_prefill_size"], flags.get("max_prefill_tokens")))


def first_wave_chunked(r: dict[str, str], concurrency: int, mean_prompt: float) -> bool:
    """Whether the first wave of an InferenceX SGLang row (``concurrency`` prompts of ``mean_prompt`` tokens, all
    sent at once) exceeds one prefill batch of its script (:func:`prefill_budget`): the prompt that straddles the
    budget is then prefilled in chunks, the later one with the earlier as its cached prefix, the extend-with-prefix
    path (``forward_normal_chunked_kv`` of ``models/deepseek_v2.py`` with prefix lengths > 0) that a server fed only
    whole prompts has not run. False for a row no script of :data:`INFERENCEX_SGLANG_SCRIPTS` ran."""
    flags = script_flags(r, concurrency)
    return flags is not None and concurrency * mean_prompt > prefill_budget(flags)


def recv_interval(r: dict[str, str], concurrency: int) -> int | None:
    """The ``--scheduler-recv-interval`` InferenceX's SGLang DeepSeek-R1 B200 scripts passed (30 from 16 clients, 10
    below; 10 for FP8 at TP 4) for an aggregated SGLang row with InferenceX's provenance; ``None`` elsewhere (the H200
    script passes none: SGLang's default, 1)."""
    flags = script_flags(r, concurrency) if INFERENCEX_NOTES.search(r.get("source_notes", "")) else None
    if flags is None or "recv" not in flags:
        return None
    least, above, below = flags["recv"]
    return above if concurrency >= least else below
