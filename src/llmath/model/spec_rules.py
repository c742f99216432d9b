"""The rules a :class:`~llmath.model.spec.ModelSpec`'s fields must satisfy, checked once when a spec is built.

Each raises :class:`~llmath.errors.SpecError` naming the field, the value, the rule and the fix; the optional
parts (MoE, MLA, mixers, compressed attention, ...) bring their own ``validate`` and are called from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmath.errors import SpecError
from llmath.model.spec_hyper import _positive

if TYPE_CHECKING:
    from llmath.model.spec import ModelSpec


def validate_spec(spec: ModelSpec) -> None:
    """Every rule of a spec's fields; raises :class:`~llmath.errors.SpecError` naming the field, the rule and
    the fix (:meth:`ModelSpec.validate`)."""
    n = spec.name
    for f in ("n_layers", "d_model", "vocab_size", "n_heads", "n_kv_heads", "head_dim"):
        _positive(n, f, getattr(spec, f))
    if spec.d_ff < 0 or (spec.d_ff == 0 and spec._needs_dense_ffn()):
        raise SpecError(f"{n!r}: d_ff={spec.d_ff} must be a positive integer (the FFN hidden width)")
    for f in ("v_head_dim", "window_kv_heads"):
        if getattr(spec, f) is not None:
            _positive(n, f, getattr(spec, f))
    if spec.window_kv_heads and spec.n_heads % spec.window_kv_heads:
        raise SpecError(f"{n!r}: n_heads={spec.n_heads} is not a multiple of window_kv_heads={spec.window_kv_heads}")
    if spec.n_heads % spec.n_kv_heads:
        raise SpecError(
            f"{n!r}: n_heads={spec.n_heads} is not a multiple of n_kv_heads={spec.n_kv_heads}; "
            "each KV head must serve a whole group of query heads"
        )
    if spec.ffn not in ("mlp", "gated"):
        raise SpecError(f"{n!r}: ffn={spec.ffn!r} must be 'mlp' or 'gated'")
    if spec.norm not in ("layer", "rms", "layer_noparam", "rms_noparam"):
        raise SpecError(f"{n!r}: norm={spec.norm!r} must be 'layer', 'rms', 'layer_noparam' or 'rms_noparam'")
    if spec.attention == "mla":
        if spec.mla is None:
            raise SpecError(f"{n!r}: attention='mla' needs the mla widths (kv_lora_rank, ...)")
        spec.mla.validate(n)
    if spec.window_mla is not None:
        if spec.mla is None or spec.window_mla.index_topk:
            raise SpecError(f"{n!r}: window_mla (the sliding layers' MLA widths) needs mla and has no indexer")
        spec.window_mla.validate(n)
    for part in (spec.moe, spec.prophet):  # sub-specs with rules of their own
        if part is not None:
            part.validate(n)
    if spec.attn_experts and (spec.moe is None or spec.n_heads != spec.moe.top_k * spec.n_kv_heads):
        raise SpecError(
            f"{n!r}: attention experts need a MoE spec whose top_k·n_kv_heads equals n_heads={spec.n_heads}"
        )
    if len(spec.layer_moe) != spec.n_layers:
        raise SpecError(f"{n!r}: layer_moe has {len(spec.layer_moe)} entries for {spec.n_layers} layers")
    if any(spec.layer_moe) and spec.moe is None:
        raise SpecError(f"{n!r}: layer_moe marks MoE layers but no moe spec is given")
    if len(spec.layer_windows) != spec.n_layers:
        raise SpecError(f"{n!r}: layer_windows has {len(spec.layer_windows)} entries for {spec.n_layers} layers")
    for w in spec.layer_windows:
        if w is not None and (not isinstance(w, int) or w <= 0):
            raise SpecError(f"{n!r}: sliding window {w!r} must be a positive integer or None")
    _validate_indexer(spec)
    if spec.position == "learned" and not spec.max_positions:
        raise SpecError(f"{n!r}: learned positions need max_positions (the table's rows)")
    if spec.rotary_dim is not None and not (0 < spec.rotary_dim <= spec.head_dim):
        raise SpecError(f"{n!r}: rotary_dim={spec.rotary_dim} must be in 1..head_dim={spec.head_dim}")
    _validate_recurrence(spec)
    if spec.attn_gate not in ("none", "head", "full"):
        raise SpecError(f"{n!r}: attn_gate={spec.attn_gate!r} must be 'none', 'head' or 'full'")
    for f in ("norms_per_layer", "prefix_positions", "extra_token_rows", "segment_rows", "codebooks", "enc_proj"):
        if getattr(spec, f) < 0:
            raise SpecError(f"{n!r}: {f}={getattr(spec, f)} must be >= 0")
    _validate_mixers(spec)
    _validate_layer_widths(spec)
    _validate_parts(spec)


def _validate_parts(spec: ModelSpec) -> None:
    """The optional parts' own rules (Inkling's layers, DeepSeek-V4's compression, Qwen4-Exp's)."""
    if spec.inkling is not None:
        spec.inkling.validate(spec.name)
    if spec.blt is not None:
        spec.blt.validate(spec.name)
    _validate_compressed(spec)
    _validate_qwen4(spec)


def _validate_indexer(spec: ModelSpec) -> None:
    n = spec.name
    if spec.block_index is not None:
        if spec.mla is not None:
            raise SpecError(f"{n!r}: block_index (block-sparse attention) is modelled for MHA/GQA, not MLA")
        spec.block_index.validate(n, spec.n_heads)
    first_dense = spec.block_index is None and spec.layer_indexer and not spec.layer_indexer[0]
    if len(spec.layer_indexer) != spec.n_layers or first_dense:
        raise SpecError(
            f"{n!r}: layer_indexer has {len(spec.layer_indexer)} entries for {spec.n_layers} layers, and the "
            "first layer must run its own indexer (a later one can only reuse an earlier layer's top-k)"
        )


def _validate_compressed(spec: ModelSpec) -> None:
    n, c = spec.name, spec.compressed
    if len(spec.layer_compress) != spec.n_layers or not set(spec.layer_compress) <= {"", "csa", "hca"}:
        raise SpecError(f"{n!r}: layer_compress needs one of '', 'csa', 'hca' for each of {spec.n_layers} layers")
    if any(spec.layer_compress) and c is None:
        raise SpecError(f"{n!r}: compressed layers need the compressed spec (DeepSeek-V4's attention widths)")
    if spec.mhc_streams < 0:
        raise SpecError(f"{n!r}: mhc_streams={spec.mhc_streams} must be >= 0 (0: a plain residual)")
    if spec.mhc_streams and (spec.parallel_block or any(k != "attention" for k in spec.layer_mixers)):
        raise SpecError(
            f"{n!r}: hyper-connection streams are modelled around attention layers in sequence "
            "only (no parallel block, no other mixer); set mhc_streams=0"
        )
    if c is not None:
        c.validate(n)
        if (spec.n_heads * spec.head_dim) % c.o_groups:
            raise SpecError(
                f"{n!r}: n_heads·head_dim={spec.n_heads * spec.head_dim} is not a multiple of "
                f"compressed.o_groups={c.o_groups}; each output group takes a whole share"
            )


def _validate_layer_widths(spec: ModelSpec) -> None:
    n = spec.name
    for f in ("full_head_dim", "full_kv_heads"):
        if getattr(spec, f) is not None:
            _positive(n, f, getattr(spec, f))
    if spec.n_heads % (spec.full_kv_heads or spec.n_kv_heads):
        raise SpecError(f"{n!r}: n_heads={spec.n_heads} is not a multiple of full_kv_heads={spec.full_kv_heads}")
    if (spec.per_layer_width > 0) != (spec.per_layer_vocab > 0) or min(spec.per_layer_width, spec.per_layer_vocab) < 0:
        raise SpecError(
            f"{n!r}: per_layer_width={spec.per_layer_width} and per_layer_vocab={spec.per_layer_vocab} must be "
            "both positive (per-layer embeddings) or both 0"
        )
    for f in ("layer_kv_shared", "layer_ffn_sparse"):
        if len(getattr(spec, f)) != spec.n_layers:
            raise SpecError(f"{n!r}: {f} has {len(getattr(spec, f))} entries for {spec.n_layers} layers")
    if spec.layer_d_ff and (len(spec.layer_d_ff) != spec.n_layers or min(spec.layer_d_ff) <= 0):
        raise SpecError(f"{n!r}: layer_d_ff={spec.layer_d_ff} must give {spec.n_layers} positive FFN widths")
    if spec.vision is not None:
        spec.vision.validate(n)
    if spec.assistant is not None:  # every layer reads the target's cache (model/spec_assistant.py)
        spec.assistant.validate(n, spec.vocab_size)
        if not all(spec.layer_kv_shared):
            raise SpecError(f"{n!r}: an assistant's layers all read the target's K/V (layer_kv_shared)")
    own = {w for w, shared in zip(spec.layer_windows, spec.layer_kv_shared, strict=True) if not shared}
    for i, (w, shared) in enumerate(zip(spec.layer_windows, spec.layer_kv_shared, strict=True)):
        if shared and spec.assistant is None and (w not in own or spec.layer_kv_shared.index(True) == 0):
            raise SpecError(f"{n!r}: layer {i} reuses K/V but no earlier layer of its window {w} computes them")
    if min(spec.altup_inputs, spec.laurel_rank) < 0 or spec.altup_inputs == 1 or spec.kv_shared_ffn_mult < 1:
        raise SpecError(
            f"{n!r}: altup_inputs={spec.altup_inputs} (0 or >= 2), laurel_rank={spec.laurel_rank} (>= 0) and "
            f"kv_shared_ffn_mult={spec.kv_shared_ffn_mult} (>= 1) are out of range"
        )
    if spec.norm_gate_rank < 0:
        raise SpecError(f"{n!r}: norm_gate_rank={spec.norm_gate_rank} must be >= 0 (0: norms without a gate)")


def _validate_recurrence(spec: ModelSpec) -> None:
    """ZAYA's CCA kernels and HRM-Text's recurrence."""
    n, r = spec.name, spec.recurrence
    if spec.cca_kernels is not None and (
        len(spec.cca_kernels) != 2 or min(spec.cca_kernels) < 1 or (spec.n_kv_heads * spec.head_dim) % 2
    ):
        raise SpecError(
            f"{n!r}: cca_kernels={spec.cca_kernels!r} must be two kernel widths >= 1, and n_kv_heads·head_dim "
            "even (CCA splits each value head into a current and a delayed half)"
        )
    if r is None:
        return
    if len(r) != 2 or min(r) < 1 or spec.n_layers % (r[0] * (r[1] + 1)) or len(set(spec.layer_kinds())) > 1:
        raise SpecError(
            f"{n!r}: recurrence={r!r} needs two cycle counts >= 1 (H, L) and n_layers={spec.n_layers} a multiple "
            "of H·(L+1) layer runs of one layer kind (HRM: two stacks of identical layers)"
        )


def _validate_qwen4(spec: ModelSpec) -> None:
    for part in (spec.hyper, spec.qsa, spec.ngram):
        if part is not None:
            part.validate(spec.name)
    ple = any(k.startswith("ple+") for k in spec.layer_mixers)
    if ple and (spec.ngram is None or spec.hyper is None):
        raise SpecError(
            f"{spec.name!r}: 'ple+' layers need the ngram spec and hyper-connections (hyper): the n-gram "
            "embeddings feed the residual streams"
        )


def _validate_mixers(spec: ModelSpec) -> None:
    n = spec.name
    if len(spec.layer_mixers) != spec.n_layers:
        raise SpecError(f"{n!r}: layer_mixers has {len(spec.layer_mixers)} entries for {spec.n_layers} layers")
    kinds = {k.split("+")[-1] for k in spec.layer_mixers} - {"attention", "none", "xattn"}
    if kinds and (spec.mixer is None or kinds != {spec.mixer.kind}):
        raise SpecError(f"{n!r}: layer_mixers names {sorted(kinds)} but the mixer spec is {spec.mixer!r}")
    if spec.mixer is not None:
        spec.mixer.validate(n)
    if any(k.startswith("shared+") for k in spec.layer_mixers) and spec.shared_block is None:
        raise SpecError(f"{n!r}: 'shared+' layers need the shared_block spec (the shared transformer block)")
    if spec.shared_block is not None:
        spec.shared_block.validate(n)
