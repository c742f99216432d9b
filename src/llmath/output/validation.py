"""Human-readable tables (rich, stdout) for ``llmath calibrate`` and ``llmath validate``."""

from __future__ import annotations

from typing import Any


def _console():
    from rich.console import Console

    c = Console()
    return Console(soft_wrap=False, width=max(c.width, 120))


def _ms(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t * 1e3:.2f} ms" if t < 10 else f"{t:.2f} s"


def _g(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v / 1e9:.3g} G{unit}"


def _pct(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "-"
    return f"{v:+.1%}" if signed else f"{v:.1%}"


def calibration_human(profile: dict[str, Any], path: str | None = None) -> None:
    """The measured ceilings and fractions of a calibration profile."""
    from rich.table import Table

    c = _console()
    m = profile.get("measured", {})
    eff, raw = m.get("efficiency", {}), m.get("raw", {})
    c.print(f"[b]{profile.get('name')}[/b]: {profile.get('source', '')}", highlight=False)
    t = Table(title="ceilings (the profile's peaks and bandwidth)")
    t.add_column("what")
    t.add_column("measured", justify="right")
    t.add_column("shape")
    cp = raw.get("copy", {})
    t.add_row(
        "copy bandwidth (read + write)",
        _g(cp.get("bytes_per_s"), "B/s"),
        f"{cp.get('bytes_moved', 0) / 1e6:.0f} MB moved",
    )
    t.add_row(
        "profile bandwidth (fractions are over it)",
        _g(profile.get("memory_bandwidth_bytes_per_s"), "B/s"),
        (raw.get("reference_bandwidth") or {}).get("from", ""),
    )
    gv = raw.get("gemv")
    if gv:
        t.add_row("weights streamed by GEMV", _g(gv.get("weight_bytes_per_s"), "B/s"), f"{gv['n']}×{gv['k']}")
    for d, v in profile.get("peak_flops_per_s", {}).items():
        sizes = [g["m"] for g in raw.get("gemm", []) if g["dtype"] == d]
        t.add_row(f"matmul {d} (median of square GEMMs)", _g(v, "FLOP/s"), ", ".join(f"{s}³" for s in sizes))
    t.add_row("vector ops (best, cache-resident)", _g(profile.get("vector_flops_per_s"), "FLOP/s"), "")
    t.add_row("per-kernel overhead", f"{eff.get('overhead_s', 0) * 1e6:.2f} µs", "tiny op")
    c.print(t)
    t = Table(title="skinny weight GEMMs (decode-like): F.linear(X[rows, k], W[n, k]), median over weight shapes")
    for col in ("rows", "shapes (k×n)", "GFLOP/s", "weight GB/s", "fraction of copy bw"):
        t.add_column(col, justify="right")
    for s in raw.get("skinny_median", []):
        t.add_row(
            str(s["rows"]),
            ", ".join(f"{k}×{n}" for k, n in s["shapes"]),
            f"{s['flops_per_s'] / 1e9:.3g}",
            f"{s['weight_bytes_per_s'] / 1e9:.3g}",
            f"{min(s['fraction_of_copy_bandwidth'], 1.0):.3f}",
        )
    c.print(t)
    c.print(
        f"fractions: vector {eff.get('vector', 0):.3f}, decode attention {eff.get('attention_decode', 0):.3f}; "
        f"load average before/after {raw.get('load_average_before')} / {raw.get('load_average_after')}",
        highlight=False,
    )
    if path:
        c.print(f"wrote {path}: use it with --hardware {path}", highlight=False)


def _table(title: str, cols: tuple[str, ...], left: tuple[str, ...] = ()) -> Any:
    """A rich table with these columns, right-aligned except ``left``."""
    from rich.table import Table

    t = Table(title=title)
    for col in cols:
        t.add_column(col, justify="left" if col in left else "right")
    return t


def _compared(x: dict[str, Any], drift: bool) -> tuple[list[str], list[str]]:
    """(measured, predicted, ratio, error, bound) cells of a timed row, and its drift-corrected cells."""
    cells = [_ms(x["measured_s"]), _ms(x["predicted_s"]), f"{x['ratio']:.3f}", _pct(x["error"]), x["bound"] or "-"]
    return cells, ([_ms(x["predicted_drift_s"]), _pct(x["error_drift"])] if drift else [])


def _timed_tables(c: Any, r: dict[str, Any]) -> None:
    """Prefill and decode rows, measured vs predicted (with the drift-corrected columns when measured)."""
    d = bool(r.get("drift"))
    extra = ("drift-corrected", "error (corr.)") if d else ()
    cols = ("measured", "predicted", "ratio", "error", "bound")
    t = _table("prefill (batch 1)", ("prompt", *cols, *extra))
    for x in r["prefill"]:
        cells, corr = _compared(x, d)
        t.add_row(str(x["prompt"]), *cells, *corr)
    c.print(t)
    t = _table("decode step", ("batch", "context", *cols, "tok/s measured", *extra))
    for x in r["decode"]:
        cells, corr = _compared(x, d)
        t.add_row(str(x["batch"]), str(x["context"]), *cells, f"{x['batch'] / x['measured_s']:.1f}", *corr)
    c.print(t)


def _breakdown_tables(c: Any, r: dict[str, Any]) -> None:
    """Where the time went per stage: torch.profiler's classes beside llmath's operators."""
    for stage, b in r.get("breakdown", {}).items():
        shape = f"prompt {b['prompt']}" if "prompt" in b else f"batch {b['batch']}, context {b['context']}"
        t = _table(
            f"where the time went, {stage} ({shape}): torch.profiler vs llmath's operators",
            ("class", "measured (profiled)", "share", "predicted", "share "),
            left=("class",),
        )
        for x in b["classes"]:
            t.add_row(
                x["class"],
                _ms(x["measured_s"]),
                _pct(x["measured_share"], False),
                _ms(x["predicted_s"]),
                _pct(x["predicted_share"], False),
            )
        c.print(t)


def _summary_table(title: str, first: str, groups: list[tuple[str, dict[str, Any]]]) -> Any:
    """n, median |error| and worst error per group."""
    t = _table(title, (first, "n", "median", "worst"), left=(first,))
    for g, s in groups:
        t.add_row(g, str(s["n"]), _pct(s["median_abs_error"], False), _pct(s["worst_error"]))
    return t


def validation_human(report: dict[str, Any]) -> None:
    """Measured vs predicted per stage, and where the time went by operator class."""
    c = _console()
    r = report
    c.print(
        f"[b]{r['model']}[/b] ({r['params']:,} parameters, {r['layers']} layers) on {r['device']} in {r['dtype']}, "
        f"attention {r['attention']}; predictions on [b]{r['hardware']}[/b] ({r['hardware_how']})",
        highlight=False,
    )
    d = r.get("drift")
    if d:
        c.print(
            f"machine now vs its profile: matmul {d['matmul']:.2f}x, copy {d['copy']:.2f}x "
            "(the 'drift-corrected' column scales the profile's ceilings by these)",
            highlight=False,
        )
    _timed_tables(c, r)
    c.print(_summary_table("summary: |error|", "group", list(r["summary"].items())))
    _breakdown_tables(c, r)
    for n in r.get("notes", []):
        c.print(f"note: {n}", highlight=False)


def published_human(report: dict[str, Any]) -> None:
    """Predicted vs published measurements, with median and worst error overall and per metric."""
    from rich.table import Table

    c = _console()
    t = Table(
        title=f"llmath ({report['efficiency']} efficiency, {report['attention']} attention) vs published measurements"
    )
    for col in ("id", "metric", "B", "P", "N", "dtypes (w/a/kv)", "measured", "predicted", "ratio", "error"):
        t.add_column(col, justify="left" if col in ("id", "metric", "dtypes (w/a/kv)") else "right")
    for x in report["rows"]:
        t.add_row(
            x["id"],
            x["metric"],
            str(x["batch"]),
            str(x["prompt"]),
            str(x["gen"]),
            f"{x['weights']}/{x['activations']}/{x['kv_dtype']}",
            f"{x['measured']:.4g}",
            f"{x['predicted']:.4g}",
            f"{x['ratio']:.3f}",
            _pct(x["error"]),
        )
    c.print(t)
    s = report["summary"]
    c.print(_summary_table("|error| summary", "metric", [("all", s["overall"]), *s["by_metric"].items()]))
    reasons: dict[str, int] = {}
    for x in report["skipped"]:
        key = x["reason"]
        reasons[key] = reasons.get(key, 0) + 1
    if reasons:
        t = Table(title=f"{len(report['skipped'])} rows skipped")
        t.add_column("reason")
        t.add_column("rows", justify="right")
        for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]):
            t.add_row(k, str(v))
        c.print(t)
    for n in report.get("notes", []):
        c.print(f"note: {n}", highlight=False)


_RUN_COLS = ("rows", "TTFT signed", "TTFT abs", "TTFT ≤25%", "TPOT signed", "TPOT abs", "TPOT ≤25%", "both ≤25%")


def _run_cells(s: dict[str, Any]) -> list[str]:
    if not s.get("n"):
        return ["0"] + ["-"] * 7
    return [
        str(s["n"]),
        _pct(s["ttft_signed_median"]),
        _pct(s["ttft_abs_median"], False),
        _pct(s["ttft_within_25"], False),
        _pct(s["tpot_signed_median"]),
        _pct(s["tpot_abs_median"], False),
        _pct(s["tpot_within_25"], False),
        _pct(s["both_within_25"], False),
    ]


def runs_markdown(report: dict[str, Any]) -> str:
    """The summaries of ``llmath validate --runs`` as Markdown tables (median errors, fractions within 25%)."""
    lines: list[str] = []
    summ = report["summary"]
    for mode in ("agg", "disagg"):
        m = summ.get(mode)
        if m is None:
            continue
        share = f"{m['computed_fraction']:.1%} computed"
        lines += [f"### {mode}: {m['computed']} computed, {m['refused']} refused ({share})", ""]
        for key, groups in [("all", {"all": m["overall"]}), *m["groups"].items()]:
            lines += [f"| {key} | " + " | ".join(_RUN_COLS) + " |", "|---" * (len(_RUN_COLS) + 1) + "|"]
            lines += [f"| {v} | " + " | ".join(_run_cells(s)) + " |" for v, s in groups.items()]
            lines.append("")
    reasons = summ.get("refusal_reasons") or {}
    if reasons:
        lines += ["### Refused rows", "", "| rows | reason |", "|---|---|"]
        lines += [f"| {n} | {why.replace('|', '/')} |" for why, n in reasons.items()]
        lines.append("")
    return "\n".join(lines)


def runs_human(report: dict[str, Any]) -> None:
    """``llmath validate --runs``: the error summaries (signed and absolute medians; error = (pred − meas) / meas)."""
    c = _console()
    c.print("error = (predicted − measured) / measured; medians over the rows of each group")
    c.print(runs_markdown(report), markup=False, highlight=False, soft_wrap=True)
