"""How aiconfigurator's own collection ran its aggregated rows (``serving_runs.csv`` rows whose ``source_notes``
carry no InferenceX provenance): the layout its configurations state in ``batch_size`` and ``silicon_concurrency``.

aiconfigurator's sdk counts a configuration's requests in flight as ``b × pp_size × attention_dp_size``, ``b``
the requests of one attention-DP rank (``sdk/backends/base_backend.py``: "correct output_throughput and
concurrency for attention dp (global batch)", ``concurrency = b * scale_factor``), and the collection keeps ``b``
as ``batch_size`` and that count as ``silicon_concurrency`` (the validation README). Its generator runs the
TensorRT-LLM workers of mixture-of-experts models with attention-DP wherever the configuration has more than one
DP rank, over the whole world of ``moe_tp × moe_ep`` GPUs (ai-dynamo/aiconfigurator
``src/aiconfigurator/generator/rule_plugin/trtllm.rule``: ``enable_attention_dp = ((data_parallel_size or 1) >
1) and ModelConfig.is_moe``; ``tensor_parallel_size = moe_tensor_parallel_size * moe_expert_parallel_size``).
Some rows (the GTL jobs') leave ``attention_dp_size`` empty and store that world in ``tp_size``; their
``silicon_concurrency`` is then ``batch_size`` × the DP ranks, and :func:`stated_attention_dp` reads the layout
from it.

The sdk also holds every MoE configuration to one width: ``tp_size × attention_dp_size = moe_tp_size × moe_ep_size``
(``sdk/config.py``, ``resolve_moe_parallelism``: "For MoE models, the attention width must match the expert
width"). The collection's vLLM Qwen3-235B-A22B-FP8 H200 rows state ``tp_size`` 1 or 2 with ``moe_tp_size`` 2 or 4
and leave ``attention_dp_size`` empty; :func:`moe_width_attention_dp` reads their attention-DP ranks from that
width (vLLM ``--data-parallel-size``, whose MoE layers then shard the experts over all TP × DP ranks).

The engine settings its generator gave those workers (token budget, request cap, KV cache share, SGLang's mixed
chunks, vLLM's grouped-expert kernel) are :func:`launcher_settings`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Any

from llmath.measure.trt_launchers import GENERATOR_TRT_KV_FRACTION

if TYPE_CHECKING:
    from llmath.measure.run_record import Layout

ADP_FROM_CONCURRENCY: dict[str, Any] = {
    "rule": "attention-DP ranks = silicon_concurrency / (batch_size × pp_size) where attention_dp_size is unstated",
    "source": "aiconfigurator-core 0.12.0 sdk/backends/base_backend.py (concurrency = b × pp_size × "
    "attention_dp_size); ai-dynamo/aiconfigurator src/aiconfigurator/generator/rule_plugin/trtllm.rule "
    "(enable_attention_dp, tensor_parallel_size = moe_tp × moe_ep)",
}


MOE_WIDTH_ADP: dict[str, Any] = {
    "rule": "attention-DP ranks = moe_tp_size × moe_ep_size / tp_size where attention_dp_size is unstated",
    "source": "aiconfigurator-core 0.12.0 sdk/config.py (ModelConfig.resolve_moe_parallelism: tp_size × "
    "attention_dp_size × cp_size == moe_tp_size × moe_ep_size for MoE models); vllm-project/vllm "
    "vllm/model_executor/layers/fused_moe/config.py (FusedMoEParallelConfig.make: without expert parallelism the "
    "experts are tensor-parallel over the TP × DP ranks)",
}


def _positive(v: str) -> int:
    v = (v or "").strip()
    return int(float(v)) if v and float(v) > 0 else 0


def stated_attention_dp(r: dict[str, str], lay: Layout, assumed: list[str]) -> Layout:
    """The aggregated layout with the attention-DP ranks its ``silicon_concurrency`` states
    (:data:`ADP_FROM_CONCURRENCY`): where ``attention_dp_size`` is empty (or 1) and the concurrency is k > 1 times
    ``batch_size`` × ``pp_size``, k dividing ``tp_size``, the replica's ``tp_size`` GPUs attend k-way
    data-parallel (TP ``tp_size / k``, EP ``moe_ep_size``); k ranks need k GPUs, so a ``tp_size`` equal to
    ``moe_tp × moe_ep`` is then the world those ranks run on, not a mis-encoding. The row's ``assumed`` says so.
    Any other row is returned as it is."""
    m = re.search(r"silicon_concurrency=(\d+)", r.get("source_notes", ""))
    per_rank, tp = _positive(r.get("batch_size", "")) * lay.pp, _positive(r.get("tp_size", ""))
    if m is None or per_rank < 1 or tp < 1 or _positive(r.get("attention_dp_size", "")) > 1:
        return moe_width_attention_dp(r, lay, assumed)
    conc = int(m.group(1))
    k = conc // per_rank
    if k < 2 or k * per_rank != conc or tp % k:
        return moe_width_attention_dp(r, lay, assumed)
    assumed[:] = [a for a in assumed if not a.startswith("tp_size ")]
    assumed.append(f"attention-DP {k}: silicon_concurrency {conc} = batch_size {per_rank // lay.pp} × {k} DP ranks"
                   f" × pp {lay.pp} (attention_dp_size unstated)")  # fmt: skip
    return replace(lay, tp=tp // k, dp=k, ep=max(_positive(r.get("moe_ep_size", "")), 1))


def moe_width_attention_dp(r: dict[str, str], lay: Layout, assumed: list[str]) -> Layout:
    """The aggregated layout with the attention-DP ranks the MoE width states (:data:`MOE_WIDTH_ADP`): where
    ``attention_dp_size`` is empty (or 1) and ``moe_tp_size × moe_ep_size`` is k > 1 times the layout's TP, the
    replica runs k attention-DP ranks of that TP on ``moe_tp × moe_ep`` GPUs (EP ``moe_ep_size``); the row's
    ``assumed`` says so. Any other row is returned as it is."""
    mtp, mep = _positive(r.get("moe_tp_size", "")), max(_positive(r.get("moe_ep_size", "")), 1)
    width, stated_tp = mtp * mep, _positive(r.get("tp_size", ""))
    if lay.dp > 1 or _positive(r.get("attention_dp_size", "")) > 1 or lay.tp != stated_tp:  # read otherwise
        return lay
    if width <= lay.tp or width % lay.tp:
        return lay
    k = width // lay.tp
    assumed.append(f"attention-DP {k}: moe_tp_size × moe_ep_size {width} = tp_size {lay.tp} × {k} DP ranks"
                   " (attention_dp_size unstated)")  # fmt: skip
    return replace(lay, dp=k, ep=mep)


# The grouped-expert kernel vLLM 0.12.0 runs block-FP8 experts with on Hopper under the collection's launcher
# (docs/serving-runs.md, "vLLM 0.12.0's DeepGEMM MoE on Hopper"): ``get_fp8_moe_backend`` picks DeepGEMM for block
# quantisation when the MoE layer's TP (TP × DP without expert parallelism) is below 8 and DeepGEMM is installed,
# and ``fused_experts`` takes it at every batch size because ``is_deep_gemm_e8m0_used()`` holds on Hopper
# (``VLLM_USE_DEEP_GEMM_E8M0`` defaults to 1), bypassing the M ≥ 128 shape check (vllm 0.12.0 wheel,
# ``model_executor/layers/quantization/fp8.py``, ``fused_moe/fused_moe.py``, ``utils/deep_gemm.py``, ``envs.py``).
# The generator's vLLM template sets none of those variables (``backend_templates/vllm/run.sh.j2``); Dynamo's vLLM
# runtime images install DeepGEMM with vLLM (ai-dynamo/dynamo ``container/deps/vllm/install_vllm.sh``).
# It applies to checkpoints whose routed experts are block-scaled FP8 (hub config.json
# ``quantization_config.weight_block_size``, read as ``fp8-block``: :func:`block_fp8_experts`).
VLLM_DEEPGEMM_MOE: dict[str, Any] = {
    "engine": "vllm", "versions": ("0.12.0",), "systems": ("h100_sxm", "h200_sxm"), "max_moe_tp": 7,
    "kernel": "vllm_deepgemm_fp8_block",
}  # fmt: skip


def generator_moe_kernel(r: dict[str, str]) -> dict[str, Any]:
    """``{"moe_kernel": …}`` where the row's engine ran :data:`VLLM_DEEPGEMM_MOE`'s kernel (its MoE width
    ``moe_tp_size × moe_ep_size`` below 8), else ``{}``."""
    g = VLLM_DEEPGEMM_MOE
    if r["backend"] != g["engine"] or r["backend_version"] not in g["versions"] or r["system"] not in g["systems"]:
        return {}
    width = _positive(r.get("moe_tp_size", "")) * max(_positive(r.get("moe_ep_size", "")), 1)
    ok = 0 < width <= g["max_moe_tp"] and block_fp8_experts(r["model_path"])
    return {"moe_kernel": g["kernel"]} if ok else {}


@cache
def block_fp8_experts(model: str) -> bool:
    """Whether the bundled checkpoint ``model`` (a hub id) routes experts stored in block-scaled FP8."""
    from llmath.model import registry

    name = registry.lookup(model)
    if name is None:
        return False
    ck = registry.checkpoint(name)
    if ck.precision is None or ck.spec.moe is None:
        return False
    return dict(ck.precision.modules).get("experts", ck.precision.weights) == "fp8-block"


# Engine settings the collection's own launcher gave aggregated workers (llmath.measure.serving_runs' docstring),
# ai-dynamo/aiconfigurator's
# config generator: ``--enable-mixed-chunk`` for aggregated SGLang workers (rule_plugin/sglang.rule ``agg
# enable_mixed_chunk = true``; the flag's spelling fixed in 07a37792, 2026-01-19), passed on by its SGLang 0.5.6.post2
# template (c46a56b0, 2026-01-23, dynamo 0.8.0); and a token budget of the worker's batch size + ISL + 1500 for
# aggregated TensorRT-LLM workers (``max_num_tokens``, cli/backends/trtllm.py before 84ee71eb, 2025-09-30, then
# rule_plugin/trtllm.rule) and vLLM workers (``--max-num-batched-tokens`` from rule_plugin/vllm.rule, 2cecd659); a
# request cap of the worker's batch size: ``max_batch_size: {{ bs }}`` (cli/templates/trtllm/dynamo/
# extra_engine_args.1.0.0rc3.yaml.j2 at fade9583c), ``agg_decode max_batch_size = max_batch_size`` passed as
# ``--max-running-requests`` / ``--max-num-seqs`` (rule_plugin/sglang.rule, vllm.rule and their templates at c46a56b0;
# raised to at least 512 for deployments only from 71bb3d00e, 2026-01-30).
GENERATOR_SETTINGS: dict[tuple[str, str], dict[str, Any]] = {("sglang", "0.5.6.post2"): {"mixed_prefill": True}}
GENERATOR_BUDGET_ENGINES = ("trtllm", "vllm")
GENERATOR_BUDGET_SLACK = 1500  # tokens above batch size + ISL (the generator's rules)


def launcher_settings(r: dict[str, str]) -> dict[str, Any]:
    """The engine settings the collection's launcher gave an aggregated row without InferenceX provenance."""
    out = dict(GENERATOR_SETTINGS.get((r["backend"], r["backend_version"]), {}), **generator_moe_kernel(r))
    if r["backend"] != "sglang" or (r["backend"], r["backend_version"]) in GENERATOR_SETTINGS:
        # not the SGLang rows older than its generator support
        out["max_num_seqs"] = max(_positive(r["batch_size"]), 1)
    if r["backend"] in GENERATOR_BUDGET_ENGINES:
        out["max_num_batched_tokens"] = max(_positive(r["batch_size"]), 1) + int(r["isl"]) + GENERATOR_BUDGET_SLACK
    if r["backend"] == "trtllm":
        out["gpu_memory_utilization"] = GENERATOR_TRT_KV_FRACTION
    return out
