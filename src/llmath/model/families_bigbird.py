"""BigBird-Pegasus (transformers 5.23 ``modeling_bigbird_pegasus.py``, BigBirdPegasusForConditionalGeneration):
Pegasus' encoder-decoder with learned position tables and BigBird's block-sparse encoder attention.

* Layers as BART's (model/families_encdec.py): pre-LN, fc1/fc2 with biases, LayerNorms; q/k/v/output
  projections of both stacks biased only with ``use_bias`` (default false); ``scale_embedding`` default true.
* Both stacks end in a LayerNorm (named ``layernorm_embedding`` but applied after the last layer) and have no
  embedding norm; each stack has a learned table of ``max_position_embeddings`` rows (no offset).
* The encoder's self-attention is ``attention_type``: ``block_sparse`` (blocks of ``block_size``,
  ``num_random_blocks`` random blocks; ops/bigbird_sizes.py states when transformers falls back to full
  attention and how it pads the source) or ``original_full``. The decoder attends fully, as BART's.

``BigBirdPegasusForCausalLM`` is the decoder alone (its config says ``is_encoder_decoder: false``): its
layers keep their cross-attention weights, which run only when encoder outputs are passed. llmath reads the
encoder-decoder and refuses such a file rather than count an encoder it does not have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.families_encdec import BART_LIKE
from llmath.model.family_facts import _attn_bias, _k

ATTENTION_TYPES = ("block_sparse", "original_full")  # BigBirdPegasusConfig.attention_type's values


def _encoder_only_full_or_block_sparse(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The encoder's attention: the block size and random blocks (0, 0 under ``original_full``)."""
    kind = cfg.get("attention_type", "block_sparse")
    if kind not in ATTENTION_TYPES:
        raise ConfigError(
            f"bigbird_pegasus: attention_type={kind!r} is not one of {', '.join(ATTENTION_TYPES)} (the values "
            "transformers accepts); set it to one of them"
        )
    if kind == "original_full":
        return dict(block_size=0, random_blocks=0)
    b, r = cfg.get("block_size", 64), cfg.get("num_random_blocks", 3)
    if type(b) is not int or type(r) is not int or b < 1 or r < 0:
        raise ConfigError(
            f"bigbird_pegasus: block_size={b!r}, num_random_blocks={r!r}: block_sparse attention needs a positive "
            "integer block_size and a non-negative integer num_random_blocks"
        )
    return dict(block_size=b, random_blocks=r)


def _the_encoder_decoder(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A file of BigBirdPegasusForCausalLM (the decoder alone) is refused: see the module docstring."""
    archs = cfg.get("architectures") or []
    if cfg.get("is_encoder_decoder") is False or "BigBirdPegasusForCausalLM" in archs:
        raise ConfigError(
            "bigbird_pegasus: is_encoder_decoder=false / BigBirdPegasusForCausalLM is the decoder alone (its layers "
            "keep cross-attention weights that run only on encoder outputs), which llmath does not model as a "
            "model of its own; pass the encoder-decoder's config (BigBirdPegasusForConditionalGeneration)"
        )
    return dict(cfg)


ADAPTERS: dict[str, dict[str, Any]] = {
    "bigbird_pegasus": dict(
        BART_LIKE,
        stack_final_norms=True,
        embedding_norm=False,
        position_offset=0,
        **_attn_bias(_k("use_bias", False)),
        embedding_scale=_k("scale_embedding", True),
        activation="gelu_new",
        encoder_fields=_encoder_only_full_or_block_sparse,
        prepare=_the_encoder_decoder,
    ),
}
