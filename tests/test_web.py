"""The local web page, served on a loopback port for the duration of the test."""

import json
import socket
import threading
import time
import urllib.error
import urllib.parse
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
    assert "llama-3-8b" in models and "t5-base" in models  # encoder-decoder models too (test_web_encdec.py)
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


# ---- the page's input rules -------------------------------------------------------------------------


def request(base, path, method="GET", headers=None, body=None):
    """(status, parsed JSON or raw bytes) for any request; HTTP errors are returned, not raised."""
    req = urllib.request.Request(base + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    return status, (json.loads(data) if ctype.startswith("application/json") else data)


def raw(port, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while True:
            c = s.recv(65536)
            if not c:
                return b"".join(chunks)
            chunks.append(c)


@pytest.mark.parametrize("model", ["/etc/passwd", "/etc/shadow", "/dev/zero", "/nonexistent/x.json", "../x.json"])
def test_no_server_side_paths(base, model):
    status, d = request(base, "/api/analyze?model=" + urllib.parse.quote(model))
    assert status == 400 and "registry names only" in d["error"]
    # the same words whether or not the path exists: nothing about the file system leaks
    assert "no such file" not in d["error"] and "directory" not in d["error"]
    status, d = request(base, "/api/analyze?model=llama-3-8b&hardware=" + urllib.parse.quote(model))
    assert status == 400 and "registry names only" in d["error"]


def test_posted_config_is_analysed(base):
    from llmath.model import registry

    def post(params, config):
        body = json.dumps({"params": params, "config": config}).encode()
        return request(base, "/api/analyze", "POST", {"Content-Type": "application/json"}, body)

    status, d = post({"hardware": "h100-sxm"}, registry.config("llama-3-8b"))
    assert status == 200 and d["params"]["total"] == 8_030_261_248  # Meta-Llama-3-8B, as transformers counts
    status, d = post({}, {"model_type": 5})
    assert status == 400 and "'model_type'=5" in d["error"]
    raw_body = b'{"params": {}, "config": {"vocab_size": NaN}}'
    status, d = request(base, "/api/analyze", "POST", {}, raw_body)
    assert status == 400 and "finite" in d["error"]
    status, d = request(base, "/api/analyze", "POST", {}, b"[" * 100_000)
    assert status == 400 and "nested deeper" in d["error"]


def test_posted_body_is_capped(base):
    from llmath.web.server import MAX_BODY

    port = int(base.rsplit(":", 1)[1])
    head = f"POST /api/analyze HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n"
    reply = raw(port, head.encode())
    assert reply.startswith(b"HTTP/1.0 413") and b'"error"' in reply
    reply = raw(port, f"POST /api/analyze HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.0 411"), reply


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example", "127.0.0.1:1"])
def test_host_must_be_loopback(base, host):
    status, d = request(base, "/api/models", headers={"Host": host})
    assert status == 403 and "Host" in d["error"]


def test_host_and_origin_accepted_forms(base):
    port = base.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", "127.0.0.1"):
        assert request(base, "/api/hardware", headers={"Host": host})[0] == 200
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        assert request(base, "/api/hardware", headers={"Origin": origin})[0] == 200


@pytest.mark.parametrize("origin", ["https://evil.example", "http://127.0.0.1:1", "null"])
def test_foreign_origin_refused(base, origin):
    status, d = request(base, "/api/analyze?model=llama-3-8b", headers={"Origin": origin})
    assert status == 403 and "Origin" in d["error"]


def test_every_error_is_json(base):
    port = int(base.rsplit(":", 1)[1])
    for data in (b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"PUT / HTTP/1.0\r\n\r\n"):
        reply = raw(port, data)
        status_line, _, rest = reply.partition(b"\r\n")
        assert int(status_line.split()[1]) >= 400, reply
        assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]
    status, d = request(base, "/nope")
    assert status == 404 and "error" in d
    status, d = request(base, "/api/analyze?model=llama-3-8b&batch=nan")
    assert status == 400 and "batch" in d["error"]
    status, d = request(base, "/api/analyze?model=llama-3-8b&batch=" + "9" * 5000)
    assert status == 400


def test_a_bug_is_a_json_500_without_traceback(base, monkeypatch, capfd):
    from llmath.web.api import HANDLERS

    def boom(*a, **k):
        raise RuntimeError("synthetic")

    monkeypatch.setitem(HANDLERS, "analyze", boom)
    status, d = request(base, "/api/analyze?model=llama-3-8b")
    assert status == 500 and "bug" in d["error"] and "synthetic" not in d["error"]
    err = capfd.readouterr().err
    assert "Traceback" not in err


def test_idle_connections_time_out_and_the_pool_is_bounded():
    server = make_server(0, workers=2, max_pending=2, timeout_s=0.5)
    port = server.server_address[1]
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        before = threading.active_count()
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(20)]
        time.sleep(0.3)
        assert threading.active_count() <= before + 2  # 2 workers, never a thread per socket
        # beyond workers + max_pending waiting connections: an immediate JSON 503
        busy = [s.recv(4096) for s in idle[4:]]
        assert all(b.startswith(b"HTTP/1.0 503") for b in busy)
        for s in idle[:4]:  # the idle ones are dropped after the timeout (0.5 s) without a reply hanging
            s.settimeout(5)
            assert s.recv(4096) == b""
        for s in idle:
            s.close()
        assert request(f"http://127.0.0.1:{port}", "/api/hardware")[0] == 200  # still serving
    finally:
        server.shutdown()
        server.server_close()


def test_backlog():
    from llmath.web.server import BACKLOG, LoopbackServer

    assert BACKLOG >= 64 and LoopbackServer.request_queue_size == BACKLOG


def test_long_context_override_control_and_refusal(base):
    # the page's control: a checkbox named as the API's parameter, off unless ticked
    import re

    page = get(base + "/")[1].decode()
    box = re.search(r"<input[^>]*name=\"allow_long_context\"[^>]*>", page)
    assert box and 'type="checkbox"' in box.group(0) and 'value="1"' in box.group(0)
    assert "checked" not in box.group(0)
    # gpt2's context is 1024 positions (n_positions, huggingface.co/openai-community/gpt2): 2000 + 128 pass it
    q = "/api/analyze?model=gpt2&hardware=h100-sxm&prompt=2000&gen=128&concurrency=4"
    for url in (q, "/api/plan?model=gpt2&hardware=h100-sxm&prompt=2000&gen=128&gpus=1"):
        with pytest.raises(urllib.error.HTTPError) as e:
            get(base + url)
        msg = json.loads(e.value.read())["error"]
        assert e.value.code == 400 and "1024" in msg
        assert "allow requests past the context" in msg and "allow_long_context=1" in msg  # the page's control
        assert "--allow-long-context" not in msg
    d = json.loads(get(base + q + "&allow_long_context=1")[1])
    assert any("1024" in n for n in d["serving"]["notes"])
