"""The Byte Latent Transformer's forward pass (BLT, arXiv:2412.09871) as transformers 5.23 runs it
(``modeling_blt.py`` ``BltModel.forward``), over L bytes cut into P patches.

**Patches.** The global stack runs over P = L / ``bytes_per_patch`` patches (:attr:`BltSpec.bytes_per_patch`,
read from the config's ``patch_size``). This is the one stated input: the entropy model places the real
boundaries from the text (its next-byte entropy above ``patching_threshold``), so P is data dependent; at
bytes_per_patch = b every formula below is exact for any text cut into P = L / b patches (a non-integer P is
the mean). The BLT paper's entropy-patched models average 4.5 to 8 bytes per patch (arXiv:2412.09871, §2, §4).

**No cache.** transformers 5.23 cannot run BLT with a cache: ``BltModel.forward`` builds
``DynamicCache(config=BltConfig)``, which asks the config for ``num_hidden_layers`` that ``BltConfig`` does not
have (AttributeError), so ``generate`` runs it with ``use_cache=False``; the reference implementation generates
the same way (facebookresearch/blt ``bytelatent/generate.py`` ``generate_nocache``: the whole sequence again
for each new byte). llmath models exactly that: a prefill of T bytes after S0 bytes and a decode step at
context S both run the full forward over L = S0 + T bytes (S + 1 in a decode step), logits for the last byte
only, and hold no KV cache. Monomials ``L`` = B·L and ``LL`` = B·L² (:mod:`llmath.ops.core`).

**Attention.** Every score of each rectangle is computed, in both executions: eager materialises it as
transformers does; ``flash`` fuses it (no score matrix written) but BLT's masks are explicit tensors (sliding
windows of ``local_attention_window_len`` over the bytes, patch masks in the cross-attentions:
``_prepare_patch_cross_attention_mask``), so a kernel computes every entry (transformers offers eager and SDPA
for BLT, not flash-attention: ``_supports_flash_attn = False``).

The stacks' layers reuse the generic operators (ops/attention.py as an uncached bidirectional block,
ops/ffn.py, norms, residuals) on each stack's own widths; their per-token monomials are then mapped to the
stack's rows: bytes (``L``), patches (``L`` / b) or the ``cross_k`` rows per patch (``L`` · k / b).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from llmath.model.spec import ModelSpec
from llmath.model.spec_blt import BltStack
from llmath.ops.attention import attention_block
from llmath.ops.core import SOFTMAX_FLOPS, Builder, Op, Term
from llmath.ops.ffn import ffn_block, residual
from llmath.ops.kernel import Kernel

# a stack's per-token monomials -> (BLT monomial, scale); "q": its query rows, "k": its key rows
_ROWS = {"BT": "q", "K:full": "k", "E:full": "qk", "P:full": "qk", "X": "k", "XE": "qk"}
_CACHE_AS_ACT = {"kv_read": "act_in", "kv_write": "act_out"}  # BLT keeps no cache: K/V are activations


def _sub_spec(spec: ModelSpec, st: BltStack, which: str) -> ModelSpec:
    """One stack as a Llama-style spec of its own widths (RMSNorm, SwiGLU, rotary, no biases)."""
    return ModelSpec(
        name=f"{spec.name}:{which}", model_type="blt", d_model=st.d_model, vocab_size=st.vocab or spec.vocab_size,
        n_heads=st.n_heads, n_kv_heads=st.n_kv_heads, head_dim=st.d_model // st.n_heads, d_ff=st.d_ff,
        ffn="gated", norm="rms", position="rotary", n_layers=st.n_layers,
    )  # fmt: skip


def _coef(c: int | float, scale: Fraction) -> int | float:
    v = Fraction(c) * scale
    return int(v) if v.denominator == 1 else float(v)


def _map_term(t: Term, q: Fraction, k: Fraction) -> Term:
    """A stack's term over its own rows -> over the bytes: query rows ``q`` and key rows ``k`` per byte."""
    rows = _ROWS.get(t.mono)
    if rows is None:
        if t.mono not in ("1", "B", "BL"):  # pragma: no cover - the stacks emit only the monomials above
            raise AssertionError(f"blt: monomial {t.mono!r}")
        return t
    scale = {"q": q, "k": k, "qk": q * k}[rows]
    sym = t.sym if scale == 1 else f"{t.sym}·({scale})"  # --explain shows the rows per byte: (1/4) per patch
    return Term(_coef(t.coef, scale), "LL" if rows == "qk" else "L", sym)


def _adopt(b: Builder, sub: Builder, prefix: str, q: Fraction, k: Fraction, pkey, weights_only=False) -> None:
    """Move ``sub``'s operators into ``b``: names under ``prefix``, parameter keys through ``pkey``, terms over
    the bytes (:func:`_map_term`), cache terms as activations; ``weights_only``: built but not run."""
    for op in sub.ops:
        costs: dict[str, list[Term]] = {}
        for cls, terms in op.costs:
            for t in terms:
                costs.setdefault(_CACHE_AS_ACT.get(cls, cls), []).append(_map_term(t, q, k))
        b.ops.append(
            replace(
                op,
                name=f"{prefix}.{op.name}",
                params=tuple((pkey(key), n) for key, n in op.params),
                costs=() if weights_only else tuple((c, tuple(ts)) for c, ts in costs.items()),
                layer_kind=f"{prefix}/{op.layer_kind}" if op.layer_kind else "",
                window=None,
                kernel=Kernel.NONE,  # explicit mask tensors, every entry computed: not the fused kernel (module doc)
            )
        )


def _in_stack(which: str):
    """Parameter keys of a stack: its name after the component (``attention.q`` -> ``attention.global.q``)."""

    def key(k: str) -> str:
        head, _, rest = k.partition(".")
        return f"{head}.{which}.{rest}" if rest else f"{head}.{which}"

    return key


def _layers(sb: Builder, st: BltStack, lk: str) -> None:
    """``st.n_layers`` Llama layers: norm, self-attention (all pairs, uncached), residual, norm, SwiGLU, residual."""
    n = st.n_layers
    sb.norm("norm.attn_in", st.d_model, count=n, pkey="norm.layers", layer_kind=lk)
    attention_block(sb, None, n, lk, encoder=True)
    residual(sb, "residual.attn", n, lk)
    sb.norm("norm.ffn_in", st.d_model, count=n, pkey="norm.layers", layer_kind=lk)
    ffn_block(sb, st.d_ff, n, lk, "ffn", "ffn", "ffn")
    residual(sb, "residual.ffn", n, lk)


def _cross(sb: Builder, count: int, lk: str) -> None:
    """``BltCrossAttention``: RMSNorms on the queries' and the keys' inputs, q/k/v/o without rotary, the
    query input added to its output, then that sum added to the stream (two adds)."""
    D = sb.spec.d_model
    sb.norm("cross.q_norm", D, count=count, pkey="norm.cross_q", layer_kind=lk)
    sb.norm("cross.k_norm", D, count=count, pkey="norm.cross_k", layer_kind=lk, rows="X")
    attention_block(sb, None, count, lk, prefix="cross", cross=True)
    residual(sb, "residual.cross", count, lk, inputs=3)


def _patch_projection(sb: Builder, name: str, din: int, dout: int, pkey: str) -> None:
    """A patch's projection (no bias), one per patch row."""
    sb.linear(name, "projection", "BTI,IO->BTO", dict(I=din, O=dout), din, dout, bias=False, count=1, pkey=pkey,
              sym_in="I", sym_out="O")  # fmt: skip


def _builder(b: Builder, st: BltStack, which: str) -> Builder:
    return Builder(_sub_spec(b.spec, st, which), b.attention, "prefill")


def blt_ops(b: Builder) -> None:
    """The operators of one BLT forward over L bytes (see the module docstring), stack by stack."""
    blt = b.spec.blt
    if blt is None:  # pragma: no cover - build_ops sends BLT specs only
        raise AssertionError(b.spec.name)
    one, per_patch = Fraction(1), Fraction(1, blt.bytes_per_patch)
    rows_k = per_patch * blt.cross_k  # the cross_k rows of each patch, per byte
    _embeddings(b, blt.encoder, blt.hash_rows, blt.hash_tables)
    if blt.patcher is not None:
        _patcher(b, blt.patcher, not blt.entropy_patching)
    enc = _builder(b, blt.encoder, "encoder")
    _layers(enc, blt.encoder, "layers")
    _adopt(b, enc, "encoder", one, one, _in_stack("encoder"))
    _encoder_cross(b, blt.encoder, blt.cross_k, blt.encoder.n_layers if blt.encoder_cross_all else 1, per_patch)
    glo = _builder(b, blt.global_, "global")
    if blt.global_in != blt.global_.d_model:  # BltGlobalTransformer.token_embedding_projection
        _patch_projection(glo, "token_projection", blt.global_in, blt.global_.d_model, "projection.in")
    _layers(glo, blt.global_, "layers")
    _adopt(b, glo, "global", per_patch, per_patch, _in_stack("global"))
    dec = _builder(b, blt.decoder, "decoder")
    D = blt.decoder.d_model
    _patch_projection(dec, "patch_projection", blt.decoder_patch_in, D * blt.cross_k, "projection.patch")
    _adopt(b, dec, "decoder", per_patch, per_patch, _in_stack("decoder"))
    dec = _builder(b, blt.decoder, "decoder")
    _cross(dec, blt.decoder.n_layers if blt.decoder_cross_all else 1, "cross")
    _adopt(b, dec, "decoder", one, rows_k, _in_stack("decoder"))
    dec = _builder(b, blt.decoder, "decoder")
    _layers(dec, blt.decoder, "layers")
    dec.norm("norm.final", D, count=1, pkey="norm.final")
    _adopt(b, dec, "decoder", one, one, _in_stack("decoder"))
    _lm_head(b, D)


def _encoder_cross(b: Builder, st: BltStack, k: int, count: int, per_patch: Fraction) -> None:
    """After the encoder's last (every) layer: the bytes max-pooled per patch, projected to ``k`` rows of D,
    then the cross-attention from those rows (queries) to the bytes (keys)."""
    D = st.d_model
    sb = _builder(b, st, "encoder")
    sb.add("patch_pool", "projection", "vector", "BTD->BPD", dict(D=D), count, layer_kind="cross",
           vflops=[(D, "BT", "D")], act_in=[(D, "BT", "D")], act_out=[(D, "X", "D")])  # fmt: skip
    _adopt(b, sb, "encoder", Fraction(1), per_patch, _in_stack("encoder"))
    sb = _builder(b, st, "encoder")
    # one Linear, run after each of the ``count`` cross layers: its weights once, its rows ``count`` times
    sb.linear("patch_projection", "projection", "BPD,DE->BPE", dict(D=D, E=D * k), D, D * k, bias=False,
              count=1, pkey="projection.patch", sym_out="E")  # fmt: skip
    _adopt(b, sb, "encoder", per_patch * count, per_patch * count, _in_stack("encoder"))
    sb = _builder(b, st, "encoder")
    _cross(sb, count, "cross")
    _adopt(b, sb, "encoder", per_patch * k, Fraction(1), _in_stack("encoder"))


def _embeddings(b: Builder, st: BltStack, hash_rows: int, n: int) -> None:
    """The byte table (V × D) and the ``n`` hash n-gram tables (functions × group sizes, fused into one of
    ``hash_rows`` × D): each byte reads its row and one row per table and adds them (``compute_hash_embeddings``)."""
    D = st.d_model
    b.add("embed.bytes", "embedding", "memory", "BL,VD->BLD", dict(V=st.vocab, D=D), 1,
          [("embedding.token", st.vocab * D)], weight=[(D, "L", "D")], act_out=[(D, "L", "D")])  # fmt: skip
    b.add("embed.hash", "embedding", "memory", "BL,HD->BLD", dict(H=hash_rows, D=D), 1,
          [("embedding.hash", hash_rows * D)], weight=[(n * D, "L", f"{n}·D")], vflops=[(n * D, "L", f"{n}·D")],
          act_in=[(D, "L", "D")], act_out=[(D, "L", "D")])  # fmt: skip


def _patcher(b: Builder, st: BltStack, weights_only: bool) -> None:
    """The entropy model (``BltPatcher``): byte table, layers, norm, and its head over every byte (it needs
    each position's next-byte entropy); built but not run when the patches come another way."""
    sb = _builder(b, st, "patcher")
    D, V = st.d_model, st.vocab
    sb.add("embed", "patcher", "memory", "BT,VD->BTD", dict(V=V, D=D), 1, [("embedding", V * D)],
           weight=[(D, "BT", "D")], act_out=[(D, "BT", "D")])  # fmt: skip
    _layers(sb, st, "layers")
    sb.norm("norm.final", D, count=1, pkey="norm.final")
    sb.linear("head", "patcher", "BTD,DV->BTV", dict(D=D, V=V), D, V, bias=False, count=1, pkey="head", sym_out="V")
    ent = SOFTMAX_FLOPS * V  # each byte's next-byte distribution and its entropy: a softmax's cost per logit
    sb.add("entropy", "patcher", "vector", "BTV->BT", dict(V=V), 1, vflops=[(ent, "BT", f"{SOFTMAX_FLOPS}·V")],
           act_in=[(V, "BT", "V")], act_out=[(1, "BT", "1")])  # fmt: skip
    _adopt(b, sb, "patcher", Fraction(1), Fraction(1), lambda k: f"patcher.{k}", weights_only)
    for i, op in enumerate(b.ops):  # every patcher weight is the patcher's component
        if op.name.startswith("patcher."):
            b.ops[i] = replace(op, component="patcher")


def _lm_head(b: Builder, D: int) -> None:
    V = b.spec.vocab_size
    b.add("lm_head", "lm_head", "matmul", "BLD,DV->BLV", dict(D=D, V=V), 1, [("lm_head.weight", V * D)],
          flops=[(2 * D * V, "BL", "2·D·V")], weight=[(D * V, "1", "D·V")], act_in=[(D, "BL", "D")],
          act_out=[(V, "BL", "V")])  # fmt: skip


__all__ = ["blt_ops", "Op"]
