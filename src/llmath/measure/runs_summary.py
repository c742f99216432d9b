"""The summaries of predicted serving runs (:func:`llmath.measure.serving_runs.validate_runs`): signed and absolute
median errors of TTFT and TPOT and the fractions within 25%, per mode, per grouping key and per engine × system."""

from __future__ import annotations

from statistics import median
from typing import Any


def relative_error(pred: float, meas: float) -> float:
    """(predicted − measured) / measured."""
    return (pred - meas) / meas


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Signed and absolute median errors of TTFT and TPOT and the fraction within 25% (each, and both)."""
    if not rows:
        return {"n": 0}
    out: dict[str, Any] = {"n": len(rows)}
    for k in ("ttft", "tpot"):
        e = [r[f"{k}_error"] for r in rows]
        out[f"{k}_signed_median"] = median(e)
        out[f"{k}_abs_median"] = median(abs(x) for x in e)
        out[f"{k}_within_25"] = sum(abs(x) <= 0.25 for x in e) / len(e)
    out["both_within_25"] = sum(abs(r["ttft_error"]) <= 0.25 and abs(r["tpot_error"]) <= 0.25 for r in rows) / len(rows)
    return out


def summarise(computed: list[dict], refused: list[dict], by: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in sorted({r["mode"] for r in computed} | {r["mode"] for r in refused}):
        rows = [r for r in computed if r["mode"] == mode]
        n_ref = sum(r["mode"] == mode for r in refused)
        m: dict[str, Any] = {"computed": len(rows), "refused": n_ref, "overall": summary(rows), "groups": {}}
        m["computed_fraction"] = len(rows) / (len(rows) + n_ref) if rows or n_ref else 0.0
        keys = [k for k in by if k != "mode" and k != "recipe"]
        for key in [*keys, *(["recipe"] if mode == "disagg" else []), "engine×system"]:  # recipe: what decides a row
            keys = key.split("×")
            vals = sorted({tuple(str(r[k]) for k in keys) for r in rows}, key=_natural)
            m["groups"][key] = {"×".join(v): summary([r for r in rows if tuple(str(r[k]) for k in keys) == v])
                                for v in vals}  # fmt: skip
        out[mode] = m
    reasons: dict[str, int] = {}
    for r in refused:
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    out["refusal_reasons"] = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))
    return out


def _natural(v: tuple[str, ...]) -> tuple:
    return tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in v)
