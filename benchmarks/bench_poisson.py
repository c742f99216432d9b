"""Poisson arrivals (``--rate``) near saturation: prints one JSON object (times on this machine).

    python benchmarks/bench_poisson.py [--repeats 3] [--loads 0.5,0.9,0.99,0.999] [--against SRC] [--cases A,B,C]

cases              A: `llmath analyze llama-3-8b -H h100-sxm --prompt 1024 --gen 256 --tp 1 --dp 2` (docs/serving.md's
                   example: the running slots bind), B: `llama-3.1-8b -H h100-sxm --prompt 4096 --gen 64` and
                   C: `... --prompt 16384 --gen 64` (long prompts: the prompt budget binds, a fine lattice)
largest_rate       per case, the largest rate `analyze` serves: the one its refusal names, refined by bisection
                   (to 10⁻⁵) between the rate it answers and the one it refuses
library_cpu_s      per case and load (a share of that rate): `serve(...)` in one warm process, CPU seconds, min and
                   median over the repeats; with its TTFT and TPOT         target: <= 0.2 s at 50%, 90% and 99%
cli_cpu_s          per case and load: `llmath analyze ... --rate R --json` as a whole fresh process (imports
                   included), CPU seconds, min and median, bytecode cached as installed
against            with ``--against SRC`` (another source tree's ``src``, e.g. main's): the same whole-process
                   runs with that tree, alternating with this one, and its TTFT/TPOT, or the error it printed
refused            per case, the message at 1.001 × the largest rate (it must name that rate)
load_average       the machine's 1-minute load average when the benchmark started and when it ended

CPU seconds rather than wall time: the development VM is shared by other processes. The library runs on one
BLAS thread, as the CLI sets it (``OPENBLAS_NUM_THREADS=1``, before numpy loads).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from bench_speed import child_cpu, installed_env  # noqa: E402

from llmath import Workload  # noqa: E402
from llmath.errors import WorkloadError  # noqa: E402

CASES = {
    "A": ("llama-3-8b", dict(prompt=1024, gen=256), dict(tp=1, dp=2)),
    "B": ("llama-3.1-8b", dict(prompt=4096, gen=64), {}),
    "C": ("llama-3.1-8b", dict(prompt=16384, gen=64), {}),
}
TARGET_S = 0.2


def _serve(case: str, rate: float):
    from llmath.deploy.layout import ParallelConfig
    from llmath.deploy.service import serve

    model, work, layout = CASES[case]
    parallel = ParallelConfig(**layout) if layout else None
    return serve(model, "h100-sxm", workload=Workload(rate=rate, **work), parallel=parallel)


def _largest_rate(case: str) -> float:
    """From the rate the refusal names (three digits): bisection between an answered and a refused rate."""
    try:
        _serve(case, 1e9)
    except WorkloadError as e:
        named = float(re.search(r"sustains \(([0-9.e+]+) requests/s", str(e)).group(1))
    lo, hi = 0.99 * named, 1.01 * named
    while _answers(case, hi):  # the refusal names one replica's rate: with dp replicas the whole is dp times it
        lo, hi = hi, 2 * hi
    while hi / lo > 1 + 1e-5:
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if _answers(case, mid) else (lo, mid)
    return lo


def _answers(case: str, rate: float) -> bool:
    try:
        _serve(case, rate)
    except WorkloadError:
        return False
    return True


def _cmd(case: str, rate: float) -> list[str]:
    model, work, layout = CASES[case]
    flags = [f"--{k}={v}" for k, v in {**work, **layout}.items()]
    return [sys.executable, "-m", "llmath", "analyze", model, "-H", "h100-sxm", *flags, "--rate", f"{rate:.9g}"]


def _answer(cmd: list[str], env: dict) -> dict:
    r = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env)
    if r.returncode:
        return {"error": r.stderr.strip()[-300:]}
    d = json.loads(r.stdout)
    return {"ttft_s": d["ttft_s"], "tpot_s": d["tpot_s"]}


def _stats(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs), "median": statistics.median(xs)}


def _library(case: str, rate: float, repeats: int) -> dict:
    ts, rep = [], None
    for _ in range(repeats):
        t = time.process_time()
        rep = _serve(case, rate)
        ts.append(time.process_time() - t)
    return {**_stats(ts), "ttft_s": rep.metrics["ttft_s"], "tpot_s": rep.metrics["tpot_s"]}


def _processes(case: str, rate: float, repeats: int, src: str | None) -> dict:
    """Whole-process CPU seconds with this tree and, alternating with it, with ``src``'s; each one's answer (its
    first run, which writes the bytecode)."""
    cmd = _cmd(case, rate)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        envs = {"this": installed_env(a)}
        if src:
            envs["against"] = {**installed_env(b), "PYTHONPATH": src}
        out = {name: _answer(cmd, env) for name, env in envs.items()}
        runs = {name: [] for name in envs if "error" not in out[name]}
        for _ in range(repeats):
            for name in runs:
                runs[name].append(child_cpu([*cmd, "--json"], envs[name]))
    for name, xs in runs.items():
        out[name]["cpu_s"] = _stats(xs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loads", default="0.5,0.9,0.99,0.999")
    ap.add_argument("--cases", default="A,B,C")
    ap.add_argument("--against", help="another source tree's src/ to time alternately with this one")
    args = ap.parse_args()
    loads = [float(x) for x in args.loads.split(",")]
    res: dict = {"load_average": [os.getloadavg()[0]], "largest_rate": {}, "library_cpu_s": {}, "cli_cpu_s": {}}
    res["refused"] = {}
    for case in args.cases.split(","):
        top = _largest_rate(case)
        res["largest_rate"][case] = top
        res["library_cpu_s"][case] = {str(x): _library(case, x * top, args.repeats) for x in loads}
        res["cli_cpu_s"][case] = {str(x): _processes(case, x * top, args.repeats, args.against) for x in loads}
        res["refused"][case] = _answer(_cmd(case, 1.001 * top), os.environ.copy()).get("error")
    res["target_library_s"] = {"loads": [0.5, 0.9, 0.99], "at_most": TARGET_S}
    res["load_average"].append(os.getloadavg()[0])
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
