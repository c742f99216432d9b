"""Calibrate a deployment's efficiency to one measured ``llmath bench`` run (``analyze --calibration FILE``).

Two interpretable terms are solved so that llmath's prediction of the measured run (same model, device,
deployment, prompt, output length and load, as the saved report states them) equals what was measured:
- the **matmul fraction** of the dense peak (prefill is compute-bound, so it sets TTFT), and
- the **bandwidth fraction** (large streams, decode weight GEMMs, decode attention, vector ops: decode is
  memory-bound, so it sets TPOT).
The fitted kernel models are replaced by these two flat fractions (a measured deployment is the better
witness of itself); the engine's overheads are kept. Fixed-point iteration: each fraction is scaled by
predicted / measured of its metric, at most ``ITERATIONS`` times, clamped to (0, 1]. A fraction that would
need to exceed 1 (the server is faster than the datasheet allows) stays at 1 and the notes say so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from llmath.errors import WorkloadError

ITERATIONS = 16  # TTFT holds constant terms (the server front end), so the matmul fraction converges slowly
TOLERANCE = 0.01
BANDWIDTH_FIELDS = ("memory", "skinny", "attention_decode", "vector")


@dataclass
class Calibration:
    """The calibrated efficiency, what it replaced, and how close the calibrated prediction came."""

    efficiency: Any
    matmul: tuple[float, float]  # (before, after)
    bandwidth: tuple[float, float]
    measured: dict[str, float]
    predicted: dict[str, float]  # at the measured point, after calibration
    notes: list[str] = field(default_factory=list)

    def lines(self, source: str) -> list[str]:
        m, b = self.matmul, self.bandwidth
        err = {k: self.predicted[k] / self.measured[k] - 1 for k in self.measured}
        return [
            f"calibration {source}: matmul fraction {m[0]:.3f} -> {m[1]:.3f}, bandwidth fraction {b[0]:.3f} ->"
            f" {b[1]:.3f} (flat fractions replace the fitted kernel models)",
            f"calibration {source}: at the measured point TTFT {self.predicted['ttft_s'] * 1e3:.3f} ms vs measured"
            f" {self.measured['ttft_s'] * 1e3:.3f} ms ({err['ttft_s']:+.1%}), TPOT {self.predicted['tpot_s'] * 1e3:.3f}"
            f" ms vs {self.measured['tpot_s'] * 1e3:.3f} ms ({err['tpot_s']:+.1%})",
            *self.notes,
        ]


def load(path: str) -> dict[str, Any]:
    """A report ``llmath bench --save`` wrote, with the deployment its prediction used."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except OSError as e:
        raise WorkloadError(f"--calibration {path!r}: {e.strerror}; give a file 'llmath bench --save' wrote") from None
    except ValueError:
        raise WorkloadError(f"--calibration {path!r} is not JSON; give a file 'llmath bench --save' wrote") from None
    pred = d.get("prediction") if isinstance(d, dict) else None
    if not pred or not isinstance(pred.get("deployment"), dict):
        raise WorkloadError(
            f"--calibration {path!r} holds no prediction to calibrate: rerun 'llmath bench ... -H DEVICE --save FILE'"
        )
    m = d.get("metrics") or {}
    for key in ("ttft_s", "tpot_s"):
        v = (m.get(key) or {}).get("mean")
        if not isinstance(v, (int, float)) or not v > 0:
            raise WorkloadError(f"--calibration {path!r}: no measured {key} (did any request complete?)")
    return d


def calibrate(report: dict[str, Any], predict) -> Calibration:
    """Solve the two fractions for ``report`` (see the module docstring). ``predict(efficiency)`` returns
    llmath's prediction (a dict with ``ttft_s`` and ``tpot_s``) of the measured run at that efficiency."""
    from llmath.hardware import get
    from llmath.hardware.efficiency import efficiency

    hw = get(report["prediction"]["hardware"])
    base = efficiency("expected", hw)
    measured = {k: float(report["metrics"][k]["mean"]) for k in ("ttft_s", "tpot_s")}
    mm, bw = base.matmul, base.memory
    notes: list[str] = []
    for _ in range(ITERATIONS):
        eff = efficiency("expected", hw, matmul=mm, matmul_fp8=mm, **dict.fromkeys(BANDWIDTH_FIELDS, bw))
        pred = predict(eff)
        rt, rp = pred["ttft_s"] / measured["ttft_s"], pred["tpot_s"] / measured["tpot_s"]
        if (abs(rt - 1) < TOLERANCE or mm >= 1.0 and rt > 1) and (abs(rp - 1) < TOLERANCE or bw >= 1.0 and rp > 1):
            break
        used = (mm, bw)
        mm, bw = min(mm * rt, 1.0), min(bw * rp, 1.0)
        if (mm, bw) == used:
            break
    if mm >= 1.0 or bw >= 1.0:
        notes.append("the measured run is faster than the datasheet peaks allow at a fraction of 1: kept at 1")
    return Calibration(eff, (base.matmul, eff.matmul), (base.memory, eff.memory), measured, pred, notes)


def saved_predictor(report: dict[str, Any]):
    """``predict(efficiency)`` for :func:`calibrate`: llmath's prediction of the saved run, its deployment as
    ``llmath bench`` recorded it (the flags, resolved again)."""
    from llmath.deploy.layout import DEGREES, ParallelConfig
    from llmath.deploy.service import serve
    from llmath.deploy.workload import Workload
    from llmath.model.checkpoint import precision_for

    cfg, dep = report["config"], dict(report["prediction"]["deployment"])
    model, hw = dep.pop("model"), report["prediction"]["hardware"]
    p = precision_for(model, None, dep.pop("weights"), None, dep.pop("kv_dtype"), None)
    load = {"rate": cfg["rate"]} if cfg.get("rate") else {"concurrency": float(cfg["concurrency"])}
    work = Workload(prompt=cfg["prompt"], gen=cfg["gen"], **load)
    par = ParallelConfig(**{k: dep.pop(k) for k in (*DEGREES, "overlap") if k in dep})  # the flags recorded

    def predict(eff) -> dict[str, float]:
        rep = serve(model, hw, workload=work, precision=p, efficiency_mode=eff, parallel=par, **dep)
        return {"ttft_s": rep.metrics["ttft_s"], "tpot_s": rep.metrics["tpot_s"]}

    return predict
