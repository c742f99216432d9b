"""Measured serving runs (a CSV in ``serving_runs.csv``'s format) predicted through the public API.

Each row is one benchmark run: an engine serving a model on one replica layout (``agg``) or on prefill and
decode pools (``disagg``), at a fixed concurrency with fixed prompt/output lengths, and the mean TTFT and TPOT
the benchmark client measured. :func:`read_runs` maps a row to llmath's names, :func:`predict_run` computes it
with :func:`llmath.deploy.service.serve` (or :func:`llmath.deploy.disagg.serve_disaggregated`), and
:func:`validate_runs` returns every row's error and the summaries by engine, system, model, concurrency and
lengths. How the columns are read (the collection's own conventions, from its ``sdk`` code):

* ``system``: ``h100_sxm`` → ``h100-sxm``, ``h200_sxm`` → ``h200``, ``b200_sxm`` → ``b200``;
* ``model_path``: the registry model of the same architecture (:data:`MODELS`; an Instruct or FP8 checkpoint
  of a bundled base model is that model, its formats then come from the row's quant modes);
* ``gemm_quant_mode`` / ``moe_quant_mode`` (the formats the engine ran): ``fp8`` → FP8 weights and
  activations (W8A8), ``fp8_block`` → block-scaled FP8 weights, FP8 activations, ``nvfp4`` → NVFP4 weights
  and activations (W4A4), empty → the checkpoint's own; ``fp8`` reads as block-scaled FP8 where the bundled
  checkpoint's config.json stores those weights so (``quantization_config.weight_block_size``: DeepSeek-R1,
  MiniMax-M2.5); the MoE mode sets the routed experts' format; the
  modules the checkpoint's ``modules_to_not_convert`` leaves unquantised keep its format (gpt-oss: attention,
  router, embeddings and LM head in bf16, as every engine loads them); TensorRT-LLM rows a rule of
  :data:`.trt_launchers.TRT_CHECKPOINT_FORMATS` names run the checkpoint's own formats whatever the label;
* the KV cache: FP8 when the row's ``precision`` is ``fp8`` or ``fp4`` (the collection's rule: a quantised
  checkpoint runs FP8 KV cache and FP8 attention, ``sdk/models/helpers.py`` ``_infer_quant_modes_from_raw_config``),
  else the checkpoint's (bf16), and the checkpoint's where an InferenceX vLLM launcher left vLLM's ``auto``
  (``kv_cache_dtype`` in the run's ``engine_settings``, :data:`.vllm_launchers.INFERENCEX_VLLM_KV_AUTO`);
* layout: TP = ``tp_size``, PP = ``pp_size``, attention-DP = ``attention_dp_size`` (empty or 0 = 1), EP =
  ``moe_ep_size`` (0 = 1); the replica has TP × PP × DP GPUs. A layout whose ``tp_size`` (or
  ``attention_dp_size``) equals ``moe_tp_size × moe_ep_size`` with ``moe_tp_size = moe_ep_size > 1`` (16–64
  GPUs on one 8-GPU node, ids such as ``…_tp8_ep8_…`` stored as ``tp_size`` 64) is read as that field divided
  by ``moe_ep_size``, with EP = ``moe_ep_size`` (and says so in the row's ``assumed``);
* concurrency: ``silicon_concurrency`` in ``source_notes``, else ``batch_size × attention_dp_size``; an aggregated
  row that leaves ``attention_dp_size`` empty while its ``silicon_concurrency`` is k × ``batch_size`` runs k
  attention-DP ranks over its ``tp_size`` GPUs (the collection's convention,
  :func:`.collection_harness.stated_attention_dp`);
* the client's lengths: rows whose ``source_notes`` carry SemiAnalysis InferenceX's provenance (``wip=`` or
  ``workflow_run_id=``; its models and its 1k/1k, 1k/8k, 8k/1k scenarios) were measured by its
  ``utils/bench_serving/benchmark_serving.py`` with ``--random-range-ratio 0.8 --ignore-eos --num-prompts
  10·C`` (``.github/workflows/benchmark-tmpl.yml``, ``benchmarks/benchmark_lib.sh``), whose
  ``sample_random_requests`` draws each prompt and output length uniformly from the integers of [⌊0.8·L⌋, L]
  (:data:`llmath.deploy.bench_client.INFERENCEX`). With ``harness_lengths`` they are predicted with that
  output-length distribution (every integer of the range: a coarser grid of lengths makes the clients' sends
  coincide more often than the client's draws do) and the mean prompt, so the clients fall out of step after
  the first wave
  (:func:`llmath.deploy.drifting_loop.drifting_state`); otherwise, and for the other rows, with the fixed
  lengths the columns state (docs/serving-runs.md, "Which clients the measured runs used", says why both exist);
* the engine's token budget: InferenceX's TensorRT-LLM DeepSeek-R1 launch scripts
  (``benchmarks/dsr1_fp8_h200_trt_slurm.sh``, ``dsr1_fp8_b200_trt_slurm.sh``, ``dsr1_fp4_b200_trt_slurm.sh``)
  pass ``--max_num_tokens`` ⌈(CONC + ISL + 64) / 64⌉ · 64, and from SemiAnalysisAI/InferenceX 64af5a77
  (2026-01-21) at least 8192: its aggregated rows run that budget by their ``measured=`` date
  (:data:`.inferencex_harness.INFERENCEX_TRT_BUDGET`), carried in the run's ``engine_settings`` as
  ``max_num_batched_tokens``;
* SGLang's launch settings: InferenceX's SGLang DeepSeek-R1 scripts (``dsr1_fp8_b200.sh``, ``dsr1_fp4_b200.sh``,
  ``dsr1_fp8_h200.sh``) pass ``--scheduler-recv-interval`` (B200: 30 from 16 clients, 10 below, 10 for FP8 at
  TP 4), the prefill budget, the sequence cap and the memory share: ``recv_interval``, ``max_num_batched_tokens``,
  ``max_num_seqs``, ``gpu_memory_utilization`` in the run's ``engine_settings``
  (:func:`.sglang_launchers.launcher_sglang_settings`);
* TensorRT-LLM's KV cache share: InferenceX's TensorRT-LLM launch scripts write ``free_gpu_memory_fraction``
  0.85 (gpt-oss-120b), 0.75 (DeepSeek-R1 on H200) and 0.8 (DeepSeek-R1 on B200; 0.7 and 0.75 in two FP8 cases from
  2026-01-29), carried as ``gpu_memory_utilization`` (:data:`.trt_launchers.INFERENCEX_TRT_KV_FRACTION`); its
  GUARANTEED_NO_EVICT admission fills that pool with each request's prompt and output to the end;
* TensorRT-LLM's batch waiting: InferenceX's DeepSeek-R1 FP8 B200 script from 2026-01-29 holds prompts for up to 40
  iterations or until they and the decoding tokens reach 0.8 × the token budget, at 1024/1024 from 64 clients; its
  Llama-3.1-70B scripts for up to 20 iterations or 0.9 × the budget at 1024/1024 with TP < 8
  (:data:`.trt_launchers.INFERENCEX_TRT_BATCH_WAIT`; TensorRT-LLM skips it with attention-DP); their constant
  ``--max_num_tokens`` (16384 for Llama-3.1-70B, 20000 for gpt-oss-120b) is the run's ``max_num_batched_tokens``
  (:data:`.trt_launchers.INFERENCEX_TRT_MAX_NUM_TOKENS`), and the DeepSeek-R1 MTP scripts' budget, sized for the
  draft tokens without the 8192 floor, that of the MTP rows (:data:`.trt_launchers.INFERENCEX_TRT_MTP_RUNS`);
* TensorRT-LLM's attention-DP balancing: InferenceX's gpt-oss-120b and DeepSeek-R1 scripts turn it on wherever they
  run attention-DP (:data:`.trt_launchers.INFERENCEX_TRT_ADP_BALANCE`);
* vLLM's launch settings: InferenceX's vLLM launch scripts pick Marlin for gpt-oss's MXFP4 experts on H100 and H200
  (``VLLM_MXFP4_USE_MARLIN=1`` from 2026-01-03), a token budget of 2 · ISL for MiniMax-M2.5 on B200 and running
  sequence caps below vLLM's default, and leave some KV caches at the model's dtype, carried as ``moe_kernel``,
  ``max_num_batched_tokens``, ``max_num_seqs`` and ``kv_cache_dtype``
  (:func:`.vllm_launchers.launcher_vllm_settings`);
* speculation: InferenceX's TensorRT-LLM DeepSeek-R1 MTP configurations ran their own image (``1.2.0rc6.post3``)
  and launch scripts, which set MTP with 3 draft tokens (1 under attention-DP): those rows are predicted with that
  ``Speculation`` at the published MTP acceptance (:func:`.disagg_recipes.mtp_speculation`,
  :func:`.inferencex_harness.harness_speculation`; docs/serving-runs.md, "Speculative decoding on the InferenceX
  TensorRT-LLM DeepSeek-R1 rows");
* the client's warm-up: from d053ae24e (2026-01-21) InferenceX's ``run_benchmark_serving`` sends 2·CONC warm-up
  requests before the measured ones; its rows measured earlier say in ``assumed`` that the first wave met a cold
  server (:func:`.inferencex_harness.harness_warmed`; not modelled: docs/serving-runs.md, "The first-token delay
  on the SGLang and vLLM InferenceX rows");
* engine settings (:func:`.collection_harness.launcher_settings`, the run's ``engine_settings``):
  the collection's other aggregated rows
  are aiconfigurator's own runs of configurations its generator wrote (every row's ``batch_size`` is its
  concurrency; SGLang 0.5.6.post2 runs at 20, 176, 352, 448, … clients, the batch sizes of generated
  configurations). The generator gives TensorRT-LLM and vLLM workers a token budget of ``batch_size`` + ISL + 1500
  (about one prompt per iteration, where the engines' defaults take 8192 tokens), TensorRT-LLM workers a KV
  cache share of 0.80 of the memory weights and buffers leave (:data:`.trt_launchers.GENERATOR_TRT_KV_FRACTION`),
  SGLang workers ``--enable-mixed-chunk`` through its 0.5.6.post2 template, and each worker it launched a cap of its
  ``batch_size`` (``max_num_seqs``; equal to the row's concurrency per attention-DP rank, so no request waits for
  a slot); the SGLang 0.5.1.post1 rows (16, 64,
  128 clients) predate the generator's SGLang support and run SGLang's defaults (prefill batches first);
* disaggregated rows: ``prefill_*`` / ``decode_*`` layouts the same way, ``*_num_workers`` replicas (empty = 1);
  where a decode pool splits its experts (EP > 1) and states no attention-DP, it runs as the engine's published
  recipes run it (:func:`recipe_defaults`: attention-DP from the engine's requests per GPU, where the engine
  states that rule), and the row's ``assumed`` says so; ``recipe=False`` reads the columns alone.
"""

from __future__ import annotations

import csv
import re
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from llmath.errors import LLMathError, WorkloadError
from llmath.measure.collection_harness import launcher_settings, stated_attention_dp
from llmath.measure.inferencex_harness import (
    INFERENCEX_NOTES,
    INFERENCEX_RANGE_RATIO,
    INFERENCEX_WARMUP,
    drawn_mean,
    harness_budget,
    harness_speculation,
    harness_warmed,
)
from llmath.measure.run_formats import precision
from llmath.measure.run_record import Layout, Run
from llmath.measure.runs_summary import relative_error, summarise
from llmath.measure.sglang_launchers import first_wave_chunked, launcher_sglang_settings
from llmath.measure.trt_launchers import (
    launcher_trt_settings,
    piecewise_prefill,
    with_script_layout,
)
from llmath.measure.vllm_launchers import launcher_vllm_settings, stated_layout

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200"}
MODELS = {
    "deepseek-ai/DeepSeek-R1": "deepseek-r1",
    "nvidia/DeepSeek-R1-NVFP4": "deepseek-r1",  # the same architecture; its formats come from the quant modes
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",  # the Instruct tune of the same architecture
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",  # the FP8 checkpoint of the same architecture
}
KEYS = ("engine", "system", "model", "concurrency", "lengths", "mode", "recipe")
DEFAULT_BY = KEYS[:-1]  # the disaggregated rows are grouped by ``recipe`` whatever ``by`` says (summarise)
# launcher settings that set the run's formats, not its engine's
FORMAT_SETTINGS = ("kv_cache_dtype", "checkpoint_formats")


def _int(v: str, default: int = 1) -> int:
    v = (v or "").strip()
    return max(int(float(v)), 1) if v and float(v) > 0 else default


def _layout(r: dict[str, str], pre: str, assumed: list[str]) -> Layout:
    tp, pp, dp = _int(r[f"{pre}tp_size"]), _int(r[f"{pre}pp_size"]), _int(r[f"{pre}attention_dp_size"])
    mtp, mep = _int(r[f"{pre}moe_tp_size"]), _int(r[f"{pre}moe_ep_size"])
    if mtp == mep > 1 and mtp * mep in (tp, dp):
        which = "tp_size" if tp == mtp * mep else "attention_dp_size"
        tp, dp = (tp // mep, dp) if which == "tp_size" else (tp, dp // mep)
        assumed.append(f"{pre}{which} {mtp * mep} = moe_tp·moe_ep read as {mtp * mep // mep} GPUs with EP {mep}")
    workers = _int(r.get(f"{pre}num_workers", ""))
    return Layout(tp, pp, dp, mep, workers)


def _concurrency(r: dict[str, str], lay: Layout | None) -> int:
    m = re.search(r"silicon_concurrency=(\d+)", r.get("source_notes", ""))
    if m:
        return int(m.group(1))
    if lay is not None:
        return _int(r["batch_size"]) * lay.dp
    n = _int(r.get("decode_batch_size", ""), 0) * _int(r["decode_attention_dp_size"]) * _int(r["decode_num_workers"])
    if n < 1:
        raise WorkloadError(f"row {r['id']}: no silicon_concurrency in source_notes and no decode_batch_size")
    return n


def read_runs(path: str | Path) -> list[dict[str, str]]:
    """The CSV's rows as dicts (a missing file or column is a one-line error)."""
    p = Path(path)
    if not p.is_file():
        raise WorkloadError(f"--runs {str(path)!r}: no such file; give a CSV in serving_runs.csv's format")
    with p.open(newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"id", "backend", "model_path", "system", "mode", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms"}
    if rows and (missing := need - set(rows[0])):
        raise WorkloadError(f"--runs {str(path)!r}: columns {sorted(missing)} missing; see serving_runs.csv's header")
    return rows


def to_run(r: dict[str, str], recipe: bool = True) -> Run:
    """A CSV row in llmath's names (a system or model without a mapping raises, naming it); a disaggregated row's
    unstated decode settings as the engine's recipes set them (:func:`recipe_defaults`) unless ``recipe`` is
    False."""
    sysname, model = SYSTEMS.get(r["system"]), MODELS.get(r["model_path"])
    if sysname is None:
        raise WorkloadError(f"system {r['system']!r} has no llmath hardware mapping ({', '.join(SYSTEMS)})")
    if model is None:
        raise WorkloadError(f"model {r['model_path']!r} has no registry mapping")
    assumed: list[str] = []
    agg = r["mode"] == "agg"
    lay = stated_attention_dp(r, _layout(r, "", assumed), assumed) if agg else None
    if lay is not None and (read := stated_layout(r, lay.tp, lay.dp, lay.ep)) is not None:
        lay = replace(lay, tp=read[0], dp=read[1], ep=read[2])
        assumed.append(read[3])
    inferencex = bool(INFERENCEX_NOTES.search(r.get("source_notes", "")))
    lay = with_script_layout(r, lay, _concurrency(r, lay), inferencex, assumed) if lay is not None else None
    pre = None if agg else _layout(r, "prefill_", assumed)
    dec = None if agg else _layout(r, "decode_", assumed)
    if inferencex and not harness_warmed(r):
        assumed.append(f"client sent no warm-up requests (InferenceX before {INFERENCEX_WARMUP['from']}): the first"
                       " wave met a cold server, not modelled")  # fmt: skip
        if agg and lay is not None and first_wave_chunked(r, _concurrency(r, lay), drawn_mean(int(r["isl"]))):
            assumed.append("the first wave's prompts exceed one prefill batch of the SGLang script: its chunked "
                           "prefill ran the extend-with-prefix path cold (such runs measure seconds)")  # fmt: skip
    settings = {} if inferencex or not agg else launcher_settings(r)
    budget = harness_budget(r, _concurrency(r, lay)) if agg else None
    if budget is not None:
        settings["max_num_batched_tokens"] = budget
    if agg and lay is not None:
        settings.update(launcher_trt_settings(r, _concurrency(r, lay), lay.dp, inferencex))
        settings.update(launcher_sglang_settings(r, _concurrency(r, lay), inferencex))
        settings.update(pytorch_backend_settings(r, inferencex))
        settings.update(piecewise_prefill(r, _concurrency(r, lay), lay.gpus, lay.ep, lay.dp, inferencex))
        settings.update(launcher_vllm_settings(r, inferencex))
    if not agg:  # the prefill servers' passes (the decode servers replay graphs; deploy.disagg.prefill_eager)
        settings.update(pytorch_backend_settings(r, inferencex))
    spec = harness_speculation(r, lay) if agg else None
    if spec is not None:
        assumed.append(f"MTP k={spec.k} (InferenceX -trt-mtp launcher), acceptance {spec.acceptance:.2f} tokens per"
                       " round as TensorRT-LLM published on real prompts, which random tokens in the chat template"
                       " (the launcher's --use-chat-template) match")  # fmt: skip
    run = Run(
        r["id"], r["backend"], sysname, model, r["model_path"], r["mode"], int(r["isl"]), int(r["osl"]),
        _concurrency(r, lay), r["gemm_quant_mode"], r["moe_quant_mode"], r["precision"], lay, pre, dec,
        float(r["silicon_ttft_ms"]) / 1e3, float(r["silicon_tpot_ms"]) / 1e3, tuple(assumed),
        INFERENCEX_RANGE_RATIO if inferencex else 1.0, tuple(settings.items()), spec,
    )  # fmt: skip
    return with_recipe(run, r) if recipe else run


def with_recipe(run: Run, r: dict[str, str]) -> Run:
    """A disaggregated run with the pools, decode ``max_batch_size`` and MTP draft tokens its benchmark
    configuration settles (:func:`llmath.measure.disagg_recipes.recipe_for`, in ``engine_settings``; where its
    entries differ, each pool whose layout they agree on), else its columns (a decode pool's with
    :func:`recipe_defaults`); ``recipe`` names which. An aggregated run is returned as it is."""
    from llmath.deploy.bench_client import SA_BENCH
    from llmath.measure.disagg_recipes import mtp_speculation, recipe_for

    if run.mode == "agg":
        return run
    found = recipe_for(r, run.concurrency)
    if found.prefill is None and found.decode is None:
        return with_moe_kernels(replace(recipe_defaults(run), recipe=found.group), r)
    settings = {"decode_max_batch": found.decode_max_batch, "draft_tokens": found.draft_tokens}
    kept = tuple((k, v) for k, v in settings.items() if v is not None)
    assert run.prefill is not None and run.decode is not None
    pre, dec = _recipe_layout(found.prefill, run.prefill), _recipe_layout(found.decode, run.decode)
    spec = mtp_speculation(found.draft_tokens, SA_BENCH) if found.draft_tokens else None
    run = replace(run, prefill=pre, decode=dec, recipe=found.group, engine_settings=(*run.engine_settings, *kept),
                  speculation=spec)  # fmt: skip
    return with_moe_kernels(run if found.decode is not None else recipe_defaults(run), r)


def with_moe_kernels(run: Run, r: dict[str, str]) -> Run:
    """The run with its pools' grouped-expert kernels (``prefill_moe_kernel``, ``decode_moe_kernel``) as their
    recipes set them (:func:`llmath.measure.disagg_recipes.recipe_moe_kernels`)."""
    from llmath.measure.disagg_recipes import recipe_moe_kernels

    kept = tuple((f"{pool}_moe_kernel", k) for pool, k in recipe_moe_kernels(r, run.prefill, run.decode).items())
    return replace(run, engine_settings=(*run.engine_settings, *kept))


def _recipe_layout(pool: tuple[int, int, int, bool] | None, stated: Layout) -> Layout:
    """A recipe's pool (workers, tp, ep, attention-DP) as a replica layout: with attention-DP its ``tp`` GPUs
    attend data-parallel (TensorRT-LLM's ``enable_attention_dp``, SGLang's ``--enable-dp-attention``); the
    ``stated`` layout where the recipe settles none."""
    if pool is None:
        return stated
    workers, tp, ep, adp = pool
    return Layout(1 if adp else tp, 1, tp if adp else 1, ep, workers)


def pytorch_backend_settings(r: dict[str, str], inferencex: bool) -> dict[str, bool]:
    """A TensorRT-LLM row served by its PyTorch backend runs every prefill pass eagerly (``eager_prefill``): the
    InferenceX rows (their launchers start ``trtllm-serve`` with PyTorch-backend options, ``cuda_graph_config``,
    ``moe_config``; the disaggregated ones' Dynamo context servers with ``cuda_graph_config: null``, e.g.
    ishandhanani/srt-slurm ``recipes/trtllm/b200-fp8/1k1k/stp/ctx1_gen1_dep8_batch512_eplb0_mtp0_4096.yaml`` at
    fe2cd905) and rows of version 1.0 or later (the PyTorch backend is the default there; ``data/engines.json``,
    ``trtllm`` ``eager_prefill``). The aggregated launchers' opt-in piecewise prefill graph (DeepSeek-R1 B200 at
    some concurrencies) turns it off again (:func:`.trt_launchers.piecewise_prefill`)."""
    if r.get("backend") != "trtllm":
        return {}
    major = re.match(r"(\d+)\.", r.get("backend_version", ""))
    return {"eager_prefill": True} if inferencex or (major is not None and int(major.group(1)) >= 1) else {}


def recipe_defaults(run: Run) -> Run:
    """The run with its decode pool as the engine's published recipes run it where the row leaves the setting
    unstated: attention data-parallel over the pool's ranks (TensorRT-LLM's ``enable_attention_dp``: each rank
    attends to its own requests, the experts stay split EP ways) when the pool splits its experts (EP > 1),
    states no attention-DP and holds at least the engine's ``attention_dp_from_requests_per_gpu`` requests per
    GPU (``data/engines.json``, ``disaggregation``; the concurrency over the pool's GPUs, its workers stated or
    one). An engine that states no such rule, an aggregated row and a pool that states attention-DP are
    returned as they are."""
    from llmath.deploy.engines import disaggregation

    D = run.decode
    if D is None or D.ep <= 1 or D.dp > 1:
        return run
    threshold = disaggregation(run.engine, "attention_dp_from_requests_per_gpu")
    per_gpu = run.concurrency / (D.gpus * D.workers)
    if threshold is None or per_gpu < threshold:
        return run
    note = (f"decode attention-DP {D.tp} (unstated; {run.engine}'s recipes run it from {threshold:g} requests per"
            f" GPU, {per_gpu:g} here)")  # fmt: skip
    return replace(run, decode=replace(D, tp=1, dp=D.tp), assumed=(*run.assumed, note))


def engine_settings(run: Run) -> dict[str, Any]:
    """The run's settings of the engine (:class:`llmath.deploy.engine_config.EngineConfig`), without those that set its
    formats (``kv_cache_dtype``, read by :func:`.run_formats.precision`)."""
    return {k: v for k, v in run.engine_settings if k not in FORMAT_SETTINGS}


def predict_run(run: Run, arrival: str | None = None, speculation=None) -> dict[str, float]:
    """TTFT and TPOT (seconds) llmath predicts for the run (its layout, engine, formats; the closed loop, or
    the aggregated rows under another ``arrival`` protocol of :func:`llmath.deploy.service.serve`), decoding
    speculatively with ``speculation`` (a :class:`llmath.deploy.speculative.Speculation`; no column states it;
    else the run's own, :func:`.inferencex_harness.harness_speculation`)."""
    from llmath.deploy.disagg import serve_disaggregated
    from llmath.deploy.layout import ParallelConfig
    from llmath.deploy.service import serve
    from llmath.deploy.workload import Workload

    prec = precision(run)
    speculation = speculation if speculation is not None else run.speculation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if run.layout is not None:
            L = run.layout
            prompts, gens = run.drawn(run.prompt), run.drawn(run.gen)
            dist = tuple((g, 1.0) for g in gens) if len(gens) > 1 else ()
            work = Workload(prompt=round(float(np.mean(prompts))), gen=run.gen, gen_dist=dist,
                            concurrency=run.concurrency, arrival=arrival)  # fmt: skip
            rep = serve(run.model, run.system, workload=work, engine=run.engine,
                        parallel=ParallelConfig(tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep), precision=prec,
                        speculation=speculation, **engine_settings(run))  # fmt: skip
            return {"ttft_s": rep.metrics["ttft_s"], "tpot_s": rep.metrics["tpot_s"]}
        assert run.prefill is not None and run.decode is not None
        P, D, settings = run.prefill, run.decode, dict(run.engine_settings)
        d = serve_disaggregated(
            run.model, run.system, workload=Workload(prompt=run.prompt, gen=run.gen, concurrency=run.concurrency),
            engine=run.engine,
            prefill=dict(tp=P.tp, pp=P.pp, dp=P.dp, ep=P.ep, workers=P.workers),
            decode=dict(tp=D.tp, pp=D.pp, dp=D.dp, ep=D.ep, workers=D.workers), precision=prec,
            speculation=speculation, decode_max_batch=settings.get("decode_max_batch"),
            eager_prefill=settings.get("eager_prefill"),
            moe_kernels={p: k for p in ("prefill", "decode") if (k := settings.get(f"{p}_moe_kernel"))},
        )  # fmt: skip
        return {"ttft_s": d["ttft_s"], "tpot_s": d["tpot_s"]}


def validate_runs(
    path: str | Path,
    by: tuple[str, ...] = DEFAULT_BY,
    arrival: str | None = None,
    recipe: bool = True,
    harness_lengths: bool = True,
) -> dict[str, Any]:
    """Every row predicted; errors = (predicted − measured) / measured; summaries per mode and per ``by`` key
    (and engine × system per mode). ``arrival``: the protocol the aggregated rows are predicted under (the
    benchmark clients' closed loop unless given); ``recipe``: unstated decode settings as the engines' recipes
    set them (:func:`recipe_defaults`), or the columns alone; ``harness_lengths``: the aggregated InferenceX
    rows with the lengths its client draws (module docstring; the default), or (False) the fixed lengths the
    columns state."""
    bad = [k for k in by if k not in KEYS]
    if bad:
        raise WorkloadError(f"--by {','.join(bad)}: not a grouping; use any of {','.join(KEYS)}")
    from llmath.measure.disagg_recipes import timed_copies

    computed, refused = [], []
    for raw in timed_copies(read_runs(path)):
        try:
            run = to_run(raw, recipe)
            run = run if harness_lengths else replace(run, range_ratio=1.0)
            pred = predict_run(run, arrival)
        except LLMathError as e:
            refused.append({"id": raw.get("id", "?"), "mode": raw.get("mode"), "reason": str(e)})
            continue
        row = {"id": run.id, "engine": run.engine, "system": run.system, "model": run.source_model,
               "concurrency": run.concurrency, "lengths": run.lengths, "mode": run.mode,
               "replica_concurrency": run.concurrency / run.layout.dp if run.layout else None,
               "measured_ttft_s": run.ttft_s, "measured_tpot_s": run.tpot_s,
               "predicted_ttft_s": pred["ttft_s"], "predicted_tpot_s": pred["tpot_s"],
               "ttft_error": relative_error(pred["ttft_s"], run.ttft_s),
               "tpot_error": relative_error(pred["tpot_s"], run.tpot_s),
               "recipe": run.recipe or "-", "assumed": list(run.assumed),
               "speculation": _speculation_json(run.speculation)}  # fmt: skip
        computed.append(row)
    return {"rows": computed, "refused": refused, "summary": summarise(computed, refused, by)}


def _speculation_json(spec) -> dict[str, Any] | None:
    return None if spec is None else {"method": spec.method, "k": spec.k, "acceptance": spec.acceptance}
