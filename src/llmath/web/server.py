"""The local web page: ``llmath serve`` answers on 127.0.0.1 only, with the standard library.

``GET /`` is one self-contained HTML page (``data/web/index.html``, no external assets). ``/api/<name>``
runs :data:`llmath.web.api.HANDLERS` ``[name]`` with the query string as parameters (GET), or with a JSON
body ``{"params": {...}, "config": {...} | null}`` (POST: a config.json object instead of a registry name).
Library errors come back as ``{"error": message}`` with status 400. Nothing here computes.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlparse

from llmath.errors import LLMathError


def page() -> bytes:
    return (resources.files("llmath") / "data" / "web" / "index.html").read_bytes()


MAX_BODY = 4 << 20  # a config.json is a few kB; a safetensors index is the largest thing worth sending


class _Handler(BaseHTTPRequestHandler):
    server_version = "llmath"

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj) -> None:
        from llmath.output import _default

        self._send(status, json.dumps(obj, default=_default).encode(), "application/json")

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlparse(self.path)
        if url.path == "/":
            self._send(200, page(), "text/html; charset=utf-8")
            return
        if url.path == "/favicon.ico":
            self._send(204, b"", "image/x-icon")
            return
        q = {k: v[-1] for k, v in parse_qs(url.query).items() if v}
        self._api(url.path, q, None)

    def do_POST(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self._json(413, {"error": f"request body of {n} bytes exceeds {MAX_BODY}; send a config.json only"})
            return
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            self._json(400, {"error": 'the request body is not JSON; send {"params": {...}, "config": {...}}'})
            return
        params = body.get("params") if isinstance(body, dict) else None
        config = body.get("config") if isinstance(body, dict) else None
        if not isinstance(params, dict) or not (config is None or isinstance(config, dict)):
            self._json(400, {"error": 'the body must be {"params": {...}, "config": {...} or null}'})
            return
        self._api(url.path, {str(k): str(v) for k, v in params.items()}, config)

    def _api(self, path: str, params: dict[str, str], config: dict | None) -> None:
        from llmath.web.api import HANDLERS

        name = path.removeprefix("/api/")
        handler = HANDLERS.get(name) if path.startswith("/api/") else None
        if handler is None:
            self._json(404, {"error": f"no such page {path!r}; try / or /api/analyze?model=llama-3-8b"})
            return
        try:
            self._json(200, handler(params, config))
        except LLMathError as e:
            self._json(400, {"error": str(e)})

    def log_message(self, fmt: str, *args) -> None:  # quiet: the CLI prints the address once
        pass


def make_server(port: int = 8765) -> ThreadingHTTPServer:
    """A server bound to 127.0.0.1 (``port=0``: any free port); call ``serve_forever()``."""
    return ThreadingHTTPServer(("127.0.0.1", port), _Handler)
