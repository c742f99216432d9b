"""The workload: what each request asks for and the load the requests arrive as, validated in one place.

One :class:`Workload` is what :func:`llmath.analyze`, :func:`llmath.serve`, :func:`llmath.plan` and
:func:`llmath.deploy.disagg.serve_disaggregated` take (``workload=``), what the command line builds from its
flags and the page from its fields; each entry point refuses the fields it does not use, naming them.

The request: a ``prompt`` of P tokens and ``gen`` = G output tokens, or output lengths drawn from
``gen_dist`` = ((G_i, weight_i), …); a cached prefix given as ``prefix`` tokens before the prompt (the static
batch) or as the fraction ``prefix_hit`` of each prompt found in the prefix cache (serving). Encoder-decoder
and vision requests add ``decoder_prompt`` and ``images`` (static batch only; :mod:`llmath.ops.stages`).

The load is one of three kinds, never two:

* a static ``batch`` of B sequences that start together and run to the end (``analyze``; the default load,
  B = 1, which a concurrency or a rate replaces: ``batch`` stays 1 and unused beside them);
* ``concurrency`` C: a closed loop of C clients, each sending its next request when one returns
  (``arrival`` ``closed``, the default, ``staggered`` or ``offline``: every request queued at once);
* ``rate`` R requests/s: an open loop (``arrival`` ``poisson``, the default and only one).

``prompts_per_client`` is how many requests each closed-loop client sends (benchmark clients' count, which
sets how long the first, in-step wave weighs; :mod:`llmath.deploy.closed_loop`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from llmath.errors import WorkloadError
from llmath.validation import MAX_BATCH, MAX_TOKENS, check_float, check_int

ARRIVALS = ("closed", "staggered", "poisson", "offline")
MAX_RATE = 1e9  # requests/s: far beyond any deployment, keeps Little's law products finite
MAX_GEN_DIST = 10_000  # (length, weight) pairs in an output-length distribution
MAX_PROMPTS_PER_CLIENT = 1e6
# SemiAnalysis InferenceMAX's benchmark scripts (benchmarks/*.sh: ``--num-prompts $(( CONC * 10 ))
# --max-concurrency $CONC --request-rate inf``, github.com/InferenceMAX/InferenceMAX) send ten prompts per
# client; vLLM's own default (``--num-prompts 1000``) gives 1000 / C.
PROMPTS_PER_CLIENT = 10


@dataclass(frozen=True)
class Workload:
    """The requests and their load (see the module doc). Checked when made: a bad value raises a one-line
    :class:`~llmath.errors.WorkloadError` naming it, the rule and what to give instead."""

    prompt: int = 512
    gen: int = 128
    prefix: int = 0
    prefix_hit: float = 0.0
    gen_dist: tuple[tuple[int, float], ...] = ()
    batch: int = 1
    concurrency: float | None = None
    rate: float | None = None
    arrival: str | None = None
    prompts_per_client: float = PROMPTS_PER_CLIENT
    decoder_prompt: int = 1
    images: int = 0

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "prompt", check_int("prompt", self.prompt, 1, MAX_TOKENS))
        put(self, "gen", check_int("gen", self.gen, 1, MAX_TOKENS))
        put(self, "prefix", check_int("prefix", self.prefix, 0, MAX_TOKENS))
        put(self, "prefix_hit", check_float("prefix_hit", self.prefix_hit, 0, 1))
        put(self, "gen_dist", gen_dist_arg(self.gen_dist))
        put(self, "decoder_prompt", check_int("decoder_prompt", self.decoder_prompt, 1, MAX_TOKENS))
        put(self, "images", check_int("images", self.images, 0, MAX_TOKENS))
        ppc = check_float("prompts_per_client", self.prompts_per_client, 0, MAX_PROMPTS_PER_CLIENT, lo_open=True)
        put(self, "prompts_per_client", ppc)
        put(self, "batch", check_int("batch", self.batch, 1, MAX_BATCH))
        loads = [k for k in ("concurrency", "rate") if getattr(self, k) is not None] + ["batch"] * (self.batch != 1)
        if len(loads) > 1:
            given = ", ".join(f"{k}={getattr(self, k)!r}" for k in loads)
            raise WorkloadError(
                f"{given}: give exactly one of concurrency (closed loop), rate (requests/s, open loop) or batch"
            )
        if self.concurrency is not None:
            put(self, "concurrency", check_float("concurrency", self.concurrency, 1, MAX_BATCH))
        elif self.rate is not None:
            put(self, "rate", check_float("rate", self.rate, 0, MAX_RATE, lo_open=True))
        put(self, "arrival", self._arrival())

    def _arrival(self) -> str | None:
        """The arrival protocol: the one given, else closed (a concurrency) or poisson (a rate); None for a batch."""
        arrival = self.arrival
        if arrival is None:
            return None if self.static else "closed" if self.rate is None else "poisson"
        if arrival not in ARRIVALS:
            raise WorkloadError(f"arrival={arrival!r} must be one of {', '.join(ARRIVALS)}; e.g. arrival='closed'")
        if self.static:
            raise WorkloadError(f"arrival={arrival!r} applies to a serving load; give concurrency= or rate=")
        if (arrival == "poisson") != (self.rate is not None):  # staggered and offline, like closed, take a concurrency
            need = "--rate R" if arrival == "poisson" else "--concurrency C"
            raise WorkloadError(f"arrival={arrival!r} needs {need}; add it, or pick the arrival of the load given")
        return arrival

    @property
    def static(self) -> bool:
        """A static batch (no concurrency or rate)."""
        return self.concurrency is None and self.rate is None

    @property
    def offline(self) -> bool:
        """Every request queued at once (vLLM's offline ``LLM`` defaults apply)."""
        return self.arrival == "offline"

    @property
    def longest_gen(self) -> int:
        """The longest output a request asks for: ``gen``, or the largest length of ``gen_dist``."""
        return max((int(g) for g, _ in self.gen_dist), default=self.gen)

    def given(self) -> dict[str, Any]:
        """The fields that differ from the defaults of the same kind of load (the load's default arrival
        counts as not given), and the concurrency or rate."""
        base = Workload(concurrency=self.concurrency, rate=self.rate)
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(base, f.name)}
        return out | {k: getattr(self, k) for k in ("concurrency", "rate") if getattr(self, k) is not None}

    def refuse(self, entry: str, unused: tuple[str, ...], hints: dict[str, str] | None = None) -> None:
        """A field ``entry`` does not use, given, is refused (never silently ignored)."""
        given = self.given()
        for k in unused:
            if k in given:
                hint = (hints or {}).get(k, f"drop it from the Workload {entry} takes")
                raise WorkloadError(f"Workload({k}={getattr(self, k)!r}): {entry} does not use {k}; {hint}")


WORKLOAD_FIELDS = tuple(f.name for f in fields(Workload))
SERVING_ONLY = ("prefix_hit", "gen_dist", "concurrency", "rate", "arrival", "prompts_per_client")
STATIC_ONLY = ("batch", "prefix", "decoder_prompt", "images")


def workload_arg(workload: Any, extra: dict[str, Any], entry: str, required: bool = False) -> Workload:
    """``workload`` checked to be a :class:`Workload` (None, where not ``required``: the default one); the
    workload spelled out as keywords among ``extra`` (``prompt=64``) refused, naming the Workload to pass."""
    refuse_workload_keywords(extra)
    if workload is None and required:
        raise WorkloadError(f"{entry}() needs workload=Workload(prompt=, gen=, ...); see help({entry})")
    if workload is None:
        return Workload()
    if not isinstance(workload, Workload):
        raise WorkloadError(f"workload={workload!r} must be a llmath.Workload(prompt=, gen=, ...); see help({entry})")
    return workload


def refuse_workload_keywords(kwargs: dict[str, Any]) -> None:
    """The workload spelled out as keywords (``prompt=64``) is refused with the one way to give it."""
    given = {k: v for k, v in kwargs.items() if k in WORKLOAD_FIELDS}
    if "offline" in kwargs:  # the offline load is an arrival protocol
        given["arrival"] = "offline" if kwargs["offline"] else None
    if given:
        kw = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise WorkloadError(f"{kw}: pass the workload as workload=Workload({kw})")


def gen_dist_arg(gen_dist: Any) -> tuple[tuple[int, float], ...]:
    """((length, weight), ...): lengths integers in [1, MAX_TOKENS], weights finite and > 0."""
    try:
        pairs = tuple(tuple(x) for x in (gen_dist or ()))
    except TypeError:
        raise WorkloadError(f"gen_dist={gen_dist!r} must be a sequence of (length, weight) pairs") from None
    if len(pairs) > MAX_GEN_DIST:
        raise WorkloadError(
            f"gen_dist: {len(pairs):,} pairs exceed the limit of {MAX_GEN_DIST:,}; merge lengths into fewer bins"
        )
    out = []
    for pair in pairs:
        if len(pair) != 2:
            raise WorkloadError(f"gen_dist entry {pair!r} must be a (length, weight) pair, e.g. (64, 0.5)")
        length = check_int("gen_dist length", pair[0], 1, MAX_TOKENS)
        out.append((length, check_float("gen_dist weight", pair[1], 0, 1e12, lo_open=True)))
    return tuple(out)
