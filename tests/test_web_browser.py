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
