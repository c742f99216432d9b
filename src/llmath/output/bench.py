"""Human table for ``llmath bench``: measured latency and throughput beside llmath's prediction."""

from __future__ import annotations

from typing import Any

from llmath.output import _console, ms, si


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key.endswith("_s") and "throughput" not in key and key != "requests_s":
        return ms(v)
    return si(v, "tok/s" if key == "throughput_tok_s" else "req/s")


def bench_human(d: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """The run's counts, then one row per metric: mean, median, p90, p99, predicted, measured/predicted."""
    from rich.table import Table

    c = _console()
    cfg = d["config"]
    load = (
        f"rate {cfg['rate']:g}/s, at most {cfg['concurrency']}"
        if cfg.get("rate")
        else f"concurrency {cfg['concurrency']}"
    )
    c.print(
        f"[b]{cfg['url']}[/b] {cfg['model']}: {load} in flight, prompt {cfg['prompt']}, gen {cfg['gen']};"
        f" {d['completed']} of {cfg['requests']} requests completed, {d['failed']} failed, in {d['duration_s']:.2f} s",
        highlight=False,
    )
    pred = d.get("prediction")
    title = "measured (vLLM bench serve definitions)"
    if pred:
        title += f" vs llmath ({pred['engine']}, {pred['model']} on {pred['hardware']})"
    t = Table(title=title)
    for col in ("metric", "mean", "median", "p90", "p99", "predicted", "measured/predicted"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in rows:
        k = r["metric"]
        ratio = r.get("measured/predicted")
        cells = [_cell(k, r.get(x)) for x in ("mean", "median", "p90", "p99", "predicted")]
        t.add_row(k, *cells, "-" if ratio is None else f"{ratio:.3f}")
    c.print(t)
    for kind, n in d["errors"].items():
        c.print(f"failed: {n} × {kind}", highlight=False)
    for n in d["notes"]:
        c.print(f"note: {n}", highlight=False)
