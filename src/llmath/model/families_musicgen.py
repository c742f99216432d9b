"""MusicGen (Copet et al. 2023, arXiv:2306.05284) as transformers 5.23 builds it (models/musicgen/).

The decoder predicts ``num_codebooks`` (C) parallel streams of EnCodec codes: each position embeds one code
per codebook from C tables of ``vocab_size + 1`` rows (the extra row is the pad/start code 2048) and sums
them; C LM heads of ``vocab_size`` each read the final hidden state. Positions are sinusoidal, computed (a
non-persistent buffer, no parameters). Layers are pre-LN: self-attention, cross-attention over the
conditioning, FFN (fc1 → GELU → fc2), no biases in any projection, three LayerNorms with bias, a final
LayerNorm.

``musicgen_decoder`` is the decoder alone (MusicgenForCausalLM): like TrOCR it is analysed as an
encoder-decoder whose encoder is another model (``prompt`` = the cross-attended conditioning positions).
``musicgen`` is the composite (MusicgenForConditionalGeneration): the T5 text encoder (its own spec,
``ModelSpec.text_encoder``, whose encoder pass is this model's encoder stage), ``enc_to_dec_proj`` (the T5
width to the decoder's, with bias, when they differ) and the decoder; the EnCodec audio encoder decodes the
generated codes to audio (and encodes an audio prompt): counted as a tower (``audio``: params and weight
memory, model/towers_encodec.py), not part of the stages; named in ``towers_not_counted`` where its
``norm_type`` is not weight_norm.

What llmath models of generation (stated here once):
- **Delay pattern**: codebook k is shifted by k steps (``build_delay_pattern_mask``), so N frames of audio
  take N + C − 1 decoder steps; a step is one position carrying C codes. ``gen`` counts decoder steps.
- **Classifier-free guidance**: ``generate`` with ``guidance_scale > 1`` (facebook/musicgen-small's
  generation_config sets 3.0) runs every decoder pass on 2·B rows (the conditional and the null-conditioned
  copy); its text encoder runs on the B prompts and pads the other half with zeros. llmath does not double
  anything silently: analyse the decoder at ``batch = 2·B`` to include guidance (the encoder pass is then
  counted for 2·B prompts, B more than transformers runs).
- **enc_to_dec_proj**: transformers applies it to the encoder output in every decoder forward; the eager
  execution counts it in the prefill and in every decode step, flash (a server keeps the cross K/V, which is
  all the projection feeds) in the prefill only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import GPT_LIKE, _all_bias, _k
from llmath.model.spec import ModelSpec
from llmath.model.spec_encoder import EncoderSpec
from llmath.model.towers_encodec import encodec_params

DECODER: dict[str, Any] = dict(
    GPT_LIKE,
    position="sinusoidal",
    **_all_bias(False),
    activation="gelu",
    norms_per_layer=3,
    embedding_scale=_k("scale_embedding", False),
    encdec="external",
    external="the text encoder (T5) of a MusicgenForConditionalGeneration, not in this config",
    fields=lambda cfg, n: dict(codebooks=int(cfg.get("num_codebooks") or 4), extra_token_rows=1),
)


def _gelu_only(cfg: Mapping[str, Any]) -> dict[str, Any]:
    act = cfg.get("activation_function", "gelu")
    if act != "gelu":
        raise ConfigError(
            f"musicgen: activation_function={act!r} is not modelled (every released MusicGen uses 'gelu'); "
            "set it to 'gelu'"
        )
    return dict(cfg)


def _sub(cfg: Mapping[str, Any], key: str, name: str) -> dict[str, Any]:
    v = cfg.get(key)
    if not isinstance(v, Mapping):
        raise ConfigError(f"{name}: the musicgen config has no {key!r} sub-config (a dict); pass the hub's "
                          "composite config.json (text_encoder, audio_encoder, decoder)")  # fmt: skip
    return dict(v)


def _t5(text: dict[str, Any], name: str) -> ModelSpec:
    """The text encoder's spec: T5 (every MusicGen checkpoint's, t5-base or larger), refused otherwise."""
    from llmath.model.hf import spec_from_config  # the adapters' reader (imports this table)

    if text.get("model_type") != "t5":
        raise ConfigError(f"{name}: text_encoder model_type={text.get('model_type')!r} is not modelled; "
                          "MusicGen's text encoder is T5 (model_type 't5')")  # fmt: skip
    return spec_from_config(text, f"{name}.text_encoder")


def _composite(cfg: Mapping[str, Any], get, *, name: str, model_type: str, source: str, tie_embeddings: bool):
    """MusicgenForConditionalGeneration: the decoder sub-config as the decoder, its text_encoder (T5) as the
    encoder pass; the audio encoder (EnCodec) a counted tower."""
    from llmath.model.hf import spec_from_config  # the adapters' reader (imports this table)

    text, dec = (_sub(cfg, k, name) for k in ("text_encoder", "decoder"))
    dec["model_type"] = "musicgen_decoder"
    t5 = _t5(text, name)
    spec = spec_from_config(dec, name, source)
    cross = dec.get("cross_attention_hidden_size")
    if cross is not None and cross != t5.d_model:
        raise ConfigError(f"{name}: decoder cross_attention_hidden_size={cross} must equal the text encoder's "
                          f"hidden size {t5.d_model} (transformers refuses it otherwise)")  # fmt: skip
    proj = t5.d_model if t5.d_model != spec.d_model and cross is None else 0
    layers = t5.encoder.n_layers if t5.encoder is not None else 0  # a T5 spec always has its encoder
    encoder = EncoderSpec(n_layers=layers, norms_per_layer=0, final_norm=False)
    counted, named = _audio(cfg)
    return replace(spec, model_type=model_type, encoder=encoder, text_encoder=t5, enc_proj=proj,
                   tower_params=counted, towers_not_counted=named)  # fmt: skip


def _audio(cfg: Mapping[str, Any]) -> tuple[tuple[tuple[str, int], ...], tuple[str, ...]]:
    """The audio_encoder (EnCodec) as a counted tower ``audio.encodec``, or named when it cannot be counted."""
    sub = cfg.get("audio_encoder")
    if not isinstance(sub, Mapping):
        return (), ()
    n = encodec_params(sub)
    return ((("audio.encodec", n),), ()) if n is not None else ((), ("audio_encoder",))


def codebook_notes(spec: ModelSpec) -> list[str]:
    """What a report on a codebook model counts of generation (the module docstring's conventions)."""
    if spec.codebooks <= 1:
        return []
    C = spec.codebooks
    notes = [
        f"{spec.name}: {C} parallel codebook streams, one position each per decoder step; gen counts decoder "
        f"steps (the delay pattern makes N audio frames N + {C - 1} steps); classifier-free guidance "
        "(generate with guidance_scale > 1) runs the decoder on 2·B rows and is not included: analyse "
        "batch = 2·B to include it"
    ]
    if spec.tower_params or spec.towers_not_counted:
        counted = ", ".join(k.split(".")[0] for k, _ in spec.tower_params) or "nothing"
        named = ", ".join(spec.towers_not_counted) or "nothing"
        notes.append(
            f"{spec.name}: {counted} counted in params and weight memory, not in the stages ({named} not counted); "
            "EnCodec (audio) turns the codes into audio after generation"
        )
    if spec.encoder is None and spec.tower_params:  # MusicGen-Melody: the conditioning is the decoder's prefix
        notes.append(
            f"{spec.name}: the stages are the decoder, whose prompt is the conditioning prefix (chroma_length "
            "chroma frames + the text tokens, projected) followed by any audio prompt steps; the text encoder's "
            "pass is not in the stages"
        )
    return notes


# MusicGen-Melody's decoder: the same layers without cross-attention (two LayerNorms); the conditioning is
# prepended to the audio positions as a prefix of the self-attention (a decoder-only model whose prompt is
# conditioning + audio codes); its heads compute logits at every position in eager (no logits_to_keep)
MELODY_DECODER: dict[str, Any] = dict(
    {k: v for k, v in DECODER.items() if k not in ("encdec", "external")},
    norms_per_layer=2,
    fields=lambda cfg, n: dict(codebooks=int(cfg.get("num_codebooks") or 4), extra_token_rows=1, eager_all_logits=True),
)


def _melody(cfg: Mapping[str, Any], get, *, name: str, model_type: str, source: str, tie_embeddings: bool):
    """MusicgenMelodyForConditionalGeneration: the decoder's stages; the T5 text encoder, ``enc_to_dec_proj``
    (T5 width -> D, when they differ) and ``audio_enc_to_dec_proj`` (num_chroma -> D, when they differ), both with
    bias, and EnCodec counted as towers (params and weight memory, not the stages)."""
    from llmath.model.hf import spec_from_config

    text, dec = (_sub(cfg, k, name) for k in ("text_encoder", "decoder"))
    dec["model_type"] = "musicgen_melody_decoder"
    t5 = _t5(text, name)
    spec = spec_from_config(dec, name, source)
    D, chroma = spec.d_model, get("num_chroma", 12)
    towers = [("text_encoder", t5_encoder_params(t5))]
    if t5.d_model != D:
        towers.append(("enc_to_dec_proj", t5.d_model * D + D))
    if chroma != D:
        towers.append(("audio_enc_to_dec_proj", chroma * D + D))
    counted, named = _audio(cfg)
    return replace(spec, model_type=model_type, tower_params=tuple(towers) + counted, towers_not_counted=named)


def t5_encoder_params(t5: ModelSpec) -> int:
    """T5EncoderModel's parameters (transformers models/t5): the shared token table V·D; per block q, k, v, o
    (D -> N·H and back, no bias), the FFN (wi, wo; gated: wi_0, wi_1, wo; no bias) and two RMSNorm weights;
    the relative-position bias (buckets × N) in the first block; the final RMSNorm."""
    if t5.encoder is None:  # pragma: no cover - a T5 spec always has its encoder
        raise ConfigError(f"{t5.name}: no encoder stack")
    D, NH, F = t5.d_model, t5.n_heads * t5.head_dim, t5.d_ff
    block = 4 * D * NH + (3 if t5.ffn == "gated" else 2) * D * F + 2 * D
    return t5.vocab_size * D + t5.encoder.n_layers * block + t5.relative_buckets * t5.n_heads + D


ADAPTERS: dict[str, dict[str, Any]] = {
    "musicgen_decoder": dict(DECODER, prepare=_gelu_only),
    "musicgen": dict(build=_composite),
    "musicgen_melody_decoder": dict(MELODY_DECODER, prepare=_gelu_only),
    "musicgen_melody": dict(build=_melody),
}
