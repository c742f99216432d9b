"""Plots (optional extra ``plot``: matplotlib): the roofline chart, sweep curves, memory vs context.

Each function writes one PNG or SVG file and returns its path; nothing is shown on screen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llmath.errors import WorkloadError


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        raise WorkloadError("plots need matplotlib: pip install 'llmath[plot]'") from None
    return plt


def _check_path(path: str) -> Path:
    p = Path(path)
    if p.suffix.lower() not in (".png", ".svg"):
        raise WorkloadError(f"--plot {path!r}: the file must end in .png or .svg")
    return p


def roofline_plot(a, path: str) -> Path:
    """Every operator of the prefill and of decode step 0 as a point (intensity, achieved FLOP/s) under the
    device's roofline (dense matmul peak of the compute dtype, and the bandwidth slope)."""
    from llmath.hardware import get

    p = _check_path(path)
    if a.hardware is None:
        raise WorkloadError("the roofline plot needs --hardware")
    plt = _plt()
    hw = get(a.hardware) if isinstance(a.hardware, str) else a.hardware
    peak = hw.peak(a.workload["activations"])
    bw = hw.memory_bandwidth_bytes_per_s
    fig, ax = plt.subplots(figsize=(9, 6))
    x = np.logspace(-2, 5, 200)
    ax.plot(x, np.minimum(peak, x * bw), "k-", lw=2, label=f"roofline: {peak / 1e12:.0f} TFLOP/s, {bw / 1e12:.2f} TB/s")
    ax.axvline(peak / bw, color="grey", ls=":", lw=1)
    ax.text(peak / bw, peak * 1.15, f"ridge {peak / bw:.0f} FLOP/B", ha="center", fontsize=8, color="grey")
    for stage, marker, color in ((a.prefill, "o", "tab:blue"), (a.decode, "s", "tab:orange")):
        pts = [
            (r.intensity, (r.flops + r.vflops) / r.time_s, r.name, r.time_s)
            for r in stage.ops
            if r.time_s and (r.flops + r.vflops) > 0 and np.isfinite(r.intensity)
        ]
        if not pts:
            continue
        xs, ys, names, ts = zip(*pts, strict=True)
        size = 20 + 300 * np.asarray(ts) / max(ts)
        label = "prefill" if stage.stage == "prefill" else "decode step 0"
        ax.scatter(xs, ys, s=size, marker=marker, color=color, alpha=0.6, label=f"{label} (size = time)")
        _label_top(ax, xs, ys, names, ts, color, (0.62, 0.82) if stage.stage == "prefill" else (0.40, 0.45))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved FLOP/s")
    w = a.workload
    ax.set_title(f"{a.model} on {hw.name}: B={w['batch']}, P={w['prompt']}, {w['activations']}, {w['attention']}")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def _label_top(ax, xs, ys, names, ts, color, column: tuple[float, float], top: int = 5) -> None:
    """Name the ``top`` operators by time in a column of labels starting at ``column`` (axes fraction), each
    joined to its point by a leader line; operators at the same point (ffn.gate and ffn.up often coincide)
    share one label, so no label overprints another."""
    groups: dict[tuple[float, float], list[int]] = {}
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        groups.setdefault((round(float(np.log10(x)), 2), round(float(np.log10(y)), 2)), []).append(i)
    ranked = sorted(groups.values(), key=lambda g: -sum(ts[i] for i in g))[:top]
    ranked.sort(key=lambda g: -ys[g[0]])  # the highest point gets the highest label: leader lines do not cross
    for k, g in enumerate(ranked):
        text = ", ".join(names[i] for i in g[:3]) + (f" +{len(g) - 3}" if len(g) > 3 else "")
        ax.annotate(
            text,
            (xs[g[0]], ys[g[0]]),
            xytext=(column[0], column[1] - 0.05 * k),
            textcoords="axes fraction",
            fontsize=7,
            color=color,
            va="center",
            arrowprops={"arrowstyle": "-", "color": color, "lw": 0.6, "alpha": 0.7},
        )


#: The swept axes' units, for the x label.
AXIS_UNITS = {"batch": "batch (sequences)", "prompt": "prompt (tokens)", "gen": "generated tokens"}


def _shade_no_fit(ax, xs: list, fits: list[bool], label: str | None) -> None:
    """Shade each swept value that does not fit, half-way to its neighbours on the log axis."""
    lx = np.log2(np.asarray(xs, dtype=float))
    half = float(np.min(np.diff(lx))) / 2 if len(lx) > 1 else 0.5
    for x, ok in zip(lx, fits, strict=True):
        if not ok:
            ax.axvspan(2 ** (x - half), 2 ** (x + half), color="red", alpha=0.15, hatch="//", lw=0, label=label)
            label = None


def sweep_plot(rows: list[dict], axes: dict[str, np.ndarray], path: str, title: str = "") -> Path:
    """TTFT, TPOT and aggregate throughput against the swept axis (the first with several values); swept values
    that do not fit in memory shaded."""
    p = _check_path(path)
    plt = _plt()
    swept = [k for k, v in axes.items() if len(v) > 1] or ["batch"]
    xk = swept[0]
    others = [k for k in swept[1:]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in others), []).append(r)
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: r[xk])
        xs = [r[xk] for r in rs]
        suffix = "" if not others else " (" + ", ".join(f"{k}={v}" for k, v in zip(others, key, strict=True)) + ")"
        ax1.plot(xs, [r["ttft_s"] * 1e3 for r in rs], "o-", label="TTFT" + suffix)
        ax1.plot(xs, [r["tpot_s"] * 1e3 for r in rs], "s--", label="TPOT" + suffix)
        ax2.plot(xs, [r["throughput_tok_s"] for r in rs], "o-", label="throughput" + suffix)
        fits = [bool(r["fits"]) for r in rs]
        if not all(fits):
            for ax in (ax1, ax2):
                _shade_no_fit(ax, xs, fits, "does not fit in memory" if ax is ax2 or not others else None)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(AXIS_UNITS.get(xk, xk))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_yscale("log")
    ax1.set_ylabel("TTFT and TPOT (ms, log scale)")
    ax1.set_title("latency")
    ax2.set_ylabel("output tokens/s (aggregate)")
    ax2.set_title("throughput")
    fig.suptitle(title or f"latency and throughput vs {xk}")
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def memory_plot(spec, hw, batch: int, precision, path: str, attention: str = "flash", max_context: int | None = None):
    """Memory breakdown (weights, KV cache, activations) against total context, with the device capacity."""
    from llmath.analysis import activation_peak_bytes, kv_cache_bytes
    from llmath.ops.params import weight_bytes

    p = _check_path(path)
    plt = _plt()
    top = max_context or (spec.max_positions or 131072)
    ctx = np.unique(np.logspace(7, np.log2(top), 60, base=2).astype(np.int64))
    weights = np.full(ctx.shape, float(sum(weight_bytes(spec, precision).values())))
    kv = kv_cache_bytes(spec, batch, ctx, precision)
    act = activation_peak_bytes(spec, batch, ctx, attention, precision)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ax.stackplot(
        ctx, weights / 1e9, kv / 1e9, act / 1e9, labels=["weights", "KV cache", "activations (prefill peak)"], alpha=0.8
    )
    if hw is not None:
        ax.axhline(hw.memory_bytes / 1e9, color="k", ls="--", label=f"{hw.name} capacity")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (prompt + generated tokens)")
    ax.set_ylabel("GB")
    ax.set_title(f"{spec.name}: memory vs context, batch {batch}, weights {precision.weights}, KV {precision.kv}")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def pareto_plot(result: dict, path: str) -> Path:
    """``llmath plan``: every Pareto configuration as tokens/s per GPU against tokens/s per user, by mode, each
    run of one layout and format labelled where it starts, the targets drawn (TPOT as the line 1000 / TPOT
    tokens/s per user; configurations over the TTFT target hollow) and the chosen best configuration marked."""
    from llmath.output.serving import plan_layout

    p = _check_path(path)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 6.5))
    rows = result["pareto"]
    t = result.get("targets") or {}
    for mode, marker in (("aggregated", "o-"), ("disaggregated", "s--")):
        pts = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["tok_s_per_user"])
        if not pts:
            continue
        xs, ys = [r["tok_s_per_user"] for r in pts], [r["throughput_tok_s_per_gpu"] for r in pts]
        (line,) = ax.plot(xs, ys, marker, ms=4, label=mode)
        over = [r for r in pts if t.get("ttft_ms") and r["ttft_s"] * 1e3 > t["ttft_ms"]]
        if over:
            ox, oy = [r["tok_s_per_user"] for r in over], [r["throughput_tok_s_per_gpu"] for r in over]
            label = f"{mode}: TTFT over {t['ttft_ms']:g} ms"
            ax.plot(ox, oy, marker[0], ms=7, mfc="white", color=line.get_color(), label=label)
        _label_runs(ax, pts, plan_layout, line.get_color())
    b = result.get("best")
    if b:
        ax.plot([b["tok_s_per_user"]], [b["throughput_tok_s_per_gpu"]], "r*", ms=14, label="best under the targets")
    if t.get("tpot_ms"):
        ax.axvline(1e3 / t["tpot_ms"], color="grey", ls=":", label=f"TPOT ≤ {t['tpot_ms']:g} ms (right of the line)")
    ax.set_xlabel("tokens/s per user (1 / TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{result['model']} on {result['gpus']} × {result['hardware']}: Pareto front")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p


def _label_runs(ax, pts: list[dict], layout, color) -> None:
    """Label the first point of each run of one (format, layout) along the front, alternating above and below."""
    prev = None
    for k, r in enumerate(pts):
        key = (r["weights"], layout(r))
        if key == prev:
            continue
        prev = key
        ax.annotate(
            f"{key[0]} {key[1]}",
            (r["tok_s_per_user"], r["throughput_tok_s_per_gpu"]),
            xytext=(6, 10 if k % 2 == 0 else -14),
            textcoords="offset points",
            fontsize=7,
            color=color,
        )
