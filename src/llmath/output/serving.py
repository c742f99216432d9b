"""Human tables for serving reports (``analyze --concurrency/--rate``) and plans (``llmath plan``)."""

from __future__ import annotations

from typing import Any

from llmath.output import _console, gb, ms, si


def serving_human(d: dict[str, Any]) -> None:
    """One serving report: the engine, memory, and the latency/throughput metrics."""
    from rich.table import Table

    c = _console()
    e, w, m, lay = d["engine"], d["workload"], d["memory"], d.get("layout") or {}
    seqs = "no cap" if e["max_num_seqs"] >= 1 << 20 else e["max_num_seqs"]
    where = " ".join(f"{k}={lay[k]}" for k in ("tp", "pp", "dp", "ep") if k in lay)
    c.print(
        f"[b]{d['model']}[/b] on {d['gpus']} × {d['hardware']} ({where}), {e['name']} (budget"
        f" {e['max_num_batched_tokens']} tokens, max_num_seqs {seqs}): prompt {w['prompt']}, gen {w['gen']},"
        f" concurrency {w['concurrency']:.4g}" + (f", rate {w['rate']:g}/s" if w.get("rate") else ""),
        highlight=False,
    )
    c.print(
        f"memory per GPU (busiest): weights {gb(m['weights_bytes'])}, activations {gb(m['activation_bytes'])},"
        f" KV pool {gb(m['kv_pool_bytes'])} = {m['max_requests_by_kv']} requests of {gb(m['kv_bytes_per_request'])};"
        f" {m['max_resident']} run at once per replica",
        highlight=False,
    )
    t = Table(title="steady state")
    t.add_column("metric")
    t.add_column("value", justify="right")
    rows = [
        ("TTFT (mean)", ms(d["ttft_s"])),
        ("TPOT (mean)", ms(d["tpot_s"])),
        ("ITL p50 / p90 / p99", f"{ms(d['itl_p50_s'])} / {ms(d['itl_p90_s'])} / {ms(d['itl_p99_s'])}"),
        ("end-to-end", ms(d["e2e_s"])),
        ("output tokens/s (aggregate)", si(d["throughput_tok_s"], "tok/s")),
        ("output tokens/s per GPU", si(d["throughput_tok_s_per_gpu"], "tok/s")),
        ("tokens/s per user (1/TPOT)", si(d["tok_s_per_user"], "tok/s")),
        ("requests/s", f"{d['requests_s']:.4g}"),
        ("running / queued per replica", f"{d['running_per_replica']:.0f} / {d['queued_per_replica']:.0f}"),
    ]
    if (o := d.get("overheads_s")) is not None:
        name = o.get("engine", "engine")
        rows.append((f"of which {name} overheads (TTFT / TPOT)", f"{ms(o['ttft'])} / {ms(o['tpot'])}"))
    for k, v in rows:
        t.add_row(k, v)
    c.print(t)
    for n in d.get("notes", []):
        c.print(f"note: {n}", highlight=False)


def plan_human(d: dict[str, Any], top: int = 20) -> None:
    """The best configuration and the Pareto front of a plan."""
    from rich.table import Table

    c = _console()
    t = d["targets"]
    goal = ", ".join(f"{k[:-3].upper()} ≤ {v:g} ms" for k, v in t.items() if v) or "no latency target (max throughput)"
    c.print(f"[b]{d['model']}[/b] on up to {d['gpus']} × {d['hardware']}: {goal}", highlight=False)
    c.print(f"{d['evaluated']} configurations in {d['seconds'] * 1e3:.0f} ms", highlight=False)
    for n in d.get("notes", []):
        c.print(f"note: {n}", highlight=False)
    if not d["best"]:
        return
    cols = ["mode", "weights", "tp", "pp", "ep", "dp", "gpus_used", "concurrency", "ttft_s", "tpot_s"]
    cols += ["throughput_tok_s", "throughput_tok_s_per_gpu", "tok_s_per_user"]
    if "usd_per_million_tokens" in d["best"]:
        cols.append("usd_per_million_tokens")
    tab = Table(title=f"Pareto front ({len(d['pareto'])} configurations; * = best)")
    for k in cols:
        tab.add_column(k, justify="right")
    rows = d["pareto"]
    step = max(1, -(-len(rows) // top))
    shown = rows[::step]
    if d["best"] not in shown:
        shown = sorted([*shown, d["best"]], key=lambda r: -r["tok_s_per_user"])
    for r in shown:
        cells = []
        for k in cols:
            v = r.get(k)
            cells.append(ms(v) if k in ("ttft_s", "tpot_s") else f"{v:.4g}" if isinstance(v, float) else str(v))
        star = "*" if r == d["best"] else ""
        tab.add_row(*[cells[0] + star, *cells[1:]])
    c.print(tab)
    b = d["best"]
    c.print(
        f"best: {b['mode']}, {b['weights']}, tp={b['tp']} pp={b['pp']} ep={b['ep']} dp={b['dp']}, concurrency"
        f" {b['concurrency']:.0f}: {si(b['throughput_tok_s_per_gpu'], 'tok/s')} per GPU, TTFT {ms(b['ttft_s'])},"
        f" TPOT {ms(b['tpot_s'])}",
        highlight=False,
    )


def serving_validation_human(rep: dict[str, Any]) -> None:
    """``llmath validate --published --serving``: each row, its error, and the summaries."""
    from rich.table import Table

    c = _console()
    t = Table(title="serving predictions vs published results")
    for k in ("id", "engine", "setup", "metric", "measured", "predicted", "error", "running"):
        t.add_column(k, justify="right" if k in ("measured", "predicted", "error", "running") else "left")
    for r in rep["rows"]:
        t.add_row(
            r["id"],
            r["engine"],
            r["setup"],
            r["metric"],
            f"{r['measured']:.4g}",
            f"{r['predicted']:.4g}",
            f"{r['error']:+.1%}",
            f"{r['running']:.0f}",
        )
    c.print(t)
    o = rep["summary"]["overall"]
    if o["n"]:
        c.print(f"{o['n']} rows: median |error| {o['median_abs_error']:.1%}, worst {o['worst_error']:+.1%}")
    for s in rep["skipped"]:
        c.print(f"skipped {s['id']}: {s['reason']}", highlight=False)
