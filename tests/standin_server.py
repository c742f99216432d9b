"""A stand-in OpenAI-compatible server for tests/test_bench.py: ``python standin_server.py MODE TTFT TPOT``
listens on 127.0.0.1 (any free port, printed on stdout) and streams ``max_tokens`` completion chunks, the first
after TTFT seconds and each next after TPOT; MODE ``error`` answers 500, ``stall`` waits 3 s before the first
token, ``close`` closes the stream after two chunks without ``[DONE]``."""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, TTFT, TPOT = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _chunk(self, payload):
        self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
        self.wfile.flush()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = body["max_tokens"]
        if MODE == "error" or body.get("stream") is not True or not body.get("prompt"):
            msg = b'{"error": "model not loaded"}'
            self.send_response(500)
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        time.sleep({"stall": 3.0, "close": 0.05}.get(MODE, TTFT))
        try:
            self._stream(n)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the stall case)

    def _stream(self, n: int):
        for i in range(n):
            if MODE == "close" and i == 2:
                return  # the connection closes without [DONE]
            if i:
                time.sleep(TPOT if MODE == "ok" else 0.01)
            self._chunk({"choices": [{"text": "tok"}]})
        self._chunk({"choices": [], "usage": {"completion_tokens": n}})
        self.wfile.write(b"data: [DONE]\n\n")


class Server(ThreadingHTTPServer):
    request_queue_size = 256  # listen backlog: 32 clients connect at once (the default 5 resets some)
    daemon_threads = True


if __name__ == "__main__":
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.05)
