"""One parallel config (``ParallelConfig``) for analyze, serve and plan, validated in one place.

Anchors: the same layout spelled out as keywords (the path the rest of the suite proves) and
:func:`~llmath.deploy.layout.make_layout`; the config must give exactly what they give, and refuse what they
refuse with the same rule.
"""

from __future__ import annotations

import pytest

import llmath
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.plan import plan
from llmath.deploy.service import serve
from llmath.errors import LayoutError, WorkloadError
from llmath.model.registry import resolve


def test_it_is_exported_and_fits_a_model_as_make_layout_does():
    spec = resolve("mixtral-8x7b")
    assert llmath.ParallelConfig is ParallelConfig
    # gpus alone on an MoE model: TP = 8 attention, EP = 8 experts (vLLM --enable-expert-parallel)
    assert ParallelConfig(gpus=8).layout(spec) == make_layout(spec, gpus=8)
    assert ParallelConfig(tp=2, pp=2, overlap="none").layout(spec) == make_layout(spec, tp=2, pp=2)


@pytest.mark.parametrize(
    "kw, rule",
    [
        (dict(tp=0), "--tp=0 must be a positive integer"),
        (dict(gpus=2.5), "--gpus=2.5 must be a positive integer"),
        (dict(dp=True), "--dp=True must be a positive integer"),
        (dict(overlap="both"), "overlap='both' must be one of none, tbo"),
    ],
)
def test_bad_degrees_are_refused_where_the_config_is_made(kw, rule):
    with pytest.raises(LayoutError, match=rule.replace("(", r"\(").replace(".", r"\.")):
        ParallelConfig(**kw)


def test_analyze_takes_the_config_as_it_takes_the_keywords():
    kw = dict(batch=4, prompt=256, gen=32)
    a = llmath.analyze("llama-3.1-8b", "h100-sxm", parallel=ParallelConfig(tp=2, pp=2), **kw)
    b = llmath.analyze("llama-3.1-8b", "h100-sxm", tp=2, pp=2, **kw)
    assert a.generation == b.generation and a.parallel == b.parallel
    assert a.memory.per_gpu_bytes == b.memory.per_gpu_bytes


def test_the_layout_is_given_once():
    with pytest.raises(LayoutError, match="give the layout once"):
        llmath.analyze("llama-3.1-8b", "h100-sxm", tp=2, parallel=ParallelConfig(tp=2))
    with pytest.raises(LayoutError, match="must be a ParallelConfig"):
        llmath.analyze("llama-3.1-8b", "h100-sxm", parallel={"tp": 2})


def test_serve_takes_the_config_as_it_takes_the_keywords():
    kw = dict(prompt=512, gen=64, concurrency=8)
    a = serve("llama-3-8b", "h100-sxm", parallel=ParallelConfig(tp=2), **kw)
    b = serve("llama-3-8b", "h100-sxm", tp=2, **kw)
    assert a.metrics == b.metrics and a.layout == b.layout and a.gpus == b.gpus == 2


def test_plan_pins_the_config_degrees():
    kw = dict(gpus=2, prompt=512, gen=64)
    a = plan("llama-3-8b", "h100-sxm", parallel=ParallelConfig(tp=2), **kw)
    b = plan("llama-3-8b", "h100-sxm", tp=2, **kw)
    assert a.best is not None and b.best is not None
    assert {k: v for k, v in a.best.items() if k != "seconds"} == {k: v for k, v in b.best.items() if k != "seconds"}
    with pytest.raises(WorkloadError, match="give the GPUs once|without overlap"):
        plan("llama-3-8b", "h100-sxm", parallel=ParallelConfig(gpus=4), **kw)


LAYOUT_KEYWORDS = {"gpus", "tp", "pp", "ep", "dp", "overlap"}


@pytest.mark.parametrize(
    "module, name, args",
    [
        ("llmath.analysis", "analyze", ["analyze", "llama-3-8b", "-H", "h100-sxm", "--tp", "2"]),
        ("llmath.deploy.service", "serve", ["analyze", "llama-3-8b", "-H", "h100-sxm", "--tp", "2", "-c", "8"]),
        ("llmath.deploy.plan", "plan", ["plan", "llama-3-8b", "-H", "h100-sxm", "--gpus", "2", "--tp", "2"]),
    ],
)
def test_the_command_line_passes_one_config_down(monkeypatch, capsys, module, name, args):
    """The flags become one ParallelConfig the library receives as ``parallel=`` (no degree spelled out; plan's
    ``gpus`` is the budget it searches on, beside the degrees it pins)."""
    import importlib

    from helpers import run_cli

    mod = importlib.import_module(module)
    real, seen = getattr(mod, name), {}

    def spy(*a, **kw):
        seen.update(kw)
        return real(*a, **kw)

    monkeypatch.setattr(mod, name, spy)
    code, _, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    assert seen["parallel"] == ParallelConfig(tp=2)
    assert not (LAYOUT_KEYWORDS - ({"gpus"} if name == "plan" else set())) & seen.keys()
