"""The local web page: ``llmath serve`` answers on 127.0.0.1 only, with the standard library.

``GET /`` is one self-contained HTML page (``data/web/index.html``, no external assets). It calls
``GET /api/analyze?model=…`` (the same object as ``llmath analyze --json``), ``/api/models`` and
``/api/hardware``. Library errors come back as ``{"error": message}`` with status 400. Nothing here
computes: it calls :func:`llmath.analysis.analyze`.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlparse

from llmath.errors import LLMathError, WorkloadError


def page() -> bytes:
    return (resources.files("llmath") / "data" / "web" / "index.html").read_bytes()


_INT_FIELDS = ("batch", "prompt", "gen", "prefix")


def analyze_query(query: dict[str, list[str]]) -> dict:
    """The ``/api/analyze`` handler: query parameters -> ``llmath analyze --json``'s object."""
    from llmath.analysis import analyze
    from llmath.model.dtypes import Precision

    q = {k: v[-1] for k, v in query.items() if v and v[-1] != ""}
    kw = {}
    for f in _INT_FIELDS:
        if f in q:
            try:
                kw[f] = int(q[f])
            except ValueError:
                raise WorkloadError(f"{f}={q[f]!r} must be an integer") from None
    dtype = q.get("dtype", "bf16")
    precision = Precision(q.get("weights", dtype), q.get("activations", dtype), q.get("kv_dtype", dtype))
    hw = q.get("hardware", "h100-sxm")
    a = analyze(
        q.get("model", "llama-3-8b"),
        None if hw == "none" else hw,
        precision=precision,
        attention=q.get("attention", "flash"),
        efficiency_mode=q.get("efficiency", "expected"),
        **kw,
    )
    return a.to_dict()


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
        try:
            if url.path == "/":
                self._send(200, page(), "text/html; charset=utf-8")
            elif url.path == "/api/models":
                from llmath.model import registry

                self._json(200, [n for n in registry.names() if not registry.spec(n).is_encoder_decoder])
            elif url.path == "/api/hardware":
                from llmath import hardware

                self._json(200, hardware.names())
            elif url.path == "/api/analyze":
                self._json(200, analyze_query(parse_qs(url.query)))
            else:
                self._json(404, {"error": f"no such page {url.path!r}; try / or /api/analyze?model=llama-3-8b"})
        except LLMathError as e:
            self._json(400, {"error": str(e)})

    def log_message(self, fmt: str, *args) -> None:  # quiet: the CLI prints the address once
        pass


def make_server(port: int = 8765) -> ThreadingHTTPServer:
    """A server bound to 127.0.0.1 (``port=0``: any free port); call ``serve_forever()``."""
    return ThreadingHTTPServer(("127.0.0.1", port), _Handler)
