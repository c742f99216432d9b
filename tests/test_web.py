"""The local web page, served on a loopback port for the duration of the test."""

import json
import threading
import urllib.error
import urllib.request

import pytest

from llmath.web import make_server


@pytest.fixture(scope="module")
def base():
    server = make_server(0)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read()


def test_page_and_lists(base):
    status, body = get(base + "/")
    assert status == 200 and b"<form" in body and b"/api/" in body
    models = json.loads(get(base + "/api/models")[1])
    assert "llama-3-8b" in models and "t5-base" not in models  # encoder-decoder: parameter counts only
    assert "h100-sxm" in json.loads(get(base + "/api/hardware")[1])


def test_analyze_matches_the_cli_object(base):
    _, body = get(base + "/api/analyze?model=llama-3-8b&hardware=h100-sxm&batch=2&prompt=100&gen=10&kv_dtype=fp8")
    d = json.loads(body)
    # 2 sequences x 100 positions x (2 * 32 layers * 8 heads * 128) elements x 1 byte (fp8 KV)
    assert d["kv_cache"]["bytes"] == 2 * 100 * 2 * 32 * 8 * 128
    assert d["ttft_s"] > 0 and d["memory"]["fits"] is True


def test_errors_are_json_400(base):
    with pytest.raises(urllib.error.HTTPError) as e:
        get(base + "/api/analyze?model=llama-3-8&hardware=h100-sxm")
    assert e.value.code == 400
    assert "closest: " in json.loads(e.value.read())["error"]
    with pytest.raises(urllib.error.HTTPError) as e:
        get(base + "/api/analyze?model=llama-3-8b&batch=two")
    assert e.value.code == 400


def test_the_page_uses_the_checkpoints_formats(base):
    """A bundled quantised checkpoint (gpt-oss-120b: MXFP4 experts) is analysed in its own formats unless the
    page overrides them: the same weights as `llmath analyze openai/gpt-oss-120b` (no --dtype)."""
    import llmath
    from llmath.model.checkpoint import precision_for

    _, body = get(base + "/api/analyze?model=openai/gpt-oss-120b&hardware=b200")
    page = json.loads(body)["memory"]["weights_bytes"]
    lib = llmath.analyze("openai/gpt-oss-120b", "b200", precision=precision_for("openai/gpt-oss-120b")).memory
    assert page == lib.weights_bytes
    _, body = get(base + "/api/analyze?model=openai/gpt-oss-120b&hardware=b200&dtype=bf16")
    assert json.loads(body)["memory"]["weights_bytes"] > 3 * page  # bf16 everywhere: 16 bits vs ~4.25 for MXFP4
