"""vLLM settings the InferenceX launchers of the measured serving runs wrote (docs/serving-runs.md, "vLLM: the
InferenceX launchers' settings"): the grouped-expert kernel an environment variable picks, the token budget, the running
sequence cap, the KV cache's format, whether prefill passes run without a CUDA graph and the largest pass that
replays one; and the GPUs of rows whose columns state TP T, attention-DP T and EP T · T (:func:`stated_layout`).
:mod:`llmath.measure.serving_runs` puts them in an aggregated vLLM row's ``engine_settings``.

Every rule is keyed by the row's ``model_path`` and ``system`` and applies by the row's ``measured=`` date (the first
date whose rows ran the commit that set it, through the rows' last date); a row without a date takes none. Settings
the launchers wrote that llmath's defaults already model, or that it does not model, are listed in docs/serving.md
with their sources."""

from __future__ import annotations

import re
from typing import Any

from llmath.deploy.engine_settings import vllm_async, vllm_capture_size, vllm_graph_mode

SCRIPTS = "https://github.com/SemiAnalysisAI/InferenceX/blob"
# The MoE kernel a launcher's environment picks. vLLM chooses its MXFP4 MoE backend in
# vllm/model_executor/layers/quantization/mxfp4.py (get_mxfp4_backend, vllm-project/vllm 007d50058a06) and, after
# the backend refactor, vllm/model_executor/layers/fused_moe/oracle/mxfp4.py (select_mxfp4_moe_backend, 001eda31e3d0):
# on SM90 without FlashInfer's opt-in flags, Marlin when VLLM_MXFP4_USE_MARLIN is set, else triton_kernels'
# matmul_ogs. InferenceX's gpt-oss H100 and H200 launchers export VLLM_MXFP4_USE_MARLIN=1 from 4e52ed4c6
# (2026-01-02 22:24 UTC, with the v0.13.0 image) through the v0.18.0 rows (79a42e20, 2026-03-27).
# The gpt-oss B200 launchers export VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 from 5e92867f4 (2025-09-24) through the
# rows' dates: FlashInfer's TensorRT-LLM-generated MoE with MXFP8 activations (SM100_FI_MXFP4_MXFP8_TRTLLM).
INFERENCEX_VLLM_MOE_KERNEL: dict[tuple[str, str], dict[str, Any]] = {
    **{
        ("openai/gpt-oss-120b", system): {
            "kernel": "marlin",
            "from": "2026-01-03",
            "env": "VLLM_MXFP4_USE_MARLIN=1",
            "source": f"{SCRIPTS}/4e52ed4c6/benchmarks/gptoss_fp4_{gpu}_slurm.sh; "
            f"{SCRIPTS}/79a42e20a8559784641ca2279994c75c0608dc39/benchmarks/single_node/gptoss_fp4_{gpu}.sh",
        }
        for system, gpu in (("h100_sxm", "h100"), ("h200_sxm", "h200"))
    },
    ("MiniMaxAI/MiniMax-M2.5", "b200_sxm"): {
        "kernel": "triton_fp8_block",
        "from": "2026-03-11",
        "until": "2026-04-03",
        "precision": "fp8",
        "env": "VLLM_USE_FLASHINFER_MOE_FP8=0, VLLM_MOE_USE_DEEP_GEMM=0",
        "source": f"{SCRIPTS}/64c20b6b5ba068ab4e3741c73fa1b3c71311aa55/benchmarks/single_node/minimaxm2.5_fp8_b200.sh "
        "(from f342df18e, 2026-03-11, until bddbf403 of 2026-04-03); vllm-project/vllm vllm/model_executor/layers/"
        "fused_moe/oracle/fp8.py select_fp8_moe_backend: FlashInfer and DeepGEMM removed by the variables, vLLM's "
        "CUTLASS not offered (Fp8MoEMethod passes allow_vllm_cutlass=False): TritonExperts",
    },
    ("openai/gpt-oss-120b", "b200_sxm"): {
        "kernel": "flashinfer_mxfp8",
        "from": "2025-09-24",
        "env": "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1",
        "source": f"{SCRIPTS}/9596d23d74e9e1e4f4bcdb27572c87cafb746a02/benchmarks/gptoss_fp4_b200_docker.sh; "
        f"{SCRIPTS}/79a42e20a8559784641ca2279994c75c0608dc39/benchmarks/single_node/gptoss_fp4_b200.sh",
    },
}
# The token budget (--max-num-batched-tokens) where a launcher sets one other than vLLM's large-GPU default of 8192:
# the MiniMax-M2.5 B200 launchers pass "$((ISL * 2))" (ISL the scenario's prompt length): the FP8 one from bddbf403
# (2026-04-03, with the v0.19.0 image that every FP8 row from that day ran, the pull request's own runs included;
# the v0.17.0 rows before ran vLLM's default), the NVFP4 one from a9c199207 (2026-04-07, the commit of pull request
# #996 that adds it and --max-cudagraph-capture-size 2048). The 2026-04-03 NVFP4 rows ran that pull request's
# 08bcde8f1 (2026-04-02, the vLLM nightly image named in their notes), which passes neither: vLLM's defaults, the
# 8192 budget and a capture size of min(2 × 1024, 512). The gpt-oss and Llama-3.1-70B launchers pass 8192.
INFERENCEX_VLLM_BUDGET: dict[tuple[str, str], dict[str, Any]] = {
    ("MiniMaxAI/MiniMax-M2.5", "b200_sxm"): {
        "prompts": 2,
        "from": {"fp8": "2026-04-03", "fp4": "2026-04-07"},
        "source": f"{SCRIPTS}/bddbf4031771240060101d349900c51e0beb934e/benchmarks/single_node/minimaxm2.5_fp8_b200.sh, "
        f"{SCRIPTS}/a9c199207c0b033834db0fd6b3337fedac37492c/benchmarks/single_node/minimaxm2.5_fp4_b200.sh "
        "(--max-num-batched-tokens $((ISL * 2))); absent from "
        f"{SCRIPTS}/08bcde8f103e56b47769943e3c5ce67047b0b601/benchmarks/single_node/minimaxm2.5_fp4_b200.sh",
    },
}
# The running-sequence cap (--max-num-seqs) where a launcher sets a number below vLLM's large-GPU default of 1024
# ("CONC": the benchmark's concurrency, which never binds a closed loop of that many clients).
INFERENCEX_VLLM_MAX_SEQS: dict[tuple[str, str], dict[str, Any]] = {
    ("openai/gpt-oss-120b", "b200_sxm"): {
        "value": 512,
        "source": f"{SCRIPTS}/79a42e20a8559784641ca2279994c75c0608dc39/benchmarks/single_node/gptoss_fp4_b200.sh",
    },
    ("meta-llama/Llama-3.1-70B", "b200_sxm"): {
        "value": 512,
        "source": f"{SCRIPTS}/9596d23d74e9e1e4f4bcdb27572c87cafb746a02/benchmarks/70b_fp8_b200_docker.sh, "
        "70b_fp4_b200_docker.sh",
    },
    ("MiniMaxAI/MiniMax-M2.5", "h100_sxm"): {
        "value": 256,
        "source": f"{SCRIPTS}/79a42e20a8559784641ca2279994c75c0608dc39/benchmarks/single_node/minimaxm2.5_fp8_h100.sh",
    },
}

# The KV cache's format where a launcher leaves ``--kv-cache-dtype`` at vLLM's ``auto`` (the model's dtype, bf16)
# although the row's precision column would give an fp8 cache (serving_runs' rule for fp8 and fp4 rows): every
# gpt-oss H100 and H200 and MiniMax-M2.5 H100 and H200 launcher through the rows' dates; the gpt-oss B200 launcher
# before 25506e87c (2025-12-05) and the MiniMax-M2.5 FP8 B200 one before bddbf403 (2026-04-03), which pass fp8 from
# then on. ``until``: the first date that passes fp8 (None: none of the rows' dates).
KV_AUTO_SOURCE = (
    f"{SCRIPTS}/9596d23d74e9e1e4f4bcdb27572c87cafb746a02/benchmarks/gptoss_fp4_h100_slurm.sh, "
    f"gptoss_fp4_h200_slurm.sh, gptoss_fp4_b200_docker.sh; {SCRIPTS}/626932a110a2348591e314eddb782f7a0dee104c/"
    "benchmarks/single_node/gptoss_fp4_h100.sh, gptoss_fp4_h200.sh, minimaxm2.5_fp8_h100.sh, minimaxm2.5_fp8_h200.sh "
    f"(no --kv-cache-dtype); {SCRIPTS}/25506e87c/benchmarks/gptoss_fp4_b200_docker.sh and "
    f"{SCRIPTS}/bddbf4031771240060101d349900c51e0beb934e/benchmarks/single_node/minimaxm2.5_fp8_b200.sh (fp8 from then)"
)
INFERENCEX_VLLM_KV_AUTO: dict[tuple[str, str], dict[str, Any]] = {
    ("openai/gpt-oss-120b", "h100_sxm"): {"until": None, "source": KV_AUTO_SOURCE},
    ("openai/gpt-oss-120b", "h200_sxm"): {"until": None, "source": KV_AUTO_SOURCE},
    ("openai/gpt-oss-120b", "b200_sxm"): {"until": "2025-12-05", "source": KV_AUTO_SOURCE},
    ("MiniMaxAI/MiniMax-M2.5", "h100_sxm"): {"until": None, "source": KV_AUTO_SOURCE},
    ("MiniMaxAI/MiniMax-M2.5", "h200_sxm"): {"until": None, "source": KV_AUTO_SOURCE},
    ("MiniMaxAI/MiniMax-M2.5", "b200_sxm"): {"until": "2026-04-03", "precision": "fp8", "source": KV_AUTO_SOURCE},
}

# Prefill passes launched without a CUDA graph (``eager_prefill``): the Llama-3.1-70B B200 launchers (FP8 from
# 425f74d51, 2025-09-12; FP4 from 27f29acbe, 2025-09-21; through the rows' 2025-10-29) pass a compilation config with
# "cudagraph_mode": "FULL_DECODE_ONLY" and "splitting_ops": []. vLLM (vllm/config/compilation.py, CUDAGraphMode)
# then captures one full graph per decode-only batch size and runs every pass that holds a prefill token, mixed
# ones included, as the compiled model without replay: its kernels are launched one by one from the host. The other
# vLLM launchers leave vLLM's default mode or set PIECEWISE or FULL_AND_PIECEWISE: mixed passes up to the capture
# size (2048 where set) replay piecewise graphs (docs/serving-runs.md, "vLLM passes without a CUDA graph"). With
# "splitting_ops": [] the compiled graph is one flattened graph, whose host time per launch is vLLM's
# flat_graph_host_factor × its split graph's (docs/serving-runs.md, "vLLM's own host times").
INFERENCEX_VLLM_EAGER_PREFILL: dict[tuple[str, str], dict[str, Any]] = {
    ("meta-llama/Llama-3.1-70B", "b200_sxm"): {
        "from": "2025-09-12",
        "source": f"{SCRIPTS}/9596d23d74e9e1e4f4bcdb27572c87cafb746a02/benchmarks/70b_fp8_b200_docker.sh, "
        "70b_fp4_b200_docker.sh (compilation-config cudagraph_mode FULL_DECODE_ONLY, splitting_ops [])",
    },
}

# The largest pass replayed from a CUDA graph (vLLM's max_cudagraph_capture_size; ``cuda_graph_max_tokens``), where
# the launcher sets it or sets the running-sequence cap it defaults from: min(2 × max_num_seqs, 512) unless given
# (vllm-project/vllm 002284db4c87 vllm/config/compilation.py). The gpt-oss launchers pass 2048 (``cuda-graph-sizes``
# in the 2025 scripts, ``max-cudagraph-capture-size`` from 2026), the MiniMax-M2.5 B200 ones 2048 from the dates of
# their token budget (FP8 from bddbf403, 2026-04-03; NVFP4 from a9c199207, 2026-04-07); the Llama-3.1-70B H100 and H200
# ones pass ``--max-num-seqs $CONC`` and no size: 2 × CONC ("conc"). The MiniMax-M2.5 H100 (256 sequences), H200
# and earlier B200 launchers leave vLLM's rule at its cap of 512 (the preset's value).
GRAPH_SOURCE = (
    f"{SCRIPTS}/9596d23d74e9e1e4f4bcdb27572c87cafb746a02/benchmarks/gptoss_fp4_h100_slurm.sh, "
    "gptoss_fp4_h200_slurm.sh, gptoss_fp4_b200_docker.sh (cuda-graph-sizes: 2048), 70b_fp8_h100_docker.sh, "
    "70b_fp8_h200_slurm.sh (--max-num-seqs "
    f"$CONC); {SCRIPTS}/79a42e20a8559784641ca2279994c75c0608dc39/benchmarks/single_node/gptoss_fp4_*.sh "
    f"(max-cudagraph-capture-size: 2048); {SCRIPTS}/bddbf4031771240060101d349900c51e0beb934e/benchmarks/single_node/"
    f"minimaxm2.5_fp8_b200.sh, {SCRIPTS}/a9c199207c0b033834db0fd6b3337fedac37492c/benchmarks/single_node/"
    "minimaxm2.5_fp4_b200.sh (--max-cudagraph-capture-size 2048)"
)
INFERENCEX_VLLM_GRAPH_TOKENS: dict[tuple[str, str], dict[str, Any]] = {
    **{
        ("openai/gpt-oss-120b", s): {"value": 2048, "source": GRAPH_SOURCE}
        for s in ("h100_sxm", "h200_sxm", "b200_sxm")
    },
    ("MiniMaxAI/MiniMax-M2.5", "b200_sxm"): {
        "value": 2048,
        "from": INFERENCEX_VLLM_BUDGET[("MiniMaxAI/MiniMax-M2.5", "b200_sxm")]["from"],
        "source": GRAPH_SOURCE,
    },
    **{("meta-llama/Llama-3.1-70B", s): {"value": "conc", "source": GRAPH_SOURCE} for s in ("h100_sxm", "h200_sxm")},
}
VLLM_GRAPH_CAP = 512  # the default capture size's cap (data/engines.json vllm cuda_graph_max_tokens)

# Async scheduling (``replacement_lag`` 2) on every row: the Llama-3.1-70B and gpt-oss-120b launchers pass
# ``async-scheduling: true`` (9596d23d, the 2025 rows) until d2c2acb19 (2026-02-25) drops the flag from the gpt-oss ones
# as the default "since v0.14.0" with the v0.15.1 image; the MiniMax-M2.5 launchers (from 2026-03, v0.16.0 and later
# images) pass neither it nor --no-async-scheduling. vLLM then keeps two steps in flight (EngineCore's batch queue of
# max_concurrent_batches = 2, vllm/v1/engine/core.py step_with_batch_queue): step n + 1 is scheduled before step n's
# outputs are processed, and step n + 2 right after, so a follow-up request sent on step n's output joins step n + 3.
ASYNC_SOURCE = (
    f"{SCRIPTS}/9596d23d74e9e1e4f4bcdb27572c87cafb746a02/benchmarks/70b_fp8_h100_docker.sh, 70b_fp8_h200_slurm.sh, "
    "70b_fp8_b200_docker.sh, 70b_fp4_b200_docker.sh, gptoss_fp4_h100_slurm.sh, gptoss_fp4_h200_slurm.sh, "
    f"gptoss_fp4_b200_docker.sh (async-scheduling: true); {SCRIPTS}/d2c2acb19f0509f8ef0b72f3368f581d6ebe1079 "
    "('Remove deprecated async-scheduling flag (default since v0.14.0)'); vllm-project/vllm vllm/config/vllm.py "
    "(async_scheduling None resolves to True unless an incompatible option is set), vllm/v1/engine/core.py "
    "(step_with_batch_queue)"
)

# The layout of rows whose columns state ``attention_dp_size`` = ``tp_size`` = T and ``moe_ep_size`` = T · T (2/2/4,
# 4/4/16): InferenceX's search-space entries ``{ tp: T, ep: T }`` (``.github/configs/nvidia-master.yaml``), with or
# without ``dp-attn: true``, which the file writes that way. The launchers run T GPUs either way
# (``benchmarks/single_node/minimaxm2.5_fp8_b200.sh`` at 8c3eb5b86e06: ``--tensor-parallel-size=$TP`` and
# ``--enable-expert-parallel`` where EP_SIZE > 1; ``minimaxm2.5_fp4_b200.sh``: ``--tensor-parallel-size=1
# --data-parallel-size=$TP --enable-expert-parallel`` where DP_ATTENTION is true), and vLLM's expert-parallel group
# is TP × DP = T ranks. The MiniMax-M2.5 FP8 B200 and H100 rows so stated measure what their twins stated as TP T,
# EP T measure at every concurrency (B200 2026-04-03, 2 GPUs, 4 to 256 clients: 74/72, 83/79, 99/99, 132/137,
# 192/192, 297/298, 529/538 ms). Attention runs data-parallel only where the row's entry sets dp-attn:
# ``{ "isl", "from", "until", "conc" }`` ranges on the row's date, ISL and concurrency (else TP T).
STATED_TP_SQUARED_SOURCE = (
    f"{SCRIPTS}/8c3eb5b86e065ad3db33e25de61019c08505e4fd/.github/configs/nvidia-master.yaml (minimaxm2.5-*-vllm "
    f"search spaces); {SCRIPTS}/13962fcfa/.github/configs/nvidia-master.yaml (the FP4 B200 dp-attn entry from 256 "
    "clients at 1k/1k, 512 before); benchmarks/single_node/minimaxm2.5_fp8_b200.sh, minimaxm2.5_fp4_b200.sh, "
    "minimaxm2.5_fp8_h100.sh (their parallel arguments)"
)
INFERENCEX_VLLM_DP_ATTENTION: dict[tuple[str, str, str], tuple[dict[str, Any], ...]] = {
    ("MiniMaxAI/MiniMax-M2.5", "b200_sxm", "fp4"): (
        {"isl": 1024, "from": "2026-04-01", "until": "2026-04-22", "conc": (512, 512)},
        {"isl": 1024, "from": "2026-04-22", "until": "9999", "conc": (256, 1024)},
    ),
}


def stated_layout(r: dict[str, str], tp: int, dp: int, ep: int) -> tuple[int, int, int, str] | None:
    """(TP, attention-DP, EP, note) of an aggregated vLLM row whose columns state TP T, attention-DP T and EP T · T
    (:data:`INFERENCEX_VLLM_DP_ATTENTION`): T GPUs, EP T, attention data-parallel T where the row's dp-attn entry
    covers it, else TP T; ``None`` for any other row."""
    if r["backend"] != "vllm" or r["mode"] != "agg" or tp < 2 or dp != tp or ep != tp * dp:
        return None
    day, m = _measured(r), re.search(r"silicon_concurrency=(\d+)", r.get("source_notes", ""))
    conc = int(m.group(1)) if m else int(r["batch_size"]) * dp
    rules = INFERENCEX_VLLM_DP_ATTENTION.get((r["model_path"], r["system"], r["precision"]), ())
    attn_dp = day is not None and any(
        int(r["isl"]) == u["isl"] and u["from"] <= day < u["until"] and u["conc"][0] <= conc <= u["conc"][1]
        for u in rules
    )
    what = f"attention-DP {tp} (TP 1)" if attn_dp else f"TP {tp}"
    note = (f"attention_dp_size {dp}, moe_ep_size {ep} read as {tp} GPUs: {what}, EP {tp} (InferenceX entry tp {tp},"
            f" ep {tp})")  # fmt: skip
    return (1, tp, tp, note) if attn_dp else (tp, 1, tp, note)


def _measured(r: dict[str, str]) -> str | None:
    m = re.search(r"measured=(\d{4}-\d\d-\d\d)", r.get("source_notes", ""))
    return m.group(1) if m else None


def launcher_vllm_settings(r: dict[str, str], inferencex: bool) -> dict[str, Any]:
    """Every setting of this module an aggregated vLLM row of InferenceX's launch scripts ran with; empty for
    other rows."""
    if r["backend"] != "vllm" or r["mode"] != "agg" or not inferencex:
        return {}
    return {
        **moe_kernel(r),
        **token_budget(r),
        **max_seqs(r),
        **kv_cache(r),
        **eager_prefill(r),
        **graph_tokens(r),
        **async_scheduling(r),
    }


def moe_kernel(r: dict[str, str]) -> dict[str, Any]:
    """``moe_kernel`` as the row's launcher picked it (:data:`INFERENCEX_VLLM_MOE_KERNEL`), from its date (until the
    rule's ``until``, for its ``precision`` where it names one)."""
    rule, day = INFERENCEX_VLLM_MOE_KERNEL.get((r["model_path"], r["system"])), _measured(r)
    if rule is None or day is None or day < rule["from"] or day >= rule.get("until", "9999"):
        return {}
    return {"moe_kernel": rule["kernel"]} if rule.get("precision", r["precision"]) == r["precision"] else {}


def token_budget(r: dict[str, str]) -> dict[str, Any]:
    """``max_num_batched_tokens`` as the row's launcher set it (:data:`INFERENCEX_VLLM_BUDGET`), from its date for
    the row's precision."""
    rule, day = INFERENCEX_VLLM_BUDGET.get((r["model_path"], r["system"])), _measured(r)
    since = rule["from"].get(r["precision"]) if rule else None
    if rule is None or since is None or day is None or day < since:
        return {}
    return {"max_num_batched_tokens": rule["prompts"] * int(r["isl"])}


def max_seqs(r: dict[str, str]) -> dict[str, Any]:
    """``max_num_seqs`` as the row's launcher set it (:data:`INFERENCEX_VLLM_MAX_SEQS`)."""
    rule = INFERENCEX_VLLM_MAX_SEQS.get((r["model_path"], r["system"]))
    return {"max_num_seqs": rule["value"]} if rule else {}


def kv_cache(r: dict[str, str]) -> dict[str, Any]:
    """``kv_cache_dtype: auto`` where the row's launcher left vLLM's default (:data:`INFERENCEX_VLLM_KV_AUTO`): its
    KV cache is the model's dtype, not the fp8 cache the precision column gives
    (:func:`llmath.measure.serving_runs.precision` reads it)."""
    rule, day = INFERENCEX_VLLM_KV_AUTO.get((r["model_path"], r["system"])), _measured(r)
    if rule is None or rule.get("precision", r["precision"]) != r["precision"] or day is None:
        return {}
    return {"kv_cache_dtype": "auto"} if rule["until"] is None or day < rule["until"] else {}


def eager_prefill(r: dict[str, str]) -> dict[str, Any]:
    """``eager_prefill`` where the row's launcher captured graphs for decode-only batches alone
    (:data:`INFERENCEX_VLLM_EAGER_PREFILL`), from the rule's date."""
    rule, day = INFERENCEX_VLLM_EAGER_PREFILL.get((r["model_path"], r["system"])), _measured(r)
    if rule is None or day is None or day < rule["from"]:
        return {}
    return vllm_graph_mode("FULL_DECODE_ONLY", splitting_ops=[])  # the scripts' compilation config


def graph_tokens(r: dict[str, str]) -> dict[str, Any]:
    """``cuda_graph_max_tokens`` as the row's launcher set it (:data:`INFERENCEX_VLLM_GRAPH_TOKENS`): its value, or
    for ``--max-num-seqs $CONC`` vLLM's default min(2 × CONC, 512) (CONC the row's ``silicon_concurrency``, else its
    ``batch_size``); from the rule's date for the row's precision where it names dates."""
    rule, day = INFERENCEX_VLLM_GRAPH_TOKENS.get((r["model_path"], r["system"])), _measured(r)
    since = rule.get("from", {}).get(r["precision"], "9999") if rule and "from" in rule else ""
    if rule is None or day is None or day < since:
        return {}
    value = rule["value"]
    if value == "conc":
        m = re.search(r"silicon_concurrency=(\d+)", r.get("source_notes", ""))
        value = min(2 * int(m.group(1) if m else r["batch_size"]), VLLM_GRAPH_CAP)
    return vllm_capture_size(value, "max_cudagraph_capture_size")


def async_scheduling(r: dict[str, str]) -> dict[str, Any]:
    """``replacement_lag`` 2 for a dated row: every InferenceX vLLM launcher ran vLLM's async scheduling, by its flag or
    by the image's default (:data:`ASYNC_SOURCE`)."""
    return vllm_async(True) if _measured(r) is not None else {}
