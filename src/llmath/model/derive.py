"""Spec fields derived from a config.json and its family's adapter table (see :mod:`llmath.model.hf`).

Each function reads one concern (head width, FFN shape, MLA, norm layout, rotary width, encoder-decoder
stacks, yes/no facts); :func:`llmath.model.hf._build` composes them into a :class:`ModelSpec`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from llmath.errors import ConfigError
from llmath.model.spec_encoder import EncoderSpec
from llmath.model.spec_mla import MLASpec

Getter = Callable[..., int]  # get(key or aliases, default=...) -> an int read from the config


def fact(table: Mapping[str, Any], cfg: Mapping[str, Any], name: str, default: Any) -> Any:
    """A family fact: the table's value, a (config key, default) pair read from the file, or a function
    of the config."""
    v = table.get(name, default)
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
        got = cfg.get(v[0])
        return v[1] if got is None else got
    if callable(v):
        return v(cfg)
    return v


def head_dim(cfg: Mapping[str, Any], d: int, n_heads: int, where: str, floor: bool = False) -> int:
    """``head_dim`` (or T5's ``d_kv``), else hidden_size / heads; ``floor``: the family's attention uses
    hidden_size // num_attention_heads as is (glm4_moe; MLA families replace it by their own widths)."""
    head_dim = cfg.get("head_dim") or cfg.get("d_kv")
    if head_dim is None and floor:
        head_dim = d // n_heads
    if head_dim is None:
        if d % n_heads:
            raise ConfigError(
                f"{where}: hidden size {d} is not divisible by {n_heads} attention heads and no 'head_dim' "
                "is given; add 'head_dim' to the config"
            )
        head_dim = d // n_heads
    return int(head_dim)


def ffn_shape(
    cfg: Mapping[str, Any], table: Mapping[str, Any], d: int, keys: tuple[str, ...], where: str
) -> tuple[Any, str, int]:
    """(ffn kind, activation, FFN width under the first of ``keys`` set); T5's ``feed_forward_proj`` names
    both kind and activation."""
    ffn = table.get("ffn")
    activation = table.get("activation", "silu")
    if ffn == "t5":
        proj = cfg.get("feed_forward_proj") or "relu"
        ffn = "gated" if proj.startswith("gated") else "mlp"
        activation = proj.split("-")[-1]
    if callable(table.get("d_ff")):  # a family that derives its width from several keys (LFM2)
        return ffn, activation, int(table["d_ff"](cfg))
    d_ff = cfg.get(keys[0])
    for k in keys:
        if cfg.get(k) is not None:
            d_ff = cfg[k]
            break
    if d_ff is None:
        mult = table.get("ffn_default")
        if mult is None:
            raise ConfigError(f"{where}: required field 'intermediate_size' (the FFN width) is missing or null")
        d_ff = mult * d
    if isinstance(d_ff, list):  # per-layer widths are a family's own reading (Gemma 3n), not this one's
        raise ConfigError(f"{where}: FFN width {keys[0]!r}={d_ff!r} must be one integer for this model type")
    return ffn, activation, int(d_ff)


def mla(table: Mapping[str, Any], cfg: Mapping[str, Any], get: Getter) -> MLASpec | None:
    """The MLA widths; with ``dsa`` (a bool, or a rule of the config: Dots 3 Note's indexed layers may be
    switched off) the sparse-attention indexer's too."""
    if not table.get("mla"):
        return None
    dsa = table.get("dsa")
    dsa = dsa(cfg) if callable(dsa) else dsa
    return MLASpec(
        q_lora_rank=cfg.get("q_lora_rank"),
        kv_lora_rank=get("kv_lora_rank"),
        qk_rope_head_dim=get("qk_rope_head_dim"),
        qk_nope_head_dim=get("qk_nope_head_dim"),
        v_head_dim=get("v_head_dim"),
        q_gate=bool(table.get("q_gate")),
        k_rope_norm=bool(table.get("k_rope_norm")),
        **(dict(index_heads=get("index_n_heads"), index_head_dim=get("index_head_dim"),
                index_topk=get("index_topk")) if dsa else {}),
    )  # fmt: skip


def norm_layout(table: Mapping[str, Any], cfg: Mapping[str, Any], n_heads: int) -> tuple[int, bool, int | None]:
    """(norms per layer, parallel block, K/V heads transformers caches if not the config's)."""
    norms = fact(table, cfg, "norms_per_layer", 2)
    parallel = bool(fact(table, cfg, "parallel", False))
    hf_cache_kv = None
    if norms == "falcon":
        if cfg.get("new_decoder_architecture"):
            norms = cfg.get("num_ln_in_parallel_attn") or 2
            hf_cache_kv = n_heads  # transformers' Falcon caches K/V broadcast to every query head
        else:
            norms = 1 if parallel else 2
    return int(norms), parallel, hf_cache_kv


def rotary_dim(cfg: Mapping[str, Any], position: str, head_dim: int, mla: MLASpec | None) -> int | None:
    rotary_dim = None
    if position == "rotary":
        if cfg.get("rotary_dim"):
            rotary_dim = int(cfg["rotary_dim"])
        else:
            pct = cfg.get("partial_rotary_factor") or cfg.get("rotary_pct")
            rope = cfg.get("rope_parameters") or {}
            pct = pct or (rope.get("partial_rotary_factor") if isinstance(rope, dict) else None)
            if pct and mla is None:
                rotary_dim = int(head_dim * float(pct))
        if mla is not None:
            rotary_dim = mla.qk_rope_head_dim
    return rotary_dim


def stacks(table: Mapping[str, Any], cfg: Mapping[str, Any], get: Getter, n_layers: int, d_ff: int) -> dict[str, Any]:
    """Encoder-decoder stacks (T5, Marian-like, BART): the spec fields they set (decoder layers, FFN width,
    encoder, relative-position buckets, final and embedding norms)."""
    encoder = None
    relative_buckets = 0
    final_norm = True
    embedding_norm = bool(fact(table, cfg, "embedding_norm", False))
    if table.get("encdec") == "t5":
        n_layers = get(("num_decoder_layers", "num_layers"))
        encoder = EncoderSpec(n_layers=get("num_layers"), norms_per_layer=2, final_norm=True)
        relative_buckets = get("relative_attention_num_buckets", 32)
    elif table.get("encdec") == "transformer":
        n_layers = get("decoder_layers")
        encoder = EncoderSpec(n_layers=get("encoder_layers"), norms_per_layer=2, final_norm=False)
        final_norm = False
    elif table.get("encdec") == "bart":  # and its descendants (model/families_encdec.py): which norms they keep
        _same_stack_widths(cfg)
        n_layers = get("decoder_layers")
        final_norm = bool(fact(table, cfg, "stack_final_norms", ("add_final_layer_norm", False)))
        embedding_norm = bool(fact(table, cfg, "embedding_norm", True))
        encoder = EncoderSpec(
            n_layers=get("encoder_layers"),
            norms_per_layer=2,
            final_norm=final_norm,
            embedding_norm=embedding_norm,
            own_position_table=True,
        )
        d_ff = get("decoder_ffn_dim")
    elif table.get("encdec") == "whisper":
        _same_stack_widths(cfg)
        n_layers, d_ff = get("decoder_layers"), get("decoder_ffn_dim")
        encoder = EncoderSpec(
            n_layers=get("encoder_layers"), in_features=get("num_mel_bins"), frontend="conv",
            source_positions=get("max_source_positions"),
        )  # fmt: skip
    elif table.get("encdec") == "external":  # TrOCR: the decoder of an image encoder's model
        encoder = EncoderSpec(
            n_layers=0, norms_per_layer=0, final_norm=False, external=str(table["external"]),
            d_model=get("cross_attention_hidden_size", 0),
        )  # fmt: skip
    if encoder is not None and "encoder_fields" in table:  # BigBird-Pegasus: its encoder's block-sparse attention
        encoder = replace(encoder, **table["encoder_fields"](cfg))
    if not fact(table, cfg, "final_norm", True):
        final_norm = False
    return dict(n_layers=n_layers, d_ff=d_ff, encoder=encoder, relative_buckets=relative_buckets,
                final_norm=final_norm, embedding_norm=embedding_norm)  # fmt: skip


def _same_stack_widths(cfg: Mapping[str, Any]) -> None:
    """llmath's encoder shares the decoder's attention and FFN widths (every released Whisper does)."""
    for enc, dec in (("encoder_ffn_dim", "decoder_ffn_dim"), ("encoder_attention_heads", "decoder_attention_heads")):
        if enc in cfg and dec in cfg and cfg[enc] != cfg[dec]:
            raise ConfigError(
                f"{enc}={cfg[enc]} differs from {dec}={cfg[dec]}: llmath models encoder and decoder stacks of the "
                "same widths; set them equal or analyse the stacks as separate models"
            )


# yes/no facts: (default, whether the file may state it through the table's (key, default) / function)
_FLAGS = {
    "norm_bias": (True, True),
    "q_bias": (False, True),
    "k_bias": (False, True),
    "v_bias": (False, True),
    "o_bias": (False, True),
    "attn_sinks": (False, False),
    "qk_norm_spans_heads": (False, False),
    "window_sinks_only": (False, False),
    "attn_out_gate": (False, False),
    "attn_gate_per_head": (False, True),
    "attn_gate_bias": (False, False),
    "gate_proj_bias": (False, True),
    "nope_full": (False, True),
    "nope_query_scale": (False, False),
    "attn_experts": (False, False),
    "ffn_bias": (False, True),
    "lm_head_bias": (False, True),
    "embedding_scale": (False, True),
    "sub_norms": (False, False),
    "chunked_windows": (False, False),
    "attn_head_gate": (False, True),
    "diff_attention": (False, False),
    "last_o_bias": (False, False),
    "first_attn_norm": (True, False),
    "head_dense": (False, False),
    "head_dense_bias": (False, True),
    "dynamic_mask": (False, False),
    "residual_scale": (False, False),
    "residual_affine": (False, False),
}


def flags(table: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's yes/no facts as the family's table (or the file) states them, with qk-norm and the
    position table offset."""
    out: dict[str, Any] = {
        k: bool(fact(table, cfg, k, d) if from_file else table.get(k, d)) for k, (d, from_file) in _FLAGS.items()
    }
    out["qk_norm"] = fact(table, cfg, "qk_norm", "none")
    out["attn_gate"] = fact(table, cfg, "attn_gate", "none")
    out["position_table_offset"] = int(table.get("position_offset", 0))
    return out
