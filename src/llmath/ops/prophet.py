"""ProphetNet's n-stream decoder (Qi et al. 2020, arXiv:2001.04063; transformers 5.23
``models/prophetnet/modeling_prophetnet.py``), one decoder pass of :class:`~llmath.model.spec_prophet.ProphetSpec`.

Beside the main stream (the T target tokens) the decoder runs predicting streams of T rows each: stream i
starts from its stream embedding plus the position table's row of the next position and predicts the token
i + 1 ahead. Every layer runs its q/k/v projections, relative-position projection, output projection,
cross-attention and FFN on all (1 + streams)·T rows. The self-attention:

* main stream: causal attention over the cached main positions (K/V of the main stream only are cached);
* each predicting stream: its T queries attend the main stream's keys (cached + new) and the stream's own T
  keys of this pass (uncached: the monomials of a window of 1, ``K:1`` = B·T keys, ``E:1`` = B·T·T scores,
  ``P:1`` = B·T pairs, the diagonal the mask keeps);
* a relative-position bias, gathered from each query row's D -> buckets·N projection, added to every score.

The LM head runs on the predicting streams, never on the main stream (``ProphetNetForConditionalGeneration
.forward``: ``predict_logits = lm_head(predicting_streams)``; ``logits`` = stream 0's).

Executions. ``eager`` is what transformers runs: all ``ngram`` predicting streams in every pass, and the LM
head over every stream and every position (no ``logits_to_keep``). ``flash`` (the default) is what inference
needs: ``generate`` reads only ``logits``, the first predicting stream's at the last position (``logits_ngram``
of the other streams feeds the training loss), so the LM head runs on that stream only. A decode step (T = 1)
runs that one predicting stream beside the main stream: it attends the main stream and itself, never another
stream. A prefill of T > 1 target tokens keeps every stream: transformers' relative-position gather
(``get_predict_relative_pos_embeddings``) lays the projected rows out as (position, stream, head) and the
buckets as (stream, head, position), so a stream's bias reads other streams' rows whenever T > 1, and the
first stream's logits then depend on the others (tests/test_prophetnet.py shows both). The main stream's own
last-layer cross-attention and FFN are not needed either (only its K/V feed the streams); llmath keeps them,
in both executions, as transformers' layer runs them.
"""

from __future__ import annotations

from dataclasses import replace

from llmath.ops.attention import Attn, attention_block, cache_append, eager_products, flash, o_proj, q_proj
from llmath.ops.core import Builder, Op, Site, Term, Window
from llmath.ops.embed import embedding, lm_head
from llmath.ops.ffn import ffn_block, residual
from llmath.ops.split import Split

ROW_MONOS = ("BT", "BL", "XE")  # terms per query row (with "E:" score entries and "P:" pairs)


CROSS_SPLITS = {"q": Split.COLUMN, "k": Split.KV_HEADS, "v": Split.KV_HEADS, "o": Split.ROW}


def streams(b: Builder) -> tuple[int, int]:
    """(predicting streams the layers run, streams whose logits the head computes) in a pass: transformers'
    ``ngram`` and ``ngram`` (eager); flash: every stream in a prefill, ``ProphetSpec.streams`` in a decode step,
    and ``ProphetSpec.streams`` through the head (1, the stream inference reads; a training step asks for all)."""
    p = b.spec.prophet
    if p is None:  # pragma: no cover - assemble sends ProphetNet specs only
        raise AssertionError(b.spec.name)
    if b.attention == "eager":
        return p.ngram, p.ngram
    return (p.ngram if b.stage == "prefill" else p.streams), p.streams


def _per_row(mono: str) -> bool:
    return mono in ROW_MONOS or mono[:2] in ("E:", "P:")


def rows_times(op: Op, r: int, every: bool = False) -> Op:
    """``op`` run on ``r`` times its query rows: each term per query row × r (``every``: each term but the
    weights', e.g. a predicting stream's own copy of the keys it reads). Parameters are unchanged."""
    if r == 1:
        return op
    costs = tuple(
        (c, tuple(Term(t.coef * r, t.mono, f"{r}·{t.sym}") if (_per_row(t.mono) or (every and t.mono != "1")) else t
                  for t in ts))
        for c, ts in op.costs
    )  # fmt: skip
    return replace(op, costs=costs)


def _scale_from(b: Builder, first: int, r: int, every: bool = False) -> None:
    b.ops[first:] = [rows_times(op, r, every) for op in b.ops[first:]]


def _keys_only(op: Op) -> Op:
    """The own-stream half of a predicting stream's attention: its query reads and output writes are the other
    half's (one softmax over the concatenated keys), so only the scores and its own keys remain here."""
    io = ("act_in", "act_out")
    costs = tuple((c, tuple(t for t in ts if not (c in io and t.mono == "BT"))) for c, ts in op.costs)
    return replace(op, costs=tuple((c, ts) for c, ts in costs if ts))


def _inputs(b: Builder, m: int) -> None:
    """Token and position rows of the main stream, then each predicting stream's input: its stream embedding
    plus the position row of the next position (``ngram_embeddings``, ``position_embeddings(position_ids + 1)``),
    and the embedding LayerNorm over all (1 + m)·T rows."""
    s, D = b.spec, b.spec.d_model
    first = len(b.ops)
    # tokens, positions, norm; the encoder's embedding owns the shared token table, if there is an encoder
    embedding(b, "decoder.embed", own_positions=True, token_table=s.encoder is None)
    *main, norm = b.ops[first:]
    n = s.prophet.ngram if s.prophet is not None else 0
    b.ops[first:] = main
    b.add(
        "decoder.embed.streams", "embedding", "vector", "BT,GD,PD->BGTD", dict(G=n, P=s.max_positions or 0, D=D), 1,
        [("embedding.ngram", n * D)], vflops=[(m * D, "BT", _times(m, "D"))],
        weight=[(D, "BT", "D"), (m * D, "1", _times(m, "D"))], act_out=[(m * D, "BT", _times(m, "D"))],
        split=Split.REPLICATED
    )  # fmt: skip
    b.ops.append(rows_times(norm, 1 + m))


def _kv(a: Attn, m: int) -> None:
    """K and V of all (1 + m)·T rows: the main stream's written to the cache, the streams' kept as activations."""
    D, r = a.D, 1 + m
    for w in ("k", "v"):
        a.site.op(
            f"{w}_proj", "matmul", "BTD,DKH->BTKH",
            params=[(f"attention.{w}.weight", D * D), (f"attention.{w}.bias", D)],
            flops=[(2 * D * D * r, "BT", f"{r}·2·D·K·H")], vflops=[(D * r, "BT", f"{r}·K·H")],
            weight=[(D * D + D, "1", "D·K·H")], act_in=[(D * r, "BT", f"{r}·D")], kv_write=[(D, "BT", "K·H")],
            act_out=[(D * m, "BT", _times(m, "K·H"))],
        )  # fmt: skip


def _stream_attention(b: Builder, a: Attn, m: int) -> None:
    """The m predicting streams' attention: over the main stream's keys (cached + new), then over their own."""
    eager = b.attention == "eager"
    for prefix, win, cached in (("streams", Window.of(None), True), ("streams_own", Window.of(1), False)):
        site = replace(a.site, prefix=f"decoder.self_attn.{prefix}")
        first = len(b.ops)
        part = replace(a, site=site, win=win, cached=cached)
        eager_products(part) if eager else flash(part)
        if not cached:
            b.ops[first:] = [_keys_only(op) for op in b.ops[first:]]
        _scale_from(b, first, m, every=True)


def _relative_bias(b: Builder, a: Attn, m: int) -> None:
    """The D -> buckets·N projection of every row (``relative_pos_embeddings``) and the gathered bias added to
    each score (eager) or pair (flash): one FLOP each."""
    p = b.spec.prophet
    U = p.buckets if p is not None else 0
    first = len(b.ops)
    a.site.linear("relative_proj", "BTD,DUN->BTUN", a.D, U * a.N, bias=True, pkey="attention.relative",
                  sizes=dict(D=a.D, U=U, N=a.N), sym_out="U·N", split=Split.COLUMN)  # fmt: skip
    _scale_from(b, first, 1 + m)
    eager = b.attention == "eager"
    k = "E" if eager else "P"
    entries = [(a.N * (1 + m), f"{k}:full", f"{1 + m}·N"), (a.N * m, f"{k}:1", _times(m, "N"))]
    if eager:  # transformers gathers the bias into a tensor of the scores' shape, then adds it
        a.site.op(
            "relative_bias", "vector", "BNTS->BNTS", vflops=entries, act_in=entries, act_out=entries, split=Split.HEADS
        )
    else:  # fused into the attention kernel: it reads each row's U·N projected values, writes nothing
        rows = [(U * a.N * (1 + m), "BT", f"{1 + m}·U·N")]
        a.site.op(
            "relative_bias",
            "vector",
            "BNTS->BNTS",
            sizes=dict(U=U, N=a.N),
            vflops=entries,
            act_in=rows,
            split=Split.HEADS,
        )


def _times(k: int, sym: str) -> str:
    return sym if k == 1 else f"{k}·{sym}"


def ngram_self_attention(b: Builder, m: int, lk: str) -> None:
    """One n-stream self-attention per decoder layer (``ProphetNetNgramSelfAttention``)."""
    s = b.spec
    D, N, H = s.d_model, s.n_heads, s.head_dim
    site = Site(b, s.n_layers, lk, "decoder.self_attn", "attention", dict(D=D, N=N, K=N, G=1, H=H))
    a = Attn(site, Window.of(None), False, "attention", D, N, N, 1, H)
    first = len(b.ops)
    q_proj(a)
    _scale_from(b, first, 1 + m)
    _kv(a, m)
    _relative_bias(b, a, m)
    main = replace(a, site=replace(site, prefix="decoder.self_attn.main"))
    if b.attention == "eager":
        cache_append(main)
        eager_products(main)
    else:
        flash(main)
    _stream_attention(b, a, m)
    first = len(b.ops)
    o_proj(a)
    _scale_from(b, first, 1 + m)


def _cross_attention(b: Builder, lk: str) -> None:
    """Cross-attention over the cached encoder output, then its residual add; ProphetNetForCausalLM (no
    encoder) skips it, its weights (and its LayerNorm's) allocated all the same (``add_cross_attention``)."""
    s, D, L = b.spec, b.spec.d_model, b.spec.n_layers
    if s.encoder is not None:
        attention_block(b, None, L, lk, prefix="decoder.cross_attn", cross=True)
        residual(b, "decoder.residual.cross_attn", L, lk)
    elif s.prophet is not None and s.prophet.cross_weights:
        for w, split in CROSS_SPLITS.items():  # weights only: split as their namesakes
            params = [(f"attention.cross.{w}.weight", D * D), (f"attention.cross.{w}.bias", D)]
            b.add(f"decoder.cross_attn.{w}_proj", "attention", "memory", "skipped (no encoder)", dict(D=D), L,
                  params, lk, split)  # fmt: skip
        b.add("decoder.cross_attn.norm", "norm", "memory", "skipped (no encoder)", dict(D=D), L,
              [("norm.layers", 2 * D)], lk)  # fmt: skip


def prophet_decoder(b: Builder, lk: str) -> None:
    """A decoder pass (``prefill`` / ``decode``): inputs, the post-LN layers (n-stream self-attention, then
    cross-attention over the cached encoder output, then the FFN, each followed by residual add and LayerNorm)
    on every stream's rows, and the LM head on the predicting streams' logit rows. ``lk``: the layers' kind
    label (deploy/shard.py places operators on pipeline stages by it)."""
    s, (m, heads) = b.spec, streams(b)
    _inputs(b, m)
    first = len(b.ops)
    for j in range(s.norms_per_layer - (s.encoder is None)):  # the decoder alone runs no cross-attention norm
        b.norm(f"decoder.norm{j}", s.d_model, count=s.n_layers, pkey="norm.layers", layer_kind=lk)
    _scale_from(b, first, 1 + m)
    ngram_self_attention(b, m, lk)
    first = len(b.ops)
    residual(b, "decoder.residual.self_attn", s.n_layers, lk)
    _cross_attention(b, lk)
    ffn_block(b, s.d_ff, s.n_layers, lk, "decoder.ffn", "ffn", "ffn")
    residual(b, "decoder.residual.ffn", s.n_layers, lk)
    _scale_from(b, first, 1 + m)
    first = len(b.ops)
    lm_head(b)
    _scale_from(b, first, heads)
