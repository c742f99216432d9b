"""Adapter row of the Byte Latent Transformer (``blt``; merged by :mod:`llmath.model.families`).

Its config.json nests four sub-configs (transformers 5.23 ``configuration_blt.py``): ``encoder_config``
(``BltLocalEncoderConfig``), ``global_config`` (``BltGlobalTransformerConfig``), ``decoder_config``
(``BltLocalDecoderConfig``) and ``patcher_config`` (``BltPatcherConfig``). A key a sub-config leaves out takes
its class's default (:data:`DEFAULTS`); a missing ``intermediate_size`` is int(8·D/3), as each ``__post_init__``
derives it. The spec's own widths are the global transformer's; :class:`~llmath.model.spec_blt.BltSpec` holds
the four stacks, and :mod:`llmath.ops.blt` their operators.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.spec import ModelSpec
from llmath.model.spec_blt import BltSpec, BltStack

Getter = Callable[..., int]

# configuration_blt.py (transformers 5.23) class defaults: (hidden_size, num_hidden_layers,
# num_attention_heads, intermediate_size (None: int(8·D/3)), vocab_size, cross_attn_all_layers, cross_attn_k)
DEFAULTS: dict[str, tuple[int, int, int, int | None, int, bool, int]] = {
    "encoder_config": (1024, 1, 16, None, 260, False, 2),
    "global_config": (2048, 25, 16, 5632, 0, False, 0),
    "decoder_config": (1024, 9, 16, 2816, 260, True, 2),
    "patcher_config": (768, 14, 12, 2048, 260, False, 0),
}


def _sub(cfg: Mapping[str, Any], key: str) -> dict[str, Any]:
    sub = cfg.get(key) or {}
    if not isinstance(sub, Mapping):
        raise ConfigError(f"blt: {key}={sub!r} must be a JSON object (the {key} of BltConfig) or absent")
    return dict(sub)


def _int(sub: Mapping[str, Any], key: str, default: int | None, where: str) -> int:
    v = sub.get(key)
    v = default if v is None else v
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ConfigError(f"blt: {where}.{key}={v!r} must be a positive integer; fix the config.json")
    return v


def _stack(cfg: Mapping[str, Any], key: str) -> tuple[BltStack, Mapping[str, Any]]:
    sub = _sub(cfg, key)
    d, n, heads, ff, vocab, _, _ = DEFAULTS[key]
    D = _int(sub, "hidden_size", d, key)
    N = _int(sub, "num_attention_heads", heads, key)
    st = BltStack(
        d_model=D,
        n_layers=_int(sub, "num_hidden_layers", n, key),
        n_heads=N,
        n_kv_heads=_int(sub, "num_key_value_heads", N, key),
        d_ff=_int(sub, "intermediate_size", ff if ff is not None else int(8 * D / 3), key),
        vocab=_int(sub, "vocab_size", vocab, key) if vocab else 0,
    )
    return st, sub


def _flag(sub: Mapping[str, Any], key: str, which: str) -> bool:
    v = sub.get("cross_attn_all_layers")
    return DEFAULTS[which][5] if v is None else bool(v)


def _cross_k(cfg: Mapping[str, Any], subs: dict[str, Mapping[str, Any]]) -> int:
    """``cross_attn_k``: the encoder's and decoder's projections read their own, the masks and the global
    input width the top-level one; transformers runs only when they agree."""
    k = _int(cfg, "cross_attn_k", 2, "blt")
    for which, sub in subs.items():
        own = _int(sub, "cross_attn_k", DEFAULTS[which][6], which)
        if own != k:
            raise ConfigError(
                f"blt: {which}.cross_attn_k={own} differs from cross_attn_k={k}: BltModel reshapes the patch "
                "projections by each one and fails unless they agree; set them equal"
            )
    return k


def blt(cfg: Mapping[str, Any], get: Getter, **common: Any) -> ModelSpec:
    """BLT: the global transformer's widths as the spec's, the four stacks in :attr:`ModelSpec.blt`."""
    enc, enc_cfg = _stack(cfg, "encoder_config")
    glo, _ = _stack(cfg, "global_config")
    dec, dec_cfg = _stack(cfg, "decoder_config")
    in_forward = cfg.get("patch_in_forward")
    patcher = _stack(cfg, "patcher_config")[0] if in_forward is None or in_forward else None
    groups = cfg.get("encoder_hash_byte_group_size") or [3, 4, 5, 6, 7, 8]  # BltConfig.__post_init__
    tables = _int(cfg, "encoder_hash_byte_group_nb_functions", 1, "blt") * len(groups)
    k = _cross_k(cfg, {"encoder_config": enc_cfg, "decoder_config": dec_cfg})
    spec = BltSpec(
        encoder=enc,
        global_=glo,
        decoder=dec,
        patcher=patcher,
        cross_k=k,
        encoder_cross_all=_flag(enc_cfg, "cross_attn_all_layers", "encoder_config"),
        decoder_cross_all=_flag(dec_cfg, "cross_attn_all_layers", "decoder_config"),
        hash_rows=tables * _int(cfg, "encoder_hash_byte_group_vocab", 500002, "blt"),
        hash_tables=tables,
        decoder_patch_in=_int(dec_cfg, "hidden_size_global", 2048, "decoder_config"),
        bytes_per_patch=_int(cfg, "patch_size", 4, "blt"),
        entropy_patching=patcher is not None and (cfg.get("patching_mode") or "entropy") == "entropy",
    )
    return ModelSpec(
        **dict(common, tie_embeddings=False),  # BltConfig forces tie_word_embeddings False
        d_model=glo.d_model,
        vocab_size=_int(cfg, "vocab_size", 260, "blt"),
        n_heads=glo.n_heads,
        n_kv_heads=glo.n_kv_heads,
        head_dim=glo.d_model // glo.n_heads,
        d_ff=glo.d_ff,
        n_layers=glo.n_layers,
        ffn="gated",
        norm="rms",
        position="rotary",
        max_positions=cfg.get("max_position_embeddings"),
        blt=spec,
    )


ADAPTERS: dict[str, dict[str, Any]] = {"blt": dict(norm="rms", build=blt)}
