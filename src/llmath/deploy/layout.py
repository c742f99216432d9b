"""Parallel layouts: tensor (TP), pipeline (PP), data / attention-data (DP) and expert (EP) parallelism.

Names follow the engines (vLLM ``ParallelConfig``: ``tensor_parallel_size``, ``pipeline_parallel_size``,
``data_parallel_size``, ``enable_expert_parallel``). A deployment of ``gpus = tp · pp · dp`` GPUs:

* the layers are split into ``pp`` pipeline stages (vLLM's ``get_pp_indices``: ⌊L/pp⌋ layers each, the
  remainder going to the stages before the last, which holds the LM head);
* within a stage, attention (and every dense layer) runs ``dp`` replicas of ``tp``-way tensor parallelism;
  each replica serves ⌈B/dp⌉ of the B sequences;
* the MoE layers of a stage span all ``tp · dp`` GPUs: the experts are spread ``ep`` ways (E/ep experts
  per group) and each expert is sharded ``expert_tp = tp · dp / ep`` ways.

Rank order is TP fastest, then DP, then PP (Megatron/vLLM), so a TP group is ``tp`` consecutive GPUs and
a stage ``tp · dp``; a group fits the scale-up domain when its span does.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from llmath.deploy.shard_mixers import SHARDED, mixer_tp_problem
from llmath.errors import LayoutError
from llmath.model.spec import ModelSpec
from llmath.model.traits import tp_problem, traits
from llmath.validation import int_rule, next_step

OVERLAPS = ("none", "tbo")
DEGREES = ("gpus", "tp", "pp", "ep", "dp")
MAX_DEGREE = 1 << 16  # GPUs / parallel degree: 65,536, beyond any deployment (keeps layout search bounded)


@dataclass(frozen=True)
class Layout:
    """A validated layout (see the module doc). ``overlap``: ``none`` (communication adds to compute) or
    ``tbo`` (two-batch overlap: the MoE all-to-all hides behind compute). ``chosen``: how it was picked."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    overlap: str = "none"
    chosen: str = "given"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def expert_tp(self) -> int:
        return self.tp * self.dp // self.ep

    @property
    def trivial(self) -> bool:
        return self.gpus == 1

    def replica_batch(self, batch):
        """Sequences one DP replica serves: ⌈B / dp⌉ (the busiest replica sets the pace)."""
        return -(-batch // self.dp)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(gpus=self.gpus, expert_tp=self.expert_tp)
        return d


@dataclass(frozen=True)
class ParallelConfig:
    """The parallel config asked for, as the engines name it (vLLM ``ParallelConfig``: ``tensor_parallel_size``
    = tp, ``pipeline_parallel_size`` = pp, ``data_parallel_size`` = dp, ``enable_expert_parallel`` = ep > 1):
    the degrees given (None: :func:`make_layout` fills them for the model) and the overlap, validated here once.
    It is the one way ``analyze``, ``serve``, ``plan``, the command line and the page take a layout
    (``parallel=``); :meth:`layout` fits it to a model (its heads, experts and stacks)."""

    gpus: int | None = None
    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    dp: int | None = None
    overlap: str = "none"

    def __post_init__(self) -> None:
        for name in DEGREES:
            object.__setattr__(self, name, _degree(name, getattr(self, name)))
        if self.overlap not in OVERLAPS:
            raise LayoutError(
                f"overlap={self.overlap!r} must be one of {', '.join(OVERLAPS)}; e.g. --overlap tbo with --ep > 1"
            )
        if self.overlap != "none" and not any((v or 1) > 1 for v in self.degrees()):
            raise LayoutError(f"overlap={self.overlap!r} applies to multi-GPU layouts; give --gpus/--tp/--ep as well")

    def degrees(self) -> tuple[int | None, ...]:
        """(gpus, tp, pp, ep, dp) as given."""
        return self.gpus, self.tp, self.pp, self.ep, self.dp

    def pinned(self) -> dict[str, int | None]:
        """tp, pp, ep, dp as given (None: free), as the planner pins them."""
        return {"tp": self.tp, "pp": self.pp, "ep": self.ep, "dp": self.dp}

    @property
    def given(self) -> bool:
        """Whether any degree is given."""
        return any(v is not None for v in self.degrees())

    def layout(self, spec: ModelSpec) -> Layout:
        return make_layout(spec, self)

    def requested(self, spec: ModelSpec) -> Layout | None:
        """The layout fitted to ``spec`` when one is asked for (a degree given, or more than one GPU), else None."""
        if any(v is not None for v in (self.tp, self.pp, self.ep, self.dp)) or (self.gpus or 1) > 1:
            return self.layout(spec)
        return None


def refuse_layout_keywords(kwargs: dict[str, Any]) -> None:
    """The layout spelled out as keywords (``tp=8``) is refused with the one way to give it."""
    given = {k: kwargs[k] for k in (*DEGREES, "overlap") if k in kwargs}
    if given:
        kw = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise LayoutError(f"{kw}: pass the layout as parallel=ParallelConfig({kw})")


def stage_layers(n_layers: int, pp: int) -> list[range]:
    """Layer indices of each pipeline stage: ⌊L/pp⌋ each, the remainder spread over the stages before the
    last one (vLLM ``vllm/distributed/utils.py: get_pp_indices``)."""
    per = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        per[-i] += 1
    out, start = [], 0
    for n in per:
        out.append(range(start, start + n))
        start += n
    return out


def _degree(name: str, v) -> int | None:
    """None, or a whole number of GPUs in [1, ``MAX_DEGREE``] as an int."""
    if v is None:
        return None
    if why := int_rule(v, 1, MAX_DEGREE):
        raise LayoutError(f"{name}={v!r} {why}; {next_step(name)}")
    return int(v)


def _tp_problem(spec: ModelSpec, tp: int) -> str | None:
    """Why ``spec`` cannot run ``tp``-way tensor parallel (vLLM's divisibility rules), or None."""
    a, ffn, mixers = spec.parts.attention, spec.parts.ffn, spec.parts.mixers
    N, K = a.heads, a.kv_heads
    if why := tp_problem(spec, tp):  # the rules a family's spec part states (model/traits.py)
        return why
    if tp > 1 and mixers.mixer is not None and (why := mixer_tp_problem(mixers.mixer, tp)):
        return why
    if not mixers.components & {"attention", "shared"}:  # a pure state-space model: no attention heads to split
        N = K = tp
    if N % tp:
        return f"tp={tp} must divide the {N} attention heads"
    if a.mla is None and K % tp and tp % K:
        return f"tp={tp} must divide the {K} KV heads or be a multiple of them (KV heads replicated)"
    Kf = a.full_kv_heads or K
    if Kf != K and (K % tp or Kf % tp):  # Gemma 4: one sharding rule for both; replication not modelled
        return f"tp={tp} must divide both the {K} and the full-attention layers' {Kf} KV heads"
    if any(f % tp for f in ffn.dense_widths):
        return f"tp={tp} must divide d_ff={next(f for f in sorted(ffn.dense_widths) if f % tp)}"
    if ffn.moe is not None and ffn.moe.d_ff_shared % tp:
        return f"tp={tp} must divide the shared experts' width {ffn.moe.d_ff_shared}"
    return None


def _unsharded_problem(spec: ModelSpec, tp: int, pp: int, dp: int) -> str | None:
    """Layers no TP or PP rule covers yet (at tp = pp = 1 every operator runs whole on each replica, so DP and
    EP still apply), or None."""
    gpus = "; analyse it on one GPU (drop --gpus/--tp/--pp/--ep/--dp)"
    known = SHARDED | {"attention", "none", "xattn", "shared", "ple"}
    mixers = spec.parts.mixers
    if mixers.components - known and tp * pp * dp > 1:
        kind = mixers.mixer.kind if mixers.mixer else "non-attention"
        return f"layers with a {kind} mixer have no sharding rule yet" + gpus
    return None


def trait_problem(spec: ModelSpec, tp: int, pp: int) -> str | None:
    """Why the model's parallel traits (model/traits.py) refuse ``tp`` and ``pp``, as a whole message, or None."""
    t = traits(spec)
    if pp > 1 and t.no_pp:
        return f"pp={pp}: {spec.name}'s {t.no_pp}; use --pp 1"
    if (tp > 1 or pp > 1) and t.no_tp_pp:
        return (
            f"{spec.name}: {t.no_tp_pp} have no sharding rule for tensor or pipeline parallelism yet; analyse it "
            "with tp=1 and pp=1 (--dp/--ep work)"
        )
    return None


def _ep_problem(spec: ModelSpec, tp: int, dp: int, ep: int) -> str | None:
    moe = spec.parts.ffn.moe
    if ep == 1:
        etp = tp * dp
    elif moe is None:
        return f"ep={ep} applies to MoE models; {spec.name} is dense (use --tp/--pp/--dp)"
    elif (tp * dp) % ep:
        return f"ep={ep} must divide tp·dp={tp * dp} (the GPUs a stage's MoE layers span)"
    elif moe.n_experts % ep:
        return f"ep={ep} must divide the {moe.n_experts} experts"
    else:
        etp = tp * dp // ep
    if moe is not None and moe.d_ff_expert % etp:
        return f"expert-TP = tp·dp/ep = {etp} must divide the expert width {moe.d_ff_expert}"
    return None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _suggest(spec: ModelSpec, gpus: int, pp: int = 1) -> str:
    """Up to four layouts on exactly ``gpus`` GPUs whose TP splits the model: with the ``pp`` given (when it
    divides ``gpus``), then with pp = 1."""
    stages = [p for p in dict.fromkeys((pp, 1)) if gpus % p == 0]
    ok: list[str] = []
    for p in stages:
        fits = [t for t in _divisors(gpus // p) if _tp_problem(spec, t) is None]
        for t in fits[-(4 // len(stages)) :]:
            d = gpus // (p * t)
            ok.append(f"--tp {t}" + (f" --pp {p}" if p > 1 else "") + (f" --dp {d}" if d > 1 else ""))
    return "; layouts that work on {} GPUs: {}".format(gpus, ", ".join(ok) or "none with TP alone")


def _gpus_problem(spec: ModelSpec, gpus: int, tp: int | None, pp: int, dp: int | None) -> str:
    """Why the degrees given cannot make ``gpus`` (a degree not given is named, never invented), TP's own rule,
    and layouts that do."""
    known = [(k, v) for k, v in (("tp", tp), ("pp", pp), ("dp", dp)) if v is not None]
    names, vals = "·".join(k for k, _ in known), "·".join(str(v) for _, v in known)
    prod = math.prod(v for _, v in known)
    if len(known) == 3:
        why = f"tp·pp·dp = {vals} = {prod} must equal --gpus {gpus}"
    else:
        free = "tp" if tp is None else "dp"
        expr = f"{names} = {vals}" + (f" = {prod}" if len(known) > 1 else "")
        why = f"--gpus {gpus} with {expr}: {gpus} is not a multiple of {prod} (no whole {free})"
    tp_why = _tp_problem(spec, tp) if tp is not None else None
    return why + (f"; {spec.name}: {tp_why}" if tp_why else "") + _suggest(spec, gpus, pp)


def _default_ep(spec: ModelSpec, ranks: int) -> int:
    """The largest expert-parallel degree ≤ ranks dividing both the experts and the ranks."""
    moe = spec.parts.ffn.moe
    n = moe.n_experts if moe is not None else 1
    return max(d for d in _divisors(ranks) if n % d == 0)


def make_layout(spec: ModelSpec, parallel: ParallelConfig | None = None) -> Layout:
    """Fit ``parallel`` (None: one GPU) to ``spec``, filling what is not given. ``gpus`` alone: a dense model
    runs TP = gpus; an MoE model runs TP = gpus attention with its experts spread EP = gpus ways (vLLM
    ``--tensor-parallel-size N --enable-expert-parallel``). Otherwise TP, then DP, absorbs the GPUs the other
    degrees leave."""
    parallel = parallel or ParallelConfig()
    if not isinstance(parallel, ParallelConfig):
        raise LayoutError(f"make_layout(spec, {parallel!r}): the layout is a ParallelConfig(gpus=, tp=, pp=, ep=, dp=)")
    gpus, tp, pp, ep, dp = parallel.degrees()
    overlap = parallel.overlap
    chosen = "given"
    if gpus is not None and tp is None and pp is None and dp is None:
        tp, pp, dp = gpus, 1, 1
        chosen = f"--gpus {gpus} alone: TP={gpus}"
        if spec.parts.ffn.moe is not None and ep is None:
            ep = _default_ep(spec, gpus)
            chosen += f" attention, EP={ep} experts (vLLM --enable-expert-parallel)"
    pp, ep = pp or 1, ep or 1
    if gpus is not None:
        if tp is None and gpus % (pp * (dp or 1)) == 0:
            tp, dp = gpus // (pp * (dp or 1)), dp or 1
        elif tp is not None and dp is None and gpus % (pp * tp) == 0:
            dp = gpus // (pp * tp)
        if tp is None or dp is None or tp * pp * dp != gpus:
            raise LayoutError(_gpus_problem(spec, gpus, tp, pp, dp))
    tp, dp = tp or 1, dp or 1
    n_layers = spec.parts.stack.pipeline_layers
    if pp > n_layers:
        raise LayoutError(f"pp={pp} exceeds the {n_layers} layers of {spec.name}'s stacks; use --pp <= {n_layers}")
    if why := trait_problem(spec, tp, pp):
        raise LayoutError(why)
    if why := _unsharded_problem(spec, tp, pp, dp):
        raise LayoutError(f"{spec.name}: {why}")
    why = _tp_problem(spec, tp)
    if why:
        raise LayoutError(f"{spec.name}: {why}" + _suggest(spec, tp * pp * dp, pp))
    why = _ep_problem(spec, tp, dp, ep)
    if why:
        good = [d for d in _divisors(tp * dp) if _ep_problem(spec, tp, dp, d) is None]
        raise LayoutError(f"{spec.name}: {why}; ep values that work here: {', '.join(map(str, good)) or 'none'}")
    if overlap == "tbo" and ep == 1:
        raise LayoutError(
            "overlap='tbo' (two-batch overlap) hides the MoE all-to-all: it needs --ep > 1; add --ep or drop --overlap"
        )
    return Layout(tp, pp, dp, ep, overlap, chosen)
