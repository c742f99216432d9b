"""The page in a real browser (Debian's chromium, headless, driven by Selenium with the system chromedriver).

Outside CI the tests skip when chromium, chromedriver or selenium is missing; in CI (``CI`` set) they fail
instead, so the page is always exercised there. ``LLMATH_SCREENSHOTS=DIR`` saves a screenshot of each view.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from llmath.web import make_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")


def _need(ok: bool, why: str) -> None:
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"{why}: CI must run the browser tests (.ci/run installs chromium and chromium-driver)")
        pytest.skip(why)


@pytest.fixture(scope="module")
def base():
    srv = make_server(0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _need(False, "selenium is not installed")
    _need(bool(CHROMIUM and DRIVER), "chromium and chromedriver are not installed")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield drv
    drv.quit()


def _api(base: str, name: str, **q) -> dict:
    url = f"{base}/api/{name}?" + "&".join(f"{k}={v}" for k, v in q.items())
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _wait_ready(drv, since: str | None = None, timeout: float = 30) -> str:
    """Wait until the page has rendered (``body[data-ready]`` set, and changed from ``since``)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = drv.execute_script("return document.body.dataset.ready || null")
        if v and v != since:
            time.sleep(0.05)
            return v
        time.sleep(0.05)
    raise AssertionError("the page did not finish rendering")


def _open(drv, url: str) -> str:
    drv.get(url)
    ready = _wait_ready(drv)
    shots = os.environ.get("LLMATH_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        view = drv.execute_script("return new URLSearchParams(location.search).get('view')") or "overview"
        drv.save_screenshot(str(Path(shots) / f"{view}.png"))
    return ready


def _text(drv, css: str) -> str:
    return drv.find_element("css selector", css).text


def test_page_loads_and_slider_updates_numbers(base, browser):
    from selenium.webdriver.common.keys import Keys

    ready = _open(browser, f"{base}/?model=llama-3-8b&hardware=h100-sxm&batch=1&prompt=512&gen=128")
    assert _text(browser, "#error") == ""
    before = _text(browser, '[data-kpi="TTFT"]')
    slider = browser.find_element("css selector", 'input[name="batch"]')
    slider.send_keys(Keys.ARROW_RIGHT)  # the keyboard moves it: batch 1 -> 2
    _wait_ready(browser, ready)
    assert "batch=2" in browser.current_url
    after = _text(browser, '[data-kpi="TTFT"]')
    assert after != before
    # The page shows what the API computes for the new state (ms with two decimals, as the page formats it).
    d = _api(base, "analyze", model="llama-3-8b", hardware="h100-sxm", batch=2, prompt=512, gen=128)
    assert after == f"{d['ttft_s'] * 1e3:.2f} ms"


def test_roofline_has_a_point_per_operator(base, browser):
    _open(browser, f"{base}/?model=llama-3-8b&hardware=h100-sxm&batch=4&prompt=256&view=roofline")
    d = _api(base, "analyze", model="llama-3-8b", hardware="h100-sxm", batch=4, prompt=256)
    expected = sum(
        1
        for s in ("prefill", "decode")
        for o in d[s]["ops"]
        if o["time_s"] > 0 and (o["flops"] + o["vflops"]) > 0 and sum(o["bytes"].values()) > 0
    )
    points = browser.find_elements("css selector", "svg circle.pt")
    assert expected > 10 and len(points) == expected
    assert browser.find_elements("css selector", "svg polyline.roof")


def test_operator_formula_one_click_away(base, browser):
    _open(browser, f"{base}/?model=llama-3-8b&hardware=h100-sxm&view=ops")
    row = browser.find_element("css selector", 'tr[data-op="attn.q_proj"][data-stage="prefill"]')
    row.click()
    t0 = time.time()
    while "attn.q_proj" not in _text(browser, "#formula") and time.time() - t0 < 20:
        time.sleep(0.05)
    # q_proj of Llama-3-8B: 2·D·N·H FLOPs per token with D = 4096, N·H = 32·128 = 4096 -> coefficient 33,554,432.
    assert "33,554,432" in _text(browser, "#formula")


def test_shared_url_restores_the_state(base, browser):
    _open(browser, f"{base}/?model=qwen2.5-7b&hardware=a100-sxm-80gb&batch=16&prompt=2048&dtype=fp16&view=ops")
    assert browser.find_element("css selector", "#model").get_attribute("value") == "qwen2.5-7b"
    assert browser.find_element("css selector", "#hardware").get_attribute("value") == "a100-sxm-80gb"
    assert _text(browser, "#batch-out") == "16" and _text(browser, "#prompt-out") == "2048"
    assert browser.find_element("css selector", '[role=tab][data-view="ops"]').get_attribute("aria-selected") == "true"
    assert browser.find_elements("css selector", "#ops-table tbody tr")


def test_scaling_chart_renders(base, browser):
    _open(browser, f"{base}/?model=llama-3-8b&hardware=h100-sxm&view=scaling")
    assert len(browser.find_elements("css selector", "svg circle.pt")) >= 20  # 10 batch sizes × 2 series, twice


def test_errors_show_as_readable_messages(base, browser):
    _open(browser, f"{base}/?model=no-such-model&hardware=h100-sxm")
    msg = _text(browser, "#error")
    assert "no-such-model" in msg and "Traceback" not in msg


def test_pareto_chart_has_a_point_per_front_configuration(base, browser):
    q = "model=llama-3-8b&hardware=h100-sxm&gpus=8&prompt=1024&gen=256&tpot_ms=30"
    _open(browser, f"{base}/?{q}&view=plan")
    d = _api(base, "plan", **dict(kv.split("=") for kv in q.split("&")))
    assert d["pareto"] and len(browser.find_elements("css selector", "svg circle.pt")) == len(d["pareto"])
    best = d["best"]
    assert f"tp{best['tp']} pp{best['pp']} ep{best['ep']} dp{best['dp']}" in _text(browser, "#best")


def test_concurrency_shows_the_serving_figures(base, browser):
    _open(browser, f"{base}/?model=llama-3-8b&hardware=h100-sxm&concurrency=64&prompt=1024&gen=256")
    d = _api(base, "analyze", model="llama-3-8b", hardware="h100-sxm", concurrency=64, prompt=1024, gen=256)
    assert _text(browser, '[data-kpi="TPOT (mean)"]') == f"{d['serving']['tpot_s'] * 1e3:.2f} ms"


# ---- what a user sees at a desk (1280×900) and on a phone (390×844) ------------------------------------------
SIZES = [(1280, 900), (390, 844)]
SERVING_Q = "model=llama-3-8b&hardware=h100-sxm&concurrency=64&prompt=1024&gen=256"
PLAN_Q = "model=llama-3.1-8b&hardware=h100-sxm&gpus=8&prompt=1024&gen=256&tpot_ms=50&disagg=1&cost_per_gpu_hour=2"


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def sized(request, browser):
    w, h = request.param
    browser.set_window_size(w, h)
    inner = browser.execute_script("return window.innerWidth")
    browser.set_window_size(2 * w - inner, h)  # the viewport itself w wide, whatever the window's frame takes
    yield browser, w
    browser.set_window_size(1400, 1000)


def _shot(drv, name: str, width: int) -> None:
    shots = os.environ.get("LLMATH_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        drv.save_screenshot(str(Path(shots) / f"{name}-{width}.png"))


def _no_overflow(drv) -> None:
    """Nothing wider than the viewport: no sideways scrolling, the header's buttons inside it."""
    assert drv.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    assert drv.execute_script("return [...document.querySelectorAll('header > *')].every(e => "
                              "e.getBoundingClientRect().right <= window.innerWidth + 0.5)")  # fmt: skip


def _smallest_chart_text_px(drv) -> float:
    return drv.execute_script(
        "const t=[...document.querySelectorAll('#view svg text')].map(e=>e.getBoundingClientRect().height)"
        ".filter(h=>h>0); return t.length ? Math.min(...t) : 0"
    )


@pytest.mark.parametrize("view", ["overview", "scaling", "plan"])
def test_views_fit_the_viewport(base, sized, view):
    drv, width = sized
    q = PLAN_Q if view == "plan" else "model=llama-3-8b&hardware=h100-sxm"
    _open(drv, f"{base}/?{q}&view={view}")
    _shot(drv, view, width)
    assert _text(drv, "#error") == ""
    _no_overflow(drv)
    # the results start in the first screenful (on a phone the controls follow them)
    assert drv.execute_script("return document.querySelector('#view').getBoundingClientRect().top") < 300
    if view != "overview":
        assert _smallest_chart_text_px(drv) >= 9  # chart text readable: 11 px, drawn at the width shown


def test_serving_view_shows_what_the_api_returns(base, sized):
    drv, width = sized
    _open(drv, f"{base}/?{SERVING_Q}")
    _shot(drv, "serving", width)
    _no_overflow(drv)
    d = _api(base, "analyze", **dict(kv.split("=") for kv in SERVING_Q.split("&")))["serving"]

    def metric(k: str) -> str:
        return _text(drv, f'#serving-table tr[data-metric="{k}"] td:last-child')

    # ms with two decimals, as the page formats them
    for k, key in (
        ("TTFT (mean)", "ttft_s"),
        ("ITL p50", "itl_p50_s"),
        ("ITL p90", "itl_p90_s"),
        ("ITL p99", "itl_p99_s"),
    ):
        assert metric(k) == f"{d[key] * 1e3:.2f} ms"
    assert metric("requests/s") == f"{d['requests_s']:.4g}"
    assert (
        metric("running / queued per replica")
        == f"{round(d['running_per_replica'])} / {round(d['queued_per_replica'])}"
    )
    assert metric("KV pool per GPU").endswith(f"= {d['memory']['max_requests_by_kv']} requests of "
                                              f"{d['memory']['kv_bytes_per_request'] / 1e6:.3g} MB")  # fmt: skip
    # the KPI TTFT is the serving TTFT, and no static batch's prefill row contradicts it
    assert _text(drv, '[data-kpi="TTFT"]') == f"{d['ttft_s'] * 1e3:.2f} ms"
    assert not drv.find_elements("css selector", "tr[data-stage-row]")
    legend = _text(drv, "#mem-legend")
    assert "weights" in legend and "KV pool" in legend and drv.find_elements("css selector", "#mem-cap")


def test_plan_view_shows_pools_cost_targets_and_legend(base, sized):
    drv, width = sized
    _open(drv, f"{base}/?{PLAN_Q}&view=plan")
    _shot(drv, "plan-disagg", width)
    d = _api(base, "plan", **dict(kv.split("=") for kv in PLAN_Q.split("&")))
    assert drv.find_element("css selector", "#disagg").is_selected()  # the toggle restored from the URL
    for mode in ("aggregated", "disaggregated"):
        n = sum(r["mode"] == mode for r in d["pareto"])
        assert len(drv.find_elements("css selector", f'svg circle.pt[data-mode="{mode}"]')) == n
        assert (mode in _text(drv, "#plan-legend")) == (n > 0)
    assert drv.find_elements("css selector", "svg line.target")  # TPOT ≤ 50 ms: the line at 1000 / 50 = 20 tok/s
    assert "TPOT target" in _text(drv, "#plan-legend")
    best, shown = d["best"], _text(drv, "#best")
    assert f"$ {best['usd_per_million_tokens']:.3g}".replace(" ", "") in shown
    if best["mode"] == "disaggregated":
        assert f"prefill pool: {best['prefill_workers']} worker(s) × tp{best['prefill_tp']}" in shown


def test_disaggregation_toggle_reaches_the_api(base, browser):
    _open(browser, f"{base}/?model=llama-3.1-8b&hardware=h100-sxm&gpus=8&view=plan")
    ready = browser.execute_script("return document.body.dataset.ready")
    browser.find_element("css selector", "#disagg").click()
    _wait_ready(browser, ready, timeout=60)
    assert "disagg=1" in browser.current_url
    d = _api(base, "plan", model="llama-3.1-8b", hardware="h100-sxm", gpus=8, disagg=1)
    n = sum(r["mode"] == "disaggregated" for r in d["pareto"])
    assert len(browser.find_elements("css selector", 'svg circle.pt[data-mode="disaggregated"]')) == n


def test_long_context_checkbox_reaches_the_api(base, browser):
    # gpt2's context is 1024 positions (n_positions): prompt 2048 + gen 128 pass it, so serving is refused
    _open(browser, f"{base}/?model=gpt2&hardware=h100-sxm&prompt=2048&gen=128&concurrency=4")
    box = browser.find_element("css selector", "#allow_long_context")
    assert box.get_attribute("type") == "checkbox" and not box.is_selected()
    msg = _text(browser, "#error")
    assert "1024" in msg and "allow requests past the context" in msg
    ready = browser.execute_script("return document.body.dataset.ready")
    box.click()
    _wait_ready(browser, ready, timeout=60)
    assert "allow_long_context=1" in browser.current_url
    assert _text(browser, "#error") == "" and "concurrent requests" in _text(browser, "#view")


def test_errors_clear_stale_results_and_loading_shows(base, browser):
    _open(browser, f"{base}/?model=llama-3-8b&hardware=h100-sxm")
    assert browser.find_elements("css selector", "#kpis")
    ready = browser.execute_script("return document.body.dataset.ready")
    browser.execute_script(
        "const m=document.querySelector('#model'); m.value='no-such-model';"
        "m.dispatchEvent(new Event('input', {bubbles: true}))"
    )
    _wait_ready(browser, ready)
    assert "no-such-model" in _text(browser, "#error")
    assert not browser.find_elements("css selector", "#kpis")  # the previous model's numbers are gone
    # a slow view (a plan of DeepSeek-V3 over 64 GPUs, both modes: about a second of search) shows that it is
    # computing once it has run longer than the page's 80 ms grace
    browser.get(f"{base}/?model=deepseek-v3&hardware=h200&gpus=64&disagg=1&view=plan")
    seen, t0 = False, time.time()
    while not seen and time.time() - t0 < 30:
        seen = browser.execute_script(
            "return document.body.dataset.busy === '1' && "
            "document.querySelector('#status').textContent.startsWith('computing')"
        )
    assert seen


def test_scaling_ticks_match_the_data(base, browser):
    _open(browser, f"{base}/?model=llama-3-8b&hardware=h100-sxm&view=scaling")
    ticks = [e.text for e in browser.find_elements("css selector", "svg text.xt")]
    assert "512" in ticks and "1" in ticks and "1.00" not in ticks  # the sweep runs 1 … 512


def test_memory_bar_has_a_legend_and_the_capacity(base, browser):
    _open(browser, f"{base}/?model=llama-3-8b&hardware=h100-sxm")
    legend = _text(browser, "#mem-legend")
    assert "weights" in legend and "KV cache" in legend and "capacity" in legend
    assert browser.find_elements("css selector", "#mem-cap")
