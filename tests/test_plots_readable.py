"""Plots people can read: titles and units, the "does not fit" region visible, roofline labels that do not
overprint, the plan's Pareto points labelled with their layout and format and the TPOT target drawn."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from llmath import (
    Workload,
    plots,  # noqa: E402
)
from llmath.analysis import analyze  # noqa: E402
from llmath.deploy.layout import ParallelConfig  # noqa: E402
from llmath.deploy.plan import plan  # noqa: E402
from llmath.sweep import parse_axis, run_sweep  # noqa: E402


@pytest.fixture
def kept_figure(monkeypatch):
    """The figure a plot function drew (it closes it after saving; here closing is a no-op)."""
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)
    plt.close("all")
    yield lambda: plt.figure(plt.get_fignums()[-1])
    for n in plt.get_fignums():
        matplotlib.pyplot.figure(n).clear()


def test_sweep_plot_title_units_and_visible_no_fit(tmp_path, kept_figure):
    # llama-3.1-70b bf16 (141 GB of weights) on 2 × 80 GB: batch 512 × 4,352 positions × 327,680 B/token of KV
    # (80 layers × 8 KV heads × 128 × 2 × 2 B) = 730 GB does not fit; batch 1 does
    axes = {"batch": parse_axis("--batch", "1,8,64,512"), "prompt": parse_axis("--prompt", "4096"),
            "gen": parse_axis("--gen", "256")}  # fmt: skip
    rows = run_sweep("llama-3.1-70b", "h100-sxm", axes, "flash", None, "expected", ParallelConfig(gpus=2))
    assert rows[0]["fits"] and not rows[-1]["fits"]
    plots.sweep_plot(rows, axes, str(tmp_path / "s.png"), "llama-3.1-70b on h100-sxm")
    fig = kept_figure()
    ax1, ax2 = fig.axes
    assert fig._suptitle.get_text() == "llama-3.1-70b on h100-sxm"
    assert "ms" in ax1.get_ylabel() and "tokens/s" in ax2.get_ylabel() and ax1.get_xlabel() == "batch (sequences)"
    for ax in (ax1, ax2):  # a shaded band of non-zero width around the batch that does not fit, on both panels
        bands = [p for p in ax.patches if isinstance(p, Rectangle) or p.get_label() == "does not fit in memory"]
        assert bands
        ext = bands[-1].get_window_extent(fig.canvas.get_renderer())
        assert ext.width > 5 and bands[-1].get_alpha() >= 0.1


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_roofline_labels_do_not_overprint(tmp_path, kept_figure):
    a = analyze("llama-3.1-8b", "h100-sxm")
    plots.roofline_plot(a, str(tmp_path / "r.png"))
    fig = kept_figure()
    r = fig.canvas.get_renderer()
    labels = [t for t in fig.axes[0].texts if "." in t.get_text() and "ridge" not in t.get_text()]
    assert len(labels) >= 6  # the top operators of both stages are named
    boxes = [Text.get_window_extent(t, r) for t in labels]  # the text alone, not its leader line
    assert not any(_overlaps(boxes[i], boxes[j]) for i in range(len(boxes)) for j in range(i))
    # ffn.gate and ffn.up sit on one point (same shape, same roofline time): one label names both
    assert any("ffn.gate" in t.get_text() and "ffn.up" in t.get_text() for t in labels)


def test_pareto_points_labelled_and_tpot_target_drawn(tmp_path, kept_figure):
    res = plan("llama-3.1-70b", "h100-sxm", gpus=8, workload=Workload(prompt=1024, gen=256), tpot_ms=50.0).to_dict()
    plots.pareto_plot(res, str(tmp_path / "p.png"))
    ax = kept_figure().axes[0]
    texts = [t.get_text() for t in ax.texts]
    best = res["best"]
    assert any(t.startswith(f"{best['weights']} tp{best['tp']}") for t in texts)
    # the TPOT target as tokens/s per user: 1000 / 50 ms = 20
    assert any(list(line.get_xdata()) == [20.0, 20.0] for line in ax.lines)
    assert any("TPOT ≤ 50 ms" in t.get_text() for t in ax.get_legend().get_texts())
