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
Each connection has a ``TIMEOUT_S`` socket timeout (idle and slow clients are dropped); requests run on a
pool of ``WORKERS`` threads with at most ``MAX_PENDING`` connections waiting (beyond: 503); the listen
backlog is ``BACKLOG``.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlparse

from llmath.errors import LLMathError

MAX_BODY = 4 << 20  # a config.json is a few kB; a safetensors index is the largest thing worth sending
TIMEOUT_S = 10.0
WORKERS = 8
MAX_PENDING = 64
BACKLOG = 128
LOOPBACK = ("127.0.0.1", "localhost")


def page() -> bytes:
    return (resources.files("llmath") / "data" / "web" / "index.html").read_bytes()


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    server_version = "llmath"
    timeout = TIMEOUT_S  # socket timeout per read/write: idle and slow clients are dropped

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
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


class LoopbackServer(HTTPServer):
    """An HTTP server on 127.0.0.1 with a bounded worker pool, a bounded wait queue and a deep backlog."""

    request_queue_size = BACKLOG
    allow_reuse_address = True

    def __init__(
        self, port: int, workers: int = WORKERS, max_pending: int = MAX_PENDING, timeout_s: float = TIMEOUT_S
    ) -> None:
        handler = type("Handler", (_Handler,), {"timeout": timeout_s})
        super().__init__(("127.0.0.1", port), handler)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llmath-web")
        self._slots = threading.BoundedSemaphore(workers + max_pending)

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
        try:
            self._pool.submit(self._work, request, client_address)
        except RuntimeError:  # pool shut down
            self._slots.release()
            self.shutdown_request(request)

    def _work(self, request, client_address) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            pass  # a client error (reset, timeout): no traceback in the log
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request, client_address) -> None:
        pass

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def make_server(port: int = 8765, **limits) -> LoopbackServer:
    """A server bound to 127.0.0.1 (``port=0``: any free port); call ``serve_forever()``. ``limits``:
    ``workers``, ``max_pending``, ``timeout_s`` (defaults ``WORKERS``, ``MAX_PENDING``, ``TIMEOUT_S``)."""
    return LoopbackServer(port, **limits)
