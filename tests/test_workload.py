"""One workload (``Workload``) for analyze, serve, plan and serve_disaggregated, validated in one place.

Anchors: the rules of :mod:`llmath.validation` (MAX_TOKENS = 2**32 tokens, MAX_BATCH = 2**24 sequences) and
the load kinds written out in :mod:`llmath.deploy.workload`; bad values are refused where the workload is
made, the workload spelled out as keywords is refused naming the Workload to pass, and a field an entry point
does not use is refused, never ignored.
"""

from __future__ import annotations

import re

import pytest

import llmath
from llmath import Workload
from llmath.deploy.disagg import serve_disaggregated
from llmath.deploy.plan import plan
from llmath.deploy.service import serve
from llmath.errors import WorkloadError


def test_it_is_exported_and_resolves_the_load_and_its_arrival():
    assert llmath.Workload is Workload
    w = Workload()  # no load given: a static batch of one 512-token prompt, 128 tokens out
    assert (w.batch, w.prompt, w.gen, w.concurrency, w.rate, w.arrival, w.static) == (
        1,
        512,
        128,
        None,
        None,
        None,
        True,
    )
    assert Workload(concurrency=8).arrival == "closed"  # a concurrency: benchmark clients' closed loop
    assert Workload(rate=2.5).arrival == "poisson"  # a rate: vLLM benchmark_serving's Poisson arrivals
    assert Workload(concurrency=8, arrival="offline").offline
    assert Workload(prompt=2.0).prompt == 2 and type(Workload(prompt=2.0).prompt) is int


@pytest.mark.parametrize(
    "kw, rule",
    [
        (dict(prompt=0), "prompt=0 must be an integer in [1, 4,294,967,296]"),
        (dict(gen=2.5), "gen=2.5 must be an integer"),
        (dict(batch=True), "batch=True must be an integer"),
        (dict(batch=2**24 + 1), "batch=16777217 must be an integer in [1, 16,777,216]"),
        (dict(prefix=-1), "prefix=-1 must be an integer in [0, 4,294,967,296]"),
        (dict(prefix_hit=1.5), "prefix_hit=1.5 must be a finite number in [0, 1]"),
        (dict(images=-1), "images=-1 must be an integer in [0, "),
        (dict(decoder_prompt=0), "decoder_prompt=0 must be an integer in [1, "),
        (dict(concurrency=0.5), "concurrency=0.5 must be a finite number in [1, "),
        (dict(rate=0), "rate=0 must be a finite number in (0, "),
        (dict(rate=float("inf")), "rate=inf must be a finite number"),
        (dict(concurrency=8, rate=1), "concurrency=8, rate=1: give exactly one of concurrency (closed loop), rate"),
        (dict(batch=4, concurrency=8), "concurrency=8, batch=4: give exactly one of"),
        (dict(concurrency=8, arrival="burst"), "arrival='burst' must be one of closed, staggered, poisson, offline"),
        (dict(concurrency=8, arrival="poisson"), "arrival='poisson' needs --rate"),
        (dict(rate=2, arrival="offline"), "arrival='offline' needs --concurrency"),
        (dict(arrival="closed"), "arrival='closed' applies to a serving load; give concurrency= or rate="),
        (dict(gen_dist=[(64,)]), "gen_dist entry (64,) must be a (length, weight) pair"),
        (dict(gen_dist=[(0, 1.0)]), "gen_dist length=0 must be an integer in [1, "),
        (dict(prompts_per_client=0), "prompts_per_client=0 must be a finite number in (0, "),
    ],
)
def test_bad_values_are_refused_where_the_workload_is_made(kw, rule):
    with pytest.raises(WorkloadError, match="^" + re.escape(rule)) as e:
        Workload(**kw)
    assert "\n" not in str(e.value)


def test_it_is_frozen():
    with pytest.raises(AttributeError):
        Workload().prompt = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    "call, said",
    [
        (lambda: llmath.analyze("llama-3.1-8b", "h100-sxm", batch=8, prompt=256), "batch=8, prompt=256"),
        (lambda: serve("llama-3-8b", "h100-sxm", prompt=64, gen=8, concurrency=4), "prompt=64, gen=8, concurrency=4"),
        (lambda: plan("llama-3-8b", "h100-sxm", gpus=2, prompt=64, gen=8), "prompt=64, gen=8"),
        (lambda: serve_disaggregated("llama-3-8b", "h100-sxm", prompt=64, gen=8, concurrency=4, prefill={},
                                     decode={}), "prompt=64, gen=8, concurrency=4"),
    ],
)  # fmt: skip
def test_the_workload_keywords_are_refused_naming_the_workload(call, said):
    with pytest.raises(WorkloadError, match=rf"^{re.escape(said)}: pass the workload as workload=Workload\("):
        call()


def test_the_offline_keyword_names_the_arrival_to_give():
    with pytest.raises(WorkloadError, match=r"offline=True.*|arrival='offline': pass the workload as"):
        serve("llama-3-8b", "h100-sxm", workload=Workload(concurrency=4), offline=True)


@pytest.mark.parametrize(
    "call, said",
    [
        (lambda: llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(concurrency=8)),
         r"^Workload\(concurrency=8.0\): analyze\(\) does not use concurrency; analyze\(\) runs a static batch"),
        (lambda: llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(prefix_hit=0.5)),
         r"^Workload\(prefix_hit=0.5\): analyze\(\) does not use prefix_hit; give the cached tokens"),
        (lambda: serve("llama-3-8b", "h100-sxm", workload=Workload(batch=4)),
         r"^Workload\(batch=4\): serve\(\) does not use batch; the serving load is concurrency= or rate="),
        (lambda: serve("llama-3-8b", "h100-sxm", workload=Workload(prefix=64, concurrency=4)),
         r"^Workload\(prefix=64\): serve\(\) does not use prefix; give prefix_hit"),
        (lambda: serve("llama-3-8b", "h100-sxm", workload=Workload()), r"^give exactly one of concurrency"),
        (lambda: plan("llama-3-8b", "h100-sxm", gpus=2, workload=Workload(concurrency=8)),
         r"^Workload\(concurrency=8.0\): plan\(\) does not use concurrency; plan searches every concurrency"),
        (lambda: plan("llama-3-8b", "h100-sxm", gpus=2), r"^llmath.plan\(\) needs workload=Workload\("),
        (lambda: serve_disaggregated("llama-3-8b", "h100-sxm", workload=Workload(rate=2), prefill={}, decode={}),
         r"^Workload\(rate=2.0\): serve_disaggregated\(\) does not use rate"),
        (lambda: llmath.analyze("llama-3-8b", "h100-sxm", workload={"prompt": 64}),
         r"^workload=\{'prompt': 64\} must be a llmath.Workload"),
    ],
)  # fmt: skip
def test_a_field_an_entry_point_does_not_use_is_refused(call, said):
    with pytest.raises(WorkloadError, match=said):
        call()


def test_the_same_workload_gives_analyze_and_serve_the_same_request():
    # one request alone (concurrency 1) is the static batch of one: the same prefill pass, hence the same
    # TTFT before the engine's overheads (ideal efficiency: the roofline, no per-step terms)
    a = llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(prompt=1024, gen=2), efficiency_mode="ideal")
    w = Workload(prompt=1024, gen=2, concurrency=1)
    s = serve("llama-3-8b", "h100-sxm", workload=w, efficiency_mode="ideal", cuda_graphs=False)
    assert s.workload["prompt"] == a.workload["prompt"] == 1024 and s.workload["concurrency"] == 1
    assert s.workload["arrival"] == "closed"
