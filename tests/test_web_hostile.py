"""The page under hostile clients, with real loopback sockets and bounded waits: slow clients never take it
offline, a request has a total deadline, work for a client that left is not done, every reply forbids framing
and foreign scripts, and a model name is never a path on the server's machine."""

import json
import socket
import threading
import time

import pytest

from llmath.web import make_server


@pytest.fixture
def serve():
    servers = []

    def start(**limits):
        server = make_server(0, **limits)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def get(port, path, timeout=5.0):
    """(status, headers text, body) of one GET."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode(), body


def test_twenty_slow_clients_do_not_stop_the_page(serve):
    port = serve()
    assert get(port, "/api/hardware")[0] == 200  # warm: the first request imports the API modules
    slow = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(20)]
    stop = threading.Event()

    def trickle():  # a byte every 2 s on each of the 20 connections, a header never finished
        for s in slow:
            s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
        while not stop.wait(2.0):
            for s in slow:
                s.sendall(b"a")

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    try:
        time.sleep(0.5)  # every slow client connected and trickling
        for _ in range(3):
            t0 = time.monotonic()
            status, _, body = get(port, "/api/hardware")
            assert status == 200 and "h100-sxm" in json.loads(body)
            assert time.monotonic() - t0 < 1.0
            time.sleep(0.7)
    finally:
        stop.set()
        t.join()
        for s in slow:
            s.close()


def test_a_request_has_a_total_deadline(serve):
    port = serve(timeout_s=1.0)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        t0 = time.monotonic()
        s.sendall(b"GET / HTTP/1.1\r\n")
        reply = b""
        while time.monotonic() - t0 < 4:  # a byte every 0.2 s: each read is quick, the whole is not
            try:
                s.sendall(b"X")
            except OSError:
                break
            s.settimeout(0.2)
            try:
                chunk = s.recv(4096)
            except TimeoutError:
                continue
            reply += chunk
            if not chunk or reply.endswith(b"}"):
                break
        elapsed = time.monotonic() - t0
    assert reply.startswith(b"HTTP/1.0 408") and b"within 1 s" in reply, reply
    assert 0.9 < elapsed < 2.0


def test_a_trickled_body_has_the_same_deadline(serve):
    port = serve(timeout_s=1.0)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        t0 = time.monotonic()
        s.sendall(f"POST /api/analyze HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 100\r\n\r\n{{".encode())
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.0 408") and time.monotonic() - t0 < 2.0


def test_work_for_a_client_that_left_is_not_done(serve, monkeypatch):
    from llmath.web import api

    calls = []
    monkeypatch.setitem(api.HANDLERS, "slow", lambda p, c: time.sleep(1.0) or {"ok": 1})
    monkeypatch.setitem(api.HANDLERS, "count", lambda p, c: calls.append(1) or {"ok": 1})
    port = serve(workers=1)
    busy = threading.Thread(target=get, args=(port, "/api/slow"), daemon=True)
    busy.start()
    time.sleep(0.2)  # the one worker is computing
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET /api/count HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    # the client closed while its request waited: when the worker frees, the request is dropped uncomputed
    busy.join(5)
    time.sleep(0.3)
    assert calls == []
    assert get(port, "/api/count")[0] == 200 and calls == [1]  # a client that waits is answered


def test_every_reply_forbids_framing_and_foreign_scripts(serve):
    port = serve()
    for path in ("/", "/api/hardware", "/nowhere"):
        status, head, _ = get(port, path)
        low = head.lower()
        assert "x-frame-options: deny" in low, head
        csp = next(line for line in low.splitlines() if line.startswith("content-security-policy:"))
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp and "connect-src 'self'" in csp
        assert "script-src 'sha256-" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]


def test_a_model_name_is_never_a_path_here(serve, tmp_path, monkeypatch):
    from llmath.errors import UnknownNameError
    from llmath.model import config_check, hub, registry

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "config.json").write_text(json.dumps(registry.config("llama-3.2-1b")))
    monkeypatch.chdir(tmp_path)

    def no_such_repo(repo_id, revision=None):  # the hub's answer for an unknown repo, without the network
        raise UnknownNameError(f"model {repo_id!r}: no such repo on the hub")

    monkeypatch.setattr(hub, "fetch", no_such_repo)
    seen = []
    real = config_check.os.stat
    monkeypatch.setattr(config_check.os, "stat", lambda p, *a, **k: seen.append(str(p)) or real(p, *a, **k))
    port = serve()
    status, _, body = get(port, "/api/analyze?model=a/b")
    # the local folder a/b (a valid config) is not read: the name is a hub id, and the hub has no such repo
    assert status == 400 and "'a/b': no such repo on the hub" in json.loads(body)["error"]
    assert not [p for p in seen if p.startswith("a/b") or p.startswith(str(tmp_path / "a"))]


def test_a_plan_whose_client_left_frees_its_worker(serve, monkeypatch):
    from llmath.deploy import plan as plan_module

    built = []
    real = plan_module._replica

    def slow_replica(*devices):  # each layout takes 50 ms, as on a slow machine: 512 GPUs' layouts take seconds
        built.append(1)
        time.sleep(0.05)
        return real(*devices)

    monkeypatch.setattr(plan_module, "_replica", slow_replica)
    port = serve(workers=1)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET /api/plan?model=llama-3-70b&gpus=512 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        time.sleep(0.5)  # the one worker is building layouts
    assert built  # the plan was computing when its client left
    t0 = time.monotonic()
    status, _, _ = get(port, "/api/models", timeout=5)
    assert status == 200 and time.monotonic() - t0 < 1.0  # its worker was freed for the next client
    n = len(built)
    time.sleep(0.3)
    assert len(built) == n  # and the abandoned plan builds nothing more


def test_repeated_plans_leave_the_search_caches_empty(serve):
    from llmath.deploy.budget import search_caches

    caches = search_caches()
    names = {f.__qualname__ for f in caches}
    assert {"rank_table", "rank_plans"} <= names  # the per-layout tables and their rank plans are among them
    port = serve(workers=2)
    for model, gpus in [("llama-3-8b", 16), ("mixtral-8x7b", 16), ("llama-3-8b", 32)]:
        status, _, body = get(port, f"/api/plan?model={model}&gpus={gpus}", timeout=60)
        assert status == 200, body[:200]
        # the stated bound between requests: once no request computes, every search cache is empty
        assert [f.__qualname__ for f in caches if f.cache_info().currsize] == []
