"""A load generator for OpenAI-compatible streaming servers, with the metrics vLLM's ``bench serve`` reports.

Protocol (as vLLM ``benchmarks/serve.py`` runs it with ``--max-concurrency``): ``requests`` requests, at most
``concurrency`` in flight; each finished request is replaced at once by the next (a closed loop), or,
with ``rate``, request *i* is not sent before its arrival time, the arrivals a Poisson process (exponential
gaps of mean 1/rate, seeded) still capped at ``concurrency`` in flight. Each request is a streaming
``POST {url}/v1/completions`` of ``prompt`` token ids (``prompt`` as a list of integers, which the OpenAI
completions API accepts, so the prompt length is exact without a tokenizer), ``max_tokens = gen``,
``ignore_eos`` (vLLM and SGLang honour it; as ``bench serve`` sends it) and ``stream_options.include_usage``.

Metrics (vLLM ``benchmarks/serve.py`` ``calculate_metrics``):
- TTFT: from sending the request to the first streamed chunk that carries text;
- ITL: the gaps between successive text chunks, every gap of every request pooled;
- TPOT per request: (e2e − TTFT) / (output tokens − 1), for requests with more than one output token; the
  reported TPOT is the mean (and percentiles) over requests;
- E2E: from sending to the last chunk; throughput: output tokens of completed requests / the run's wall time
  (first send to last completion), and requests/s likewise.
Output tokens are the ``usage.completion_tokens`` the server reports, else the number of text chunks.

Every wait is bounded: a connection or a read that sees nothing for ``timeout_s`` fails that request
("stalled"), a request running longer than ``request_timeout_s`` is abandoned, and the run stops sending
after ``max_duration_s``. A non-200 answer, a refused connection or a stream closed before ``[DONE]``
fails that request with its reason; the report counts each kind. The library prints nothing: ``progress``
is called with (finished, total).
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from llmath.errors import WorkloadError

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class BenchConfig:
    url: str
    model: str
    concurrency: int
    prompt: int
    gen: int
    requests: int
    rate: float | None = None
    timeout_s: float = 30.0
    request_timeout_s: float = 600.0
    max_duration_s: float = 3600.0
    seed: int = 0

    def __post_init__(self):
        for name, v, lo in (("concurrency", self.concurrency, 1), ("prompt", self.prompt, 1), ("gen", self.gen, 1)):
            if not isinstance(v, int) or v < lo:
                raise WorkloadError(f"--{name} {v!r} must be an integer >= {lo}")
        if not isinstance(self.requests, int) or self.requests < 1:
            raise WorkloadError(f"--requests {self.requests!r} must be an integer >= 1")
        if self.rate is not None and not (0 < self.rate < float("inf")):
            raise WorkloadError(f"--rate {self.rate!r} must be a finite number of requests/s > 0")
        for name, t in (("--timeout", self.timeout_s), ("--max-seconds", self.max_duration_s)):
            if not (0 < t < float("inf")):
                raise WorkloadError(f"{name} {t!r} must be a finite number of seconds > 0")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WorkloadError(f"URL {self.url!r} must be http://HOST:PORT (the server's base URL)")


@dataclass
class RequestResult:
    """One request: when it was sent, its text chunks' arrival times (seconds after sending), the output
    tokens and, for a failed one, why."""

    sent_s: float
    chunk_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    done_s: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.chunk_s)


def _body(cfg: BenchConfig, rng: random.Random) -> bytes:
    prompt = [rng.randrange(1000, 30000) for _ in range(cfg.prompt)]
    req = {
        "model": cfg.model,
        "prompt": prompt,
        "max_tokens": cfg.gen,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    return json.dumps(req).encode()


def _connect(cfg: BenchConfig) -> http.client.HTTPConnection:
    parts = urlsplit(cfg.url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return kind(parts.hostname or "127.0.0.1", parts.port, timeout=cfg.timeout_s)


def one_request(cfg: BenchConfig, body: bytes, t0: float) -> RequestResult:
    """Send one streaming completion and time its chunks (see the module docstring for what fails it)."""
    path = urlsplit(cfg.url).path.rstrip("/") + "/v1/completions"
    res = RequestResult(sent_s=time.perf_counter() - t0)
    start = time.perf_counter()
    conn = _connect(cfg)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            text = resp.read(300).decode(errors="replace")
            res.error = f"HTTP {resp.status}: {' '.join(text.split())[:120]}"
            return res
        _read_stream(cfg, resp, res, start)
    except TimeoutError:
        res.error = f"stalled: no data for {cfg.timeout_s:g} s"
    except (ConnectionError, OSError, http.client.HTTPException) as e:
        res.error = f"connection: {type(e).__name__}: {e}"[:160]
    finally:
        conn.close()
    return res


def _read_stream(cfg: BenchConfig, resp, res: RequestResult, start: float) -> None:
    """Read SSE lines until ``data: [DONE]``; a stream that ends before it fails the request."""
    usage = None
    for _ in range(10 * cfg.gen + 10_000):
        line = resp.readline()
        now = time.perf_counter() - start
        if now > cfg.request_timeout_s:
            res.error = f"abandoned: still streaming after {cfg.request_timeout_s:g} s"
            return
        if not line:
            res.error = f"closed mid-stream after {len(res.chunk_s)} chunks (no [DONE])"
            return
        text = line.decode(errors="replace").strip()
        if not text.startswith("data:"):
            continue
        data = text[5:].strip()
        if data == "[DONE]":
            res.done_s = now
            res.output_tokens = usage if usage is not None else len(res.chunk_s)
            if not res.chunk_s:
                res.error = "no tokens streamed"
            return
        usage = _chunk(data, now, res, usage)
        if res.error:
            return
    res.error = "too many stream lines for the requested output"


def _chunk(data: str, now: float, res: RequestResult, usage: int | None) -> int | None:
    try:
        msg = json.loads(data)
    except ValueError:
        res.error = f"malformed stream chunk {data[:60]!r}"
        return usage
    if isinstance(msg, dict) and msg.get("error"):
        res.error = f"server error in stream: {str(msg['error'])[:120]}"
        return usage
    choices = (msg.get("choices") or []) if isinstance(msg, dict) else []
    if choices and isinstance(choices[0], dict) and (choices[0].get("text") or "") != "":
        res.chunk_s.append(now)
    u = msg.get("usage") if isinstance(msg, dict) else None
    if isinstance(u, dict) and isinstance(u.get("completion_tokens"), int):
        return u["completion_tokens"]
    return usage


def arrivals(n: int, rate: float | None, seed: int) -> np.ndarray:
    """Send times (s after the start): all 0 for a closed loop; cumulative exponential gaps of mean 1/rate
    (a Poisson process, vLLM ``bench serve`` with burstiness 1) otherwise."""
    if rate is None:
        return np.zeros(n)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def run(cfg: BenchConfig, progress: Callable[[int, int], None] | None = None) -> BenchReport:
    """Run the benchmark (module docstring) and return its report."""
    rng = random.Random(cfg.seed)
    bodies = [_body(cfg, rng) for _ in range(min(cfg.requests, 64))]
    due = arrivals(cfg.requests, cfg.rate, cfg.seed)
    results: list[RequestResult | None] = [None] * cfg.requests
    lock = threading.Lock()
    state = {"next": 0, "done": 0}
    t0 = time.perf_counter()

    def worker():
        while True:
            with lock:
                i = state["next"]
                if i >= cfg.requests or time.perf_counter() - t0 > cfg.max_duration_s:
                    return
                state["next"] = i + 1
            wait = t0 + due[i] - time.perf_counter()
            if wait > 0:
                time.sleep(min(wait, cfg.max_duration_s))
            results[i] = one_request(cfg, bodies[i % len(bodies)], t0)
            with lock:
                state["done"] += 1
                done = state["done"]
            if progress:
                progress(done, cfg.requests)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(cfg.concurrency, cfg.requests))]
    for t in threads:
        t.start()
    limit = cfg.max_duration_s + cfg.request_timeout_s + cfg.timeout_s
    for t in threads:
        t.join(max(limit - (time.perf_counter() - t0), 0.0))
    wall = time.perf_counter() - t0
    return summarise(cfg, [r for r in results if r is not None], wall)


@dataclass
class BenchReport:
    """Measured metrics (seconds; percentiles keyed ``p50``...), counts and the failures by reason."""

    config: dict[str, Any]
    completed: int
    failed: int
    errors: dict[str, int]
    duration_s: float
    metrics: dict[str, Any]
    prediction: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, **{f"p{p}": None for p in PERCENTILES}}
    a = np.asarray(values, dtype=float)
    out: dict[str, float | None] = {"mean": float(a.mean()), "median": float(np.median(a))}
    out.update({f"p{p}": float(np.percentile(a, p)) for p in PERCENTILES})
    return out


def summarise(cfg: BenchConfig, results: list[RequestResult], wall_s: float) -> BenchReport:
    """The metrics of ``results`` as vLLM ``bench serve`` defines them (module docstring)."""
    ok = [r for r in results if r.ok]
    errors: dict[str, int] = {}
    for r in results:
        if not r.ok:
            kind = (r.error or "failed").split(":")[0]
            errors[kind] = errors.get(kind, 0) + 1
    first: dict[str, str] = {}
    for r in results:
        if not r.ok and r.error:
            first.setdefault((r.error or "").split(":")[0], r.error)
    ttft = [r.chunk_s[0] for r in ok]
    e2e = [r.chunk_s[-1] for r in ok]
    tpot = [(r.chunk_s[-1] - r.chunk_s[0]) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    itl = [b - a for r in ok for a, b in zip(r.chunk_s, r.chunk_s[1:], strict=False)]
    out_tokens = sum(r.output_tokens for r in ok)
    span = (max(r.sent_s + r.chunk_s[-1] for r in ok) - min(r.sent_s for r in ok)) if ok else wall_s
    metrics = {
        "ttft_s": _stats(ttft),
        "tpot_s": _stats(tpot),
        "itl_s": _stats(itl),
        "e2e_s": _stats(e2e),
        "output_tokens": out_tokens,
        "throughput_tok_s": out_tokens / span if ok and span > 0 else None,
        "requests_s": len(ok) / span if ok and span > 0 else None,
    }
    conf = {k: getattr(cfg, k) for k in ("url", "model", "concurrency", "prompt", "gen", "requests", "rate")}
    rep = BenchReport(conf, len(ok), len(results) - len(ok), errors, wall_s, metrics)
    rep.notes += list(first.values())
    if len(results) < cfg.requests:
        rep.notes.append(f"stopped after {len(results)} of {cfg.requests} requests (--max-seconds)")
    return rep


PREDICTED = {"ttft_s": "ttft_s", "tpot_s": "tpot_s", "itl_s": "itl_p50_s", "e2e_s": "e2e_s"}


def predict(cfg: BenchConfig, hardware, model: str, deployment: dict | None = None, **serve_kwargs) -> dict[str, Any]:
    """llmath's steady-state prediction of the same protocol (``concurrency`` closed loop, or ``rate``) for
    the deployment ``serve_kwargs`` describe (:func:`llmath.deploy.service.serve`); ``deployment``: the
    flags that gave them, kept in the prediction so a saved report can calibrate it."""
    from llmath.deploy.service import serve
    from llmath.deploy.workload import Workload

    conc = None if cfg.rate is not None else float(cfg.concurrency)
    work = Workload(prompt=cfg.prompt, gen=cfg.gen, concurrency=conc, rate=cfg.rate)
    served = serve(model, hardware, workload=work, **serve_kwargs)
    rep = served.to_dict()
    keys = ("ttft_s", "tpot_s", "itl_p50_s", "itl_p90_s", "itl_p99_s", "e2e_s", "throughput_tok_s", "requests_s")
    pred = {k: rep.get(k) for k in keys}
    pred.update({"model": rep["model"], "hardware": rep["hardware"], "layout": rep.get("layout")})
    pred["engine"] = rep["engine"]["name"] if isinstance(rep.get("engine"), dict) else rep.get("engine")
    if deployment is not None:
        pred["deployment"] = deployment
    return pred


def comparison(rep: BenchReport) -> list[dict[str, Any]]:
    """Rows of measured (mean, median, p90, p99) beside predicted and their ratio, for the output layer."""
    rows = []
    pred = rep.prediction or {}
    for key, pkey in PREDICTED.items():
        m = rep.metrics[key]
        p = pred.get(pkey)
        ratio = m["mean"] / p if m["mean"] is not None and p else None
        rows.append({"metric": key, **m, "predicted": p, "measured/predicted": ratio})
    for key in ("throughput_tok_s", "requests_s"):
        m = rep.metrics[key]
        p = pred.get(key)
        rows.append({"metric": key, "mean": m, "predicted": p, "measured/predicted": m / p if m and p else None})
    return rows
