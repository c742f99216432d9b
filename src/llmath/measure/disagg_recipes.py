"""The benchmark configurations that ran the measured disaggregated rows, where their recipes record them.

The DeepSeek-R1 disaggregated rows of ``serving_runs.csv`` carry SemiAnalysis InferenceX's provenance (Dynamo with
TensorRT-LLM or SGLang, ``image=`` and ``measured=`` in ``source_notes``). Its search spaces
(``.github/configs/nvidia-master.yaml``, every version committed while the rows were measured) list, per framework,
system, precision, lengths and concurrency, the pools that ran: prefill and decode workers, their TP, EP and
attention-DP, the speculation (MTP with N draft tokens: ``mtpN`` in the srt-slurm recipe's name) and the decode
workers' ``max_batch_size`` (``DECODE_MAX_BATCH_SIZE=N`` or ``batchN`` in the recipe's name; for SGLang the recipe
file's decode ``max-running-requests`` per attention-DP rank and ``speculative-num-steps``). The rows keep only each
pool's TP and EP. ``data/inferencex_disagg.json`` holds those entries (written from the repository by
``scripts/disagg_recipe_join.py --write``), and :func:`recipe_for` finds a row's: the entries of the file's version
in effect when the row was measured (the last committed before its ``measured=`` time; where that lists none, the
first later one that does: runs measured on a pull request before it was merged), with the row's image where one
matches; where they list several pools, those the row's columns state (each pool's GPUs and EP) where any do, else
those whose GPUs and expert split (EP > 1 or not) the columns state (the SGLang FP4 B200 rows state every EP 8
decode pool as moe-TP 2 × EP 4). What they settle is a setting of the run, carried in ``Run.engine_settings``; what
they leave open (several entries that differ in pools or speculation, or none) is said in the row's ``recipe``
group, never filled in beyond what every entry has: where the pools differ, each pool whose layout (TP, EP,
attention-DP) they agree on runs that layout with the fewest workers they list. The collection's own disaggregated
runs (aiconfigurator's evaluation pipeline, without ``silicon_concurrency``) were benchmarked at several
concurrencies each, fractions of the decode workers' ``max_batch_size`` (``aiconfigurator/eval/pipeline.py``
``_auto_concurrency_values`` at 612e5b10, aiperf at ``--concurrency`` C with 10·C requests after 2·C warm-up ones,
``genai_perf_runner.py``), and their row does not say which: they are predicted at ``decode_batch_size`` ×
attention-DP × workers and grouped as ``concurrency unrecorded``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from importlib import resources
from typing import Any

from llmath.deploy.bench_client import SA_BENCH, BenchClient

FRAMEWORKS = {"trtllm": "dynamo-trt", "sglang": "dynamo-sglang"}
SYSTEMS = {"b200_sxm": "b200", "h200_sxm": "h200", "h100_sxm": "h100"}
# How many of DeepSeek-R1's MTP draft tokens are accepted, one convention for every measured row: the first with
# probability p, each later one (the model's single MTP module run again on its own draft, TensorRT-LLM's MTP-Eagle
# and SGLang's EAGLE-style MTP) with q. TensorRT-LLM tech blog 1 ("Pushing Latency Boundaries", table
# "Autoregressive MTP Layers": DeepSeek-R1 on 8 B200, ISL/OSL 1k/2k, strict acceptance) measures 1.92 tokens per
# round with 1 draft and 2.82 with 3: p = 0.92, and 1 + 0.92·(1 + q + q²) = 2.82 gives q = 0.608. Checks from other
# sources: the DeepSeek-V3 technical report (arXiv:2412.19437, §5.4.3) gives 85–90% for the second token (p); the
# nebius/MTP-DeepSeek-V3-0324 model card measures 3.20 for the original module with 7 drafts (this chain: 3.28).
# The acceptance is a property of the prompts the client sends (:data:`ACCEPTANCE_BY_PROMPTS`): these values hold
# for real prompts and for random tokens wrapped in the chat template, which accept alike (SemiAnalysis InferenceX
# pull request #649, merged as dab13cea0 on 2026-02-06: DeepSeek-R1 MTP on random tokens in the chat template
# accepts about 2.50 tokens per round, as on MT-Bench's real prompts, and about 3.55 without the template, "MTP
# acceptance rates are artificially high" in its perf-changelog.yaml entry); every measured MTP row's client wraps
# them (:data:`llmath.deploy.bench_client.SA_BENCH`, and InferenceX's ``-mtp`` launch scripts pass
# ``--use-chat-template``). Raw random tokens have no published acceptance per draft count.
MTP_FIRST_ACCEPTED = 0.92
MTP_LATER_ACCEPTED = 0.608
MTP_ACCEPTANCE_SOURCE = (
    "https://nvidia.github.io/TensorRT-LLM/blogs/tech_blog/"
    "blog1_Pushing_Latency_Boundaries_Optimizing_DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.html"
)
CHAT_TEMPLATE_ACCEPTANCE_SOURCE = "https://github.com/SemiAnalysisAI/InferenceX/pull/649"
# (first, later) per-draft acceptance by the prompts the client sends: True = chat template (or real prompts)
ACCEPTANCE_BY_PROMPTS: dict[bool, tuple[float, float] | None] = {
    True: (MTP_FIRST_ACCEPTED, MTP_LATER_ACCEPTED),
    False: None,  # raw random tokens: inflated (about 3.55 tokens per round in #649), nothing per draft count
}
# The draft tokens of InferenceX's SGLang MTP configurations whose recipe file the table does not read (the entries'
# names carry no count; scripts/disagg_recipe_join.py SGLANG_RECIPE_DECODE reads the files it has): the srt-slurm
# SGLang MTP recipes decode with ``speculative-algorithm: EAGLE``, ``speculative-num-steps: 2``,
# ``speculative-eagle-topk: 1``, ``speculative-num-draft-tokens: 3`` (a chain of 2 drafts verified with the last
# token): e.g. recipes/b200-fp8/1k1k/mtp/low-latency-tep8-1p1d.yaml and max-tpt-dep8-1p5d.yaml, b200-fp4/1k1k/mtp/
# low-latency-dep4-1p-tep8-5d.yaml and max-tpt-dep4-1p-dep8-1d.yaml, h100/1k1k/mtp/h100-fp8-1p2d-max-tp-mtp.yaml,
# h200/1k1k/bs256-1p6d-dep-mtp.yaml (srt-slurm as the InferenceX master file's CONFIG_FILE names them), all but
# recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p2d.yaml (speculative-num-steps 1, read from its file)
SGLANG_MTP_DRAFT_TOKENS = 2
# The grouped-expert kernel each pool of InferenceX's TensorRT-LLM DeepSeek-R1 B200 recipes runs
# (``trtllm_config.{prefill,decode}.moe_config.backend``), by (model, system, precision): FP8 runs TRTLLM
# (TensorRT-LLM's TensorRT-LLM-generated block-scale MoE) on a pool whose experts are tensor-parallel
# (``moe_expert_parallel_size: 1``) and DEEPGEMM on one that splits them (EP 8): ishandhanani/srt-slurm at fe2cd905
# ``recipes/trtllm/b200-fp8/1k1k/stp/ctx1_gen3_tp8_batch1024_eplb0_mtp0_128.yaml`` (prefill EP 8 DEEPGEMM, decode EP 1
# TRTLLM), ``…/1k1k/mtp/ctx1_gen8_tp8_batch8_eplb0_mtp3_64.yaml`` (the same), ``…/1k1k/stp/
# ctx1_gen5_dep8_batch48_eplb0_mtp0_1920.yaml`` (decode EP 8 DEEPGEMM), and at e71238b3 ``recipes/trtllm/b200-fp8/8k1k/
# stp/ctx1_gen4_tp8_batch32_eplb0_mtp0_128.yaml`` (prefill and decode EP 1 TRTLLM). FP4 runs CUTLASS on a decode pool
# with attention-DP and TRTLLM (the engine's default NVFP4 kernel here) elsewhere: connorcarpenter15/srt-slurm at
# 5a156f6b ``recipes/trtllm/b200-fp4/1k1k/stp/ctx1_gen5_tep8_batch32_eplb0_mtp0.yaml`` (decode TP 8 EP 8 TRTLLM, prefill
# attention-DP TRTLLM), ``…/1k1k/stp/ctx1_gen5_dep8_batch32_eplb0_mtp0.yaml`` and ``…/8k1k/mtp/
# ctx5_gen1_dep8_batch192_eplb0_mtp1.yaml`` (decode attention-DP CUTLASS, prefill TRTLLM). Kernel names:
# :data:`llmath.hardware.efficiency_fit.LAUNCHER_MOE_KERNELS` ("": the engine's default)
RECIPE_TRT_MOE_KERNELS: dict[tuple[str, str, str], dict[str, str]] = {
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8"): {"ep1": "trtllm_gen_fp8_block", "ep": "trtllm_deepgemm_fp8_block"},
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp4"): {"decode_adp": "trtllm_cutlass_nvfp4"},
}
# The 2026-04-06 collection stamps a run with its day alone; the earlier collection holds some of the same runs
# with their time (:func:`timed_copies`)
DAY_ONLY = re.compile(r"measured=(\d{4}-\d\d-\d\d)T00:00:00\.000Z")
# The row's ``recipe`` group (:func:`recipe_for`)
COLUMNS, POOLS, POOLS_MTP, SPEC_OPEN, POOLS_OPEN, CONCURRENCY_OPEN = (
    "columns", "pools", "pools + MTP", "pools, speculation unsettled", "pools unsettled", "concurrency unrecorded",
)  # fmt: skip


@dataclass(frozen=True)
class Recipe:
    """What a row's recipe entries settle: the group label, the pools (workers, tp, ep, attention-DP) where they
    agree (``pools unsettled``: their layouts where those agree, :func:`_agreed_layouts`), the decode
    ``max_batch_size`` and the MTP draft tokens where they agree (0: no speculation)."""

    group: str
    prefill: tuple[int, int, int, bool] | None = None
    decode: tuple[int, int, int, bool] | None = None
    decode_max_batch: int | None = None
    draft_tokens: int | None = None


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return json.loads((resources.files("llmath") / "data" / "inferencex_disagg.json").read_text())


def _measured(notes: str) -> datetime | None:
    m = re.search(r"measured=([^;\s]+)", notes)
    if m is None:
        return None
    text = m.group(1).replace("Z", "+00:00")
    return datetime.fromisoformat(text if "T" in text else text + "T23:59:59+00:00")


def _version_at(when: datetime) -> int | None:
    dated = [i for i, (_, d) in enumerate(_table()["versions"]) if datetime.fromisoformat(d) <= when]
    return max(dated) if dated else None


def _entries(r: dict[str, str], concurrency: int) -> list[dict[str, Any]]:
    """The row's entries in the version in effect when it was measured, or, where that lists none, in the first
    later version that does (a run measured on a pull request before the entry was merged); those of its image
    where any match."""
    when = _measured(r.get("source_notes", ""))
    version = None if when is None else _version_at(when)
    if version is None or r["backend"] not in FRAMEWORKS or r["system"] not in SYSTEMS:
        return []
    key = (FRAMEWORKS[r["backend"]], SYSTEMS[r["system"]], r["precision"], int(r["isl"]), int(r["osl"]), concurrency)
    listed = [
        e for e in _table()["entries"]
        if (e["framework"], e["system"], e["precision"], e["isl"], e["osl"], e["concurrency"]) == key
    ]  # fmt: skip
    later = [a for e in listed for a, b in e["versions"] if b >= version]
    if not later:
        return []
    first = max(version, min(later))
    found = [e for e in listed if any(a <= first <= b for a, b in e["versions"])]
    image = re.search(r"image=([^;]+)", r.get("source_notes", ""))
    same = [e for e in found if image is not None and e["image"] == image.group(1).strip()]
    return same or found


def _states(r: dict[str, str], e: dict[str, Any], exact: bool = True) -> bool:
    """Whether the row's columns state the entry's pools: each pool's GPUs (``tp_size`` × ``attention_dp_size``,
    read as :func:`llmath.measure.serving_runs.to_run` reads them) and its expert parallelism (``exact``), or
    only whether it splits its experts (EP > 1) at all: the columns of InferenceX's SGLang DeepSeek-R1 FP4 B200
    rows state every EP 8 decode pool as ``moe_tp_size`` 2 × ``moe_ep_size`` 4 and every attention-DP prefill
    pool with ``attention_dp_size`` 1."""
    from llmath.measure.serving_runs import _layout

    for pool in ("prefill", "decode"):
        lay = _layout(r, f"{pool}_", [])
        ep = lay.ep if exact else lay.ep > 1
        if (lay.tp * lay.dp, ep) != (e[pool][1], e[pool][2] if exact else e[pool][2] > 1):
            return False
    return True


def _one(values: list) -> Any:
    return values[0] if len({json.dumps(v) for v in values}) == 1 else None


def recipe_for(r: dict[str, str], concurrency: int) -> Recipe:
    """What the InferenceX entries of a disaggregated CSV row (at the client's ``concurrency``) settle
    (module docstring); ``columns`` when there are none."""
    if "silicon_concurrency=" not in r.get("source_notes", ""):
        return Recipe(CONCURRENCY_OPEN)
    found = _entries(r, concurrency)
    if not found:
        return Recipe(COLUMNS)
    if _one([(e["prefill"], e["decode"]) for e in found]) is None:
        found = [e for e in found if _states(r, e)] or [e for e in found if _states(r, e, exact=False)] or found
    prefill, decode = _one([e["prefill"] for e in found]), _one([e["decode"] for e in found])
    if prefill is None or decode is None:
        return _agreed_layouts(found)
    batch = _one([e["decode_max_batch"] for e in found])
    pools = dict(prefill=tuple(prefill), decode=tuple(decode), decode_max_batch=batch)
    speculation = _one([_speculation(e) for e in found])
    if speculation == ("none", None):
        return Recipe(POOLS, draft_tokens=0, **pools)
    if speculation is None or speculation[1] is None:
        return Recipe(SPEC_OPEN, **pools)
    return Recipe(POOLS_MTP, draft_tokens=int(speculation[1]), **pools)


def _agreed_layouts(found: list[dict[str, Any]]) -> Recipe:
    """``pools unsettled``: entries whose pools differ. Each pool whose layout (TP, EP, attention-DP) they all list
    runs it with the fewest workers any of them lists (every listed configuration has at least those), a pool
    whose layouts differ is left to the row's columns (``None``); the decode ``max_batch_size`` only where the
    decode pools agree whole (the slots are workers × ranks × batch). No speculation: predicted without."""
    pools: dict[str, tuple | None] = {}
    for pool in ("prefill", "decode"):
        layout = _one([e[pool][1:] for e in found])
        pools[pool] = None if layout is None else (min(e[pool][0] for e in found), *layout)
    whole_decode = _one([e["decode"] for e in found]) is not None
    batch = _one([e["decode_max_batch"] for e in found]) if whole_decode else None
    return Recipe(POOLS_OPEN, pools["prefill"], pools["decode"], batch)


def _speculation(e: dict[str, Any]) -> tuple[str, int | None]:
    """An entry's (speculation, draft tokens); an SGLang MTP entry's count is its recipes'
    (:data:`SGLANG_MTP_DRAFT_TOKENS`)."""
    if e["speculation"] == "mtp" and e["draft_tokens"] is None and e["framework"] == FRAMEWORKS["sglang"]:
        return "mtp", SGLANG_MTP_DRAFT_TOKENS
    return e["speculation"], e["draft_tokens"]


def mtp_speculation(draft_tokens: int, client: BenchClient = SA_BENCH):
    """MTP with ``draft_tokens`` drafts per round on the prompts ``client`` sends, a round yielding
    1 + p·(1 + q + … + q^(k−1)) tokens (p = :data:`MTP_FIRST_ACCEPTED`, q = :data:`MTP_LATER_ACCEPTED`, for
    prompts in the chat template: :data:`ACCEPTANCE_BY_PROMPTS`); a client of raw random tokens is refused."""
    from llmath.deploy.speculative import Speculation
    from llmath.errors import WorkloadError

    chain = ACCEPTANCE_BY_PROMPTS[bool(client.chat_template)]
    if chain is None:
        raise WorkloadError(
            f"client {client.name!r} sends raw random tokens: MTP accepts more of them than of real prompts "
            f"({CHAT_TEMPLATE_ACCEPTANCE_SOURCE}) and no acceptance per draft count is published; give a "
            "Speculation with the measured acceptance, or a client with chat_template=True"
        )
    k, (p, q) = int(draft_tokens), chain
    return Speculation("mtp", k, 1 + p * sum(q**i for i in range(k)))


def _identity(r: dict[str, str]) -> tuple:
    """What one measured run shows in every copy of it: its engine, system, model, precision, lengths, both pools'
    columns, its client's concurrency and its measured TTFT and TPOT (to 9 significant digits: the copies differ
    in the last digit of their decimal form)."""
    conc = re.search(r"silicon_concurrency=(\d+)", r.get("source_notes", ""))
    pools = tuple(r.get(k, "") for k in sorted(r) if k.startswith(("prefill_", "decode_")))
    measured = tuple(f"{float(r[k]):.9g}" for k in ("silicon_ttft_ms", "silicon_tpot_ms"))
    key = ("backend", "system", "model_path", "precision", "mode", "isl", "osl")
    return (*(r[k] for k in key), conc.group(1) if conc else "", pools, measured)


def timed_copies(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """``rows`` with each disaggregated run stamped with its day alone (:data:`DAY_ONLY`) given the time of its copy
    in the collection that timed it, where exactly one timed copy of the same day exists (:func:`_identity`): the
    configuration in effect changed during some of those days, and the day alone reads the one in force at its
    start. Every other row is returned as it is."""
    timed: dict[tuple, set[str]] = {}
    for r in rows:
        m = re.search(r"measured=([^;\s]+)", r.get("source_notes", ""))
        if r.get("mode") == "disagg" and m is not None and DAY_ONLY.search(r["source_notes"]) is None:
            timed.setdefault(_identity(r), set()).add(m.group(1))
    out = []
    for r in rows:
        day = DAY_ONLY.search(r.get("source_notes", "")) if r.get("mode") == "disagg" else None
        times = {t for t in timed.get(_identity(r), set()) if t.startswith(day.group(1))} if day else set()
        if len(times) == 1:
            r = {**r, "source_notes": DAY_ONLY.sub(f"measured={times.pop()}", r["source_notes"])}
        out.append(r)
    return out


def recipe_moe_kernels(r: dict[str, str], prefill: Any, decode: Any) -> dict[str, str]:
    """The grouped-expert kernel each pool of an InferenceX TensorRT-LLM disaggregated row runs
    (:data:`RECIPE_TRT_MOE_KERNELS`), given the pools' replica layouts (``ep``, ``dp``: attention-DP ranks):
    ``{"prefill": K, "decode": K}`` where the recipes set another kernel than the engine's default; {} elsewhere."""
    rule = RECIPE_TRT_MOE_KERNELS.get((r.get("model_path", ""), r.get("system", ""), r.get("precision", "")))
    if r.get("backend") != "trtllm" or rule is None or "silicon_concurrency=" not in r.get("source_notes", ""):
        return {}
    out = {}
    for name, pool in (("prefill", prefill), ("decode", decode)):
        kernel = rule.get("ep1" if pool.ep == 1 else "ep", "")
        kernel = rule.get("decode_adp", kernel) if name == "decode" and pool.dp > 1 else kernel
        if kernel:
            out[name] = kernel
    return out
