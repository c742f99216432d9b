"""One parallel config (``ParallelConfig``) for analyze, serve and plan, validated in one place.

Anchors: the degrees asked for, and the rule of :func:`~llmath.deploy.layout.make_layout` written out (vLLM
``--tensor-parallel-size N --enable-expert-parallel``); bad degrees are refused where the config is made, and
the layout spelled out as keywords is refused with the config to pass instead.
"""

from __future__ import annotations

import pytest

import llmath
from llmath import Workload
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.plan import plan
from llmath.deploy.service import serve
from llmath.errors import LayoutError, WorkloadError
from llmath.model.registry import resolve


def test_it_is_exported_and_fits_a_model_as_make_layout_does():
    spec = resolve("mixtral-8x7b")
    assert llmath.ParallelConfig is ParallelConfig
    # gpus alone on an MoE model: TP = 8 attention, EP = 8 experts (vLLM --enable-expert-parallel; 8 experts)
    lay = ParallelConfig(gpus=8).layout(spec)
    assert (lay.tp, lay.pp, lay.dp, lay.ep) == (8, 1, 1, 8)
    assert lay == make_layout(spec, ParallelConfig(gpus=8))
    lay = make_layout(spec, ParallelConfig(tp=2, pp=2))
    assert (lay.tp, lay.pp, lay.dp, lay.ep, lay.gpus) == (2, 2, 1, 1, 4)


@pytest.mark.parametrize(
    "kw, rule",
    [
        (dict(tp=0), "tp=0 must be an integer in [1, 65,536]"),
        (dict(gpus=2.5), "gpus=2.5 must be an integer"),
        (dict(dp=True), "dp=True must be an integer"),
        (dict(pp=2**16 + 1), "pp=65537 must be an integer in [1, 65,536]"),  # 65,536 GPUs: MAX_DEGREE
        (dict(overlap="both"), "overlap='both' must be one of none, tbo"),
        (dict(overlap="tbo"), "overlap='tbo' applies to multi-GPU layouts"),
    ],
)
def test_bad_degrees_are_refused_where_the_config_is_made(kw, rule):
    with pytest.raises(LayoutError, match=rule.replace("(", r"\(").replace(".", r"\.").replace("[", r"\[")):
        ParallelConfig(**kw)


def test_a_whole_number_is_kept_as_an_int():
    par = ParallelConfig(tp=2.0)
    assert par.tp == 2 and type(par.tp) is int


@pytest.mark.parametrize(
    "call, kwargs, said",
    [
        (lambda **kw: llmath.analyze("llama-3.1-8b", "h100-sxm", **kw), {"tp": 8}, "tp=8"),
        (lambda **kw: serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=64, gen=8, concurrency=4), **kw),
         {"tp": 2, "pp": 2}, "tp=2, pp=2"),
        (lambda **kw: plan("llama-3-8b", "h100-sxm", gpus=2, workload=Workload(prompt=64, gen=8), **kw), {"dp": 2},
         "dp=2"),
        (lambda **kw: llmath.analyze("mixtral-8x7b", "h100-sxm", **kw), {"gpus": 4, "overlap": "tbo"},
         "gpus=4, overlap='tbo'"),
    ],
)  # fmt: skip
def test_the_layout_keywords_are_refused_naming_the_config(call, kwargs, said):
    with pytest.raises(LayoutError, match=rf"^{said}: pass the layout as parallel=ParallelConfig\({said}\)$"):
        call(**kwargs)


def test_a_config_is_what_the_layout_takes():
    with pytest.raises(LayoutError, match="must be a ParallelConfig"):
        llmath.analyze("llama-3.1-8b", "h100-sxm", parallel={"tp": 2})
    with pytest.raises(LayoutError, match="must be a ParallelConfig"):
        serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=64, gen=8, concurrency=4), parallel={"tp": 2})
    with pytest.raises(LayoutError, match="the layout is a ParallelConfig"):
        make_layout(resolve("llama-3-8b"), 2)  # the old positional gpus


def test_analyze_serve_and_plan_run_the_degrees_asked_for():
    a = llmath.analyze(
        "llama-3.1-8b", "h100-sxm", workload=Workload(batch=4, prompt=256, gen=32), parallel=ParallelConfig(tp=2, pp=2)
    )
    assert (a.parallel["tp"], a.parallel["pp"], a.parallel["gpus"]) == (2, 2, 4)
    s = serve(
        "llama-3-8b", "h100-sxm", workload=Workload(prompt=512, gen=64, concurrency=8), parallel=ParallelConfig(tp=2)
    )
    assert s.layout["tp"] == 2 and s.gpus == 2
    kw = dict(workload=Workload(prompt=512, gen=64), gpus=2)
    p = plan("llama-3-8b", "h100-sxm", parallel=ParallelConfig(tp=2), **kw)
    assert p.best is not None and p.best["tp"] == 2
    with pytest.raises(WorkloadError, match="without overlap"):
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
