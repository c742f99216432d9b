"""The disaggregated rows beside the benchmark configurations that ran them (by hand; prints markdown).

    python scripts/disagg_recipe_join.py INFERENCEX_GIT_DIR [RUNS.csv] [--since 2025-12-01] [--until 2026-04-07]
                                         [--write src/llmath/data/inferencex_disagg.json]

The DeepSeek-R1 disaggregated rows of ``serving_runs.csv`` come from SemiAnalysis' InferenceX sweeps (Dynamo with
TensorRT-LLM or SGLang). Their search spaces are in that repository's ``.github/configs/nvidia-master.yaml``: for
each framework, system, precision, lengths and concurrency, the prefill and decode pools' workers, TP, EP,
attention-DP and speculation. The rows keep only each pool's TP and EP. This joins every row to the entries of
every version of that file committed in the window (git directory of a clone or snapshot of
SemiAnalysisAI/InferenceX); where all of them agree on one setting, that is what the run used. It prints:

* how often llmath's recipe default (:func:`llmath.measure.serving_runs.recipe_defaults`) agrees with the
  configurations' decode attention-DP, and how many rows' configurations use several decode workers;
* for the rows with one configuration, the errors with the columns alone and with the configuration's pools
  (workers, attention-DP, EP), by speculation and engine. Speculating runs are predicted without speculation
  (their acceptance length is not recorded), so their TPOT error shows what speculation took off.

With ``--write PATH`` it writes instead the table :mod:`llmath.measure.disagg_recipes` reads
(``src/llmath/data/inferencex_disagg.json``): every DeepSeek-R1 disaggregated entry on the systems llmath maps
(B200, H200, H100), with the versions of the file that list it, the pools, the speculation and its draft tokens
(``mtpN`` in the entry's ``CONFIG_FILE`` name) and the decode workers' ``max_batch_size``
(``DECODE_MAX_BATCH_SIZE=N``, or ``batchN`` in the ``CONFIG_FILE`` name: srt-slurm's recipe names; the recipe
file's own value where the name misstates it, ``RECIPE_DECODE_MAX_BATCH``; for SGLang the recipe file's decode
``max-running-requests`` per attention-DP rank and its MTP draft count, ``SGLANG_RECIPE_DECODE``).

Nothing here is fitted.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import replace
from statistics import median

import yaml
from doc_section import RUNS_CSV

from llmath.errors import LLMathError
from llmath.measure.run_record import Layout
from llmath.measure.serving_runs import predict_run, read_runs, to_run

CONFIG = ".github/configs/nvidia-master.yaml"
FRAMEWORKS = {"trtllm": "dynamo-trt", "sglang": "dynamo-sglang"}
SYSTEMS = {"b200_sxm": "b200", "h200_sxm": "h200", "h100_sxm": "h100"}


def _versions(git_dir: str, since: str, until: str) -> list[str]:
    out = subprocess.run(["git", "-C", git_dir, "log", "--format=%H", f"--since={since}", f"--until={until}",
                          "--", CONFIG], capture_output=True, text=True, check=True).stdout  # fmt: skip
    return out.split()


def _pool(p: dict) -> tuple:
    return (p.get("num-worker") or 1, p.get("tp") or 1, p.get("ep") or 1, bool(p.get("dp-attn")))


def configurations(git_dir: str, since: str, until: str) -> dict[tuple, set[tuple]]:
    """(framework, system, precision, isl, osl, concurrency) → {(speculation, prefill pool, decode pool)}, each
    pool (workers, tp, ep, attention-DP), over every committed version of the file in the window."""
    out: dict[tuple, set[tuple]] = defaultdict(set)
    for commit in _versions(git_dir, since, until):
        for c, name, seq, e in _search_spaces(git_dir, commit):
            key = (c.get("framework"), name.split("-")[2], c.get("precision"), seq["isl"], seq["osl"])
            setting = (e.get("spec-decoding", "none"), _pool(e.get("prefill", {})), _pool(e.get("decode", {})))
            for conc in e.get("conc-list") or []:
                out[(*key, conc)].add(setting)
    return out


def _search_spaces(git_dir: str, commit: str):
    """(configuration, its name, sequence-length entry, search-space entry) of every DeepSeek-R1 disaggregated
    configuration in the file at ``commit``."""
    text = subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{CONFIG}"], capture_output=True, text=True)
    for name, c in (yaml.safe_load(text.stdout) or {}).items():
        if isinstance(c, dict) and c.get("disagg") and name.startswith("dsr1"):
            for seq in c.get("seq-len-configs", []):
                for e in seq.get("search-space", []):
                    yield c, name, seq, e


def _layout(pool: tuple) -> Layout:
    workers, tp, ep, adp = pool
    return Layout(1 if adp else tp, 1, tp if adp else 1, ep, workers)


def joined(path, configs: dict) -> list[dict]:
    rows = []
    for raw in read_runs(path):
        if raw["mode"] != "disagg" or raw["backend"] not in FRAMEWORKS or raw["system"] not in SYSTEMS:
            continue
        conc = re.search(r"silicon_concurrency=(\d+)", raw.get("source_notes", ""))
        key = (FRAMEWORKS[raw["backend"]], SYSTEMS[raw["system"]], raw["precision"], int(raw["isl"]),
               int(raw["osl"]), int(conc.group(1)) if conc else -1)  # fmt: skip
        found = configs.get(key, set())
        try:
            run, recipe = to_run(raw, recipe=False), to_run(raw)
            row = {"run": run, "found": found, "recipe_adp": recipe.decode.dp > 1, "columns": predict_run(run)}
            if len(found) == 1:
                spec, pre, dec = next(iter(found))
                row["spec"] = spec
                row["config"] = predict_run(replace(run, prefill=_layout(pre), decode=_layout(dec)))
        except LLMathError:
            continue
        rows.append(row)
    return rows


def _errors(rows: list[dict], which: str) -> str:
    t = [r[which]["ttft_s"] / r["run"].ttft_s - 1 for r in rows]
    d = [r[which]["tpot_s"] / r["run"].tpot_s - 1 for r in rows]
    med = [100 * median(x) for x in (t, [abs(v) for v in t], d, [abs(v) for v in d])]
    return "{:+.0f}% / {:.0f}% | {:+.0f}% / {:.0f}%".format(*med)


def report(rows: list[dict]) -> None:
    settled = [r for r in rows if len({s[2][3] for s in r["found"]}) == 1]
    agree = sum(r["recipe_adp"] == next(iter(r["found"]))[2][3] for r in settled)
    multi = sum(all(s[2][0] > 1 for s in r["found"]) for r in rows if r["found"])
    print(
        f"{len(rows)} rows; {sum(bool(r['found']) for r in rows)} with a configuration; decode attention-DP settled"
        f" by them on {len(settled)}, the recipe default agrees on {agree}; several decode workers on {multi}\n"
    )
    print("| speculation | engine | rows | columns: TTFT | TPOT | configuration's pools: TTFT | TPOT |")
    print("|---|---|---|---|---|---|---|")
    one = [r for r in rows if "config" in r]
    for spec in sorted({r["spec"] for r in one}):
        for engine in sorted({r["run"].engine for r in one}):
            g = [r for r in one if r["spec"] == spec and r["run"].engine == engine]
            if g:
                print(f"| {spec} | {engine} | {len(g)} | {_errors(g, 'columns')} | {_errors(g, 'config')} |")


def _dated_versions(git_dir: str, since: str, until: str) -> list[list[str]]:
    fmt = ["--format=%H %cI", f"--since={since}", f"--until={until}", "--", CONFIG]
    out = subprocess.run(["git", "-C", git_dir, "log", *fmt], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()][::-1]


def _settings_number(settings: str, *patterns: str) -> int | None:
    for pattern in patterns:
        if m := re.search(pattern, settings):
            return int(m.group(1))
    return None


# Recipes whose name's ``batchN`` is not the decode workers' ``max_batch_size`` their file sets (the file is what the
# engine ran): ishandhanani/srt-slurm at fe2cd90552d38cee128edc32f26fc0003c22f21d for _128 (trtllm_config.decode
# max_batch_size 48), its copy qiching/srt-slurm at 5063eb432640574bd93410ae2697591a7d15f57c for _4 (1) and _32 (12)
RECIPE_DECODE_MAX_BATCH = {
    "recipes/trtllm/b200-fp8/1k1k/stp/ctx1_gen3_tp8_batch1024_eplb0_mtp0_4.yaml": 1,
    "recipes/trtllm/b200-fp8/1k1k/stp/ctx1_gen3_tp8_batch1024_eplb0_mtp0_32.yaml": 12,
    "recipes/trtllm/b200-fp8/1k1k/stp/ctx1_gen3_tp8_batch1024_eplb0_mtp0_128.yaml": 48,
}


# The SGLang recipes InferenceX's DeepSeek-R1 B200 and H200 entries name (``CONFIG_FILE``), as NVIDIA/srt-slurm holds
# them at 5063eb432640574bd93410ae2697591a7d15f57c ("Merge sa-submission-q1-2026 into main", 2026-03-03; the branch
# InferenceX's B200 and H200 launchers check out): (requests one decode rank admits, MTP draft tokens). The first is
# the decode servers' ``max-running-requests`` over their attention-DP ranks where ``enable-dp-attention`` is set
# (SGLang's schedulers each run max_running_requests // dp_size: sgl-project/sglang python/sglang/srt/managers/
# tp_worker.py at 4f34e24a, data/engine_flags.json), e.g. recipes/h200/8k1k/bs4-1p7d.yaml ``max-running-requests: 8``
# on TP 8, recipes/h200/1k1k/bs256-1p6d-dep-mtp.yaml ``128`` over ``dp-size: 8``; the second ``speculative-num-steps``
# (``speculative-eagle-topk: 1``, a chain), None without speculation. The H100 recipes and the earlier
# ``recipes/b200-fp8/8k1k_*.yaml`` names are not in that tree: their entries keep the name's reading.
SGLANG_RECIPE_DECODE: dict[str, tuple[int, int | None]] = {
    "recipes/b200-fp4/1k1k/mtp/low-latency-dep4-1p-tep8-5d.yaml": (512, 2),
    "recipes/b200-fp4/1k1k/mtp/low-latency-dep4-1p-tep8-6d.yaml": (512, 2),
    "recipes/b200-fp4/1k1k/mtp/max-tpt-dep4-1p-dep8-1d.yaml": (128, 2),
    "recipes/b200-fp4/1k1k/mtp/max-tpt-dep4-1p-dep8-2d.yaml": (64, 2),
    "recipes/b200-fp4/1k1k/stp/low-latency-dep4-1p-tep8-5d.yaml": (512, None),
    "recipes/b200-fp4/1k1k/stp/low-latency-dep4-1p-tep8-6d.yaml": (512, None),
    "recipes/b200-fp4/1k1k/stp/max-tpt-dep4-1p-dep8-1d.yaml": (128, None),
    "recipes/b200-fp4/1k1k/stp/max-tpt-dep4-1p-dep8-2d.yaml": (64, None),
    "recipes/b200-fp4/8k1k/mtp/low-latency-dep4-1p-tep8-1d.yaml": (512, 2),
    "recipes/b200-fp4/8k1k/mtp/low-latency-dep4-1p-tep8-5d.yaml": (512, 2),
    "recipes/b200-fp4/8k1k/mtp/low-latency-dep4-2p-tep8-5d.yaml": (512, 2),
    "recipes/b200-fp4/8k1k/mtp/low-latency-tp4-1p-tp8-1d.yaml": (512, 2),
    "recipes/b200-fp4/8k1k/mtp/max-tpt-dep4-4p-dep8-1d.yaml": (128, 2),
    "recipes/b200-fp4/8k1k/mtp/max-tpt-dep4-7p-dep8-2d.yaml": (256, 2),
    "recipes/b200-fp4/8k1k/stp/low-latency-dep4-1p-tep8-1d.yaml": (512, None),
    "recipes/b200-fp4/8k1k/stp/low-latency-dep4-1p-tep8-5d.yaml": (512, None),
    "recipes/b200-fp4/8k1k/stp/low-latency-dep4-2p-tep8-5d.yaml": (512, None),
    "recipes/b200-fp4/8k1k/stp/low-latency-tp4-1p-tp8-1d.yaml": (512, None),
    "recipes/b200-fp4/8k1k/stp/max-tpt-dep4-7p-dep8-2d.yaml": (256, None),
    "recipes/b200-fp8/1k1k/mtp/low-latency-tep8-1p1d.yaml": (512, 2),
    "recipes/b200-fp8/1k1k/mtp/low-latency-tep8-1p3d.yaml": (512, 2),
    "recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p1d.yaml": (64, 2),
    "recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p2d.yaml": (64, 1),
    "recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p5d.yaml": (64, 2),
    "recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-2p5d.yaml": (64, 2),
    "recipes/b200-fp8/1k1k/stp/low-latency-tep8-1p1d.yaml": (512, None),
    "recipes/b200-fp8/1k1k/stp/low-latency-tep8-1p3d.yaml": (512, None),
    "recipes/b200-fp8/1k1k/stp/max-tpt-dep8-1p5d.yaml": (128, None),
    "recipes/b200-fp8/1k1k/stp/max-tpt-dep8-2p5d.yaml": (128, None),
    "recipes/b200-fp8/8k1k/mtp/low-latency-tep8-1p1d.yaml": (512, 2),
    "recipes/b200-fp8/8k1k/mtp/low-latency-tep8-1p4d.yaml": (512, 2),
    "recipes/b200-fp8/8k1k/mtp/low-latency-tep8-1p6d.yaml": (512, 2),
    "recipes/b200-fp8/8k1k/mtp/max-tpt-dep8-1p1d.yaml": (64, 2),
    "recipes/b200-fp8/8k1k/mtp/max-tpt-dep8-1p2d.yaml": (64, 2),
    "recipes/b200-fp8/8k1k/mtp/max-tpt-dep8-2p1d.yaml": (64, 2),
    "recipes/b200-fp8/8k1k/stp/low-latency-tep8-1p1d.yaml": (512, None),
    "recipes/b200-fp8/8k1k/stp/low-latency-tep8-1p4d.yaml": (512, None),
    "recipes/b200-fp8/8k1k/stp/low-latency-tep8-1p6d.yaml": (512, None),
    "recipes/b200-fp8/8k1k/stp/max-tpt-dep8-1p1d.yaml": (128, None),
    "recipes/b200-fp8/8k1k/stp/max-tpt-dep8-2p1d.yaml": (128, None),
    "recipes/h200/1k1k/bs256-1p6d-dep-mtp.yaml": (16, 2),
    "recipes/h200/1k1k/bs256-1p6d-dep.yaml": (64, None),
    "recipes/h200/1k1k/bs256-1p6d-tp-mtp.yaml": (128, 2),
    "recipes/h200/1k1k/bs256-1p6d-tp.yaml": (512, None),
    "recipes/h200/1k1k/low-latency-1p9d-mtp.yaml": (64, 2),
    "recipes/h200/1k1k/low-latency-1p9d.yaml": (256, None),
    "recipes/h200/8k1k/bs128-1p1d-dep-mtp.yaml": (24, 2),
    "recipes/h200/8k1k/bs128-1p1d-dep.yaml": (32, None),
    "recipes/h200/8k1k/bs16-1p3d-mtp.yaml": (32, 2),
    "recipes/h200/8k1k/bs16-1p3d.yaml": (32, None),
    "recipes/h200/8k1k/bs4-1p7d-mtp.yaml": (2, 2),
    "recipes/h200/8k1k/bs4-1p7d.yaml": (8, None),
    "recipes/h200/8k1k/bs64-2p3d-mtp.yaml": (16, 2),
    "recipes/h200/8k1k/bs64-2p3d.yaml": (128, None),
    "recipes/h200/8k1k/bs8-1p6d-mtp.yaml": (16, 2),
    "recipes/h200/8k1k/bs8-1p6d.yaml": (16, None),
}


def _decode_max_batch(settings: str) -> int | None:
    """The decode workers' ``max_batch_size`` (per attention-DP rank): the recipe file's where
    :data:`RECIPE_DECODE_MAX_BATCH` or :data:`SGLANG_RECIPE_DECODE` reads it, else ``DECODE_MAX_BATCH_SIZE=N`` or
    ``batchN`` in the recipe's name."""
    for recipe, batch in RECIPE_DECODE_MAX_BATCH.items():
        if recipe in settings:
            return batch
    if (read := _sglang_recipe(settings)) is not None:
        return read[0]
    return _settings_number(settings, r"DECODE_MAX_BATCH_SIZE=(\d+)", r"_batch(\d+)_")


def _sglang_recipe(settings: str) -> tuple[int, int | None] | None:
    """What :data:`SGLANG_RECIPE_DECODE` reads of the SGLang recipe the settings' ``CONFIG_FILE`` names, if any."""
    m = re.search(r"CONFIG_FILE=(\S+\.yaml)", settings)
    return SGLANG_RECIPE_DECODE.get(m.group(1)) if m else None


def _draft_tokens(settings: str) -> int | None:
    """An MTP entry's draft tokens: ``mtpN`` in the recipe's name, or the SGLang recipe file's
    ``speculative-num-steps`` (:data:`SGLANG_RECIPE_DECODE`)."""
    read = _sglang_recipe(settings)
    return read[1] if read is not None and read[1] is not None else _settings_number(settings, r"_mtp(\d+)")


def _entry(c: dict, name: str, seq: dict, e: dict) -> dict | None:
    system = name.split("-")[2]
    if "prefill" not in e or "decode" not in e or system not in SYSTEMS.values():
        return None
    extra = " ".join(str(s) for pool in ("prefill", "decode") for s in e[pool].get("additional-settings") or [])
    spec = e.get("spec-decoding", "none")
    return {
        "framework": c.get("framework"), "system": system, "precision": c.get("precision"), "isl": seq["isl"],
        "osl": seq["osl"], "image": c.get("image"), "speculation": spec,
        "draft_tokens": _draft_tokens(extra) if spec == "mtp" else None,
        "decode_max_batch": _decode_max_batch(extra),
        "prefill": list(_pool(e["prefill"])), "decode": list(_pool(e["decode"])),
    }  # fmt: skip


def _benchmark_concurrencies(e: dict) -> list[int]:
    """The concurrencies the entry's benchmark ran. A recipe named ``c{N}_ctx{P}_gen{D}_…`` (srt-slurm's H200
    TensorRT-LLM recipes) runs N clients per decode worker, N·D in all (its ``benchmark.concurrencies``: e.g.
    recipes/trtllm/h200/1k1k/mtp/c128_ctx1_gen7_dep8_batch128_eplb0_mtp3.yaml "896",
    1k1k/stp/c16_ctx1_gen9_tep8_batch256_eplb0_mtp0.yaml "144", 8k1k/stp/c256_ctx5_gen3_dep8_batch256_eplb0_mtp0.yaml
    "768", ishandhanani/srt-slurm at 4893f83e), where the entry's ``conc-list`` holds N; otherwise its
    ``conc-list``."""
    extra = " ".join(
        str(s) for s in e["decode"].get("additional-settings") or e["prefill"].get("additional-settings") or []
    )
    m = re.search(r"/c(\d+)_ctx\d+_gen(\d+)_", extra)
    if m:
        return [int(m.group(1)) * int(m.group(2))]
    return list(e.get("conc-list") or [])


def _ranges(indices: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i in sorted(set(indices)):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def write_table(git_dir: str, since: str, until: str, path: str) -> None:
    """The table of every DeepSeek-R1 disaggregated entry (module docstring), each with the index ranges of the
    file's versions (oldest first) that list it."""
    versions = _dated_versions(git_dir, since, until)
    seen: dict[str, tuple[dict, list[int]]] = {}
    for i, (commit, _) in enumerate(versions):
        for c, name, seq, e in _search_spaces(git_dir, commit):
            if (entry := _entry(c, name, seq, e)) is None:
                continue
            for conc in _benchmark_concurrencies(e):
                row = {**entry, "concurrency": conc}
                seen.setdefault(json.dumps(row, sort_keys=True), (row, []))[1].append(i)
    table = {
        "source": "https://github.com/SemiAnalysisAI/InferenceX " + CONFIG + " (Apache-2.0), every version committed"
        f" from {since} to {until}; written by scripts/disagg_recipe_join.py --write",
        "versions": versions,
        "entries": [{**row, "versions": _ranges(idx)} for row, idx in seen.values()],
    }  # fmt: skip
    lines = [f'  "{k}": [\n' + ",\n".join("    " + json.dumps(v, sort_keys=True) for v in vs) + "\n  ]"
             for k, vs in table.items() if isinstance(vs, list)]  # fmt: skip
    with open(path, "w") as f:
        f.write('{\n  "source": ' + json.dumps(table["source"]) + ",\n" + ",\n".join(lines) + "\n}\n")


def main(argv: list[str]) -> int:
    opts = {"--since": "2025-12-01", "--until": "2026-04-07T00:00:00+00:00", "--write": ""}
    for k in opts:
        if k in argv:
            i = argv.index(k)
            opts[k] = argv[i + 1]
            argv = argv[:i] + argv[i + 2 :]
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    if opts["--write"]:
        write_table(argv[0], opts["--since"], opts["--until"], opts["--write"])
        return 0
    configs = configurations(argv[0], opts["--since"], opts["--until"])
    report(joined(argv[1] if len(argv) > 1 else RUNS_CSV, configs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
