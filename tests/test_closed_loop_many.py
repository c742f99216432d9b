"""Several replicas' closed loops in one evaluation give each replica's own closed loop, number for number: the
oracle is :func:`llmath.deploy.closed_loop.lockstep_state` called once per replica."""

import dataclasses

import numpy as np
import pytest

from llmath.deploy import engines
from llmath.deploy.closed_loop import lockstep_state
from llmath.deploy.closed_loop_many import lockstep_states
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.serving import Decoding, Requests, memory
from llmath.deploy.speculative import Speculation, draft_device
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H200 = get("h200")
EFF = efficiency("expected", H200)


def _device(model: str, p: Precision, tp: int = 1, pp: int = 1, dp: int = 1, ep: int = 1) -> Device:
    spec = resolve(model)
    lay = make_layout(spec, ParallelConfig(None, tp, pp, ep, dp))
    return Device(spec, H200, p, EFF, layout=None if lay.trivial else lay)


def _items(decs: list[Decoding], eng, req: Requests) -> list:
    """Each decoding at concurrencies from 1 to what its memory admits (grids of different lengths)."""
    out = []
    for i, dec in enumerate(decs):
        top = memory(dec.dev, eng, req).max_resident
        out.append((dec, eng, np.unique(np.round(np.geomspace(1, top, 7 + 5 * i))), top))
    return out


def _assert_same(items: list, req: Requests) -> None:
    many = lockstep_states(items, req)
    assert len(many) == len(items)
    for (dec, eng, c, top), got in zip(items, many, strict=True):
        want = lockstep_state(dec, eng, req, c, top)
        for f in dataclasses.fields(want):
            np.testing.assert_array_equal(getattr(got, f.name), getattr(want, f.name), err_msg=f.name)


FP8 = Precision("fp8", "fp8", "fp8")
# DeepSeek-V3 (MLA, MoE) on H200s as the planner lays it out: pipelines of 2 and 4 stages, TP 8, attention-DP × EP
DEEPSEEK = [dict(tp=8), dict(tp=4, pp=2), dict(tp=8, dp=2, ep=16), dict(tp=2, pp=4)]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])  # mixed prefill, and SGLang's prefill-first batches
def test_many_moe_layouts_in_one_evaluation_give_each_layouts_closed_loop(engine):
    eng, req = engines.preset(engine, H200), Requests(1024, 1024)
    decs = [Decoding(_device("deepseek-v3", FP8, **lay)) for lay in DEEPSEEK]
    _assert_same(_items(decs, eng, req), req)


def test_a_long_prompt_and_short_bursts_give_each_layouts_closed_loop():
    # an 8,192-token prompt over an 8,192-token budget: bursts of one prompt, groups of one; a 256-token prompt
    # with 64 output tokens: many prompts per burst (the burst positions summed one by one differ per layout)
    eng = engines.preset("vllm", H200)
    decs = [Decoding(_device("llama-3.1-8b", Precision(), tp=t)) for t in (1, 2, 4)]
    for req in (Requests(8192, 128), Requests(256, 64)):
        _assert_same(_items(decs, eng, req), req)


def test_replicas_of_other_engines_and_decodings_are_evaluated_apart():
    # TP engines of other settings, and decoding speculatively (EAGLE rounds) beside one token per step
    req = Requests(2048, 512)
    dev = [_device("llama-3.1-8b", Precision(), tp=t) for t in (1, 2)]
    spec = Speculation("eagle", 3, 2.5)
    decs = [Decoding(dev[0]), Decoding(dev[1], spec, draft_device(dev[1], spec)), Decoding(dev[1])]
    engs = [engines.preset("vllm", H200), engines.preset("vllm", H200), engines.preset("vllm", H200, max_num_seqs=64)]
    items = [(d, e, c, top) for (d, _, c, top), e in zip(_items(decs, engs[0], req), engs, strict=True)]
    _assert_same(items, req)
