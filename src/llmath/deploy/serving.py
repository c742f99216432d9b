"""Continuous batching in steady state: TTFT, TPOT, throughput of C concurrent requests (or a request rate).

**Choice: a steady-state closed form over the iteration cost** (:mod:`.step`), vectorised over the
concurrency with numpy, not an iteration-by-iteration simulation. Why:

* *speed*: the planner evaluates ~10⁵ configurations a second; one closed-form evaluation is a handful of
  matrix products over a whole concurrency grid, where a simulation steps through thousands of iterations;
* *accuracy*: in steady state every iteration has (nearly) the same decode batch and the same prefill share,
  and the iteration cost is affine in the contexts, so the mean iteration is the iteration at the mean. The
  small event simulation of :mod:`.simulate` (vLLM-like scheduler, one iteration at a time) validates it in
  the tests: TTFT, TPOT and throughput within 5% on the cases tested there (dense and MoE, one prefill at a
  time and budget-filling chunks); with a queue (C > B_max) TTFT, TPOT and throughput stay within 5% but the
  ITL p99 is 36–40% low, as admissions then come in bursts the mean field smooths out.

**The model** (all lengths in tokens; times from the operator table through :class:`.step.Device`):

* a request has P prompt tokens, of which a fraction ``prefix_hit`` is already cached (its KV is reused, not
  recomputed: P' = P − ⌊h·P⌋ are prefilled), and G output tokens (or a mixture of lengths: below, G − 1 reads
  E[G − 1] and the contexts and KV sizes their weighted means, :class:`Requests`); the prefill's last chunk
  yields token 1, then G − 1 decode iterations (one token each) follow;
* the engine holds at most ``B_max = min(max_num_seqs, KV pool / KV bytes a request counts)`` requests
  (:mod:`.serving_memory`; the engine's settings: :class:`.engine_config.EngineConfig`): its
  final KV at P + G − 1 positions where admission reserves it (TensorRT-LLM's GUARANTEED_NO_EVICT), its mean
  over a lifetime (P + (G − 1)/2 positions) where blocks are allocated on demand (vLLM, SGLang; preemption
  when the pool runs dry is not modelled), plus the share of its remaining output the engine's admission holds
  back (SGLang's ``new_token_ratio``, :mod:`.admission_reserve`); the others queue (C − B_max requests wait);
* each iteration schedules every decoding request (one token each) and fills the rest of the token budget K
  (``max_num_batched_tokens``) with prefill chunks, first come first served (vLLM V1, SGLang and TensorRT-LLM
  with chunked context all do so); without chunking, a prompt is prefilled whole in one iteration;
* steady state: with B resident requests, X requests finish per iteration and each stays L = I_p + G − 1
  iterations (I_p prefill iterations), so X = B / L, d = X·(G − 1) decode tokens and X·P' prefill tokens run
  per iteration; I_p = ⌈P' / (K − d)⌉, solved by a few fixed-point passes; the token budget caps
  X ≤ K / (P' + G − 1) (then prefills wait for budget: I_p grows to L − G + 1);
* iterations are of three kinds: a fraction f = min(1, X·I_p) carry prefill chunks, of which (I_p − 1)/I_p
  fill the budget (τ_a: K − d tokens) and 1/I_p carry a prompt's last, shorter chunk (τ_b); the rest are pure
  decode (τ_d, all B requests decoding). When prefills overlap (X·I_p ≥ 1) every iteration carries the mean
  X·P' prefill tokens. A decoding request shares an iteration with another's prefill with probability
  q = min(1, X·I_p·(B − 1)/B) (the others' prefills spread evenly over the iterations), so
  TPOT (mean) = q·τ_m + (1 − q)·τ_d with τ_m = ((I_p − 1)·τ_a + τ_b)/I_p, and the inter-token latency takes
  τ_a, τ_b, τ_d with those probabilities (p50/p90/p99); TTFT = queue wait + (I_p − 1)·τ_a + τ_b;
* the clients are desynchronised (their requests start evenly spread over a lifetime): the Poisson arrivals
  of :func:`llmath.deploy.service.serve` with a rate. Benchmark clients start their requests together and
  stay in step: :mod:`.closed_loop` models that closed loop (the default with a concurrency);
* decoding contexts are spread evenly over P … P + G − 2 (mean P + (G − 2)/2, exact for full attention);
  a prefill chunk of k tokens sits on average after h·P + (P' − k)/2 positions (exact for the pairs sum);
* open loop (a request rate λ): the prompt queue as the scheduler serves it, a bulk-service Markov chain,
  and the decoders' law from λ (:mod:`.prompt_queue`); this steady state at Little's concurrency only
  starts it.

Encoder-decoder models (``Requests.encoder_decoder``; iteration costs in :mod:`.step`): P is the source a
request's encoder runs over, whole (an encoder is bidirectional: its prompt is never chunked, so it must fit
the token budget); its decoder then starts from one token, so the decoding contexts run 1 … G − 1 and a
request holds its self-attention K/V at those positions plus the cross-attention K/V of its P source positions,
fixed from its prefill to its end.

Output lengths may follow a distribution (:class:`Requests` ``gen_dist``: the steady state takes its moments;
every request still has the same P). The engine's time outside the kernels (scheduling, input preparation,
sampling, detokenisation, tokenisation: :mod:`.overheads`, the preset's sourced terms) is added to every
iteration (τ_a, τ_b, τ_d) and once per request to TTFT under ``expected`` efficiency, and reported as
``overheads_s``. Not modelled: prompt-length distributions, preemption/recompute and the network.
``tok_s_per_user`` is 1 / TPOT (the generation speed a user sees, as aiconfigurator and GenAI-Perf report it);
``throughput_tok_s`` is aggregate output tokens/s = C·E[G] / e2e (Little's law for the closed loop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmath.deploy.engine_config import EngineConfig
from llmath.deploy.graph_passes import eager_host_time as eager_host_time
from llmath.deploy.graph_passes import graph_tokens as graph_tokens
from llmath.deploy.overheads import Overheads
from llmath.deploy.speculative import Speculation, round_time
from llmath.deploy.step import (
    Device,
)
from llmath.errors import WorkloadError
from llmath.model.traits import traits

FIXED_POINT_PASSES = 6


@dataclass(frozen=True)
class Requests:
    """The request stream: P prompt tokens (``prefix_hit`` of them cached) and G output tokens each, or output
    lengths drawn from ``gen_dist`` = ((G_i, weight_i), …) (weights normalised; ``gen`` is then ignored).

    A request of length G_i stays G_i − 1 decode iterations after its prefill; the mixture enters the steady
    state through a few moments: the mean output E[G], the decode iterations per request E[G − 1], the mean
    context of the decoding requests (weighted by the iterations each spends decoding), and the KV a request
    counts in the pool (weighted by its lifetime)."""

    prompt: int
    gen: int
    prefix_hit: float = 0.0
    gen_dist: tuple[tuple[int, float], ...] = ()
    encoder_decoder: bool = False  # P source tokens through an encoder; the decoder starts from one token

    def __post_init__(self) -> None:
        for k in ("prompt", "gen"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise WorkloadError(f"{k}={v!r} must be an integer >= 1")
        if not 0 <= self.prefix_hit < 1:
            raise WorkloadError(f"prefix_hit={self.prefix_hit} must be a fraction in [0, 1); e.g. 0.5")
        if self.encoder_decoder and self.prefix_hit:
            raise WorkloadError(
                f"prefix_hit={self.prefix_hit} applies to decoder-only models: an encoder reruns over every source;"
                " drop --prefix-hit"
            )
        for g, w in self.gen_dist:
            if isinstance(g, bool) or not isinstance(g, int | np.integer) or g < 1 or not w > 0:
                raise WorkloadError(f"gen_dist entry ({g!r}, {w!r}): lengths must be integers >= 1, weights > 0")

    @property
    def cached(self) -> int:
        return int(self.prefix_hit * self.prompt)

    @property
    def new(self) -> int:
        """P': prompt tokens prefilled (not served from the prefix cache)."""
        return self.prompt - self.cached

    @property
    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(output lengths, probabilities)."""
        if not self.gen_dist:
            return np.array([float(self.gen)]), np.array([1.0])
        g = np.array([float(x) for x, _ in self.gen_dist])
        w = np.array([float(x) for _, x in self.gen_dist])
        return g, w / w.sum()

    @property
    def mean_gen(self) -> float:
        g, w = self.lengths
        return float(g @ w)

    @property
    def max_gen(self) -> int:
        return int(self.lengths[0].max())

    @property
    def decode_steps(self) -> float:
        """E[G − 1]: decode iterations per request."""
        g, w = self.lengths
        return float((g - 1) @ w)

    @property
    def start(self) -> int:
        """Positions in the (self-attention) cache when decoding starts: P, or 1 (encoder-decoder)."""
        return 1 if self.encoder_decoder else self.prompt

    @property
    def decode_context(self) -> float:
        """Mean context of the decoding requests: P + (G_i − 2)/2 weighted by the G_i − 1 steps each decodes
        (encoder-decoder: 1 + (G_i − 2)/2, the decoder's own positions)."""
        g, w = self.lengths
        steps = (g - 1) * w
        total = float(steps.sum())
        return self.start + (float(steps @ (np.maximum(g - 2, 0) / 2)) / total if total else 0.0)

    def kv_positions(self, reserve: bool) -> float:
        """Positions of KV a resident request counts, averaged over the requests in the pool (weighted by
        their lifetimes ∝ G_i): its last position P + G_i − 1 where admission reserves it, its mean over its
        life P + (G_i − 1)/2 where blocks come on demand."""
        g = self.lengths[0]
        return self.lifetime_mean(self.start + ((g - 1) if reserve else (g - 1) / 2))

    def lifetime_mean(self, per_length: np.ndarray) -> float:
        """The mean of ``per_length`` (one value per output length of :attr:`lengths`) over the requests in the
        pool, each weighted by its lifetime ∝ G_i."""
        g, w = self.lengths
        return float((g * w) @ per_length / (g @ w))


def refuse_uncached(spec) -> None:
    """A model that keeps no cache (the ``reruns_context`` trait, model/traits.py: each new position reruns the
    whole sequence): an engine's continuous batching of cached decode steps does not describe it."""
    if traits(spec).reruns_context:
        raise WorkloadError(
            f"{spec.name}: continuous batching (--concurrency, --rate, llmath plan) is not modelled for a model "
            "that keeps no cache (each new position reruns the whole sequence); analyse it with --batch instead"
        )


@dataclass(frozen=True)
class SteadyState:
    """Arrays over the concurrency grid (seconds, tokens/s, requests/s)."""

    concurrency: np.ndarray
    resident: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    itl_p50_s: np.ndarray
    itl_p90_s: np.ndarray
    itl_p99_s: np.ndarray
    e2e_s: np.ndarray
    throughput_tok_s: np.ndarray
    requests_s: np.ndarray
    decode_batch: np.ndarray
    prefill_tokens_per_iter: np.ndarray
    mixed_fraction: np.ndarray
    step_decode_s: np.ndarray
    step_mixed_s: np.ndarray
    overhead_ttft_s: np.ndarray | float = 0.0  # the engine overheads' share of ttft_s and tpot_s
    overhead_tpot_s: np.ndarray | float = 0.0

    @property
    def mean_iteration_s(self) -> np.ndarray:
        """The mean iteration: mixed ones (``mixed_fraction`` of them) at ``step_mixed_s``, the rest at
        ``step_decode_s``."""
        f = self.mixed_fraction
        return f * self.step_mixed_s + (1 - f) * self.step_decode_s


def _prefill_iterations(P_new: int, K: float, d: np.ndarray, chunked: bool) -> np.ndarray:
    if not chunked:
        return np.ones_like(d)
    return np.ceil(P_new / np.maximum(K - d, 1.0))


@dataclass(frozen=True)
class Decoding:
    """How decoding requests advance: one token per iteration, or speculative rounds (``spec`` with its
    ``draft`` device) that take ``width`` = k + 1 budget tokens per sequence and yield ``acceptance`` tokens."""

    dev: Device
    spec: Speculation | None = None
    draft: Device | None = None

    @property
    def tokens(self) -> float:
        return self.spec.acceptance if self.spec else 1.0

    @property
    def width(self) -> float:
        return float(self.spec.k + 1) if self.spec else 1.0

    def step(self, d, ctx) -> np.ndarray:
        if self.spec is None or self.draft is None:
            return self.dev.iteration(d, ctx).time_s
        return round_time(self.dev, self.draft, self.spec, d, ctx)

    def mixed(self, d, ctx, n, c, pf) -> np.ndarray:
        """With prefill chunks; under speculation the chunks run as their own pass after the round."""
        if self.spec is None:
            return self.dev.iteration(d, ctx, n, c, pf).time_s
        return self.step(d, ctx) + self.dev.iteration(0, 0, n, c, pf).time_s

    def mixed_and_step(self, d, d_step, ctx, n, c, pf) -> tuple[np.ndarray, np.ndarray]:
        """``mixed(d, ctx, n, c, pf)`` and ``step(d_step, ctx)``, the kinds of each along the leading axis: the
        same values, stacked into one evaluation (under speculation one round over both, the chunks' pass apart)."""
        d, n, c, pf = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (d, n, c, pf)))
        d_step = np.broadcast_to(np.asarray(d_step, dtype=float), (len(d_step), *d.shape[1:]))
        rows, k = np.concatenate([d, d_step]), len(d)
        if self.spec is not None:
            both = self.step(rows, ctx)
            return both[:k] + self.dev.iteration(0, 0, n, c, pf).time_s, both[k:]
        pad = np.zeros_like(d_step)
        t = self.dev.iteration(rows, ctx, *(np.concatenate([x, pad]) for x in (n, c, pf))).time_s
        return t[:k], t[k:]

    def select(self, mask) -> Decoding:
        """The decoding of the points ``mask`` selects: this one (its evaluations are element-wise)."""
        return self


def steady_state(
    dev: Device | Decoding, eng: EngineConfig, req: Requests, concurrency, max_resident: int
) -> SteadyState:
    """The closed-loop steady state at each concurrency (numpy array), B_max = ``max_resident``: the engine's
    prompts in its decode iterations (:func:`mixed_steady_state`), or, prefill-first (``eng.mixed_prefill``
    False), in passes of their own (:func:`.prefill_first.prefill_first_state`)."""
    if eng.mixed_prefill:
        return mixed_steady_state(dev, eng, req, concurrency, max_resident)
    from .prefill_first import prefill_first_state  # it builds on this module's parts

    return prefill_first_state(dev, eng, req, concurrency, max_resident)


def mixed_steady_state(
    dev: Device | Decoding, eng: EngineConfig, req: Requests, concurrency, max_resident: int
) -> SteadyState:
    """The steady state of the module's closed form: prefill chunks ride in the decoding requests' iterations."""
    dec, C = checked_concurrency(dev, concurrency)
    Pn = req.new
    K, chunked = _budget(eng, req)
    steps, w = req.decode_steps / dec.tokens, dec.width  # decode iterations per request, budget tokens each
    B = np.minimum(C, max_resident)
    Ip = _prefill_iterations(Pn, K, np.zeros_like(B), chunked)
    for _ in range(FIXED_POINT_PASSES):
        X = B / (Ip + steps)
        Ip = _prefill_iterations(Pn, K, X * steps * w, chunked)
    X = np.minimum(B / (Ip + steps), K / (Pn + steps * w))  # the token budget caps the request rate
    Ip = np.maximum(B / X - steps, Ip)  # when capped, prefills also wait for budget
    f = np.minimum(1.0, X * Ip)  # iterations that carry a prefill chunk
    n_pre = X * Ip / f  # requests prefilling in such an iteration
    d_m = np.maximum(B - n_pre, 0.0)  # the other resident requests decode
    ctx = req.decode_context
    # one prefill at a time (f < 1): I_p − 1 chunks fill the budget, the last takes the remainder;
    # overlapping prefills (f = 1) keep every iteration at the mean X·P' prefill tokens
    alone = X * Ip < 1
    full = np.minimum(Pn, np.maximum(K - d_m * w, 1.0)) if chunked else np.full_like(B, float(Pn))
    c_a = np.where(alone, full, X * Pn / n_pre)
    c_b = np.where(alone, np.maximum(Pn - (Ip - 1) * full, 1.0), c_a)
    pre_a, pre_b = req.cached + np.maximum(Pn - c_a, 0.0) / 2, req.cached + np.maximum(Pn - c_b, 0.0)
    two = np.stack  # both kinds of mixed iteration in one evaluation
    tau_a, tau_b = dec.mixed(two([d_m, d_m]), ctx, two([n_pre, n_pre]), two([c_a, c_b]), two([pre_a, pre_b]))
    tau_d = dec.step(B, ctx)
    o_m, o_d, o_req = _overheads(dec, eng, req, B, d_m)
    tau_a, tau_b, tau_d = tau_a + o_m, tau_b + o_m, tau_d + o_d
    tau_m = ((Ip - 1) * tau_a + tau_b) / Ip
    # a decoding request shares an iteration with another's prefill with probability q
    # (the others' prefills, spread evenly over the iterations as in the desynchronised steady state)
    q = np.minimum(1.0, X * Ip * (B - 1) / B)
    step_s = q * tau_m + (1 - q) * tau_d
    wait_iters = np.maximum(C - B, 0.0) / X  # closed loop: the queue drains X requests per iteration
    ttft = wait_iters * (f * tau_m + (1 - f) * tau_d) + Ip * tau_m + o_req
    e2e = ttft + steps * step_s
    a = dec.tokens
    o_ttft = wait_iters * (f * o_m + (1 - f) * o_d) + Ip * o_m + o_req  # the overheads' part of each, exactly
    o_tpot = (q * o_m + (1 - q) * o_d) / a
    p50, p90, p99 = _quantiles((0.5, 0.9, 0.99), q, Ip, tau_a / a, tau_b / a, tau_d / a)
    d = B - X * Ip
    return SteadyState(C, B, ttft, step_s / a, p50, p90, p99, e2e, C * req.mean_gen / e2e, C / e2e, d, X * Pn, f,
                       tau_d, tau_m, o_ttft, o_tpot)  # fmt: skip


def checked_concurrency(dev: Device | Decoding, concurrency) -> tuple[Decoding, np.ndarray]:
    """(the decoding, the concurrencies as a float array); a concurrency below 1 raises."""
    C = np.asarray(concurrency, dtype=float)
    if np.any(C < 1):
        raise WorkloadError(f"concurrency={concurrency!r} must be >= 1")
    return (dev if isinstance(dev, Decoding) else Decoding(dev)), C


def _budget(eng: EngineConfig, req: Requests) -> tuple[float, bool]:
    """(token budget K per iteration, whether prompts are chunked); a prompt over an unchunked budget raises."""
    Pn = req.new
    K = float(eng.max_num_batched_tokens) if eng.max_num_batched_tokens else float("inf")
    chunked = eng.chunked_prefill and eng.max_num_batched_tokens is not None and not req.encoder_decoder
    if not chunked and Pn > K:
        why = "an encoder's source is never chunked" if req.encoder_decoder else "without chunked prefill"
        raise WorkloadError(
            f"prompt {Pn} tokens > max_num_batched_tokens={int(K)} ({why}); enable chunking, a shorter prompt"
            " or raise the budget"
        )
    return K, chunked


def active_overheads(dev: Device, eng: EngineConfig) -> Overheads:
    """The engine's overheads under ``expected`` (or calibrated) efficiency; none under ``ideal``."""
    return Overheads(eng.name) if dev.eff.name == "ideal" else eng.overheads


def _overheads(dec: Decoding, eng: EngineConfig, req: Requests, B, d_m) -> tuple:
    """The engine's overheads (:mod:`.overheads`) per iteration and request, zero under ``ideal`` efficiency:
    (mixed iteration: the eager term + d_m·per_token; pure decode: the graph term + B·per_token; per request:
    per_request + P·per_prompt_token + front_end)."""
    ov = active_overheads(dec.dev, eng)
    o_m = ov.per_iteration_eager_s + d_m * ov.per_token_s
    o_d = ov.iteration_s(eng.cuda_graphs) + B * ov.per_token_s
    return o_m, o_d, ov.served_request_s(req.prompt)


def _quantiles(qs: tuple[float, ...], q, Ip, tau_a, tau_b, tau_d) -> list:
    """Quantiles ``qs`` of the inter-token latency: τ_d (prob. 1 − q), τ_b (q / I_p), τ_a (the rest)."""
    vals = np.stack(np.broadcast_arrays(tau_d, tau_b, tau_a))
    probs = np.stack(np.broadcast_arrays(1 - q, q / Ip, q * (Ip - 1) / Ip))
    order = np.argsort(vals, axis=0)
    v, pr = np.take_along_axis(vals, order, 0), np.take_along_axis(probs, order, 0)
    cum = np.cumsum(pr, axis=0)
    return [np.take_along_axis(v, np.argmax(cum >= qq - 1e-12, axis=0)[None], 0)[0] for qq in qs]


def rate_to_concurrency(dev: Device, eng: EngineConfig, req: Requests, rate: float, max_resident: int) -> float:
    """Open loop: the concurrency whose steady-state requests/s equals ``rate`` (interpolated on a grid)."""
    if not rate > 0:
        raise WorkloadError(f"request rate={rate!r} must be > 0 requests/s")
    grid = np.unique(np.concatenate([np.geomspace(1, max(max_resident, 1), 64), [max_resident]]))
    ss = steady_state(dev, eng, req, grid, max_resident)
    rps = ss.requests_s
    if rate > rps.max():
        raise WorkloadError(
            f"request rate {rate:g}/s exceeds what this deployment sustains ({rps.max():.3g} requests/s at"
            f" {int(grid[np.argmax(rps)])} concurrent); lower the rate or add GPUs"
        )
    i = int(np.argmax(rps >= rate))
    if i == 0:
        return float(grid[0] * rate / rps[0])
    x0, x1, y0, y1 = grid[i - 1], grid[i], rps[i - 1], rps[i]
    return float(x0 + (rate - y0) * (x1 - x0) / (y1 - y0)) if y1 > y0 else float(x1)
