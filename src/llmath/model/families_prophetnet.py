"""ProphetNet (Qi et al. 2020, arXiv:2001.04063) as transformers 5.23 builds it
(``models/prophetnet/configuration_prophetnet.py``, ``modeling_prophetnet.py``).

An encoder-decoder of post-LN layers (LayerNorm after each residual add, an embedding LayerNorm in each stack,
no final norms), biased q/k/v/out and FFN linears, one token table shared by both stacks and the LM head, and
a learned position table of ``max_position_embeddings`` rows per stack (ProphetNetPositionalEmbeddings: no
extra rows). ``ProphetNetForCausalLM`` (:func:`decoder_only`) is the decoder alone, with the token table and
its cross-attention weights. The decoder is the n-stream decoder of :class:`~llmath.model.spec_prophet.ProphetSpec`
(operators: :mod:`llmath.ops.prophet`). ``xlm-prophetnet`` is not a model_type of transformers 5.23
(tests/test_prophetnet.py checks it), so there is no alias for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.spec import ModelSpec
from llmath.model.spec_encoder import EncoderSpec
from llmath.model.spec_prophet import ProphetSpec


def _same_widths(cfg: Mapping[str, Any], get: Callable[..., int]) -> None:
    """llmath's encoder shares the decoder's heads and FFN width (every released ProphetNet does)."""
    pairs = (("num_encoder_attention_heads", "num_decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim"))
    for enc, dec in pairs:
        if get(enc) != get(dec):
            raise ConfigError(
                f"prophetnet: {enc}={get(enc)} differs from {dec}={get(dec)}: llmath models encoder and decoder "
                "stacks of the same widths; set them equal or analyse the stacks as separate models"
            )


def _refused(cfg: Mapping[str, Any], decoder_only: bool) -> None:
    """Options whose module layout llmath does not model: an error, never a silently different count."""
    if cfg.get("tie_word_embeddings") is False:
        raise ConfigError(
            "prophetnet: tie_word_embeddings=false (an LM head of its own) is not modelled; llmath reads "
            "ProphetNet with its head tied to the shared token table, as every released checkpoint is"
        )
    if cfg.get("add_cross_attention") is False and not decoder_only:
        raise ConfigError(
            "prophetnet: add_cross_attention=false leaves the decoder without cross-attention, which "
            "ProphetNetForConditionalGeneration needs; name ProphetNetForCausalLM in `architectures` (or set "
            "is_encoder_decoder false) to read the decoder alone"
        )


def decoder_only(cfg: Mapping[str, Any]) -> bool:
    """ProphetNetForCausalLM: the decoder alone (its class sets ``is_decoder`` and clears ``is_encoder_decoder``
    in the config it saves), else the encoder-decoder ProphetNetForConditionalGeneration."""
    return "ProphetNetForCausalLM" in (cfg.get("architectures") or []) or cfg.get("is_encoder_decoder") is False


def build(cfg: Mapping[str, Any], get: Callable[..., int], *, name: str, model_type: str, source: str,
          tie_embeddings: bool) -> ModelSpec:  # fmt: skip
    """The spec of a ProphetNet config.json (the ``build`` hook of :data:`ADAPTERS`)."""
    del tie_embeddings  # ProphetNetConfig defaults tie_word_embeddings=True (configuration_prophetnet.py)
    alone = decoder_only(cfg)
    _refused(cfg, alone)
    if not alone:
        _same_widths(cfg, get)
    d, n = get("hidden_size"), get("num_decoder_attention_heads")
    if d % n:
        raise ConfigError(f"prophetnet: hidden_size={d} is not a multiple of num_decoder_attention_heads={n}")
    encoder = None if alone else EncoderSpec(
        n_layers=get("num_encoder_layers"), norms_per_layer=2, final_norm=False, embedding_norm=True,
        own_position_table=True,
    )  # fmt: skip
    prophet = ProphetSpec(
        ngram=get("ngram"), buckets=get("num_buckets"), max_distance=get("relative_max_distance"),
        cross_weights=cfg.get("add_cross_attention") is not False,
    )  # fmt: skip
    return ModelSpec(
        name=name, n_layers=get("num_decoder_layers"), d_model=d, vocab_size=get("vocab_size"), n_heads=n,
        n_kv_heads=n, head_dim=d // n, d_ff=get("decoder_ffn_dim"), ffn="mlp", norm="layer", position="learned",
        model_type=model_type, activation=str(cfg.get("activation_function") or "gelu"), q_bias=True,
        k_bias=True, v_bias=True, o_bias=True, ffn_bias=True, norms_per_layer=3, final_norm=False,
        embedding_norm=True, max_positions=get("max_position_embeddings"), tie_embeddings=True,
        encoder=encoder, prophet=prophet, source=source, eager_all_logits=alone,
    )  # fmt: skip


ADAPTERS: dict[str, dict[str, Any]] = {"prophetnet": dict(build=build)}
