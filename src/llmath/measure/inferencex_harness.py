"""What SemiAnalysis InferenceX's harness did to the ``serving_runs.csv`` rows that carry its provenance
(``wip=`` or ``workflow_run_id=`` in ``source_notes``), as :mod:`llmath.measure.serving_runs` reads them: the
lengths its benchmark client draws, the warm-up requests it sent from a date on, the token budget of its
TensorRT-LLM DeepSeek-R1 launch scripts and the MTP speculation of their ``-trt-mtp`` configurations (each rule
with its source below; :mod:`llmath.measure.serving_runs`'s docstring says how a row is read).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from llmath.deploy.bench_client import INFERENCEX, INFERENCEX_MTP
from llmath.measure.trt_launchers import MTP_DRAFT_TOKENS, mtp_run

if TYPE_CHECKING:
    from llmath.measure.run_record import Layout

# InferenceX's benchmark client: lengths uniform integers in [⌊0.8·L⌋, L] (llmath.measure.serving_runs' docstring,
# :data:`llmath.deploy.bench_client.INFERENCEX`); rows marked by its provenance
INFERENCEX_RANGE_RATIO = INFERENCEX.range_ratio
INFERENCEX_NOTES = re.compile(r"(^|; )(wip|workflow_run_id)=")
# InferenceX's client sends 2·CONC warm-up requests before the measured ones from d053ae24e (2026-01-21 17:53 UTC,
# ``run_benchmark_serving`` passes ``--num-warmups``); before, it passed none, so the measured first wave met a
# server that had served one test prompt: rows measured earlier say so in ``assumed`` (not modelled)
INFERENCEX_WARMUP: dict[str, str] = {
    "from": "2026-01-22",
    "source": "https://github.com/SemiAnalysisAI/InferenceX/commit/d053ae24ea30500c88dd740ac6213b8fe1d9c9f5 "
    "(benchmarks/benchmark_lib.sh: --num-warmups $((2 * max_concurrency)))",
}
# InferenceX's TensorRT-LLM launch scripts for a model (by the row's model_path): the token budget they pass as
# ``--max_num_tokens``, ⌈(CONC + ISL + 64) / 64⌉ · 64 (CONC the benchmark's concurrency, ISL the prompt's upper
# bound), and from the date the floor of 8192 was added, the floor (llmath.measure.serving_runs' docstring)
INFERENCEX_TRT_BUDGET: dict[str, dict[str, Any]] = {
    "deepseek-ai/DeepSeek-R1": {
        "scripts": "benchmarks/dsr1_fp8_h200_trt_slurm.sh, dsr1_fp8_b200_trt_slurm.sh, dsr1_fp4_b200_trt_slurm.sh",
        "floor": 8192,
        "floor_from": "2026-01-22",  # SemiAnalysisAI/InferenceX 64af5a77 (#258), merged 2026-01-21 23:05 UTC
        "source": "https://github.com/SemiAnalysisAI/InferenceX/blob/64af5a771b8a14915d907e0dc8abb2af40d9eaf0/"
        "benchmarks/dsr1_fp8_h200_trt_slurm.sh (MAX_NUM_TOKENS)",
    },
}
# InferenceX's TensorRT-LLM DeepSeek-R1 MTP configurations (``dsr1-fp8-b200-trt-mtp``, ``dsr1-fp4-b200-trt-mtp`` in
# .github/configs/nvidia-master.yaml from 5d517074c, 2026-02-05, and 0aae52d4c, 2026-02-06) run image 1.2.0rc6.post3,
# the plain ``-trt`` ones 1.2.0rc6.post2; with the sweep that added them (2026-01-14, ``dsr1-fp8-h200-trt-mtp`` too),
# the rows :func:`.trt_launchers.mtp_run` names; their scripts (benchmarks/dsr1_fp8_b200_trt_mtp.sh,
# dsr1_fp4_b200_trt_mtp.sh) set ``speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 3}``, 1 with
# attention-DP, and leave TensorRT-LLM's defaults (``MTPDecodingConfig``: strict acceptance, MTP-Eagle: the model's
# one MTP module run k times), at the one MTP acceptance convention of the measured rows
# (:func:`.disagg_recipes.mtp_speculation`)
INFERENCEX_TRT_MTP: dict[str, Any] = {
    "model": "deepseek-ai/DeepSeek-R1",
    "k": MTP_DRAFT_TOKENS["plain"],
    "k_attention_dp": MTP_DRAFT_TOKENS["attention_dp"],
    "source": "https://github.com/SemiAnalysisAI/InferenceX/blob/0aae52d4ced7f27fc8c1a8dcb9a500a376683eca/"
    "benchmarks/dsr1_fp4_b200_trt_mtp.sh (MTP), .github/configs/nvidia-master.yaml (image); 5d517074c for FP8",
}


def harness_budget(r: dict[str, str], concurrency: int) -> int | None:
    """The ``--max_num_tokens`` InferenceX's TensorRT-LLM launch script for the row's model passed
    (:data:`INFERENCEX_TRT_BUDGET`), for its aggregated TensorRT-LLM rows with its provenance; ``None`` elsewhere
    (the engine preset's budget)."""
    rule, notes = INFERENCEX_TRT_BUDGET.get(r["model_path"]), r.get("source_notes", "")
    if rule is None or r["backend"] != "trtllm" or not INFERENCEX_NOTES.search(notes):
        return None
    budget = -(-(concurrency + int(r["isl"]) + 64) // 64) * 64
    measured = re.search(r"measured=(\d{4}-\d\d-\d\d)", notes)
    if measured is None or measured.group(1) >= rule["floor_from"]:
        budget = max(budget, rule["floor"])
    return budget


def harness_speculation(r: dict[str, str], lay: Layout | None):
    """The speculation InferenceX's TensorRT-LLM DeepSeek-R1 MTP launch scripts configured
    (:data:`INFERENCEX_TRT_MTP`): its rows are those the ``-trt-mtp`` configurations measured
    (:func:`.trt_launchers.mtp_run`); k draft tokens, 1 with attention-DP, at the published acceptance length for
    that k. ``None`` elsewhere."""
    from llmath.measure.disagg_recipes import mtp_speculation

    rule, notes = INFERENCEX_TRT_MTP, r.get("source_notes", "")
    if (r["backend"], r["model_path"]) != ("trtllm", rule["model"]) or not INFERENCEX_NOTES.search(notes):
        return None
    if mtp_run(r, True) is None:
        return None
    k = rule["k_attention_dp"] if lay is not None and lay.dp > 1 else rule["k"]
    return mtp_speculation(k, INFERENCEX_MTP)


def drawn_mean(length: int) -> float:
    """The mean of the lengths InferenceX's client draws for an upper bound L: integers uniform in [⌊0.8·L⌋, L]."""
    return (int(INFERENCEX_RANGE_RATIO * length) + length) / 2


def harness_warmed(r: dict[str, str]) -> bool:
    """Whether InferenceX's client sent warm-up requests before the row's measured ones
    (:data:`INFERENCEX_WARMUP`, by the row's ``measured=`` date; a row without a date is taken as warmed)."""
    measured = re.search(r"measured=(\d{4}-\d\d-\d\d)", r.get("source_notes", ""))
    return measured is None or measured.group(1) >= INFERENCEX_WARMUP["from"]
