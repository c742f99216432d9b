"""The local web page: ``llmath serve`` answers on 127.0.0.1 only, with the standard library.

``GET /`` is one self-contained HTML page (``data/web/index.html``, no external assets). ``/api/<name>``
runs :data:`llmath.web.api.HANDLERS` ``[name]`` with the query string as parameters (GET), or with a JSON
body ``{"params": {...}, "config": {...} | null}`` (POST, ``Content-Type: application/json``, at most
``MAX_BODY`` bytes: a config.json object instead of a registry name). Models and accelerators are
**registry names only**; a server-side path is never read. Nothing here computes.

Errors: ``{"error": message}`` with a 4xx status for bad input (400 bad parameter or body, 403 Host or
Origin, 404 unknown page, 411/413 body length, 501 method, 503 busy) and 500 for a bug; never a traceback,
neither in the reply nor in the server's log. JSON replies never hold NaN or Infinity (``null`` instead).

Protection for a loopback service: the ``Host`` header must be ``127.0.0.1`` or ``localhost`` (with the
server's port if one is given), which defeats DNS rebinding; an ``Origin`` header, when sent, must be the
page's own (``http://127.0.0.1:PORT`` or ``http://localhost:PORT``), so other web pages cannot drive it.
Slow clients cannot take it offline: one intake thread reads every connection's request (head and body)
without blocking (:class:`_Intake`, a ``selectors`` loop), within a **total** deadline of ``TIMEOUT_S`` per
request however the bytes trickle in (then 408, or a silent close if nothing came); only a complete request
reaches the pool of ``WORKERS`` threads, so a worker never waits on a client. At most ``WORKERS +
MAX_PENDING`` connections are held (beyond: an immediate 503), each buffering at most ``MAX_HEAD`` bytes of
head and ``MAX_BODY`` of body, so memory is bounded. A request whose client has gone away while it
waited for a worker is dropped unanswered and uncomputed; one whose client goes away while it computes is
abandoned at the search's next candidate (:data:`llmath.deploy.budget.ABANDON`, checked every
``POLL_S`` = 0.05 s), which frees its worker; each computation is bounded by the library's cost bound
(:mod:`llmath.deploy.budget`). The listen backlog is ``BACKLOG``.

Every reply carries ``Content-Security-Policy`` (the page's one inline script by its SHA-256, styles inline,
fetches to itself only, no frames, no form targets, no base URI) and ``X-Frame-Options: DENY``. Model and
hardware names are never paths here: a request runs with :data:`llmath.model.config_check.LOCAL_PATHS`
off, so a name such as ``a/b`` is a registry name or a hub id and nothing on this machine is ``stat``-ed.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import selectors
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlparse

from llmath.deploy.budget import ABANDON, release_search_caches
from llmath.errors import Abandoned, LLMathError
from llmath.model.config_check import LOCAL_PATHS

MAX_BODY = 4 << 20  # a config.json is a few kB; a safetensors index is the largest thing worth sending
MAX_HEAD = 64 << 10  # request line and headers
TIMEOUT_S = 10.0  # total seconds to receive a request's head and body
WORKERS = 8
MAX_PENDING = 64
BACKLOG = 128
LOOPBACK = ("127.0.0.1", "localhost")


def page() -> bytes:
    return (resources.files("llmath") / "data" / "web" / "index.html").read_bytes()


@lru_cache(maxsize=1)
def security_policy() -> str:
    """The Content-Security-Policy of every reply: the page's inline script allowed by its SHA-256 only."""
    scripts = re.findall(rb"<script>(.*?)</script>", page(), flags=re.S)
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s).digest()).decode()}'" for s in scripts)
    return (
        f"default-src 'none'; script-src {hashes or chr(39) + 'none' + chr(39)}; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Request:
    """A connection and the bytes of its request as the intake read them."""

    sock: socket.socket
    deadline: float
    data: bytearray = field(default_factory=bytearray)


class _Handler(BaseHTTPRequestHandler):
    server_version = "llmath"
    timeout = TIMEOUT_S  # socket timeout of the reply's writes
    server: LoopbackServer  # the only server that runs this handler

    def setup(self) -> None:
        """Read the request from the intake's buffer, write the reply to the socket."""
        req: _Request = self.request
        self.connection = req.sock
        self.connection.settimeout(self.timeout)
        self.rfile = io.BytesIO(bytes(req.data))
        self.wfile = socketserver._SocketWriter(self.connection)  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", security_policy())
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj) -> None:
        from llmath.output import to_json

        self._send(status, to_json(obj, indent=None).encode(), "application/json")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (malformed request, unsupported method, ...) as JSON too."""
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":  # unparsable request line: reply HTTP/1.0
            self.request_version = "HTTP/1.0"
        try:
            self._json(code, {"error": message or self.responses.get(code, ("error",))[0]})
        except OSError:
            pass

    def _check_origin(self) -> None:
        port = self.server.server_address[1]
        host = (self.headers.get("Host") or "").strip().lower()
        name, _, hport = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
        if name not in LOOPBACK or (hport and hport != str(port)):
            raise HTTPError(403, f"Host {host[:100]!r} refused: use http://127.0.0.1:{port}/")
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower() not in {f"http://{h}:{port}" for h in LOOPBACK}:
            raise HTTPError(403, f"Origin {origin[:100]!r} refused: only the page at http://127.0.0.1:{port}/")

    def _body(self) -> tuple[dict[str, str], dict | None]:
        """The POSTed ``{"params": {...}, "config": {...} | null}``, length-checked and strictly parsed."""
        length = self.headers.get("Content-Length")
        if length is None or not length.strip().isdigit():
            raise HTTPError(411, 'POST {"params": {...}, "config": {...}} with a Content-Length header')
        n = int(length)
        if n > MAX_BODY:
            raise HTTPError(413, f"request body of {n:,} bytes exceeds {MAX_BODY:,}; send a config.json only")
        data = self.rfile.read(n)
        if len(data) < n:
            raise HTTPError(400, "the body ended before Content-Length bytes")
        from llmath.model.config_check import parse_json

        try:
            body = parse_json(data.decode("utf-8") or "{}", "the request body")
        except UnicodeDecodeError:
            raise HTTPError(400, "the request body is not UTF-8 JSON") from None
        params = body.get("params") if isinstance(body, dict) else None
        config = body.get("config") if isinstance(body, dict) else None
        if not isinstance(params, dict) or not (config is None or isinstance(config, dict)):
            raise HTTPError(400, 'the body must be {"params": {...}, "config": {...} or null}')
        return {str(k): str(v) for k, v in params.items()}, config

    def _route(self, post: bool) -> None:
        self._check_origin()
        url = urlparse(self.path)
        if not post and url.path == "/":
            self._send(200, page(), "text/html; charset=utf-8")
            return
        if not post and url.path == "/favicon.ico":
            self._send(204, b"", "image/x-icon")
            return
        from llmath.web.api import HANDLERS

        handler = HANDLERS.get(url.path.removeprefix("/api/")) if url.path.startswith("/api/") else None
        if handler is None:
            raise HTTPError(404, f"no such page {url.path[:100]!r}; try / or /api/analyze?model=llama-3-8b")
        if post:
            params, config = self._body()
        else:
            params = {k: v[-1] for k, v in parse_qs(url.query, max_num_fields=64).items() if v}
            config = None
        self._json(200, handler(params, config))

    def _handle(self, post: bool) -> None:
        try:
            self._route(post)
        except HTTPError as e:
            self._json(e.status, {"error": str(e)})
        except Abandoned:  # the client went away: nobody to answer
            self.close_connection = True
        except LLMathError as e:
            self._json(400, {"error": str(e)})
        except ValueError as e:  # parse_qs: too many fields
            self._json(400, {"error": f"bad query: {e}"})
        except OSError:  # the client went away or timed out
            self.close_connection = True
        except Exception as e:  # a bug: one line to the client, no traceback anywhere
            self._json(
                500, {"error": f"internal error ({type(e).__name__}); this is a bug in llmath, please report it"}
            )

    def do_GET(self) -> None:  # noqa: N802 (http.server's names)
        self._handle(post=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle(post=False)

    def do_POST(self) -> None:  # noqa: N802
        self._handle(post=True)

    def log_message(self, fmt: str, *args) -> None:  # quiet: the CLI prints the address once
        pass


def _complete(buf: bytearray) -> int | None:
    """None while more bytes are needed; 0 once the request (head, and a POST's body) is whole; an HTTP status
    when the head is too long."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return 431 if len(buf) > MAX_HEAD else None
    head = bytes(buf[:end]).lower()
    if not head.startswith(b"post "):
        return 0
    m = re.search(rb"\r\ncontent-length:[ \t]*(\d{1,12})[ \t]*(?:\r\n|$)", head)
    n = int(m.group(1)) if m else 0
    return 0 if n > MAX_BODY or len(buf) >= end + 4 + n else None  # over the cap: the handler answers 413


class _Intake(threading.Thread):
    """Reads every connection's request without blocking; hands complete ones to the server's pool."""

    def __init__(self, server: LoopbackServer) -> None:
        super().__init__(name="llmath-web-intake", daemon=True)
        self.server = server
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        self.incoming: list[_Request] = []
        self.lock = threading.Lock()
        self.stopped = False

    def add(self, req: _Request) -> None:
        req.sock.setblocking(False)
        with self.lock:
            self.incoming.append(req)
        self.wake_w.send(b"\0")

    def run(self) -> None:
        while not self.stopped:
            for key, _ in self.selector.select(timeout=0.05):
                if key.data is None:
                    self._admit()
                else:
                    self._read(key.data)
            self._expire()
        for key in list(self.selector.get_map().values()):
            if key.data is not None:
                self._drop(key.data)

    def _admit(self) -> None:
        try:
            self.wake_r.recv(4096)
        except OSError:
            pass
        with self.lock:
            new, self.incoming = self.incoming, []
        for req in new:
            self.selector.register(req.sock, selectors.EVENT_READ, req)

    def _read(self, req: _Request) -> None:
        try:
            chunk = req.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # the client closed before a whole request: nothing to answer
            self._drop(req)
            return
        req.data += chunk
        status = _complete(req.data)
        if status is None:
            return
        self.selector.unregister(req.sock)
        if status:
            self._reply(req, status, "request headers too long")
            return
        req.sock.setblocking(True)
        self.server.dispatch(req)

    def _expire(self) -> None:
        now = time.monotonic()
        for key in list(self.selector.get_map().values()):
            req = key.data
            if req is not None and now > req.deadline:
                self.selector.unregister(req.sock)
                if req.data:
                    self._reply(req, 408, f"the request did not arrive within {self.server.timeout_s:g} s")
                else:
                    self._drop(req)

    def _reply(self, req: _Request, status: int, message: str) -> None:
        body = b'{"error": "%s"}' % message.encode()
        try:
            req.sock.send(
                b"HTTP/1.0 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close"
                b"\r\n\r\n%s" % (status, BaseHTTPRequestHandler.responses[status][0].encode(), len(body), body)
            )
        except OSError:
            pass
        self._drop(req)

    def _drop(self, req: _Request) -> None:
        try:
            self.selector.unregister(req.sock)
        except (KeyError, ValueError):
            pass
        self.server.release(req)

    def stop(self) -> None:
        """End the loop, then close its selector and wake-up pair (none left for the garbage collector)."""
        self.stopped = True
        self.wake_w.send(b"\0")
        self.join(timeout=1.0)
        self.selector.close()
        self.wake_r.close()
        self.wake_w.close()


class LoopbackServer(HTTPServer):
    """An HTTP server on 127.0.0.1: a non-blocking intake, a bounded worker pool, bounded connections."""

    request_queue_size = BACKLOG
    allow_reuse_address = True

    def __init__(
        self, port: int, workers: int = WORKERS, max_pending: int = MAX_PENDING, timeout_s: float = TIMEOUT_S
    ) -> None:
        handler = type("Handler", (_Handler,), {"timeout": timeout_s})
        super().__init__(("127.0.0.1", port), handler)
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llmath-web")
        self._slots = threading.BoundedSemaphore(workers + max_pending)
        self._computing, self._lock = 0, threading.Lock()
        self._intake = _Intake(self)
        self._intake.start()

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                body = b'{"error": "server busy; retry shortly"}'
                request.sendall(
                    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        self._intake.add(_Request(request, time.monotonic() + self.timeout_s))

    def dispatch(self, req: _Request) -> None:
        try:
            self._pool.submit(self._work, req)
        except RuntimeError:  # pool shut down
            self.release(req)

    def _work(self, req: _Request) -> None:
        try:
            if not _gone(req.sock):
                LOCAL_PATHS.set(False)  # names are never paths on this machine
                ABANDON.set(lambda: _gone(req.sock))  # a search stops when its client goes away
                with self._counted():
                    # socketserver hands any request object to the handler (here _Handler.setup reads it);
                    # typeshed types finish_request's request as a socket only
                    self.finish_request(req, req.sock.getpeername())  # type: ignore[arg-type]
        except Exception:
            pass  # a client error (reset, timeout): no traceback in the log
        finally:
            self.release(req)

    @contextmanager
    def _counted(self) -> Iterator[None]:
        """Count a running computation; the last one to end empties the search caches, so memory stays that
        of the requests running, not of every request since start (:func:`release_search_caches`)."""
        with self._lock:
            self._computing += 1
        try:
            yield
        finally:
            with self._lock:
                self._computing -= 1
                if not self._computing:
                    release_search_caches()

    def release(self, req: _Request) -> None:
        self.shutdown_request(req.sock)
        self._slots.release()

    def handle_error(self, request, client_address) -> None:
        pass

    def server_close(self) -> None:
        self._intake.stop()
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _gone(sock: socket.socket) -> bool:
    """Whether the client closed its side (then its request is not computed, or no longer). Never waits: a
    socket with a timeout would wait for data before ``recv``, so readiness is polled first."""
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(sock, selectors.EVENT_READ)
            if not sel.select(0):
                return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except (OSError, ValueError):  # ValueError: the socket is already closed
        return True


def make_server(port: int = 8765, **limits) -> LoopbackServer:
    """A server bound to 127.0.0.1 (``port=0``: any free port); call ``serve_forever()``. ``limits``:
    ``workers``, ``max_pending``, ``timeout_s`` (defaults ``WORKERS``, ``MAX_PENDING``, ``TIMEOUT_S``)."""
    return LoopbackServer(port, **limits)
