"""One rank's operator list under a layout: the single-device operators, reshaped.

Nothing is recomputed: each operator's terms are multiplied by the fraction of it one rank runs, its
parameters by the fraction one rank holds, and its count by the layers of the rank's pipeline stage;
collectives are added as operators of their own (:mod:`.collectives`). Every operator declares how it splits
where it is built (its ``split`` trait, :mod:`llmath.ops.split`); this module applies one rule per trait
(:data:`RULES`) and never asks which model or operator it is. The rules, and where each family's operators
take them from, with T = tp:

* **column-parallel** (q, q_b, gate, up; dense FFN and shared experts): output width / T; the input is
  read whole. **row-parallel** (o_proj, down): input width / T; the full-width partial output is written
  and then all-reduced; a bias is held whole on every rank (transformers' ``rowwise``, vLLM's
  ``RowParallelLinear``).
* **heads**: N/T query heads per rank; K/T KV heads, or one KV head replicated T/K times when K < T
  (vLLM ``QKVParallelLinear``): K/V projections, cache and reads scale by that, so replicated KV is
  counted on every rank that holds it. MLA: heads split, the latent (q_a, kv_a, their norms, the
  latent cache) replicated on every rank (vLLM ``ReplicatedLinear`` for ``q_a_proj``/``kv_a_proj``).
* **replicated** on every rank that runs them: norms, residual adds, position embeddings, the router and
  top-k, the shared-expert gate.
* **vocabulary**: embedding rows and LM-head columns ⌈V/T⌉ per rank (vLLM pads the vocabulary); the
  embedding is all-reduced, the logits all-gathered.
* **experts**: a stage's MoE layers span its tp·dp GPUs and see all dp replicas' tokens: E/ep experts per
  rank group, each sharded expert_tp = tp·dp/ep ways. Per rank: token-expert pairs × dp/ep, width /
  expert_tp (so matmul FLOPs / T), expert weights / (ep·expert_tp), experts hit counted on the
  stage's dp·B·T tokens (``moe_tokens = dp``).
* **mixers** (:mod:`llmath.deploy.shard_mixers`, as vLLM shards each): Mamba, Mamba-2 (also beside
  attention in Falcon-H1's parallel layers), Gated DeltaNet, KDA, lightning attention and LFM2's short conv
  split by heads / inner channels, their in-projections column-parallel and out_proj row-parallel; the
  per-sequence state scales with the rank's channels. Recurrent kinds without a sourced rule: refused.
* **DeepSeek-V4 / HY-V4** (vLLM ``deepseek_v4.py``; the sources: docs/parallel.md): heads and output
  groups split, the latent KV, compressors, indexer and hyper-connections replicated.
* **HRM-Text** (no engine implements it; llmath's choice): every layer run shards as a decoder layer (heads
  and FFN split, two all-reduces per run); the two stacks' weights, held once, split as the projections that
  use them. Pipeline parallelism is refused (each stage would need both stacks).
* **Zamba2's shared block** (:mod:`llmath.deploy.shard_shared`, vLLM ``zamba2.py``): heads and FFN split,
  the LoRA adapters column-parallel (A all-gathered), the per-layer ``linear`` replicated.
* **pipeline**: stage s runs its layers (:func:`~llmath.deploy.layout.stage_layers`); the embedding
  lives on stage 0, the final norm and LM head on the last (which also holds a copy of a tied embedding).
* **encoder-decoder** (T5, BART, the original Transformer): every operator shards as its decoder-only
  namesake (``encoder.self_attn.q_proj`` and ``decoder.cross_attn.q_proj`` as ``attn.q_proj``; the cross
  K/V projections and their cache as ``attn.k_proj``/``attn.v_proj``: K/T heads; ``encoder.ffn.up`` as
  ``ffn.up``), as vLLM's Whisper shards them (``vllm/model_executor/models/whisper.py``: ``QKVParallelLinear``
  for self-attention, ``ColumnParallelLinear`` q and ``MergedColumnParallelLinear`` k/v for cross-attention,
  ``RowParallelLinear`` out_proj and fc2, ``ColumnParallelLinear`` fc1) and its BART the vocabulary
  (``VocabParallelEmbedding``, ``ParallelLMHead``). transformers ships no ``base_model_tp_plan`` for T5, BART
  or Whisper. Under PP each stack is split on its own (:func:`~llmath.deploy.layout.stage_layers` of the
  encoder's and of the decoder's layers): stage s runs its share of both; T5's relative-position table
  (read by a stack's first layer) lives on stage 0 with the embedding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction as Fr
from functools import lru_cache
from itertools import count as numbers

from llmath.deploy.collectives import Collective
from llmath.deploy.layout import Layout, stage_layers, trait_problem
from llmath.deploy.shard_mixers import SHARDED, mixer_factors, mixer_groups_per_rank, mixer_tp_problem
from llmath.deploy.shard_shared import holder_params
from llmath.errors import LayoutError
from llmath.model.spec import ModelSpec
from llmath.model.traits import traits
from llmath.ops import build_ops
from llmath.ops.assemble import layer_kind, mixer_layer_kind
from llmath.ops.core import Attention, Op, Stage, Term
from llmath.ops.split import MIXER_SPLITS, Split

ONE = Fr(1)
Factor = Fr | Callable[[int, Term], Fr]  # one factor for a cost class, or one per (index, term)
Factors = tuple[Fr, dict[str, Factor], Fr, Fr]  # default, per-class overrides, weight and bias parameters
WHOLE: Factors = (ONE, {}, ONE, ONE)


@dataclass(frozen=True)
class RankPlan:
    """What one GPU of pipeline stage ``index`` runs in a pass: its operators and collectives."""

    index: int
    layers: range
    ops: tuple[Op, ...]
    collectives: tuple[Collective, ...]
    moe_tokens: int  # tokens its MoE layers route per token of its replica (the dp degree)


def kv_heads_per_rank(spec: ModelSpec, tp: int) -> int:
    """K/T, or one (replicated) KV head when T exceeds K."""
    return max(spec.parts.attention.kv_heads // tp, 1)


def _times(n: int, f: Fr):  # an int, or a float share
    """n·f exactly: an int where the division is exact, else the correctly rounded float of the quotient
    (Python's int / int, as ``float(Fraction)`` computes it; no Fraction built)."""
    num, den = n * f.numerator, f.denominator
    q, r = divmod(num, den)
    return q if r == 0 else num / den


def _scale(terms: tuple[Term, ...], f: Fr) -> tuple[Term, ...]:
    num, den = f.numerator, f.denominator
    if num == den:  # f == 1 (a Fraction is kept in lowest terms)
        return terms
    tail = f"/{den}" if num == 1 else f"·{f}"
    ff = num / den
    return tuple(
        Term(_times(t.coef, f) if isinstance(t.coef, int) else t.coef * ff, t.mono, t.sym + tail) for t in terms
    )


def _kv_share(spec: ModelSpec, T: int) -> Fr:
    """The share of the K/V heads (and their cache) a rank holds: K/T heads, one replicated head when K < T,
    the whole latent under MLA."""
    a = spec.parts.attention
    return ONE if a.mla is not None else Fr(kv_heads_per_rank(spec, T), a.kv_heads)


def _kv_heads(spec: ModelSpec, L: Layout) -> Factors:
    """K/V projections: the rank's share of the K/V heads; the input read whole."""
    k = _kv_share(spec, L.tp)
    return k, {"act_in": ONE}, k, k


def _qk_heads(spec: ModelSpec, L: Layout) -> Factors:
    """q/k norms and rotary over the rank's query and K/V heads (MLA: its heads and the one shared rotary key);
    per-head norm weights (width H) whole."""
    a, T = spec.parts.attention, L.tp
    N, K = a.heads, a.kv_heads
    f = Fr(N // T + 1, N + 1) if a.mla is not None else Fr(N // T + kv_heads_per_rank(spec, T), N + K)
    return f, {}, (ONE if a.qk_norm == "head" else f), ONE


def _vocab(spec: ModelSpec, L: Layout, whole: str) -> Factors:
    """⌈V/T⌉ rows (embedding) or columns (LM head) per rank; the ``whole`` class read or written in full."""
    V = spec.parts.embeddings.vocab_size
    f = Fr(-(-V // L.tp), V)
    return f, {whole: ONE}, f, f


def _experts(L: Layout, side: str) -> Factors:
    """Routed experts: E/ep experts per rank group, each expert-TP-sharded; the rank routes dp/ep of the stage's
    token-expert pairs, read (``side`` act_in) or written (act_out) whole-width."""
    tokens, w = Fr(L.dp, L.ep), Fr(1, L.ep * L.expert_tp)
    over: dict[str, Factor] = {"weight": w}
    if side:
        over[side] = tokens
    return Fr(1, L.tp), over, w, w


def _share(L: Layout, over: dict[str, Factor] | None = None, bias: Fr | None = None) -> Factors:
    t = Fr(1, L.tp)
    return t, over or {}, t, t if bias is None else bias


# one rule per split trait (ops/split.py): (spec, layout) -> the factors of the operator's cost classes
RULES: dict[str, Callable[[ModelSpec, Layout], Factors]] = {
    Split.REPLICATED: lambda spec, L: WHOLE,
    Split.HELD: lambda spec, L: WHOLE,
    Split.COLUMN: lambda spec, L: _share(L, {"act_in": ONE}),
    Split.ROW: lambda spec, L: _share(L, {"act_out": ONE, "vflops": ONE}, bias=ONE),
    Split.SHARE: lambda spec, L: _share(L),
    Split.KV_HEADS: lambda spec, L: _kv_heads(spec, L),
    Split.HEADS: lambda spec, L: _share(L, {"kv_read": _kv_share(spec, L.tp), "kv_write": _kv_share(spec, L.tp)}),
    Split.QK_HEADS: _qk_heads,
    Split.VOCAB_ROWS: lambda spec, L: _vocab(spec, L, "act_out"),
    Split.VOCAB_COLUMN: lambda spec, L: _vocab(spec, L, "act_in"),
    Split.EXPERTS_COLUMN: lambda spec, L: _experts(L, "act_in"),
    Split.EXPERTS_ROW: lambda spec, L: _experts(L, "act_out"),
    Split.EXPERTS: lambda spec, L: _experts(L, ""),
    Split.EMBEDDING_COLUMNS: lambda spec, L: _share(L, {"kv_write": ONE, "kv_read": ONE}),
}


def _factors(op: Op, spec: ModelSpec, L: Layout) -> Factors:
    """(default factor, per-class overrides, weight-parameter factor, bias-parameter factor) of ``op``, by its
    declared split; an operator that declares none runs only whole (tp = pp = 1, and outside an MoE block,
    whose operators follow the routed tokens)."""
    if op.split in MIXER_SPLITS and (m := spec.parts.mixers.mixer) is not None:
        return mixer_factors(op.split, m, L.tp)
    rule = RULES.get(op.split)
    if rule is not None:
        return rule(spec, L)
    if L.tp == 1 and L.pp == 1 and op.component != "moe":
        return WHOLE
    raise LayoutError(f"operator {op.name!r} has no sharding rule; llmath cannot shard this model yet")


def _scale_each(terms: tuple[Term, ...], f: Factor) -> tuple[Term, ...]:
    """``terms`` scaled by ``f``, or term by term by ``f(index, term)``."""
    if isinstance(f, Fr):
        return _scale(terms, f)
    return tuple(_scale((t,), f(i, t))[0] for i, t in enumerate(terms))


# a sharded operator depends only on the operator, its factors and its count: layouts that share them (the same
# TP degree under other DP, EP or PP degrees) reuse it, and stages of other layer counts reuse its scaled costs
# and parameters (keyed by (operator, factors) alone)
_SHARDED: dict[tuple, tuple[Op, Op]] = {}


def _key(f: Factor) -> tuple[int, int] | Factor:
    """A factor as a cache key: a fraction's (numerator, denominator), hashed faster than the Fraction."""
    return (f.numerator, f.denominator) if isinstance(f, Fr) else f


# a factor set's cache key (:func:`_layout_factors`) → a number of its own, never given to another: the caches
# keyed by it hash one int instead of nested tuples
_FACTOR_IDS: dict[tuple, int] = {}
_NEXT_ID = numbers()


def _layout_factors(op: Op, spec: ModelSpec, L: Layout, memo: dict) -> tuple[Factors, int]:
    """(:func:`_factors` of ``op``, the number of their cache key), once per (split, whether the op is in an MoE
    block) of one layout (``memo``: that layout's): the factors depend on nothing else of the operator."""
    k = (op.split, op.component == "moe")
    got = memo.get(k)
    if got is None:
        default, over, fw, fb = f = _factors(op, spec, L)
        fkey = (_key(default), tuple((c, _key(v)) for c, v in over.items()), _key(fw), _key(fb))
        if len(_FACTOR_IDS) >= 65536:
            _FACTOR_IDS.clear()  # a key seen again gets a new number: only a cache miss
        fid = _FACTOR_IDS.get(fkey)
        if fid is None:
            fid = _FACTOR_IDS[fkey] = next(_NEXT_ID)
        got = memo[k] = (f, fid)
    return got


def _shard(op: Op, spec: ModelSpec, L: Layout, count: int, memo: dict) -> Op:
    if op.split == Split.HELD:  # Zamba2's shared block, HRM-Text's stacks: weights held once, split as used
        kv = Fr(kv_heads_per_rank(spec, L.tp), spec.parts.attention.kv_heads)
        return replace(op, params=holder_params(op, spec, L.tp, kv), count=count)
    (default, over, fw, fb), fid = _layout_factors(op, spec, L, memo)
    key = (id(op), fid, count)
    hit = _SHARDED.get(key)
    if hit is not None and hit[0] is op:
        return hit[1]
    if len(_SHARDED) >= 65536:
        _SHARDED.clear()
    shaped = _SHARDED.get(key[:2])  # the operator under these factors at another count: only the count differs
    if shaped is not None and shaped[0] is op:
        out = replace(shaped[1], count=count)
    else:
        costs = tuple((cls, _scale_each(ts, over.get(cls, default))) for cls, ts in op.costs)
        params = tuple((k, _times(n, fb if k.endswith(".bias") else fw)) for k, n in op.params)
        out = replace(op, costs=costs, params=params, count=count)
        _SHARDED[key[:2]] = (op, out)
    _SHARDED[key] = (op, out)  # keeps ``op``: its id is not reused while cached
    return out


def _stage_counts(spec: ModelSpec, layers: range) -> dict[str, int]:
    """Layers of each layer kind among ``layers``, in the order they first appear."""
    return dict(_kind_counts(spec, layers.start, layers.stop))


@lru_cache(maxsize=4096)
def _kind_counts(spec: ModelSpec, start: int, stop: int) -> tuple[tuple[str, int], ...]:
    """:func:`_stage_counts` once per (spec, layer range): every layout with that stage asks again."""
    out: dict[str, int] = {}
    for i in range(start, stop):
        kind, moe = spec.layer_mixers[i], spec.layer_moe[i]
        if kind.startswith("attention"):
            lk = layer_kind(
                spec, spec.layer_windows[i], moe, spec.layer_indexer[i], kind, spec.layer_kv_shared[i],
                spec.layer_ffn_sparse[i], spec.ffn_width(i), spec.layer_compress[i],
            )  # fmt: skip
        else:
            lk = mixer_layer_kind(spec, i)
        out[lk] = out.get(lk, 0) + 1
    return tuple(out.items())


def _place(op: Op, counts: dict[str, int], first: bool, last: bool) -> int:
    """How many times ``op`` runs on a rank of the stage (0: not there)."""
    if op.split == Split.HELD:  # weights held once (HRM-Text, Zamba2: pp = 1)
        return op.count if last else 0
    if op.layer_kind:
        return counts.get(op.layer_kind, 0)
    if op.component == "embedding" or op.first_stage:
        return op.count if first else 0
    return op.count if last else 0


def _tied_head(op: Op, spec: ModelSpec, L: Layout) -> Op:
    """A tied LM head on a later stage than the embedding holds its own copy of the table."""
    emb = spec.parts.embeddings
    rows = -(-emb.vocab_size // L.tp)
    return replace(op, params=(("lm_head.weight", rows * emb.d_model),) + op.params[1:])


def _stack_ranges(spec: ModelSpec, stage: Stage, pp: int) -> list[range]:
    """Each pipeline stage's layers of the stack this pass runs (the encoder's in the encoder pass)."""
    st = spec.parts.stack
    n = st.encoder.n_layers if stage == "encoder" and st.encoder is not None else st.layers
    return stage_layers(n, pp)


def _encdec_counts(spec: ModelSpec, pp: int, s: int) -> dict[str, int]:
    """Encoder and decoder layers on pipeline stage ``s``: each stack split on its own."""
    st = spec.parts.stack
    assert st.encoder is not None
    return {
        "encoder": len(stage_layers(st.encoder.n_layers, pp)[s]),
        "decoder": len(stage_layers(st.layers, pp)[s]),
    }


def _refuse_unsharded(spec: ModelSpec, layout: Layout) -> None:
    """Layers no sharding rule covers yet (the model's parallel traits, model/traits.py; its mixer's kind): a
    one-line error naming what to do instead."""
    if why := trait_problem(spec, layout.tp, layout.pp):
        raise LayoutError(why)
    mixers = spec.parts.mixers
    if layout.tp > 1 and mixers.mixer is not None and (why := mixer_tp_problem(mixers.mixer, layout.tp)):
        raise LayoutError(f"{spec.name}: {why}")
    known = SHARDED | {"attention", "none", "xattn", "shared", "ple"}
    if mixers.components - known:
        raise LayoutError(
            f"{spec.name}: layers with a {mixers.mixer.kind if mixers.mixer else 'non-attention'} mixer have no "
            "sharding rule yet; analyse it on one GPU (drop --gpus/--tp/--pp/--ep/--dp)"
        )
    if what := traits(spec).no_layout:
        raise LayoutError(
            f"{spec.name}: {what} have no sharding rule yet (no serving engine's split to follow); analyse it on "
            "one GPU (drop --gpus/--tp/--pp/--ep/--dp)"
        )


def _sharded_stage(base: tuple[Op, ...], spec: ModelSpec, L: Layout, counts, first: bool, last: bool, memo) -> tuple:
    """One pipeline stage's sharded operators, built operator by operator."""
    ops = []
    tied = spec.parts.embeddings.tied and L.pp > 1
    for op, n in _placed(base, counts, first, last):
        o = _shard(op, spec, L, n, memo)
        if tied and o.split == Split.VOCAB_COLUMN and o.kind == "matmul":
            o = _tied_head(o, spec, L)
        ops.append(o)
    return tuple(ops)


_PLACED: dict[tuple, tuple[tuple[Op, ...], tuple[tuple[Op, int], ...]]] = {}


def _placed(base: tuple[Op, ...], counts: dict[str, int], first: bool, last: bool) -> tuple[tuple[Op, int], ...]:
    """(operator, runs on a rank of the stage) of each operator of ``base`` the stage runs (:func:`_place`), once
    per (base, layer counts, ends): every TP, DP and EP degree of a pipeline depth asks again."""
    key = (id(base), tuple(counts.items()), first, last)
    hit = _PLACED.get(key)
    if hit is not None and hit[0] is base:
        return hit[1]
    out = tuple((op, n) for op in base if (n := _place(op, counts, first, last)))
    if len(_PLACED) >= 4096:
        _PLACED.clear()
    _PLACED[key] = (base, out)  # keeps ``base``: its id is not reused while cached
    return out


# a stage's operators depend only on the single-device operators, the stage's layer counts and ends, the TP
# degree (held and tied-head operators), whether it pipelines, and each split's factors: layouts that share
# them (other DP or EP degrees with the same factors) reuse one tuple, and with it one table (deploy/cost.py)
_STAGES: dict[tuple, tuple[tuple[Op, ...], tuple[Op, ...]]] = {}


_SPLITS: dict[int, tuple[tuple[Op, ...], tuple[Op, ...]]] = {}


def _split_ops(base: tuple[Op, ...]) -> tuple[Op, ...]:
    """One operator per distinct (split, whether in an MoE block) of ``base``, in order of first appearance."""
    hit = _SPLITS.get(id(base))
    if hit is not None and hit[0] is base:
        return hit[1]
    seen: dict[tuple[str, bool], Op] = {}
    for op in base:
        if op.split != Split.HELD:
            seen.setdefault((op.split, op.component == "moe"), op)
    if len(_SPLITS) >= 256:
        _SPLITS.clear()
    _SPLITS[id(base)] = (base, tuple(seen.values()))
    return _SPLITS[id(base)][1]


def _stage_ops(base: tuple[Op, ...], spec: ModelSpec, L: Layout, counts, first: bool, last: bool, memo) -> tuple:
    """:func:`_sharded_stage`, once per (base, counts, ends, TP degree, pipelining, factors of every split)."""
    try:
        fkeys = tuple(_layout_factors(op, spec, L, memo)[1] for op in _split_ops(base))
    except LayoutError:  # an operator without a rule: refused where the stage reaches it, as built
        return _sharded_stage(base, spec, L, counts, first, last, memo)
    key = (id(base), tuple(counts.items()), first, last, L.tp, L.pp > 1, fkeys)
    hit = _STAGES.get(key)
    if hit is not None and hit[0] is base:
        return hit[1]
    out = _sharded_stage(base, spec, L, counts, first, last, memo)
    if len(_STAGES) >= 4096:
        _STAGES.clear()
    _STAGES[key] = (base, out)  # keeps ``base``: its id is not reused while cached
    return out


# each split's factors depend only on the spec, the TP, DP and EP degrees (:data:`RULES`) and whether the layout
# pipelines (an operator without a rule runs only whole): both passes of a layout, and the layouts of other
# pipeline depths, share them
_FACTORS: dict[tuple, dict[tuple[str, bool], tuple[Factors, int]]] = {}


def _factor_memo(spec: ModelSpec, L: Layout) -> dict[tuple[str, bool], tuple[Factors, int]]:
    """The memo of :func:`_layout_factors` for ``spec`` under ``L``'s TP, DP and EP degrees and pipelining."""
    key = (spec, L.tp, L.dp, L.ep, L.pp > 1)
    memo = _FACTORS.get(key)
    if memo is None:
        if len(_FACTORS) >= 4096:
            _FACTORS.clear()
        memo = _FACTORS[key] = {}
    return memo


@lru_cache(maxsize=4096)
def rank_plans(spec: ModelSpec, stage: Stage, attention: Attention, layout: Layout) -> tuple[RankPlan, ...]:
    """One :class:`RankPlan` per pipeline stage (every GPU of a stage runs the same, by symmetry)."""
    from llmath.deploy.comm import encdec_collectives, stage_collectives

    _refuse_unsharded(spec, layout)
    base = build_ops(spec, stage, attention)
    if unsharded := traits(spec).unsharded:  # (model/traits.py) on one GPU per replica
        if layout.tp * layout.pp * layout.ep > 1:
            raise LayoutError(
                f"{spec.name}: {unsharded} have no sharding rule yet; analyse it on one GPU per replica (drop "
                "--tp/--pp/--ep; --dp replicates it)"
            )
        return (RankPlan(0, range(spec.parts.stack.layers), base, (), layout.dp),)
    plans = []
    memo = _factor_memo(spec, layout)  # each split's factors under this layout
    ranges = _stack_ranges(spec, stage, layout.pp)
    for s, layers in enumerate(ranges):
        first, last = s == 0, s == len(ranges) - 1
        encdec = spec.parts.stack.encoder is not None
        counts = _encdec_counts(spec, layout.pp, s) if encdec else _stage_counts(spec, layers)
        ops = _stage_ops(base, spec, layout, counts, first, last, memo)
        if not encdec:
            colls = stage_collectives(spec, layout, counts, s, first, last)
        else:
            colls = encdec_collectives(spec, layout, counts, s, first, last, stage == "encoder")
        plans.append(RankPlan(s, layers, tuple(ops), colls, layout.dp))
    return tuple(plans)


__all__ = ["RULES", "RankPlan", "kv_heads_per_rank", "mixer_groups_per_rank", "rank_plans"]
