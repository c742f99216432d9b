"""EnCodec (Défossez et al. 2022, arXiv:2210.13438) as a counted tower: MusicGen's ``audio_encoder``.

Its parameters as transformers 5.23 builds EncodecModel (models/encodec/modeling_encodec.py): the SEANet
encoder and decoder of convolutions, residual blocks and LSTMs; the residual vector quantizer's codebooks are
buffers (``embed``, ``embed_avg``, ``cluster_size``), not parameters. A weight-normed convolution
(``norm_type`` "weight_norm", every released EnCodec) holds its direction v (the weight's shape), its
magnitude g (one per output channel of a Conv1d; per *input* channel of a ConvTranspose1d, dim 0 of its
(in, out, k) weight) and a bias. Another ``norm_type`` is not counted (named instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _conv(cin: int, cout: int, k: int) -> int:
    return cout * cin * k + cout + cout  # v, g (per output channel), bias


def _conv_t(cin: int, cout: int, k: int) -> int:
    return cin * cout * k + cin + cout  # v, g (per input channel: dim 0 of the (in, out, k) weight), bias


def _lstm(dim: int, layers: int) -> int:
    return layers * (2 * 4 * dim * dim + 2 * 4 * dim)  # W_ih, W_hh (4 gates each) and their two biases


def _resblock(c: Mapping[str, Any], dim: int) -> int:
    hidden = dim // c["compress"]
    n = _conv(dim, hidden, c["residual_kernel_size"]) + _conv(hidden, dim, 1)
    return n + (_conv(dim, dim, 1) if c["use_conv_shortcut"] else 0)


def encodec_params(c: Mapping[str, Any]) -> int | None:
    """EncodecModel's parameter count from its config (None: a layout llmath does not count)."""
    keys = ("audio_channels", "num_filters", "kernel_size", "last_kernel_size", "upsampling_ratios", "hidden_size",
            "num_residual_layers", "compress", "residual_kernel_size", "num_lstm_layers")  # fmt: skip
    if c.get("model_type") != "encodec" or c.get("norm_type", "weight_norm") != "weight_norm":
        return None
    if any(not isinstance(c.get(k), int | list) for k in keys):
        return None
    c = dict(c, use_conv_shortcut=c.get("use_conv_shortcut", True))
    nf, ratios, res = c["num_filters"], list(c["upsampling_ratios"]), c["num_residual_layers"]
    top = nf * 2 ** len(ratios)
    enc = _conv(c["audio_channels"], nf, c["kernel_size"])
    scale = nf
    for r in reversed(ratios):
        enc += res * _resblock(c, scale) + _conv(scale, 2 * scale, 2 * r)
        scale *= 2
    enc += _lstm(top, c["num_lstm_layers"]) + _conv(top, c["hidden_size"], c["last_kernel_size"])
    dec = _conv(c["hidden_size"], top, c["kernel_size"]) + _lstm(top, c["num_lstm_layers"])
    scale = top
    for r in ratios:
        dec += _conv_t(scale, scale // 2, 2 * r) + res * _resblock(c, scale // 2)
        scale //= 2
    dec += _conv(nf, c["audio_channels"], c["last_kernel_size"])
    return enc + dec
