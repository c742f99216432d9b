"""The local web page: ``llmath serve`` answers on 127.0.0.1 only, with the standard library.

API (every reply is JSON except ``/``; nothing here computes: it calls :func:`llmath.analysis.analyze`):

* ``GET /`` — the self-contained page (``data/web/index.html``, no external assets).
* ``GET /api/models`` — registry names of the decoder models (a JSON list of strings).
* ``GET /api/hardware`` — registry names of the accelerators (a JSON list of strings).
* ``GET /api/analyze?model=NAME&hardware=NAME&batch=&prompt=&gen=&prefix=&attention=&dtype=&weights=
  &activations=&kv_dtype=&efficiency=`` — the same object as ``llmath analyze --json``. ``model`` and
  ``hardware`` are **registry names only** (``hardware=none`` skips timing); never a server-side path.
* ``POST /api/analyze?<the same parameters but model>`` with a config.json as the body
  (``Content-Type: application/json``, at most ``MAX_BODY`` bytes) — analyses that config.

Errors: ``{"error": message}`` with a 4xx status for bad input (400 bad parameter, 403 Host/Origin,
404 unknown page, 405 method, 411/413 body length, 431 headers, 503 busy) and 500 for a bug; never a
traceback, neither in the reply nor in the server's log.

Protection for a loopback service: the ``Host`` header must be ``127.0.0.1`` or ``localhost`` (with
the server's port if one is given), which defeats DNS rebinding; an ``Origin`` header, when sent, must be
the page's own (``http://127.0.0.1:PORT`` or ``http://localhost:PORT``), so other web pages cannot drive
it. Each connection has a ``TIMEOUT_S`` socket timeout (idle and slow clients are dropped); requests run
on a pool of ``WORKERS`` threads with at most ``MAX_PENDING`` connections waiting (beyond: 503); the
listen backlog is ``BACKLOG``.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlparse

from llmath.errors import LLMathError, UnknownNameError, WorkloadError

MAX_BODY = 1 << 20  # bytes of a POSTed config.json
TIMEOUT_S = 10.0
WORKERS = 8
MAX_PENDING = 64
BACKLOG = 128
LOOPBACK = ("127.0.0.1", "localhost")


def page() -> bytes:
    return (resources.files("llmath") / "data" / "web" / "index.html").read_bytes()


_INT_FIELDS = ("batch", "prompt", "gen", "prefix")
_STR_FIELDS = ("model", "hardware", "attention", "dtype", "weights", "activations", "kv_dtype", "efficiency")
PARAMS = _INT_FIELDS + _STR_FIELDS


def _registry_name(kind: str, value: str, names: list[str]) -> str:
    if value not in names:
        from llmath.model.registry import closest

        close = closest(value, names)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise UnknownNameError(
            f"unknown {kind} {value[:100]!r}{hint}. The web API takes registry names only "
            f"(GET /api/{'models' if kind == 'model' else 'hardware'}); POST a config.json to analyse another model"
        )
    return value


def analyze_query(query: dict[str, list[str]], config: dict | None = None) -> dict:
    """The ``/api/analyze`` handler: query parameters (and a POSTed config) -> ``analyze --json``'s object."""
    from llmath import hardware as hwreg
    from llmath.analysis import analyze
    from llmath.model import registry
    from llmath.model.dtypes import Precision
    from llmath.model.hf import spec_from_config

    unknown = sorted(set(query) - set(PARAMS))
    if unknown:
        raise WorkloadError(f"unknown parameter(s) {', '.join(map(repr, unknown))}; accepted: {', '.join(PARAMS)}")
    q = {k: v[-1] for k, v in query.items() if v and v[-1] != ""}
    kw = {}
    for f in _INT_FIELDS:
        if f in q:
            try:
                kw[f] = int(q[f])
            except ValueError:
                raise WorkloadError(f"{f}={q[f][:50]!r} must be an integer") from None
    dtype = q.get("dtype", "bf16")
    precision = Precision(q.get("weights", dtype), q.get("activations", dtype), q.get("kv_dtype", dtype))
    hw = q.get("hardware", "h100-sxm")
    if config is not None:
        if "model" in q:
            raise WorkloadError("give either a POSTed config.json or ?model=NAME, not both")
        model = spec_from_config(config, name="posted config", source="POST body")
    else:
        model = _registry_name("model", q.get("model", "llama-3-8b"), registry.names())
    a = analyze(
        model,
        None if hw == "none" else _registry_name("hardware", hw, hwreg.names()),
        precision=precision,
        attention=q.get("attention", "flash"),
        efficiency_mode=q.get("efficiency", "expected"),
        **kw,
    )
    return a.to_dict()


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

    def _body(self) -> dict:
        length = self.headers.get("Content-Length")
        if length is None or not length.strip().isdigit():
            raise HTTPError(411, "POST a config.json with a Content-Length header")
        n = int(length)
        if n > MAX_BODY:
            raise HTTPError(413, f"body of {n:,} bytes exceeds the {MAX_BODY:,}-byte limit for a config.json")
        data = self.rfile.read(n)
        if len(data) < n:
            raise HTTPError(400, "the body ended before Content-Length bytes")
        from llmath.model.config_check import parse_json

        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise HTTPError(400, "the body is not UTF-8 JSON") from None
        return parse_json(text, "POST body")

    def _route(self, post: bool) -> None:
        self._check_origin()
        url = urlparse(self.path)
        if post and url.path != "/api/analyze":
            raise HTTPError(405, f"POST goes to /api/analyze, not {url.path[:100]!r}")
        if url.path == "/" and not post:
            self._send(200, page(), "text/html; charset=utf-8")
        elif url.path == "/api/models":
            from llmath.model import registry

            self._json(200, [n for n in registry.names() if not registry.spec(n).is_encoder_decoder])
        elif url.path == "/api/hardware":
            from llmath import hardware

            self._json(200, hardware.names())
        elif url.path == "/api/analyze":
            config = self._body() if post else None
            self._json(200, analyze_query(parse_qs(url.query, max_num_fields=64), config))
        else:
            raise HTTPError(404, f"no such page {url.path[:100]!r}; try / or /api/analyze?model=llama-3-8b")

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
