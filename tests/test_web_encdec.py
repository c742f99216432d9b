"""Encoder-decoder models on the page: listed, analysed with their encoder pass, explained per stage."""

from __future__ import annotations

import time

import pytest
from test_web_browser import _api, _open, _text, base, browser  # noqa: F401 - fixtures

import llmath
from llmath import Workload
from llmath.model import registry
from llmath.web import api


def test_meta_lists_encoder_decoder_models():
    m = api.meta({})
    assert {"t5-base", "bart-large", "transformer-base"} <= set(m["models"])
    assert set(m["encoder_decoder"]) == {n for n in m["models"] if registry.spec(n).is_encoder_decoder}
    assert "llama-3-8b" in m["models"] and "llama-3-8b" not in m["encoder_decoder"]


def test_analyze_view_has_the_encoder_stage_and_matches_the_library():
    d = api.analyze_view({"model": "t5-base", "hardware": "h100-sxm", "batch": "4", "prompt": "256", "gen": "32"})
    a = llmath.analyze("t5-base", "h100-sxm", workload=Workload(batch=4, prompt=256, gen=32))
    assert d["encoder"]["time_s"] == a.encoder.time_s and d["ttft_s"] == a.generation["ttft_s"]
    assert set(d["split"]) == {"encoder", "prefill", "decode"}
    # the split of each stage adds up to the stage's time
    assert sum(d["split"]["encoder"].values()) == pytest.approx(a.encoder.time_s, rel=1e-12)
    # decoder_prompt reaches analyze: 4 decoder tokens in the prefill
    d4 = api.analyze_view({"model": "t5-base", "hardware": "h100-sxm", "prompt": "256", "decoder_prompt": "4"})
    assert d4["workload"]["decoder_prompt"] == 4


def test_analyze_view_on_a_layout_and_explain_of_an_encoder_operator():
    q = {"model": "bart-large", "hardware": "h100-sxm", "batch": "2", "prompt": "128", "tp": "2"}
    d = api.analyze_view(q)
    assert d["parallel"]["tp"] == 2 and d["encoder"]["comm_s"] > 0
    e = api.explain(q | {"stage": "encoder", "op": "encoder.self_attn.q_proj"})
    # the model's own operator (explain does not shard): bart-large q_proj 2·D·D per token, D = 1024 ->
    # 2,097,152, times B·P = 2·128 = 256 source tokens, times 12 encoder layers
    assert "2,097,152 × 256) × 12 layers" in e["ops"][0]["formulas"]["flops"]
    with pytest.raises(llmath.LLMathError, match="stage='encoder'"):
        api.explain({"model": "llama-3-8b", "stage": "encoder", "op": "attn.q_proj"})


def test_page_shows_the_encoder_stage(base, browser):  # noqa: F811
    _open(browser, f"{base}/?model=t5-base&hardware=h100-sxm&batch=4&prompt=256&gen=32")
    assert _text(browser, "#error") == ""
    d = _api(base, "analyze", model="t5-base", hardware="h100-sxm", batch=4, prompt=256, gen=32)
    rows = [r.text.split()[0] for r in browser.find_elements("css selector", "tr[data-stage-row]")]
    assert rows == ["encoder", "decoder", "decode"]  # encoder, decoder prefill, decode step 0
    assert _text(browser, '[data-kpi="TTFT"]') == f"{d['ttft_s'] * 1e3:.2f} ms"
    assert "encoder-decoder" in _text(browser, "#encdec-note")
    # the decoder-prompt control: 2^2 = 4 decoder tokens reach the analysis and the note
    _open(browser, f"{base}/?model=t5-base&hardware=h100-sxm&batch=4&prompt=256&gen=32&decoder_prompt=4")
    assert "starts from 4 token(s)" in _text(browser, "#encdec-note")
    # the roofline: a point per operator of the three stages, the encoder's among them
    _open(browser, f"{base}/?model=t5-base&hardware=h100-sxm&batch=4&prompt=256&gen=32&view=roofline")
    expected = sum(
        1
        for s in ("encoder", "prefill", "decode")
        for o in d[s]["ops"]
        if o["time_s"] > 0 and (o["flops"] + o["vflops"]) > 0 and sum(o["bytes"].values()) > 0
    )
    assert len(browser.find_elements("css selector", "svg circle.pt")) == expected
    assert browser.find_elements("css selector", 'svg circle.pt[data-stage="encoder"]')
    # an encoder operator's formulas, one click away in the operator table
    _open(browser, f"{base}/?model=t5-base&hardware=h100-sxm&batch=4&prompt=256&gen=32&view=ops")
    browser.find_element("css selector", 'tr[data-op="encoder.ffn.up"][data-stage="encoder"]').click()
    t0 = time.time()
    while "encoder.ffn.up" not in _text(browser, "#formula") and time.time() - t0 < 20:
        time.sleep(0.05)
    # t5-base wi: 2·D·F per token, D = 768, F = 3072 -> coefficient 4,718,592
    assert "4,718,592" in _text(browser, "#formula")


def test_plan_and_serving_views_take_encoder_decoder_models():
    p = api.plan({"model": "bart-large", "hardware": "h100-sxm", "gpus": "2", "prompt": "512", "gen": "64"})
    assert p["best"] is not None and p["pareto"]
    d = api.analyze_view({"model": "t5-base", "hardware": "h100-sxm", "prompt": "512", "gen": "64", "concurrency": "8"})
    assert d["serving"]["ttft_s"] == d["ttft_s"] and d["serving"]["running_per_replica"] == 8
