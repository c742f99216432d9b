"""Human tables for serving reports (``analyze --concurrency/--rate``) and plans (``llmath plan``)."""

from __future__ import annotations

from typing import Any

from llmath.output import _console, gb, ms, si
from llmath.output.tables import Col, print_table


def serving_human(d: dict[str, Any]) -> None:
    """One serving report: the engine, memory, and the latency/throughput metrics."""

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
    itl = [(f"ITL {p}", ms(d[f"itl_{p}_s"])) for p in ("p50", "p90", "p99")]
    rows = [
        *_latency_rows(d, after_ttft=[], after_tpot=itl),
        ("tokens/s per user (1/TPOT)", si(d["tok_s_per_user"], "tok/s")),
        ("requests/s", f"{d['requests_s']:.4g}"),
        ("running / queued per replica", f"{d['running_per_replica']:.0f} / {d['queued_per_replica']:.0f}"),
    ]
    if (o := d.get("overheads_s")) is not None:
        name = o.get("engine", "engine")
        rows.append((f"of which {name} overheads (TTFT / TPOT)", f"{ms(o['ttft'])} / {ms(o['tpot'])}"))
    print_table(c, "steady state", [Col("metric", right=False), Col("value")], [list(r) for r in rows])
    for n in d.get("notes", []):
        c.print(f"note: {n}", highlight=False)


def _latency_rows(d: dict[str, Any], after_ttft: list, after_tpot: list) -> list[tuple[str, str]]:
    """The metric rows every serving table shows (TTFT, TPOT, end-to-end, throughput in all and per GPU), with a
    mode's own rows after TTFT and after TPOT."""
    return [
        ("TTFT (mean)", ms(d["ttft_s"])),
        *after_ttft,
        ("TPOT (mean)", ms(d["tpot_s"])),
        *after_tpot,
        ("end-to-end", ms(d["e2e_s"])),
        ("output tokens/s (aggregate)", si(d["throughput_tok_s"], "tok/s")),
        ("output tokens/s per GPU", si(d["throughput_tok_s_per_gpu"], "tok/s")),
    ]


def disagg_human(d: dict[str, Any], model: str, hardware: str, engine: str, prefill: dict, decode: dict) -> None:
    """One disaggregated serving result (``analyze --disagg``): the pools, then the latency/throughput metrics."""

    def layout(p: dict) -> str:
        degrees = {"tp": 1} | {k: v for k, v in p.items() if k != "workers" and (v != 1 or k == "tp")}
        return f"{p.get('workers', 1)}×" + " ".join(
            f"{k}{degrees[k]}" for k in ("tp", "pp", "ep", "dp") if k in degrees
        )

    c = _console()
    c.print(
        f"[b]{model}[/b] on {d['gpus']:.0f} × {hardware}, {engine}, disaggregated: prefill {layout(prefill)},"
        f" decode {layout(decode)}",
        highlight=False,
    )
    rows = [
        *_latency_rows(
            d,
            after_ttft=[
                ("of which KV transfer", ms(d["kv_transfer_s"])),
                ("of which the decode server's first steps", ms(d["first_token_decode_s"])),
            ],
            after_tpot=[],
        ),
        ("prefill pool: GPUs / requests", f"{d['prefill_gpus']:.0f} / {d['prefill_requests']:.1f}"),
        ("decode pool: GPUs / requests", f"{d['decode_gpus']:.0f} / {d['decode_requests']:.1f}"),
        ("decode batch per attention-DP rank", f"{d['decode_batch']:.1f}"),
    ]
    print_table(c, "steady state", [Col("metric", right=False), Col("value")], [list(r) for r in rows])
    for n in d.get("notes", []):
        c.print(f"note: {n}", highlight=False)


def plan_formats_line(formats: dict[str, Any]) -> str:
    """The formats a plan searched (its ``formats`` key), in one line."""
    by = formats["by_weights"]
    if formats["from"] != "checkpoint":
        return f"weights: {', '.join(by)} (--weights)"
    ((label, d),) = by.items()
    where = d["sources"].get("weights", "the checkpoint states no format")
    kept = sorted({f for f in d["modules"].values() if f != label})
    also = f", {', '.join(kept)} where it keeps them" if kept else ""
    gemm = f", GEMM inputs {d['act_quant']}" if d.get("act_quant") else ""
    return f"weights: the checkpoint's {label}{also}{gemm}, KV cache {d['kv']} ({where}); --weights F plans others"


def plan_human(d: dict[str, Any], top: int = 20) -> None:
    """The best configuration and the Pareto front of a plan; a disaggregated row shows its two pools."""
    c = _console()
    t = d["targets"]
    goal = ", ".join(f"{k[:-3].upper()} ≤ {v:g} ms" for k, v in t.items() if v) or "no latency target (max throughput)"
    c.print(f"[b]{d['model']}[/b] on up to {d['gpus']} × {d['hardware']}: {goal}", highlight=False)
    c.print(f"{d['evaluated']} configurations in {d['seconds'] * 1e3:.0f} ms", highlight=False)
    if d.get("formats"):
        c.print(plan_formats_line(d["formats"]), highlight=False)
    for n in d.get("notes", []):
        c.print(f"note: {n}", highlight=False)
    if not d["best"] or top < 1:
        return
    cols = [Col("mode", right=False), Col("weights", right=False, drop=4), Col("layout", right=False)]
    cols += [Col("GPUs", drop=3), Col("concurrency", drop=6), Col("TTFT"), Col("TPOT"), Col("tok/s", drop=7)]
    cols += [Col("tok/s/GPU"), Col("tok/s/user", drop=5)]
    cost = "usd_per_million_tokens" in d["best"]
    if cost:
        cols.append(Col("$/Mtok", drop=2))
    shown = pareto_rows_shown(d["pareto"], d["best"], top)
    rows = [_plan_cells(r, r == d["best"], cost) for r in shown]
    print_table(c, f"Pareto front ({len(d['pareto'])} configurations, {len(shown)} shown; * = best)", cols, rows)
    if any(r["mode"] == "disaggregated" for r in shown):
        c.print(
            "disagg: P = the prefill pool, D = the decode pool, each workers × layout; GPUs prefill+decode;"
            " concurrency = the benchmark clients of `llmath analyze --disagg`, TTFT and TPOT its closed loop's"
            " (the rate-matched grid's: --json grid; the decode pool's batch: --json decode_batch)",
            highlight=False,
        )
    sd = next((r["speculation"] for r in shown if r.get("speculation")), None)
    if sd:
        c.print(
            f"+sd = speculative decoding ({sd['method']}, k={sd['k']}, acceptance {sd['acceptance']:g} tokens per"
            " verify round); the other rows decode one token per step",
            highlight=False,
        )
    b = d["best"]
    c.print(
        f"best: {b['mode']}{', speculative' if b.get('speculation') else ''},"
        f" {b['weights']}, {plan_layout(b)} on {plan_gpus(b)} GPUs, concurrency"
        f" {b['concurrency']:.0f}: {si(b['throughput_tok_s_per_gpu'], 'tok/s')} per GPU, TTFT {ms(b['ttft_s'])},"
        f" TPOT {ms(b['tpot_s'])}",
        highlight=False,
    )


def pareto_rows_shown(rows: list[dict], best: dict, top: int) -> list[dict]:
    """``top`` rows spread evenly over the front (all of them when there are no more), the best included."""
    n = len(rows)
    if n <= top:
        return list(rows)
    idx = sorted({round(i * (n - 1) / (top - 1)) for i in range(top)} if top > 1 else {0})
    shown = [rows[i] for i in idx]
    if best in rows and best not in shown:  # the best replaces the shown row nearest to it on the front
        j = rows.index(best)
        k = min(range(len(idx)), key=lambda m: abs(idx[m] - j))
        shown[k] = best
    return shown


def plan_layout(r: dict) -> str:
    """'tp4 dp2' for an aggregated row; 'P 1×tp2, D 1×tp4' (prefill and decode pools, each decode replica's
    attention-DP ranks as its dp) for a disaggregated one."""
    if r.get("mode") == "disaggregated":
        r = {**r, "dp": r.get("decode_dp", 1)}  # the row's dp counts its decode workers
    one = " ".join(f"{k}{r[k]}" for k in ("tp", "pp", "ep", "dp") if r.get(k, 1) != 1 or k == "tp")
    if r.get("mode") != "disaggregated":
        return one
    return f"P {r['prefill_workers']}×tp{r['prefill_tp']}, D {r['decode_workers']}×{one}"


def plan_gpus(r: dict) -> str:
    """GPUs used; a disaggregated row as prefill + decode."""
    if r.get("mode") != "disaggregated":
        return str(r["gpus_used"])
    pre = r["prefill_workers"] * r["prefill_tp"]
    return f"{pre}+{r['gpus_used'] - pre}"


def _plan_cells(r: dict, best: bool, cost: bool) -> list[str]:
    mode = ("disagg" if r["mode"] == "disaggregated" else "agg") + ("+sd" if r.get("speculation") else "")
    mode += "*" if best else ""
    cells = [mode, r["weights"], plan_layout(r), plan_gpus(r), f"{r['concurrency']:.0f}", ms(r["ttft_s"])]
    cells += [ms(r["tpot_s"]), f"{r['throughput_tok_s']:,.0f}", f"{r['throughput_tok_s_per_gpu']:,.1f}"]
    cells += [f"{r['tok_s_per_user']:.1f}"]
    if cost:
        v = r.get("usd_per_million_tokens")
        cells.append("-" if v is None else f"{v:.3g}")
    return cells


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
