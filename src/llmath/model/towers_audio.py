"""Audio towers of the speech wrappers (Qwen2-Audio, Voxtral, GLM-ASR, MOSS-Transcribe-Diarize): Whisper-style
encoders counted from ``audio_config`` the way transformers 5.23 builds them (modeling_qwen2_audio.py,
modeling_voxtral.py, modeling_glmasr.py, modeling_moss_transcribe_diarize.py), and each wrapper's projector;
:mod:`llmath.model.towers` merges these rows into its tables and ``tests/test_multimodal.py`` proves each
against the meta-device module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Counts = dict[str, int]
Cfg = Mapping[str, Any]


def _width(a: Cfg) -> tuple[int, int, int]:
    """(width, layers, FFN width) under either spelling (Whisper's d_model/encoder_* or hidden_size/...)."""
    D = a.get("d_model") or a["hidden_size"]
    L = a.get("encoder_layers") or a["num_hidden_layers"]
    F = a.get("encoder_ffn_dim") or a["intermediate_size"]
    return int(D), int(L), int(F)


def whisper_encoder(a: Cfg, positions: bool = True) -> Counts:
    """Two biased width-3 convs over the mel bins, a learned table of ``max_source_positions`` rows (absent
    with rotary positions), LayerNorm layers whose q, v and o projections have biases (k has none) and a
    biased fc1/fc2 MLP, a final LayerNorm."""
    D, L, F = _width(a)
    layer = 4 * D * D + 3 * D + 2 * D * F + F + D + 4 * D
    return {
        "audio.embeddings": a["num_mel_bins"] * 3 * D + D + 3 * D * D + D
        + (a["max_source_positions"] * D if positions else 0),
        "audio.layers": L * layer,
        "audio.norm": 2 * D,
    }  # fmt: skip


def _moss(c: Cfg, a: Cfg, dt: int) -> int:
    """Linear(width·audio_merge_size, dt), Linear(dt, dt) (biases per projector_bias), LayerNorm(dt)."""
    bias = bool(c.get("projector_bias", True))
    din = _width(a)[0] * int(c.get("audio_merge_size") or 4)
    return din * dt + dt * dt + (2 * dt if bias else 0) + 2 * dt


_WHISPER = dict(num_mel_bins=128, max_source_positions=1500, hidden_size=1280, num_hidden_layers=32,
                intermediate_size=5120)  # fmt: skip
# Defaults of the transformers 5.23 audio config classes, for keys a hub file leaves out.
DEFAULTS: dict[str, dict[str, Any]] = {
    "qwen2_audio_encoder": dict(
        num_mel_bins=128, max_source_positions=1500, d_model=1280, encoder_layers=32, encoder_ffn_dim=5120
    ),  # fmt: skip
    "voxtral_encoder": _WHISPER,
    "glmasr_encoder": _WHISPER,
    "moss_transcribe_diarize_audio": dict(
        _WHISPER, num_mel_bins=80, hidden_size=1024, num_hidden_layers=24, intermediate_size=4096
    ),  # fmt: skip
}

AUDIO: dict[str, Callable[[Cfg], Counts]] = {
    "qwen2_audio_encoder": whisper_encoder,
    "voxtral_encoder": whisper_encoder,
    "glmasr_encoder": lambda a: whisper_encoder(a, positions=False),  # rotary positions
    "moss_transcribe_diarize_audio": whisper_encoder,
}

# wrapper -> projector parameters from (wrapper config, audio config, text width)
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {
    "qwen2_audio": lambda c, a, dt: _width(a)[0] * dt + dt,  # Linear(width, dt) with bias
    "voxtral": lambda c, a, dt: _width(a)[2] * dt + dt * dt,  # Linear(F, dt), Linear(dt, dt), no biases
    "glmasr": lambda c, a, dt: _width(a)[2] * 2 * dt + 2 * dt + 2 * dt * dt + dt,  # F -> 2·dt -> dt, biased
    "moss_transcribe_diarize": _moss,
}
# the wrappers whose config class has its own tie_word_embeddings (Qwen2-Audio and Voxtral take the text config's)
WRAPPER_TIES = {"glmasr": True, "moss_transcribe_diarize": True}
