"""Reproduce the fit of vLLM's ``moe_prefill_host_per_layer_s``: TTFT error of the vLLM MoE rows by candidate value.

    PYTHONPATH=src python scripts/fit_vllm_moe_prefill.py ../shared/validation/serving_runs.csv [--values 0,100,350]

The term (``data/engines.json``, vLLM's ``overheads``; docs/serving-runs.md, "vLLM MoE passes that prefill") adds a time
per routed-expert layer to every pass that prefills. This script predicts the aggregated vLLM rows of the file
whose model has routed experts (``Table.routed_expert_layers`` > 0) with each candidate value in µs (this process
only: the loaded engine table is edited in memory, the file is not), and prints as JSON, per value, the median
|TTFT error| and the signed median per model and over all of them, then the leave-one-model-out choice: for each
model, the value the other models' rows prefer and that model's median |error| there.
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
from pathlib import Path

import numpy as np

from llmath.deploy import engines
from llmath.measure.serving_runs import validate_runs
from llmath.model.registry import resolve
from llmath.ops.table import table

VALUES_US = (0, 100, 200, 300, 350, 400, 500)


def moe_rows(path: Path) -> list[dict[str, str]]:
    """The file's aggregated vLLM rows whose model routes experts."""
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["backend"] == "vllm" and r["mode"] == "agg"]
    layers = {m: _moe_layers(m) for m in {r["model_path"] for r in rows}}
    return [r for r in rows if layers[r["model_path"]] > 0]


def _moe_layers(model: str) -> float:
    try:
        return table(resolve(model), "prefill").routed_expert_layers
    except Exception:  # a model llmath does not read: its rows are refused by validate_runs too
        return 0.0


def errors_at(rows_csv: Path, us: float) -> dict[str, tuple[str, float]]:
    """{row id: (model, TTFT error)} with the term at ``us`` µs per routed-expert layer."""
    entry = engines._data()["vllm"]["overheads"]["moe_prefill_host_per_layer_s"]
    kept = entry["value"]
    entry["value"] = us * 1e-6
    try:
        out = validate_runs(rows_csv)
    finally:
        entry["value"] = kept
    return {r["id"]: (r["model"], r["ttft_error"]) for r in out["rows"] if r.get("ttft_error") is not None}


def summary(errs: dict[str, tuple[str, float]]) -> dict[str, dict[str, float]]:
    by: dict[str, list[float]] = {}
    for model, e in errs.values():
        by.setdefault(model, []).append(e)
    by["all"] = [e for _, e in errs.values()]
    return {m: {"abs": float(np.median(np.abs(v))), "signed": float(np.median(v)), "n": len(v)} for m, v in by.items()}


def leave_one_model_out(table_by_value: dict[float, dict[str, tuple[str, float]]]) -> dict[str, dict[str, float]]:
    """Per model: the value minimising the other models' median |error|, and this model's median |error| there."""
    models = {m for errs in table_by_value.values() for m, _ in errs.values()}
    out = {}
    for held in sorted(models):

        def rest(us: float, held: str = held) -> float:
            return float(np.median([abs(e) for m, e in table_by_value[us].values() if m != held]))

        pick = min(table_by_value, key=rest)
        own = [abs(e) for m, e in table_by_value[pick].values() if m == held]
        out[held] = {"picked_us": pick, "held_out_abs": float(np.median(own))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--values", default=",".join(map(str, VALUES_US)), help="candidate µs per routed-expert layer")
    a = ap.parse_args()
    rows = moe_rows(a.runs)
    with tempfile.TemporaryDirectory() as d:
        subset = Path(d) / "vllm_moe_rows.csv"
        with a.runs.open(newline="") as f:
            header = next(csv.reader(f))
        with subset.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header)
            w.writeheader()
            w.writerows(rows)
        by_value = {float(v): errors_at(subset, float(v)) for v in a.values.split(",")}
    print(json.dumps({"rows": len(rows), "by_value_us": {v: summary(e) for v, e in by_value.items()},
                      "leave_one_model_out": leave_one_model_out(by_value)}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
