"""BigBird-Pegasus (transformers 5.23 ``modeling_bigbird_pegasus.py``, BigBirdPegasusForConditionalGeneration):
Pegasus' encoder-decoder with learned position tables and BigBird's block-sparse encoder attention.

* Layers as BART's (model/families_encdec.py): pre-LN, fc1/fc2 with biases, LayerNorms; q/k/v/output
  projections of both stacks biased only with ``use_bias`` (default false); ``scale_embedding`` default true.
* Both stacks end in a LayerNorm (named ``layernorm_embedding`` but applied after the last layer) and have no
  embedding norm; each stack has a learned table of ``max_position_embeddings`` rows (no offset).
* The encoder's self-attention is ``attention_type``: ``block_sparse`` (blocks of ``block_size``,
  ``num_random_blocks`` random blocks; ops/bigbird_sizes.py states when transformers falls back to full
  attention and how it pads the source) or ``original_full``. The decoder attends fully, as BART's.

``BigBirdPegasusForCausalLM`` is the decoder alone (a file it saves says ``is_encoder_decoder: false`` and
names it in ``architectures``): its own token and position tables, layers that keep their cross-attention, the
final norm and an LM head that transformers 5.23 does not tie (the class declares no ``_tied_weights_keys``).
llmath reads such a file as TrOCR's decoder: an encoder-decoder whose encoder is another model
(``EncoderDecoderModel``), whose ``src`` output positions the decoder cross-attends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.families_encdec import BART_LIKE
from llmath.model.family_facts import _attn_bias, _k

ATTENTION_TYPES = ("block_sparse", "original_full")  # BigBirdPegasusConfig.attention_type's values


DECODER_ALONE = "BigBirdPegasusForCausalLM"
EXTERNAL = "the encoder of an EncoderDecoderModel (BigBirdPegasusForCausalLM is the decoder alone), not in this config"


def _decoder_alone(cfg: Mapping[str, Any]) -> bool:
    return cfg.get("is_encoder_decoder") is False or DECODER_ALONE in (cfg.get("architectures") or [])


def _encoder(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The encoder's attention: the block size and random blocks (0, 0 under ``original_full``); the decoder
    alone's encoder is another model's."""
    if _decoder_alone(cfg):
        return dict(n_layers=0, norms_per_layer=0, final_norm=False, external=EXTERNAL)
    kind = cfg.get("attention_type", "block_sparse")
    if kind not in ATTENTION_TYPES:
        raise ConfigError(
            f"bigbird_pegasus: attention_type={kind!r} is not one of {', '.join(ATTENTION_TYPES)} (the values "
            "transformers accepts); set it to one of them"
        )
    if kind == "original_full":
        return dict(block_size=0, random_blocks=0)
    b, r = cfg.get("block_size", 64), cfg.get("num_random_blocks", 3)
    if type(b) is not int or type(r) is not int or b < 1 or r < 1:  # r = 0: transformers 5.23 fails (a reshape
        raise ConfigError(  # of the empty random blocks) once the source is long enough for block-sparse
            f"bigbird_pegasus: block_size={b!r}, num_random_blocks={r!r}: block_sparse attention needs positive "
            "integers (transformers' block-sparse path fails without random blocks); set them, or "
            "attention_type='original_full'"
        )
    return dict(block_size=b, random_blocks=r)


def _untied_decoder_head(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The decoder alone keeps an LM head of its own whatever ``tie_word_embeddings`` says (5.23)."""
    return dict(cfg, tie_word_embeddings=False) if _decoder_alone(cfg) else dict(cfg)


ADAPTERS: dict[str, dict[str, Any]] = {
    "bigbird_pegasus": dict(
        BART_LIKE,
        stack_final_norms=True,
        embedding_norm=False,
        position_offset=0,
        **_attn_bias(_k("use_bias", False)),
        embedding_scale=_k("scale_embedding", True),
        activation="gelu_new",
        encoder_fields=_encoder,
        prepare=_untied_decoder_head,
    ),
}
