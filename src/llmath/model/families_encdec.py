"""BART's descendants in transformers 5.23: the same encoder-decoder layers (biased q/k/v/out, fc1/fc2,
LayerNorms), differing only in which norms each stack keeps and how its positions are tabled.

=================  ===============  ============  ==================  ======================================
model_type         embedding norm   final norms   position table      transformers module
=================  ===============  ============  ==================  ======================================
mbart              yes              yes           learned, +2 rows    MBartLearnedPositionalEmbedding
plbart, mvp        yes              no            learned, +2 rows    PLBart/MvpLearnedPositionalEmbedding
blenderbot-small   yes              no            learned             BlenderbotSmallLearnedPositionalEmb.
blenderbot         no               yes           learned             BlenderbotLearnedPositionalEmbedding
pegasus            no               yes           sinusoidal, stored  PegasusSinusoidalPositionalEmbedding
marian             no               no            sinusoidal, stored  MarianSinusoidalPositionalEmbedding
=================  ===============  ============  ==================  ======================================

Pegasus' and Marian's sinusoidal tables are ``nn.Embedding`` weights (frozen, but parameters that
``model.parameters()`` yields and the checkpoint stores): llmath counts them as a table of
``max_position_embeddings`` rows, read per position like a learned one. ``scale_embedding`` (√d on the token
embeddings) costs one vector FLOP per element.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import GPT_LIKE, _k


def decoder_alone(cfg: Mapping[str, Any]) -> bool:
    """A file of the decoder alone (``*ForCausalLM``: transformers saves it with ``is_encoder_decoder: false`` and
    names the class in ``architectures``), not of the whole encoder-decoder."""
    archs = cfg.get("architectures") or []
    return cfg.get("is_encoder_decoder") is False or any(str(a).endswith("ForCausalLM") for a in archs)


def external_encoder(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """BART's family as ``*ForCausalLM`` (BartForCausalLM and its copies wrap the decoder alone, whose layers keep
    their cross-attention): an encoder-decoder whose encoder is another model, as TrOCR's."""
    if not decoder_alone(cfg):
        return {}
    name = cfg.get("model_type", "the model")
    what = f"the encoder of an EncoderDecoderModel ({name}'s *ForCausalLM is the decoder alone), not in this config"
    return dict(n_layers=0, norms_per_layer=0, final_norm=False, external=what)


def external_whisper_encoder(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """WhisperForCausalLM (distil-whisper's draft decoders): the decoder alone; no audio front end either."""
    fields = external_encoder(cfg)
    return dict(fields, frontend="", in_features=0, source_positions=0) if fields else {}


BART_LIKE: dict[str, Any] = dict(
    GPT_LIKE,
    position="learned",
    position_offset=2,
    norms_per_layer=3,
    encdec="bart",
    activation="gelu",
    embedding_scale=_k("scale_embedding", False),
    encoder_fields=external_encoder,
)


def _mvp_without_prompts(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """MVP's task prompts (``use_prompt``: prefix key/values from a prompt encoder per layer) are not modelled."""
    if cfg.get("use_prompt"):
        raise ConfigError(
            "mvp: use_prompt=true (task-specific prompt encoders feeding every layer) is not modelled yet; "
            "set it false to analyse the model without its prompts"
        )
    return dict(cfg)


def _marian_shared_vocabulary(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Marian with separate source and target vocabularies (``share_encoder_decoder_embeddings`` false, a
    ``decoder_vocab_size`` of its own) has two token tables: not modelled."""
    dec = cfg.get("decoder_vocab_size")
    if cfg.get("share_encoder_decoder_embeddings") is False or (dec is not None and dec != cfg.get("vocab_size")):
        raise ConfigError(
            f"marian: decoder_vocab_size={dec} with share_encoder_decoder_embeddings="
            f"{cfg.get('share_encoder_decoder_embeddings')}: separate source and target vocabularies are not "
            "modelled yet; llmath reads Marian models with one shared vocabulary"
        )
    return dict(cfg)


ADAPTERS: dict[str, dict[str, Any]] = {
    "mbart": dict(BART_LIKE, stack_final_norms=True),
    "plbart": dict(BART_LIKE, stack_final_norms=False),
    "mvp": dict(BART_LIKE, stack_final_norms=False, prepare=_mvp_without_prompts),
    "blenderbot-small": dict(BART_LIKE, stack_final_norms=False, position_offset=0),
    "blenderbot": dict(BART_LIKE, stack_final_norms=True, embedding_norm=False, position_offset=0),
    "pegasus": dict(BART_LIKE, stack_final_norms=True, embedding_norm=False, position_offset=0),
    "marian": dict(
        BART_LIKE,
        stack_final_norms=False,
        embedding_norm=False,
        position_offset=0,
        prepare=_marian_shared_vocabulary,
    ),
}
