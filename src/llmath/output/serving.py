"""Human tables for serving reports (``analyze --concurrency/--rate``) and plans (``llmath plan``)."""

from __future__ import annotations

from typing import Any

from llmath.output import _console, gb, ms, si


def serving_human(d: dict[str, Any]) -> None:
    """One serving report: the engine, memory, and the latency/throughput metrics."""
    from rich.table import Table

    c = _console()
    e, w, m = d["engine"], d["workload"], d["memory"]
    c.print(
        f"[b]{d['model']}[/b] on {d['gpus']} × {d['hardware']}, {e['name']} (budget {e['max_num_batched_tokens']}"
        f" tokens, max_num_seqs {e['max_num_seqs']}): prompt {w['prompt']}, gen {w['gen']},"
        f" concurrency {w['concurrency']:.4g}" + (f", rate {w['rate']:g}/s" if w.get("rate") else ""),
        highlight=False,
    )
    c.print(
        f"memory per replica: weights {gb(m['weights_bytes'])}, activations {gb(m['activation_bytes'])},"
        f" KV pool {gb(m['kv_pool_bytes'])} = {m['max_requests_by_kv']} requests of {gb(m['kv_bytes_per_request'])};"
        f" {m['max_resident']} run at once",
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
    for k, v in rows:
        t.add_row(k, v)
    c.print(t)
    for n in d.get("notes", []):
        c.print(f"note: {n}", highlight=False)
