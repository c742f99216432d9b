"""The one output layer of the CLI: human tables (rich), JSON and CSV. Data to stdout, notes to stderr."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any

from llmath.validation import is_numpy

MAX_TABLE_ROWS = 2000


def _default(o):
    if is_numpy(o, "generic"):
        return o.item()
    if is_numpy(o, "ndarray"):
        return o.tolist()
    return str(o)


def to_json(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON: NumPy values converted, NaN/±Infinity written as ``null`` (JSON has no such numbers;
    e.g. the intensity of an operator that moves no bytes is 0/0): the parser reads them as ``None``, as
    :func:`llmath.validation.finite_or_none` would make them, without a second walk of the object."""
    text = json.dumps(obj, default=_default)
    return json.dumps(json.loads(text, parse_constant=_non_finite), indent=indent, allow_nan=False)


def _non_finite(constant: str) -> None:
    """What ``NaN``, ``Infinity`` and ``-Infinity`` become in strict JSON."""
    return None


def emit_json(obj: Any) -> None:
    sys.stdout.write(to_json(obj) + "\n")


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _console():
    from llmath.output.tables import console

    return console()


def note(msg: str) -> None:
    print(msg, file=sys.stderr)


def rows_csv(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    w = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]))
    w.writeheader()
    for r in rows:
        w.writerow({k: _default(v) if is_numpy(v, "generic") else v for k, v in r.items()})


def si(v: float | None, unit: str = "", digits: int = 3) -> str:
    """1.23e12 -> '1.23 T' + unit."""
    if v is None:
        return "-"
    v = float(v)
    if v == 0:
        return f"0 {unit}".strip()
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= p:
            return f"{v / p:.{digits}g} {s}{unit}"
    return f"{v:.{digits}g} {unit}".strip()


def ms(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t * 1e3:.3f} ms" if t < 10 else f"{t:.2f} s"


def gb(b: float | None) -> str:
    return "-" if b is None else f"{b / 1e9:.2f} GB"


def emit_rows(rows: list[dict[str, Any]], as_json: bool, title: str, columns: list[str]) -> None:
    if as_json:
        emit_json({"rows": rows})
        return
    from llmath.output.tables import Col, print_table

    if len(rows) > MAX_TABLE_ROWS:  # a terminal table of 10^6 rows takes minutes and helps nobody
        note(f"showing the first {MAX_TABLE_ROWS:,} of {len(rows):,} rows; --csv or --json print them all")
        rows = rows[:MAX_TABLE_ROWS]
    # the rightmost columns go first; known keys get a short header and a unit ("ttft_s" -> "TTFT", "12.3 ms")
    cols = [Col(HUMAN_KEYS.get(c, (c, None))[0], right=False, drop=i) for i, c in enumerate(columns)]
    cells = [[_human_cell(c, r.get(c)) for c in columns] for r in rows]
    print_table(_console(), title, cols, cells)


#: --json keys shown under a short header and in their unit in human tables (their JSON stays as it is).
HUMAN_KEYS: dict[str, tuple[str, Any]] = {
    "ttft_s": ("TTFT", lambda v: ms(v)),
    "tpot_s": ("TPOT", lambda v: ms(v)),
    "e2e_s": ("end-to-end", lambda v: ms(v)),
    "throughput_tok_s": ("tok/s", lambda v: si(v)),
    "throughput_tok_s_per_gpu": ("tok/s/GPU", lambda v: si(v)),
    "per_sequence_tok_s": ("tok/s/seq", lambda v: si(v)),
    "kv_peak_bytes": ("KV peak", lambda v: gb(v)),
    "memory_bytes": ("memory", lambda v: gb(v)),
}


def _human_cell(key: str, v) -> str:
    fmt = HUMAN_KEYS.get(key, (key, None))[1]
    return fmt(v) if fmt is not None and isinstance(v, (int, float)) and not isinstance(v, bool) else _cell(v)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def params_human(rep) -> None:
    from rich.table import Table

    c = _console()
    t = Table(title=f"{rep.model}: parameters by component (exact; tied weights once)")
    t.add_column("component")
    t.add_column("parameters", justify="right")
    t.add_column("share", justify="right")
    for k, v in rep.by_component.items():
        t.add_row(k, f"{v:,}", f"{v / rep.total:.2%}")
    t.add_row("[b]total[/b]", f"[b]{rep.total:,}[/b]", "100%")
    c.print(t)
    t2 = Table(title="per layer")
    t2.add_column("layer kind")
    t2.add_column("layers", justify="right")
    t2.add_column("params / layer", justify="right")
    for k, v in rep.per_layer.items():
        t2.add_row(k, str(rep.layer_counts[k]), f"{v:,}")
    c.print(t2)
    if rep.active_per_token != rep.total:
        c.print(
            f"active per token: {rep.active_per_token:,} ({rep.active_per_token / rep.total:.1%} of total; "
            f"one embedding row, routed experts not chosen excluded; {rep.active_per_token_with_embedding:,} "
            "with the whole embedding table)"
        )
    if rep.wrapper and rep.towers:
        c.print(
            f"a {rep.wrapper} wrapper: {', '.join(f'{k} {v:,}' for k, v in rep.towers.items())} counted in the "
            "total; active per token and the stages are its language model"
        )
    if rep.wrapper and not rep.towers:
        c.print(
            f"language model of a {rep.wrapper} wrapper: {', '.join(rep.towers_not_counted) or 'other towers'} "
            "not counted"
        )
    t3 = Table(title="closed-form estimates vs the exact count")
    t3.add_column("estimate")
    t3.add_column("value", justify="right")
    t3.add_column("error", justify="right")
    for k, v in rep.estimates.items():
        t3.add_row(k.replace("d2", "d²"), f"{v:,}", f"{rep.estimate_error[k]:+.2%}")
    c.print(t3)


def ops_human(spec, rep, scenario, attention: str, explain: bool) -> None:
    c = _console()
    _ops_table(c, spec, rep, scenario, attention)
    if explain:
        _explain_ops(c, spec, rep, scenario, attention)


def _ops_table(c, spec, rep, scenario, attention: str) -> None:
    """The per-operator table with its total row."""
    from llmath.output.tables import Col, print_table

    title = (
        f"{spec.name} {rep.stage}: B={scenario.B} T={scenario.T} S0={scenario.S0}"
        + (f" src={scenario.src}" if spec.is_encoder_decoder and rep.stage != "encoder" else "")
        + f", attention={attention} "
        "(FLOPs = 2 per multiply-add; bytes = compulsory traffic)"
    )
    cols = [Col("operator", right=False), Col("layers", right=False, drop=6), Col("signature", right=False, drop=10)]
    cols += [Col("×", drop=4), Col("matmul FLOPs"), Col("vector FLOPs", drop=7), Col("weights", drop=2)]
    cols += [Col("act in", drop=9), Col("act out", drop=8), Col("KV read", drop=3), Col("KV write", drop=5)]
    cols += [Col("intensity", drop=1)]
    if rep.ops and rep.ops[0].time_s is not None:
        cols += [Col("time"), Col("bound", right=False)]
    print_table(c, title, cols, _ops_rows(rep))


def _ops_rows(rep) -> list[list[str]]:
    """One row per operator, then the total."""
    rows = []
    for r in rep.ops:
        row = [
            r.name,
            r.layer_kind,
            r.signature,
            str(r.count),
            si(r.flops),
            si(r.vflops),
            si(r.bytes["weight"], "B"),
            si(r.bytes["act_in"], "B"),
            si(r.bytes["act_out"], "B"),
            si(r.bytes["kv_read"], "B"),
            si(r.bytes["kv_write"], "B"),
            _g(r.intensity),
        ]
        if r.time_s is not None:
            row += [ms(r.time_s), r.bound]
        rows.append(row)
    b = rep.bytes
    tot = [
        "[b]total[/b]",
        "",
        "",
        "",
        si(rep.flops["matmul"]),
        si(rep.flops["vector"]),
        si(b["weights"], "B"),
        si(b["act_in"], "B"),
        si(b["act_out"], "B"),
        si(b["kv_read"], "B"),
        si(b["kv_write"], "B"),
        f"{rep.intensity:.3g}",
    ]
    if rep.time_s is not None:
        tot += [ms(rep.time_s), rep.bound]
    rows.append(tot)
    return rows


def _explain_ops(c, spec, rep, scenario, attention: str) -> None:
    """Each operator's formulas with the numbers substituted, and its sizes."""
    from llmath.ops import build_ops
    from llmath.ops import explain as explain_op

    ops = build_ops(spec, rep.stage, attention)
    c.print(
        "[b]formulas[/b] (letters: B batch, T new tokens, S attended positions, D width, N query heads, "
        "K KV heads, G=N/K, H head width, F FFN width, V vocabulary, E experts, L logit rows, "
        "src source positions)"
    )
    for op in ops:
        for cls, label in (
            ("flops", "matmul FLOPs"),
            ("vflops", "vector FLOPs"),
            ("weight", "weight elems"),
            ("act_in", "act in elems"),
            ("act_out", "act out elems"),
            ("kv_read", "KV read elems"),
            ("kv_write", "KV write elems"),
        ):
            e = explain_op(op, scenario, spec, cls)
            if e:
                c.print(f"  {op.name:22s} {label:15s} {e}", highlight=False)
        if op.sizes:
            c.print("  " + " " * 22 + " where " + ", ".join(f"{k}={v:,}" for k, v in op.sizes), highlight=False)


def ops_csv(rep) -> None:
    rows = []
    for r in rep.ops:
        rows.append(
            {
                "name": r.name,
                "component": r.component,
                "kind": r.kind,
                "signature": r.signature,
                "count": r.count,
                "flops": r.flops,
                "vflops": r.vflops,
                **{f"bytes_{k}": v for k, v in r.bytes.items()},
                "intensity": r.intensity,
                "time_s": r.time_s,
                "bound": r.bound,
            }
        )
    rows_csv(rows)


def formats_line(pr: dict) -> str:
    """One line: each weight module's format and bytes per element (with its source), GEMM inputs, KV, and
    what the device runs each GEMM format as."""
    src = pr.get("sources", {})
    parts = []
    for m, f in pr.get("modules", {}).items():
        bpe = pr.get("module_bytes_per_element", {}).get(m)
        where = pr.get("module_sources", {}).get(m) or src.get("weights") or "default"
        parts.append(f"{m} {f} ({bpe:.4g} B/el; {where})" if bpe is not None else f"{m} {f}")
    line = "formats: " + ", ".join(parts)
    if pr.get("act_quant"):
        line += f"; GEMM inputs {pr['act_quant']}"
    line += f"; KV {pr.get('kv')} ({src.get('kv', 'default')})"
    ran = pr.get("compute") or {}
    if ran:
        line += "; GEMMs run in " + ", ".join(k if k == v else f"{k} as {v}" for k, v in ran.items())
    return line


def analysis_human(a, top: int = 8) -> None:
    """The human report of :func:`llmath.analysis.analyze`: header, KV cache, stages, generation, memory."""
    c = _console()
    _analysis_header(c, a)
    _kv_lines(c, a)
    if a.parallel:
        _layout_lines(c, a)
    _stage_table(c, a)
    if a.parallel and a.comm and a.comm.get("decode") is not None:
        _comm_table(c, a)
    if a.generation:
        _generation_lines(c, a, top)
    _closing_lines(c, a)


def _analysis_header(c, a) -> None:
    """The workload, the formats and the parameter count."""
    w = a.workload
    c.print(
        f"[b]{a.model}[/b] on [b]{a.hardware or 'no hardware'}[/b]: batch {w['batch']}, prompt {w['prompt']}, "
        f"gen {w['gen']}, attention {w['attention']}, weights {w['weights']} / activations {w['activations']} / "
        f"KV {w['kv_dtype']}"
        + (f", efficiency {a.efficiency.get('name')}" if a.efficiency else "")
        + (f" ({a.efficiency['rule']})" if a.efficiency.get("rule") else "")
    )
    if a.precision:
        c.print(formats_line(a.precision))
    p = a.params
    line = f"params {p.total:,}"
    if p.active_per_token != p.total:
        line += f" (active per token {p.active_per_token:,})"
    line += f"; 12·L·d² estimate {p.estimates['12Ld2']:,} ({p.estimate_error['12Ld2']:+.1%})"
    c.print(line)


def _kv_lines(c, a) -> None:
    """The KV cache per token, after prefill and at the end; an encoder-decoder's cross cache."""
    w = a.workload
    kv = a.kv_cache
    growth = ""
    if kv.get("windows_full_at"):
        growth = (
            f" ({kv['growth_bytes_per_token']:,} B per token once every sliding window is full, from "
            f"{kv['windows_full_at']:,} positions; the windows then hold {kv['window_bytes']:,} B)"
        )
    fixed = kv.get("fixed_bytes_per_sequence", 0)
    if fixed:  # state-space / recurrent mixers: a fixed-size state per sequence besides the KV cache
        ssm = (a.precision or {}).get("ssm_state")
        what = f"SSM state in {ssm['format']} ({ssm['source']}), conv" if ssm else "SSM and conv"
        growth += f" + {fixed:,} B of fixed state per sequence ({what} states)"
    c.print(
        f"KV cache: {kv['bytes_per_token']:,} B per token per sequence{growth}; {gb(kv['bytes'])} after prefill "
        f"({kv['positions_after_prefill']} positions × {w['batch']}), {gb(kv['peak_bytes'])} at the end"
    )
    if a.encoder is not None:
        c.print(
            f"encoder-decoder: prompt = {w['prompt']} source positions (tokens; Whisper: audio positions) through "
            "the encoder once; the decoder starts "
            f"from {w['decoder_prompt']} token(s); cross-attention cache {kv['cross_bytes_per_source_token']:,} B "
            f"per source token, {gb(kv['cross_bytes'])} fixed (included above)"
        )
    if w.get("images"):
        c.print(
            f"images: {w['images']} per request through the vision encoder (its pass joins the TTFT); "
            f"{kv['source_positions']:,} vision tokens cross-attended, cross-attention cache {gb(kv['cross_bytes'])}"
            " fixed (included above)"
        )


def _stage_table(c, a) -> None:
    """One row per stage: FLOPs, bytes, intensity, time and bound (with a layout: the time's split)."""
    from llmath.output.tables import Col, print_table

    title = "stages" + (" (per GPU; with pp > 1 summed over one GPU of each pipeline stage)" if a.parallel else "")
    cols = [Col("stage", right=False), Col("matmul FLOPs", drop=2), Col("vector FLOPs", drop=7), Col("bytes")]
    cols += [Col("weights", drop=5), Col("KV read", drop=6), Col("FLOP/B", drop=3), Col("time"), Col("bound")]
    if a.parallel:
        cols += [Col("compute", drop=8), Col("memory", drop=8), Col("comm", drop=4)]
    rows = [
        [
            label,
            si(s.flops["matmul"]),
            si(s.flops["vector"]),
            si(s.bytes["total"], "B"),
            si(s.bytes["weights"], "B"),
            si(s.bytes["kv_read"], "B"),
            f"{s.intensity:.3g}",
            ms(s.time_s),
            s.bound or "-",
            *((ms(s.compute_s), ms(s.memory_s), ms(s.comm_s)) if a.parallel else ()),
        ]
        for s, label in _stages(a)
    ]
    print_table(c, title, cols, rows)


def _generation_lines(c, a, top: int) -> None:
    """TTFT, TPOT, throughput and utilisation, then each stage's top operators."""
    g = a.generation
    c.print(
        f"TTFT {ms(g['ttft_s'])} | TPOT mean {ms(g['tpot_s'])} (first {ms(g['tpot_first_s'])}, "
        f"last {ms(g['tpot_last_s'])}) | end-to-end {ms(g['e2e_s'])}"
    )
    c.print(
        f"throughput {g['throughput_tok_s']:.1f} output tok/s aggregate, {g['per_sequence_tok_s']:.1f} per "
        f"sequence; prefill {g['prefill_tok_s']:.0f} tok/s; prefill uses "
        f"{g['utilisation']['prefill_flops_fraction']:.0%} of peak matmul FLOP/s"
        + (
            f", decode step 0 {g['utilisation']['decode_bandwidth_fraction']:.0%} of the memory bandwidth"
            if g["utilisation"]["decode_bandwidth_fraction"] is not None
            else " (no decode steps: gen = 1)"
        )
    )
    for s, label in _stages(a):
        _top_table(c, s, label, top)


def _top_table(c, s, label: str, top: int) -> None:
    """The ``top`` operators of stage ``s`` by time."""
    from llmath.output.tables import Col, print_table

    ranked = sorted(s.ops, key=lambda r: -(r.time_s or 0))[:top]
    cols = [Col("operator", right=False), Col("time"), Col("share"), Col("bound")]
    cols += [Col("FLOPs", drop=2), Col("bytes", drop=3), Col("FLOP/B", drop=1)]
    rows = [
        [
            r.name,
            ms(r.time_s),
            f"{r.time_s / s.time_s:.1%}",
            r.bound,
            si(r.flops + r.vflops),
            si(sum(r.bytes.values()), "B"),
            _g(r.intensity),
        ]
        for r in ranked
    ]
    print_table(c, f"top operators, {label}", cols, rows)


def _closing_lines(c, a) -> None:
    """Causal prefill FLOPs, the training step, memory fit and the warnings."""
    if a.prefill.flops["useful_matmul"] != a.prefill.flops["matmul"]:
        c.print(
            f"prefill matmul FLOPs executed {si(a.prefill.flops['matmul'])}, useful (causal) "
            f"{si(a.prefill.flops['useful_matmul'])}"
        )
    tr = a.training
    c.print(
        f"training step on the same {tr['tokens']:,} tokens: {si(tr['step_matmul'])} matmul FLOPs "
        f"(3 × forward; {si(tr['step_matmul_recompute'])} with full recomputation)"
    )
    m = a.memory
    line = (
        ("memory per GPU (busiest): " if a.parallel else "memory: ")
        + f"weights {gb(m.weights_bytes)} + KV {gb(m.kv_cache_bytes)} + activations "
        f"{gb(m.activation_bytes)} + reserve {gb(m.reserve_bytes)} = {gb(m.total_bytes)}"
    )
    if m.capacity_bytes is not None:
        verdict = "fits" if m.fits else f"does NOT fit: {gb(m.over_by_bytes)} over"
        longest = f"{m.max_context:,}" if m.max_context_bounded is not False else "not bounded by memory (fixed state)"
        line += f" of {gb(m.capacity_bytes)}: {verdict}; largest batch {m.max_batch}, longest context {longest}"
    c.print(line)
    for wmsg in a.warnings:
        note(f"warning: {wmsg}")


def _stages(a) -> list:
    """(stage report, label) in execution order; the encoder pass first for encoder-decoder models."""
    st = [(a.prefill, "decoder prefill" if a.encoder is not None else "prefill"), (a.decode, "decode step 0")]
    first = [(a.encoder, "encoder")] if a.encoder is not None else []
    return first + ([(a.vision, "vision (images)")] if getattr(a, "vision", None) is not None else []) + st


def _layout_lines(c, a) -> None:
    par = a.parallel
    c.print(
        f"layout: {par['gpus']} GPUs = tp {par['tp']} × pp {par['pp']} × dp {par['dp']}; experts ep {par['ep']} × "
        f"expert-tp {par['expert_tp']}; batch per replica {par['replica_batch']}; overlap {par['overlap']}"
        + (f" ({par['chosen']})" if par["chosen"] != "given" else "")
    )
    if par.get("topology"):
        tp_ = par["topology"]
        up, out_ = tp_["scale_up"], tp_["scale_out"]
        c.print(
            f"topology: {up['kind']} {si(up['bytes_per_s'], 'B/s')} per GPU per direction within {up['domain']} GPUs, "
            f"{out_['kind']} {si(out_['bytes_per_s'], 'B/s')} beyond"
            + (" (assumptions: --json parallel.topology.derived)" if tp_["derived"] else "")
        )
    for st in par["stages"]:
        c.print(
            f"  pp stage {st['index']}: layers {st['layers'][0]}-{st['layers'][1] - 1}, "
            f"{st['params']:,} params and {gb(st['per_gpu_bytes'])} per GPU"
        )


def _comm_table(c, a) -> None:
    from llmath.output.tables import Col, print_table

    passes = [
        (k, n) for k, n in (("encoder", "encoder"), ("prefill", "prefill"), ("decode", "decode-step")) if k in a.comm
    ]
    cols = [Col("collective", right=False), Col("kind", right=False, drop=1)]
    for i, (_, n) in enumerate(passes):  # the earlier passes' columns go first when the table is too wide
        cols += [Col(f"{n} bytes", drop=2 * (len(passes) - i)), Col(f"{n} time", drop=2 * (len(passes) - i) + 1)]
    per = [a.comm.get(k) or {} for k, _ in passes]
    rows = []
    for name in dict.fromkeys(n for p in per for n in p):
        cells = [p.get(name, {}) for p in per]
        kind = next((x.get("kind") for x in cells if x), "")
        rows.append([name, kind, *(v for x in cells for v in (si(x.get("bytes"), "B"), ms(x.get("time_s"))))])
    print_table(c, "communication per pass (per GPU)", cols, rows)
    if "decode_total_s" in a.comm:
        c.print(f"communication over all decode steps: {ms(a.comm['decode_total_s'])}")


def estimates_human(rep: dict) -> None:
    from rich.table import Table

    c = _console()
    for w in rep.get("warnings", []):
        note(f"warning: {w}")
    c.print(f"[b]{rep['model']}[/b]: L={rep['L']}, d={rep['d']}")
    enc = rep.get("encoder")
    if enc:
        c.print(
            f"encoder-decoder: L = the {rep['L']} decoder layers; the {enc['L']} encoder layers run once per "
            f"sequence over the {rep['prompt']} source tokens (--prompt): {enc['matmul']:,} matmul FLOPs for "
            f"batch {rep['batch']}; every generated token cross-attends those {rep['prompt']} positions"
        )
    t = Table(title="FLOPs per generated token: exact vs the rule 24·L·d² + 4·L·d·N")
    for col in ("context N", "exact matmul", "exact layers only", "24Ld²+4LdN", "error vs layers", "attention share"):
        t.add_column(col, justify="right")
    for r in rep["per_token"]:
        t.add_row(
            f"{r['context']:,}",
            f"{r['exact']:,}",
            f"{r['exact_layers']:,}",
            f"{r['estimate']:,}",
            f"{r['error']:+.2%}",
            f"{r['attention_share']:.1%}",
        )
    c.print(t)
    x = rep["crossover"]
    c.print(
        f"attention FLOPs overtake the rest at context N = {x['exact']:,} (exact, this model) vs 6d = {x['six_d']:,} "
        f"(the 6d rule; off by {x['error']:+.1%})"
    )
    b = rep["prefill_vs_loop"]
    c.print(
        f"prefill of {b['prompt']} tokens (one sequence, layers only, matmul FLOPs): batch prefill "
        f"(eager, N² pairs) {b['batch_eager']:,} vs token loop (N(N+1)/2 pairs) {b['loop']:,} FLOPs: "
        f"the batch form does {b['extra_fraction']:.2%} more; a causal "
        f"flash kernel does {b['batch_flash']:,}"
    )
    t = Table(title=f"arithmetic intensity over a generation (B={rep['batch']}, P={rep['prompt']})")
    for col in ("step", "context", "proj (weight GEMMs)", "act-to-act (attention)", "whole step"):
        t.add_column(col, justify="right")
    for r in rep["intensity"]:
        t.add_row(str(r["step"]), f"{r['context']:,}", f"{r['proj']:.3g}", f"{r['attention']:.3g}", f"{r['total']:.3g}")
    c.print(t)
    c.print(
        f"cumulative over the {max(rep['gen'] - 1, 1)} decode steps of a {rep['gen']}-token generation: "
        f"proj {rep['cumulative']['proj']:.3g}, attention {rep['cumulative']['attention']:.3g} FLOP/B"
    )
