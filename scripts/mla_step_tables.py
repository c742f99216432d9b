"""An MLA + MoE model's decode (or verify) step and prefill pass, part by part, beside TensorRT-LLM's kernel tables.

    pip install pandas pyarrow                  # in a separate venv; not llmath dependencies
    PYTHONPATH=src python scripts/mla_step_tables.py AIC_DATA RUN_ID [RUN_ID ...] [--runs serving_runs.csv]

AIC_DATA is the unpacked aiconfigurator-core wheel's ``systems/data/<system>`` folder (e.g. ``h200_sxm``). Each
RUN_ID is an aggregated TensorRT-LLM row of a DeepSeek-V3-shaped model (MLA attention, routed and shared experts).
The row is read as ``llmath validate --runs`` reads it (its layout, launcher settings, formats and speculation) and
its replica is built as :func:`llmath.deploy.service.serve` builds it. The step: the replica's requests (the row's
concurrency over its attention-DP ranks) each feeding ``k + 1`` tokens under MTP, else one, at the mean context
(mean drawn prompt + output / 2); the pass: one prompt of the mean drawn length alone. Per part, llmath's seconds
and the tables' (TensorRT-LLM 1.3.0rc20):

* attention: llmath's ``attn.*`` operators (projections, norms, rotary, absorbed products, kernel, o_proj) against
  ``mla/trtllm/1.3.0rc20/mla_{generation,context}_module_perf`` (the whole MLA module of DeepSeek-V3, the rank's
  heads, its GEMM and KV formats; generation: batch = tokens of the step, ``step`` = context; nearest shape; a
  verify step's draft tokens counted as sequences there, which reads their caches again: an upper bound);
* routed experts: ``moe.experts.*`` and ``moe.topk`` at the busiest rank against ``moe/trtllm/1.3.0rc20/moe_perf``
  (the rows' format, every attention-DP rank's tokens, the layout's moe-TP and EP; balanced and power-law routing;
  linear in the token count between measured rows, and past the last along its last two);
* all-reduces: llmath's collectives against ``comm/trtllm/1.3.0rc20/custom_allreduce_perf`` (bf16 elements);
* the rest (shared experts, router, dense layers, norms, residuals, head): llmath's, in both sums.

Only kernel-level measurements are read (never ``silicon_sample``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from llmath.deploy import engines
from llmath.deploy.cost import comm_costs, fitted_device
from llmath.deploy.engine_device import engine_device
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.step import _mono
from llmath.hardware import get as get_hardware
from llmath.hardware.execution import checkpoint_precision
from llmath.hardware.kernels import engine_fp4_gemm, engine_hardware, engine_precision
from llmath.hardware.roofline import efficiency, monomial_times
from llmath.measure.serving_runs import engine_settings, precision, read_runs, to_run
from llmath.model.registry import resolve
from llmath.ops import Scenario

VERSION = "1.3.0rc20"
MOE_DTYPES = {"fp8-block": "fp8_block", "fp8": "fp8", "bf16": "bfloat16"}


def replica(run):
    """The run's replica as :func:`llmath.deploy.service.serve` builds it."""
    spec, L = resolve(run.model), run.layout
    layout = ParallelConfig(tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep).requested(spec)
    hw = get_hardware(run.system)
    p = engine_precision(checkpoint_precision(run.model, precision(run))[0], hw, run.engine)
    eng = engines.preset(run.engine, hw, tp=layout.tp, **engine_settings(run))
    hw = engine_hardware(hw, run.engine) or hw
    eff = engine_fp4_gemm(efficiency("expected", hw), hw, run.engine)
    return engine_device(spec, hw, p, eff, eng, "flash", layout)


def llmath_parts(dev, B: float, width: float, S: float, decode: bool) -> dict[str, float]:
    """Seconds by part of a decode/verify step (``decode``) or a prefill pass of one ``width``-token prompt."""
    part = dev.parts[0]
    t = part.decode if decode else part.prefill
    scen = Scenario(np.asarray(B), np.asarray(width), np.asarray(S))
    tokens = B * width
    mv = dev._fix(t, _mono(t, scen), tokens)
    eff = dev.decode_eff if decode else dev.eff
    tm = monomial_times(t, mv, dev.hw, dev.precision, eff, B, tokens, decode, S if decode else None)[0]
    tm = dev._busiest_rank(t, tm, tokens)
    out = {"attention": 0.0, "experts": 0.0, "all-reduce": 0.0, "rest": 0.0}
    for i, op in enumerate(t.ops):
        key = "attention" if op.name.startswith("attn.") else "rest"
        key = "experts" if op.name.startswith("moe.experts.") or op.name == "moe.topk" else key
        out[key] += float(tm[i])
    colls = part.decode_collectives if decode else part.prefill_collectives
    for c in comm_costs(colls, scen, dev.spec, dev.precision, dev.topology, fitted_device(dev.hw, dev.eff)):
        out["all-reduce" if c.kind == "all_reduce" else "rest"] += float(c.time_s)
    return out


def _nearest(df, col: str, v: float):
    vals = np.array(sorted(df[col].unique()), dtype=float)
    return df[df[col] == vals[np.argmin(np.abs(np.log(vals / max(v, 1e-9))))]]


def _loglinear(df, col: str, v: float) -> float:
    """The latency at ``col`` = v, linear between the two measured rows around v; below the first row that row's,
    above the last the line through the last two."""
    s = df.groupby(col).latency.median().sort_index()
    x, y = s.index.to_numpy(float), s.to_numpy(float)
    if v > x[-1] and len(x) > 1:
        return float(y[-1] + (v - x[-1]) * (y[-1] - y[-2]) / (x[-1] - x[-2]))
    return float(np.interp(v, x, y))


class Tables:
    def __init__(self, root: Path):
        import pandas as pd

        self.gen = pd.read_parquet(root / f"mla/trtllm/{VERSION}/mla_generation_module_perf.parquet")
        self.ctx = pd.read_parquet(root / f"mla/trtllm/{VERSION}/mla_context_module_perf.parquet")
        self.moe = pd.read_parquet(root / f"moe/trtllm/{VERSION}/moe_perf.parquet")
        self.ar = pd.read_parquet(root / f"comm/trtllm/{VERSION}/custom_allreduce_perf.parquet")

    def attention(self, dev, heads: int, B: float, width: float, S: float, decode: bool) -> float:
        gemm = MOE_DTYPES.get(dev.precision.weight_format("attention"), "bfloat16")
        kv = "fp8" if dev.precision.kv == "fp8" else "bfloat16"
        d = self.gen if decode else self.ctx
        d = d[(d.gemm_type == gemm) & (d.kv_cache_dtype == kv) & (d.num_heads == heads)]
        if decode:
            d = _nearest(d, "step", S)
            return _loglinear(d, "batch_size", B * width) * 1e-3
        return _loglinear(d[d.batch_size == 1], "isl", width) * 1e-3

    def experts(self, dev, tokens: float, distribution: str) -> float:
        m, L = dev.spec.moe, dev.layout
        d = self.moe[(self.moe.moe_dtype == MOE_DTYPES.get(dev.precision.weight_format("experts"), "bfloat16"))]
        d = d[(d.hidden_size == dev.spec.d_model) & (d.inter_size == m.d_ff_expert) & (d.num_experts == m.n_experts)]
        d = d[(d.topk == m.top_k) & (d.distribution == distribution)]
        d = d[(d.moe_ep_size == L.ep) & (d.moe_tp_size == max(L.tp * L.dp // L.ep, 1))]
        return _loglinear(d, "num_tokens", tokens) * 1e-3

    def all_reduce(self, gpus: int, elements: float) -> float:
        d = self.ar[self.ar.num_gpus == gpus]
        return _loglinear(d, "message_size", elements) * 1e-3


def compare(tab: Tables, run) -> list[str]:
    dev, L = replica(run), run.layout
    spec = dev.spec
    sp = run.speculation
    width = (sp.k + 1) if sp is not None else 1
    B = max(run.concurrency / L.dp, 1.0)
    P = float(np.mean(run.drawn(run.prompt)))
    S = P + run.gen / 2
    heads = spec.n_heads // L.tp
    moe_layers = dev.decode_table.routed_expert_layers
    lines = []
    for what, decode, b, w, s in (("step", True, B, width, S), ("pass", False, 1.0, round(P), 0.0)):
        ll = llmath_parts(dev, b, w, s, decode)
        att = tab.attention(dev, heads, b, w, s, decode) * spec.n_layers
        tokens = b * w * L.dp  # every attention-DP rank's tokens (llmath's pass: all ranks prefill together)
        moe = [tab.experts(dev, tokens, dist) * moe_layers for dist in ("balanced", "power_law_1.01")]
        ar = 2 * spec.n_layers * tab.all_reduce(L.tp, b * w * spec.d_model) if L.tp > 1 else 0.0
        tab_total = att + moe[0] + ar + ll["rest"]
        lines.append(
            f"| {run.concurrency} | {run.lengths} | {L.tp}×{L.dp}, EP {L.ep}, w {width} | {what} | "
            f"{ll['attention'] * 1e3:.2f} / {att * 1e3:.2f} | {ll['experts'] * 1e3:.2f} / {moe[0] * 1e3:.2f}"
            f" ({moe[1] * 1e3:.2f}) | {ll['all-reduce'] * 1e3:.2f} / {ar * 1e3:.2f} | {ll['rest'] * 1e3:.2f} | "
            f"{sum(ll.values()) * 1e3:.2f} / {tab_total * 1e3:.2f} |"
        )
    return lines


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    runs = argv[argv.index("--runs") + 1] if "--runs" in argv else "serving_runs.csv"
    if "--runs" in argv:
        args = [a for a in args if a != runs]
    if len(args) < 2:
        print("usage: mla_step_tables.py AIC_DATA RUN_ID [RUN_ID ...] [--runs CSV]", file=sys.stderr)
        return 2
    rows = {r["id"]: r for r in read_runs(runs)}
    tab = Tables(Path(args[0]))
    print(
        "| clients | lengths | TP×DP, EP, width | | attention llmath / table | experts llmath / table balanced"
        " (power-law) | all-reduce llmath / table | rest (llmath) | total llmath / table |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for rid in args[1:]:
        if rid not in rows:
            print(f"{rid}: not a row of {runs}", file=sys.stderr)
            return 2
        for line in compare(tab, to_run(rows[rid])):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
