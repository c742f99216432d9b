"""Planner speed: prints one JSON object (times on this machine).

    python benchmarks/bench_plan.py

plan_default_s        the default search: `llmath plan llama-3-8b -H h100-sxm --gpus 8 --prompt 1024 --gen 256`
                      (library call, warm caches, median of 20)                      target well under 1 s
plan_wide_s           a wider search: the same with --weights bf16,fp8,int8,int4 --disagg
configs_per_s         configurations evaluated per second by the wide search             target >= 1e5
*_cpu_s               the same in CPU seconds of this process (the development VM is shared: wall time
                      there includes other processes' load)
steady_state_per_s    concurrency points per second of one vectorised steady_state call (10^4 points)
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np


def main() -> None:
    from llmath.deploy.engines import preset
    from llmath.deploy.plan import plan
    from llmath.deploy.serving import Requests, memory, steady_state
    from llmath.deploy.step import Device
    from llmath.hardware import get
    from llmath.hardware.roofline import efficiency
    from llmath.model.dtypes import Precision
    from llmath.model.registry import resolve

    def timed(**kw):
        plan("llama-3-8b", "h100-sxm", gpus=8, prompt=1024, gen=256, **kw)  # warm the compiled tables
        ts, cpu, n = [], [], 0
        for _ in range(20):
            t, c = time.perf_counter(), time.process_time()
            n = plan("llama-3-8b", "h100-sxm", gpus=8, prompt=1024, gen=256, **kw).evaluated
            ts.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        return statistics.median(ts), statistics.median(cpu), n

    default_s, default_cpu, _ = timed()
    med, med_cpu, n = timed(weights=["bf16", "fp8", "int8", "int4"], disagg=True)
    hw = get("h100-sxm")
    dev = Device(resolve("llama-3-8b"), hw, Precision(), efficiency("expected", hw))
    eng, req = preset("vllm", hw), Requests(1024, 256)
    mem = memory(dev, eng, req)
    c = np.linspace(1, mem.max_resident, 10_000)
    steady_state(dev, eng, req, c, mem.max_resident)
    ss = []
    for _ in range(5):
        t = time.perf_counter()
        steady_state(dev, eng, req, c, mem.max_resident)
        ss.append(time.perf_counter() - t)
    print(
        json.dumps(
            {
                "plan_default_s": default_s,
                "plan_default_cpu_s": default_cpu,
                "plan_wide_s": med,
                "plan_wide_cpu_s": med_cpu,
                "configurations": n,
                "configs_per_s": n / med,
                "configs_per_cpu_s": n / med_cpu,
                "steady_state_per_s": len(c) / statistics.median(ss),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
