"""Planner speed: prints one JSON object (times on this machine).

    python benchmarks/bench_plan.py [--repeats 3] [--sizes 8,72,512,4096] [--exhaustive 8,64] [--against SRC]
                                    [--instructions 512]

cluster_cpu_s       per GPU count: `llmath plan deepseek-v3 -H h200 --gpus N --prompt 1024 --gen 1024
                    --tpot-ms 50 --disagg --weights bf16,fp8,nvfp4 --json` as a whole fresh process (imports,
                    tables built from nothing, search), CPU seconds (user + system, the operating system's
                    accounting of the finished child): min and median over the repeats, bytecode cached as an
                    installed package has it (a warm-up run writes it)
                    targets: <= 1 s for 8 and 512 GPUs, <= 2 s for 4,096
cluster_search_s    the same search as a library call in one process, warm (min, median)
cluster_evaluated   configurations the search evaluated
cluster_refused     GPU counts the plan refuses (over its cost limit), with its message
exhaustive          per GPU count: the exhaustive search's CPU seconds (library call, cold process) and the
                    pruned one's in the same process, their ratio, and whether both found the same best
default_cpu_s       the default search (`llama-3-8b -H h100-sxm --gpus 8 --prompt 1024 --gen 256`, library call,
                    warm caches): CPU seconds, min and median of 20
steady_state_per_s  concurrency points per second of one vectorised steady_state call (10^4 points)
against             with ``--against SRC`` (another source tree's ``src``, e.g. an older commit's): per GPU count,
                    the whole-process CPU seconds of the same command with this tree and with that one, run
                    alternately (min, median each), and the ratio of their medians: on a shared machine the
                    load moves both alike
instructions        with ``--instructions N,...``: per GPU count, the instructions the whole process executes
                    (valgrind's callgrind; hash seed fixed, bytecode cached), with ``--against`` that tree's too
                    and their ratio: unlike CPU seconds, the count does not move with the machine's load, so it
                    compares trees whose difference is smaller than the load's noise (about 90 s per run at
                    512 GPUs)
load_average        the machine's 1-minute load average when the benchmark started and when it ended

CPU seconds rather than wall time: the development VM is shared by other processes, whose load shows in
wall time (and, less, in CPU time through the shared caches).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from bench_speed import child_cpu, installed_env, process_cpu  # whole processes with bytecode cached, as installed

from llmath import Workload

PLAN = ["plan", "deepseek-v3", "-H", "h200", "--prompt", "1024", "--gen", "1024", "--tpot-ms", "50", "--disagg"]
PLAN += ["--weights", "bf16,fp8,nvfp4", "--json"]
WORK = dict(prompt=1024, gen=1024)  # the request, as the Workload the planner takes
KW = dict(tpot_ms=50, disagg=True, weights=["bf16", "fp8", "nvfp4"])

_EXHAUSTIVE = """
import json, time
from llmath.deploy.plan import plan
from llmath.deploy.workload import Workload
kw = json.loads({kw!r})
work = Workload(**json.loads({work!r}))
t = time.process_time(); full = plan("deepseek-v3", "h200", gpus={gpus}, workload=work, exhaustive=True, **kw)
t_full = time.process_time() - t
t = time.process_time(); pruned = plan("deepseek-v3", "h200", gpus={gpus}, workload=work, **kw)
t_pruned = time.process_time() - t
print(json.dumps({{"exhaustive_cpu_s": t_full, "pruned_cpu_s": t_pruned, "ratio": t_full / t_pruned,
                  "same_best": full.best == pruned.best, "same_pareto": full.pareto == pruned.pareto,
                  "evaluated": [full.evaluated, pruned.evaluated]}}))
"""


def _stats(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs), "median": statistics.median(xs)}


def _cluster(sizes: list[int], repeats: int) -> dict:
    from llmath.deploy.plan import plan
    from llmath.errors import LLMathError

    out: dict = {"cluster_cpu_s": {}, "cluster_search_s": {}, "cluster_evaluated": {}, "cluster_refused": {}}
    for g in sizes:
        try:
            plan("deepseek-v3", "h200", gpus=g, workload=Workload(**WORK), **KW)  # warm
        except LLMathError as e:  # over the plan's cost limit: the CLI refuses it too (exit 2)
            out["cluster_refused"][g] = str(e)
            continue
        cmd = [sys.executable, "-m", "llmath", *PLAN[:2], "--gpus", str(g), *PLAN[2:]]
        out["cluster_cpu_s"][g] = _stats(process_cpu(cmd, repeats))
        ts = []
        for _ in range(repeats):
            t = time.process_time()
            res = plan("deepseek-v3", "h200", gpus=g, workload=Workload(**WORK), **KW)
            ts.append(time.process_time() - t)
        out["cluster_search_s"][g] = _stats(ts)
        out["cluster_evaluated"][g] = res.evaluated
    return out


def _against(sizes: list[int], src: str, repeats: int) -> dict:
    """Per GPU count: the CLI command as a whole process with this tree and with the source tree ``src``,
    alternately, each with its own bytecode cache (written by a warm-up run)."""
    out = {}
    for g in sizes:
        cmd = [sys.executable, "-m", "llmath", *PLAN[:2], "--gpus", str(g), *PLAN[2:]]
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            ours, theirs = installed_env(a), {**installed_env(b), "PYTHONPATH": src}
            for env in (ours, theirs):
                subprocess.run(cmd, capture_output=True, check=True, env=env)
            xs, ys = [], []
            for _ in range(repeats):
                xs.append(child_cpu(cmd, ours))
                ys.append(child_cpu(cmd, theirs))
        out[g] = {"this": _stats(xs), "against": _stats(ys), "ratio": statistics.median(ys) / statistics.median(xs)}
    return out


def _instructions(g: int, src: str | None) -> int:
    """Instructions of the CLI command on ``g`` GPUs as a whole process (``src``: another tree's), under
    callgrind: the hash seed fixed (sets' orders), bytecode written by a first run as installed."""
    cmd = [sys.executable, "-m", "llmath", *PLAN[:2], "--gpus", str(g), *PLAN[2:]]
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        env = {**installed_env(cache), "PYTHONHASHSEED": "0", **({"PYTHONPATH": src} if src else {})}
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.out"]
        r = subprocess.run([*grind, *cmd], capture_output=True, text=True, check=True, env=env)
    return int(r.stderr.split("Collected :")[1].split()[0])


def _instruction_counts(sizes: list[int], src: str | None) -> dict:
    out: dict = {}
    for g in sizes:
        out[g] = {"this": _instructions(g, None)}
        if src:
            out[g]["against"] = _instructions(g, src)
            out[g]["ratio"] = out[g]["against"] / out[g]["this"]
    return out


def _exhaustive(sizes: list[int]) -> dict:
    out = {}
    for g in sizes:
        code = _EXHAUSTIVE.format(kw=json.dumps(KW), work=json.dumps(WORK), gpus=g)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        out[g] = json.loads(r.stdout)
    return out


def _default_and_steady_state() -> dict:
    from llmath.deploy.engines import preset
    from llmath.deploy.plan import plan
    from llmath.deploy.serving import Requests, steady_state
    from llmath.deploy.serving_memory import memory
    from llmath.deploy.step import Device
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency
    from llmath.model.dtypes import Precision
    from llmath.model.registry import resolve

    plan("llama-3-8b", "h100-sxm", gpus=8, workload=Workload(prompt=1024, gen=256))
    cpu = []
    for _ in range(20):
        c = time.process_time()
        plan("llama-3-8b", "h100-sxm", gpus=8, workload=Workload(prompt=1024, gen=256))
        cpu.append(time.process_time() - c)
    hw = get("h100-sxm")
    dev = Device(resolve("llama-3-8b"), hw, Precision(), efficiency("expected", hw))
    eng, req = preset("vllm", hw), Requests(1024, 256)
    mem = memory(dev, eng, req)
    c = np.linspace(1, mem.max_resident, 10_000)
    steady_state(dev, eng, req, c, mem.max_resident)
    ss = []
    for _ in range(5):
        t = time.process_time()
        steady_state(dev, eng, req, c, mem.max_resident)
        ss.append(time.process_time() - t)
    return {"default_cpu_s": _stats(cpu), "steady_state_per_s": len(c) / statistics.median(ss)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="8,72,512,4096")
    ap.add_argument("--exhaustive", default="8,64", help="GPU counts to compare with the exhaustive search")
    ap.add_argument("--against", help="another source tree's src/ to time alternately with this one")
    ap.add_argument("--instructions", default="", help="GPU counts to count instructions of (callgrind)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    load = [os.getloadavg()[0]]
    res = _cluster(sizes, args.repeats)
    if args.against:
        res["against"] = _against([g for g in sizes if g in res["cluster_cpu_s"]], args.against, args.repeats)
    if args.instructions:
        res["instructions"] = _instruction_counts([int(s) for s in args.instructions.split(",")], args.against)
    res["exhaustive"] = _exhaustive([int(s) for s in args.exhaustive.split(",") if s])
    res.update(_default_and_steady_state())
    res["targets_cpu_s"] = {8: 1.0, 512: 1.0, 4096: 2.0}
    res["load_average"] = [*load, os.getloadavg()[0]]
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
