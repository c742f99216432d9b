"""Speed benchmark: prints one JSON object (times on this machine).

    python benchmarks/bench_speed.py --json [--peer-python PATH] [--startup-only] [--repeats N]

scenario_us        median time of one full in-process scenario (params + prefill + decode step + a 1,024-token
                   generation, per-op breakdown included), Llama-3-8B on an H100 SXM, batch 8: the median over 5
                   fresh processes of each one's median of 2,000 calls (on this 2-core VM a single
                   process's median varies up to 2x from run to run)
peer_scenario_us   the same for llm-flops 0.0.1's ``estimate()`` on the same scenario (Meta-Llama-3-8B, batch 8,
                   1,024 prompt tokens, 1,024 generated, H100, inference), its processes alternating with
                   ours; run by ``--peer-python`` (an interpreter with ``llm-flops==0.0.1`` installed) or by this
                   one when it can import ``llmflops``; absent when neither can
scenario_ratio     peer_scenario_us / scenario_us, the median of the ratios of each alternating pair
                                                                                         target >= 3
sweep_1e6_s        10^6 scenarios (batch x prompt grid) in one vectorised call, CPU s     target <= 0.5 s
generation_1e5_ms  one 100,000-token generation (closed form over decode steps)          target <= 5 ms
import_s           `import llmath` in a fresh process, CPU s                             target <= 0.15 s
cli_s              `llmath analyze llama-3-8b --hardware h100-sxm --json`, whole process, CPU s
                                                                                         target <= 0.3 s
help_s             `llmath --help`, whole process, CPU s                                 target <= 0.15 s
cli_modules        what that ``analyze`` process imports: llmath's modules, all modules, and whether numpy,
                   pydantic or typer's pydantic adapters are among them
load_average       the 1-minute load average of this machine before and after the run (other processes share it)
Each figure is the median of its repeats; ``*_min`` the minimum. CPU seconds (the operating system's
accounting of the finished child, or of this process) rather than wall time: the VM is shared.
The whole-process figures run as an installed package does: with compiled bytecode (pip writes it at install
time), cached under a temporary ``PYTHONPYCACHEPREFIX`` by the warm-up run, whatever PYTHONDONTWRITEBYTECODE
says here; without it every run would compile the sources again (about 0.25 CPU s for ``analyze``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

_SCENARIO = """
import statistics, time
import llmath
from llmath.analysis import scenario
from llmath.hardware import get
spec, hw = llmath.resolve("llama-3-8b"), get("h100-sxm")
scenario(spec, hw, 8, 1024, 1024)  # warm the caches (compiled tables)
ts = []
for _ in range(2000):
    t = time.perf_counter()
    scenario(spec, hw, 8, 1024, 1024)
    ts.append(time.perf_counter() - t)
print(statistics.median(ts) * 1e6)
"""

_PEER = """
import statistics, time
from llmflops.estimator import estimate
kw = dict(batch_size=8, sequence_length=1024, gpu="H100", num_generated_tokens=1024, include_backward=False,
          causal=True, allow_hf_fetch=False)
estimate("meta-llama/Meta-Llama-3-8B", **kw)
ts = []
for _ in range(2000):
    t = time.perf_counter()
    estimate("meta-llama/Meta-Llama-3-8B", **kw)
    ts.append(time.perf_counter() - t)
print(statistics.median(ts) * 1e6)
"""

TARGETS = {"sweep_1e6_s": 0.5, "generation_1e5_ms": 5.0, "import_s": 0.15, "cli_s": 0.3, "help_s": 0.15}
_ANALYZE = ["-m", "llmath", "analyze", "llama-3-8b", "--hardware", "h100-sxm", "--json"]
_MODULES = """
import contextlib, io, json, sys
from llmath.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
mods = set(sys.modules)
print(json.dumps({"llmath": sum(m.split(".")[0] == "llmath" for m in mods), "all": len(mods),
                  **{m: m in mods for m in ("numpy", "pydantic", "typer._adapters")}}))
"""


def _median_cpu(fn, repeats: int) -> tuple[float, float]:
    ts = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        ts.append(time.process_time() - t)
    return statistics.median(ts), min(ts)


def child_cpu(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """CPU seconds (user + system) of one run of ``cmd`` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, capture_output=True, check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def installed_env(cache: str) -> dict[str, str]:
    """This environment, with bytecode written to and read from ``cache`` (as an installed package has it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def process_cpu(cmd: list[str], repeats: int = 7) -> list[float]:
    """CPU seconds of ``repeats`` whole-process runs of ``cmd`` with bytecode cached: a warm-up run writes it
    (and warms the file cache)."""
    with tempfile.TemporaryDirectory(prefix="llmath-bench-pyc-") as cache:
        env = installed_env(cache)
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        return [child_cpu(cmd, env) for _ in range(repeats)]


def _process(cmd: list[str], repeats: int = 7) -> tuple[float, float]:
    ts = process_cpu(cmd, repeats)
    return statistics.median(ts), min(ts)


def _peer_python(given: str | None) -> str | None:
    if given:
        return given
    try:
        import llmflops  # noqa: F401
    except ImportError:
        return None
    return sys.executable


def _scenarios(peer: str | None, rounds: int = 5) -> dict:
    """Ours and the peer's per-process medians, alternating process by process."""
    ours, theirs = [], []
    for _ in range(rounds):
        r = subprocess.run([sys.executable, "-c", _SCENARIO], capture_output=True, text=True, check=True)
        ours.append(float(r.stdout))
        if peer:
            r = subprocess.run([peer, "-c", _PEER], capture_output=True, text=True, check=True)
            theirs.append(float(r.stdout))
    res = {"scenario_us": statistics.median(ours), "scenario_us_per_process": ours}
    if theirs:
        res["peer_scenario_us"] = statistics.median(theirs)
        res["peer_scenario_us_per_process"] = theirs
        res["scenario_ratio"] = statistics.median(t / o for t, o in zip(theirs, ours, strict=True))
    return res


def _library(res: dict, peer: str | None) -> None:
    """The in-process figures: one scenario against the peer, the 10^6-point sweep, a long generation."""
    import numpy as np

    import llmath
    from llmath.hardware import get
    from llmath.hardware.decode import decode_generation
    from llmath.hardware.roofline import efficiency
    from llmath.model.dtypes import Precision
    from llmath.ops import table
    from llmath.sweep import grid

    spec = llmath.resolve("llama-3-8b")
    hw = get("h100-sxm")
    res.update(_scenarios(peer))

    B = np.tile(np.arange(1, 1001), 1000)
    P = np.repeat(np.arange(1, 1001) * 8, 1000)
    grid(spec, hw, B[:10], P[:10], 256)
    res["sweep_1e6_s"], res["sweep_1e6_s_min"] = _median_cpu(lambda: grid(spec, hw, B, P, 256), 3)

    t, p, e = table(spec, "decode", "flash"), Precision(), efficiency("expected", hw)
    gen_s, gen_min = _median_cpu(lambda: decode_generation(t, hw, p, e, 8, 1024, 100_000), 200)
    res["generation_1e5_ms"], res["generation_1e5_ms_min"] = gen_s * 1e3, gen_min * 1e3


def _startup(res: dict, repeats: int) -> None:
    """The whole-process figures: ``import llmath``, ``llmath analyze … --json``, ``llmath --help``, and what
    that ``analyze`` imports."""
    res["import_s"], res["import_s_min"] = _process([sys.executable, "-c", "import llmath"], repeats)
    res["cli_s"], res["cli_s_min"] = _process([sys.executable, *_ANALYZE], repeats)
    res["help_s"], res["help_s_min"] = _process([sys.executable, "-m", "llmath", "--help"], repeats)
    r = subprocess.run([sys.executable, "-c", _MODULES, *_ANALYZE[2:]], capture_output=True, text=True, check=True)
    res["cli_modules"] = json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--peer-python", help="an interpreter with llm-flops==0.0.1 installed")
    ap.add_argument("--startup-only", action="store_true", help="only the whole-process figures")
    ap.add_argument("--repeats", type=int, default=7, help="runs of each whole-process figure (default 7)")
    args = ap.parse_args()

    res: dict = {}
    load_before = os.getloadavg()[0]
    if not args.startup_only:
        _library(res, _peer_python(args.peer_python))
    _startup(res, args.repeats)
    res["load_average"] = [load_before, os.getloadavg()[0]]
    targets = {k: v for k, v in {**TARGETS, "scenario_ratio": 3.0}.items() if k in res}
    res["targets"] = targets
    res["met"] = {k: (res[k] >= v if k == "scenario_ratio" else res[k] <= v) for k, v in targets.items()}
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        for k, v in targets.items():
            print(f"{k:20s} {res[k]:10.4g}  (target {'>=' if k == 'scenario_ratio' else '<='} {v})")


if __name__ == "__main__":
    main()
