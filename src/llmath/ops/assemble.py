"""The per-stage assembly: embedding, decoder layers by group, head -> one operator list (encoder-decoder
models: an encoder pass, or a decoder pass with cross-attention)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from llmath.errors import WorkloadError
from llmath.model.spec import ModelSpec
from llmath.ops.altup import (
    altup_correct,
    altup_inputs,
    altup_outputs,
    altup_predict,
    gaussian_topk,
    laurel,
    logit_rows_only,
)
from llmath.ops.attention import attention_block
from llmath.ops.core import ATTENTIONS, Attention, Builder, Op, Stage
from llmath.ops.cycles import recurrence_weights
from llmath.ops.embed import embedding, head, lm_head
from llmath.ops.ffn import ffn_block, residual
from llmath.ops.mhc import mhc_embed, mhc_head, mhc_in, mhc_out
from llmath.ops.moe import moe_beside_ffn, moe_block, router_state_carry
from llmath.ops.norm_gate import norm_gate
from llmath.ops.per_layer import per_layer_block, per_layer_inputs
from llmath.ops.variants import last_layer_o_bias


def layer_groups(spec: ModelSpec) -> list[tuple[int | None, bool, int]]:
    """(window, moe, count) for each distinct kind of attention decoder layer, in first-seen order."""
    return [(g.window, g.moe, g.count) for g in _attention_groups(spec)]


@dataclass(frozen=True)
class _Group:
    """The attention decoder layers of one kind (everything :meth:`ModelSpec.layer_kinds` lists)."""

    window: int | None
    moe: bool
    kind: str  # "attention" or "attention+<mixer kind>"
    own_indexer: bool  # False only on DSA layers reusing an earlier top-k
    kv_shared: bool  # reuses an earlier layer's K/V (Gemma 3n / 4)
    sparse: bool  # the FFN gate's gaussian top-k (Gemma 3n)
    d_ff: int  # the dense FFN width (Gemma 3n's MatFormer slices differ per layer)
    count: int


def _attention_groups(spec: ModelSpec) -> list[_Group]:
    """The layers that attend, grouped by kind (the fields :meth:`ModelSpec.layer_kinds` lists) in first-seen order."""
    groups: dict[tuple[int | None, bool, str, bool, bool, bool, int], int] = {}
    per_layer = zip(
        spec.layer_windows, spec.layer_moe, spec.layer_mixers, spec.layer_indexer, spec.layer_kv_shared,
        spec.layer_ffn_sparse, spec.layer_d_ff or (spec.d_ff,) * spec.n_layers, strict=True,
    )  # fmt: skip
    for k in per_layer:
        if k[2].startswith("attention"):
            groups[k] = groups.get(k, 0) + 1
    return [_Group(*k, count=c) for k, c in groups.items()]


def layer_kind(
    spec: ModelSpec,
    window: int | None,
    moe: bool,
    own_indexer: bool = True,
    kind: str = "attention",
    kv_shared: bool = False,
    sparse: bool = False,
    d_ff: int | None = None,
    compress: str = "",
) -> str:
    """The label of an attention layer kind (operators' ``layer_kind``; deploy/shard.py counts layers by it)."""
    win = "full" if window is None else f"{'chunk' if spec.chunked_windows else 'window'} {window}"
    ffn = "moe" if moe else "dense" if spec.attention_ffn else "attention only"
    if spec.block_index is not None:  # MiniMax-M3: the indexer's layers are the block-sparse ones
        index = "/block-sparse" if own_indexer else ""
    else:  # DSA: a layer without its own indexer reuses an earlier top-k
        index = "" if own_indexer else "/shared top-k"
    tags = index + ("/shared kv" if kv_shared else "") + ("/sparse" if sparse else "")
    width = "" if d_ff is None or d_ff == spec.d_ff else f"/ffn {d_ff}"
    return f"{ffn}/{win}" + kind.removeprefix("attention") + tags + width + (f"/{compress}" if compress else "")


def _compressed_layers(b: Builder) -> None:
    """DeepSeek-V4's layers, grouped by (window, moe, compressor): hyper-connection in, norm, attention
    (ops/compressed.py), hyper-connection out, then the same around the FFN or MoE (ops/mhc.py); a plain
    residual where the spec has no hyper-connection streams."""
    from llmath.ops.compressed import compressed_attention

    s = b.spec
    groups: dict[tuple[int | None, bool, str], int] = {}
    for key in zip(s.layer_windows, s.layer_moe, s.layer_compress, strict=True):
        groups[key] = groups.get(key, 0) + 1
    for (w, moe, kind), count in groups.items():
        lk = layer_kind(s, w, moe, compress=kind)
        b.window = w
        for which in ("attn", "ffn"):
            if s.mhc_streams:
                mhc_in(b, which, count, lk)
            b.norm(f"norm.{which}_in", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
            if which == "attn":
                compressed_attention(b, w, kind, count, lk)
            else:
                _ffn(b, moe, count, lk)
            _residual_or_hyper(b, which, count, lk)


def _ffn(b: Builder, moe: bool, count: int, lk: str) -> None:
    """The layer's FFN: dense (Gemma 3n's gaussian top-k on sparse layers; Gemma 4's KV-shared layers
    ``kv_shared_ffn_mult`` times wider), MoE, or (Gemma 4's ``moe_beside_ffn``) both, summed."""
    s = b.spec
    if moe and not s.moe_beside_ffn:
        moe_block(b, count, lk)
        return
    width = (b.d_ff or s.d_ff) * (s.kv_shared_ffn_mult if b.kv_shared else 1)
    if b.sparse:
        gaussian_topk(b, count, lk, width)
    ffn_block(b, width, count, lk, "ffn", "ffn", "ffn")
    if moe:
        moe_beside_ffn(b, count, lk)


def mixer_layer_kind(spec: ModelSpec, i: int) -> str:
    """The label of non-attention layer ``i`` (deploy/shard.py counts layers by it): its mixer kind, its FFN
    (``moe``, ``dense`` or ``mixer only``) and the FFN's width where layers differ (Nemotron-NAS)."""
    kind, moe = spec.layer_mixers[i], spec.layer_moe[i]
    ffn = spec.layer_has_ffn(kind)
    width = spec.ffn_width(i) if ffn and not moe else spec.d_ff
    return f"{kind}/{'moe' if moe else 'dense' if ffn else 'mixer only'}" + (
        f"/ffn {width}" if width != spec.d_ff else ""
    )


def _mixer_layers(b: Builder) -> None:
    """Layers whose mixer is not attention (state-space, recurrent): norm, mixer, residual, then (hybrids)
    norm, FFN or MoE, residual; grouped by :func:`mixer_layer_kind`. Kind "none" (Nemotron-H, Nemotron-NAS):
    norm, FFN or MoE, residual only. Kind "shared+<mixer>" (Zamba): the shared block first (ops/shared_block.py)."""
    s = b.spec
    groups: dict[tuple[str, bool, int, str], int] = {}
    for i, (kind, moe) in enumerate(zip(s.layer_mixers, s.layer_moe, strict=True)):
        if not kind.startswith("attention"):
            key = (kind, moe, s.ffn_width(i), mixer_layer_kind(s, i))
            groups[key] = groups.get(key, 0) + 1
    b.window, b.kv_shared, b.sparse = None, False, False
    for (kind, moe, width, lk), count in groups.items():
        ffn = s.layer_has_ffn(kind)
        b.d_ff = width
        if kind == "xattn":  # Mllama's cross-attention layers: skipped in a text-only request (weights only)
            from llmath.ops.vision_cross import vision_cross_layers

            vision_cross_layers(b, count, lk)
            continue
        if kind.startswith("shared+"):  # Zamba: the shared transformer block feeds the mixer's input
            from llmath.ops.shared_block import shared_block

            shared_block(b, count, lk)
        if kind != "none":
            from llmath.ops.mixers import mixer_block

            b.norm("norm.mixer_in", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
            mixer_block(b, count, lk)
            if s.norms_per_layer >= 4:  # LFM3's sandwich norms, as attention layers place them
                b.norm("norm.mixer_out", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
            residual(b, "residual.mixer", count, lk)
        if not ffn:
            continue
        b.norm("norm.ffn_in", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
        _ffn(b, moe, count, lk)
        if s.norms_per_layer >= 4:
            b.norm("norm.ffn_out", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
        residual(b, "residual.ffn", count, lk)


def _residual_or_hyper(b: Builder, which: str, count: int, lk: str, inputs: int = 2) -> None:
    if b.spec.mhc_streams:
        mhc_out(b, which, count, lk)
    else:
        residual(b, f"residual.{which}", count, lk, inputs=inputs)


def _decoder_layers(b: Builder) -> None:
    s = b.spec
    first = len(b.ops)
    if s.inkling is not None:  # Inkling / Inkling-2: their own layer (ops/inkling.py)
        from llmath.ops.inkling import inkling_layers

        inkling_layers(b, layer_kind)
        return
    if s.compressed is not None:  # DeepSeek-V4: compressed attention and hyper-connections
        _compressed_layers(b)
        return
    if s.hyper is not None:  # Qwen4-Exp: residual streams (ops/hyper.py)
        from llmath.ops.hyper import hyper_layers

        hyper_layers(b, layer_kind)
        return
    _mixer_layers(b)
    for i, g in enumerate(_attention_groups(s)):
        before = len(b.ops)
        _attention_layers(b, g, first=i == 0)
        # Gemma 4 in transformers runs its KV-shared layers on the logit rows only; serving engines run every row
        # (vLLM's kv_sharing_fast_prefill is False by default, vllm/config/cache.py), as flash does here
        if g.kv_shared and s.kv_shared_last_only and b.attention == "eager":
            b.ops[before:] = [logit_rows_only(op) for op in b.ops[before:]]
    last_layer_o_bias(b)
    router_state_carry(b)  # ZAYA: the router state each MoE layer after the first adds (ops/moe.py)
    recurrence_weights(b, first)  # HRM-Text: layer runs of two stacks, weights once per layer (ops/cycles.py)


def _attention_layers(b: Builder, g: _Group, first: bool) -> None:
    """The ``g.count`` attention layers of one kind (Gemma 3n's AltUp and LAuReL steps where it has them)."""
    s, count, kind = b.spec, g.count, g.kind
    ffn = s.attention_ffn
    lk = layer_kind(s, g.window, g.moe, g.own_indexer, kind, g.kv_shared, g.sparse, g.d_ff)
    b.window, b.own_indexer, b.kv_shared, b.sparse, b.d_ff = g.window, g.own_indexer, g.kv_shared, g.sparse, g.d_ff
    norms = s.norms_per_layer
    altup_predict(b, count, lk)
    attn_in = count - (0 if s.first_attn_norm or not first else 1)  # ModernBERT-decoder: none in the first layer
    if s.mhc_streams:  # HY-V4: hyper-connections around attention and FFN (ops/mhc.py)
        mhc_in(b, "attn", count, lk)
    if attn_in:
        b.norm("norm.attn_in", s.d_model, count=attn_in, pkey="norm.layers", layer_kind=lk)
        norm_gate(b, "norm.attn_in", attn_in, lk)  # A.X K2's gated norms (ops/norm_gate.py)
    if s.parallel_block and norms >= 2:
        b.norm("norm.ffn_in", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
    attention_block(b, g.window, count, lk)
    if kind != "attention":  # Falcon-H1: the mixer runs beside attention on the same normed input
        from llmath.ops.mixers import mixer_block

        mixer_block(b, count, lk)
    if norms >= 4:
        b.norm("norm.attn_out", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
    if not s.parallel_block:
        _residual_or_hyper(b, "attn", count, lk, inputs=2 if kind == "attention" else 3)
        laurel(b, count, lk)
        if s.mhc_streams and ffn:
            mhc_in(b, "ffn", count, lk)
        if norms >= 2 and ffn:
            b.norm("norm.ffn_in", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
            norm_gate(b, "norm.ffn_in", count if g.moe else 0, lk)
    if ffn:
        _ffn(b, g.moe, count, lk)
    if norms >= 4:
        b.norm("norm.ffn_out", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
    for extra in range(4, norms):  # more norms than modelled placements: count their weights
        b.norm(f"norm.extra{extra}", s.d_model, count=count, pkey="norm.layers", layer_kind=lk)
    if s.parallel_block:
        residual(b, "residual.parallel", count, lk, inputs=3)
    elif ffn:
        _residual_or_hyper(b, "ffn", count, lk)
    altup_correct(b, count, lk)
    per_layer_block(b, count, lk)  # Gemma 3n / 4's per-layer input (ops/per_layer.py); none elsewhere


def _stack(b: Builder, stack: str, n_layers: int, norms: int, final: bool) -> None:
    """The layers of one encoder-decoder stack (the decoder's carry cross-attention), then its final norm."""
    s, enc = b.spec, stack == "encoder"
    for j in range(norms):
        b.norm(f"{stack}.norm{j}", s.d_model, count=n_layers, pkey="norm.layers", layer_kind=stack)
    attention_block(b, None, n_layers, stack, prefix=f"{stack}.self_attn", encoder=enc)
    residual(b, f"{stack}.residual.self_attn", n_layers, stack)
    if not enc:
        attention_block(b, None, n_layers, stack, prefix=f"{stack}.cross_attn", cross=True)
        residual(b, f"{stack}.residual.cross_attn", n_layers, stack)
    ffn_block(b, s.d_ff, n_layers, stack, f"{stack}.ffn", "ffn", "ffn")
    residual(b, f"{stack}.residual.ffn", n_layers, stack)
    if final:
        b.norm(f"{stack}.norm_final", s.d_model, count=1, pkey="norm.final")


def _encoder_decoder(b: Builder) -> None:
    """An encoder-decoder stage: the ``encoder`` pass over the source, or a decoder pass (``prefill`` /
    ``decode``) with cross-attention over the cached encoder output. The token table is shared: the
    encoder's embedding owns it; parameters are the union of the encoder and prefill lists."""
    from llmath.ops.bigbird import block_sparse_rows, dense_probs
    from llmath.ops.codebooks import enc_to_dec_proj, text_encoder_pass
    from llmath.ops.frontend import audio_frontend
    from llmath.ops.prophet import prophet_decoder

    s, enc = b.spec, b.spec.encoder
    if enc is None:  # pragma: no cover - build_ops sends encoder-decoder specs only
        raise AssertionError(f"{s.name}: no encoder")
    if b.stage == "encoder":
        if enc.external:  # another model's encoder (TrOCR's image encoder): no operators here
            return
        if s.text_encoder is not None:  # MusicGen: its T5 text encoder's pass (ops/codebooks.py)
            text_encoder_pass(b)
            return
        if enc.frontend:  # Whisper's convolutions over audio frames (ops/frontend.py)
            audio_frontend(b)
        else:
            embedding(b, "encoder.embed", own_positions=enc.own_position_table)
        first = len(b.ops)
        _stack(b, "encoder", enc.n_layers, enc.norms_per_layer, enc.final_norm)
        if enc.block_size:  # BigBird-Pegasus: block-sparse attention over the padded source (ops/bigbird.py)
            b.ops[first:] = [block_sparse_rows(op, enc) for op in b.ops[first:]]
            dense_probs(b, enc)
        return
    if s.prophet is not None:  # ProphetNet's n-stream decoder (ops/prophet.py)
        prophet_decoder(b, "decoder")
        return
    own = bool(enc.external or enc.frontend or s.text_encoder)  # the decoder owns its token and position tables
    embedding(b, "decoder.embed", own_positions=enc.own_position_table or own, token_table=own)
    enc_to_dec_proj(b)
    _stack(b, "decoder", s.n_layers, s.norms_per_layer, s.final_norm)
    lm_head(b)


@lru_cache(maxsize=256)
def build_ops(spec: ModelSpec, stage: Stage = "prefill", attention: Attention = "flash") -> tuple[Op, ...]:
    """The operator list of one forward pass of ``spec`` at ``stage`` under ``attention``."""
    if attention not in ATTENTIONS:
        raise WorkloadError(f"attention={attention!r} must be one of {', '.join(ATTENTIONS)}")
    if stage not in ("prefill", "decode", "encoder", "vision"):
        raise WorkloadError(f"stage={stage!r} must be 'prefill', 'decode', 'encoder' or 'vision'")
    if stage == "vision":  # Llama 3.2 Vision's image encoder (ops/vision_mllama.py)
        from llmath.ops.vision_mllama import vision_pass

        if spec.vision is None:
            raise WorkloadError(f"stage='vision': {spec.name!r} has no image encoder llmath runs (mllama has)")
        b = Builder(spec, attention, stage)
        vision_pass(b)
        return tuple(b.ops)
    if stage == "encoder" and not spec.is_encoder_decoder:
        raise WorkloadError(f"stage='encoder': {spec.name!r} is a decoder-only model; use 'prefill' or 'decode'")
    b = Builder(spec, attention, stage)
    if spec.blt is not None:  # the Byte Latent Transformer: its four stacks (ops/blt.py)
        from llmath.ops.blt import blt_ops

        blt_ops(b)
    elif spec.is_encoder_decoder:
        _encoder_decoder(b)
    elif spec.prophet is not None:  # ProphetNetForCausalLM: the n-stream decoder alone (ops/prophet.py)
        from llmath.ops.prophet import prophet_decoder

        prophet_decoder(b, layer_kind(spec, None, False))
    else:
        _decoder_pass(b)
    return tuple(b.ops)


def _decoder_pass(b: Builder) -> None:
    """A decoder-only pass: the embedding (a draft model's input on its target's cache), the layers, the head."""
    spec = b.spec
    if spec.assistant is not None:  # a draft model on its target's cache (ops/assistant.py)
        from llmath.ops.assistant import assistant_head, assistant_input

        assistant_input(b)
    else:
        embedding(b)
    per_layer_inputs(b)
    if spec.mhc_streams:
        mhc_embed(b)
    altup_inputs(b)
    _decoder_layers(b)
    altup_outputs(b)
    mhc_head(b)
    (assistant_head if spec.assistant is not None else head)(b)
