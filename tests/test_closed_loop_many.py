"""Several replicas' closed loops in one evaluation give each replica's own closed loop, number for number: the
oracle is :func:`llmath.deploy.closed_loop.lockstep_state` called once per replica."""

import dataclasses

import numpy as np
import pytest

from llmath.deploy import closed_loop as cl
from llmath.deploy import engines
from llmath.deploy.burst import flow_decoders, wave_kinds
from llmath.deploy.closed_loop import lockstep_state
from llmath.deploy.closed_loop_many import lockstep_states
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.serving import Decoding, Requests, _overheads
from llmath.deploy.serving_memory import memory
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


def _front_end(eng, dec: Decoding, req: Requests, c: np.ndarray):
    """``eng`` with a front-end time between one decode iteration at the smallest and the largest batches
    (×1.5, ⌈o_req / τ_d⌉ = 2 at the small ones and 1 at the large ones): the lag differs along the grid."""
    tau = dec.step(np.array([c[0], c[-1]]), req.decode_context)
    ov = dataclasses.replace(eng.overheads, front_end_s=float(np.sqrt(tau[0] * tau[1])) * 1.5)
    return dataclasses.replace(eng, overheads=ov)


def test_a_later_wave_is_timed_at_the_lag_its_front_end_sets():
    # lag = max(replacement_lag, ⌈o_req / τ_d⌉) needs the decode iteration τ_d: the later wave's burst laid out
    # after τ_d is known and timed on its own (two evaluations) gives the same times, element for element
    req = Requests(1024, 1024)
    dec = Decoding(_device("deepseek-v3", FP8, tp=8))
    eng0 = engines.preset("vllm", H200)
    top = memory(dec.dev, eng0, req).max_resident
    C = np.unique(np.round(np.geomspace(1, top, 24)))
    eng = _front_end(eng0, dec, req, C)
    B, w, ctx = np.minimum(C, top), dec.width, req.decode_context
    d_burst, o_req = cl.prefill_burst(eng, req, B, w, req.decode_steps)[1], _overheads(dec, eng, req, B, 0.0)[2]
    lag, flow, _, later, (tau_d, _) = cl._waves(dec, eng, req, (C, B), d_burst, o_req)
    want_d = dec.step(B, ctx) + _overheads(dec, eng, req, B, 0.0)[1]
    want_lag = np.maximum(float(eng.replacement_lag), np.ceil(o_req / want_d - 1e-9))
    assert (want_lag > eng.replacement_lag).any() and (want_lag == eng.replacement_lag).any()
    D = flow_decoders(B, 1024.0, *cl._budget(eng, req), w, want_lag, d_burst, queued=C - B)
    kinds = wave_kinds(B, 1024.0, 0.0, *cl._budget(eng, req), w, D)[1:]
    want = [dec.mixed(k.decoders, ctx, k.chunks, k.size, k.prefix) + _overheads(dec, eng, req, B, k.decoders)[0]
            for k in kinds]  # fmt: skip
    np.testing.assert_array_equal(tau_d, want_d)
    np.testing.assert_array_equal(lag, want_lag)
    np.testing.assert_array_equal(flow[0], D)
    np.testing.assert_array_equal(later, want)


def test_replicas_whose_front_end_moves_the_lag_give_each_replicas_closed_loop():
    # the points whose later wave is timed again are each replica's own (some replicas have none of them)
    req = Requests(1024, 1024)
    decs = [Decoding(_device("deepseek-v3", FP8, **lay)) for lay in DEEPSEEK]
    items = _items(decs, engines.preset("vllm", H200), req)
    eng = _front_end(items[0][1], decs[0], req, items[0][2])
    _assert_same([(d, eng, c, top) for d, _, c, top in items], req)
