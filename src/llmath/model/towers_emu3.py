"""Emu3's VQ-VAE image tokenizer (``vq_config``, model_type ``emu3_vqgan``), counted the way transformers 5.23
builds ``Emu3VQVAE`` (modeling_emu3.py); :mod:`llmath.model.towers` merges the row and ``tests/test_towers.py``
proves it against the meta-device module.

Every convolution has a bias (torch's default); GroupNorm and BatchNorm hold a weight and a bias per channel;
a spatial norm (the decoder's, conditioned on the quantised latents of ``embed_dim`` channels) is a GroupNorm
and two biased 1×1 convs from ``embed_dim``. With c_i = base_channels · channel_multiplier[i]:

* encoder: a 3×3 conv in; per resolution ``num_res_blocks`` ResNet blocks (GroupNorm, 3×3 conv, GroupNorm, 3×3
  conv, a 1×1 shortcut when the width changes), an attention block (biased q/k/v/out of ``hidden_size``) and a
  GroupNorm after each block at ``attn_resolutions``, a stride-2 3×3 conv between resolutions; the middle
  block (ResNet, GroupNorm + attention, ResNet); a GroupNorm and a 3×3 conv out to the latent channels (twice
  them with ``double_latent``); log2(temporal_downsample_factor) temporal 4×3×3 convs and ``num_res_blocks``
  temporal ResNet blocks (BatchNorm3d, 3×3×3 convs);
* decoder: the temporal ResNet blocks and 3×3×3 temporal upsampling convs on the latent channels, a 3×3 conv
  in, the middle block with spatial norms, per resolution (widest first) ``num_res_blocks`` + 1 ResNet blocks
  with spatial norms (and attention + spatial norm at ``attn_resolutions``), a 3×3 conv between resolutions;
  a spatial norm and a 3×3 conv out;
* the codebook (codebook_size × embed_dim) and the 3×1×1 convs into and out of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

Counts = dict[str, int]
Cfg = Mapping[str, Any]

# Emu3VQVAEConfig's defaults (transformers 5.23 configuration_emu3.py), for keys a file leaves out
DEFAULTS: dict[str, dict[str, Any]] = {
    "emu3_vqgan": dict(codebook_size=32768, embed_dim=4, latent_channels=4, double_latent=False, in_channels=3,
                       out_channels=3, temporal_downsample_factor=4, base_channels=256,
                       channel_multiplier=[1, 2, 2, 4], num_res_blocks=2, attn_resolutions=[3], hidden_size=1024),
}  # fmt: skip


def _conv(i: int, o: int, k: int) -> int:
    """A biased convolution from ``i`` to ``o`` channels over a kernel of ``k`` taps."""
    return i * o * k + o


def _spatial_norm(q: int, c: int) -> int:
    return 2 * c + 2 * _conv(q, c, 1)


def _resnet(i: int, o: int, q: int | None) -> int:
    norms = 2 * i + 2 * o if q is None else _spatial_norm(q, i) + _spatial_norm(q, o)
    return norms + _conv(i, o, 9) + _conv(o, o, 9) + (_conv(i, o, 1) if i != o else 0)


def _temporal_resnet(c: int) -> int:
    return 2 * c + _conv(c, c, 27) + 2 * c + _conv(c, c, 27)


def _attention(v: Cfg) -> int:
    return 4 * (v["hidden_size"] ** 2 + v["hidden_size"])


def _middle(v: Cfg, c: int, q: int | None) -> int:
    return 2 * _resnet(c, c, q) + _attention(v) + (2 * c if q is None else _spatial_norm(q, c))


def _encoder(v: Cfg) -> int:
    base, mult, n = v["base_channels"], list(v["channel_multiplier"]), v["num_res_blocks"]
    attn_at = v.get("attn_resolutions") or ()
    out = 2 * v["latent_channels"] if v["double_latent"] else v["latent_channels"]
    total, c = _conv(v["in_channels"], base, 9), base
    for level, m in enumerate(mult):
        for _ in range(n):
            total += _resnet(c, base * m, None) + (_attention(v) + 2 * base * m if level in attn_at else 0)
            c = base * m
        total += _conv(c, c, 9) if level != len(mult) - 1 else 0
    total += _middle(v, c, None) + 2 * c + _conv(c, out, 9)
    steps = int(math.log2(v["temporal_downsample_factor"]))
    return total + steps * _conv(out, out, 36) + n * _temporal_resnet(out)


def _decoder(v: Cfg) -> int:
    base, mult, n, q = v["base_channels"], list(v["channel_multiplier"]), v["num_res_blocks"], v["embed_dim"]
    attn_at, lat = v.get("attn_resolutions") or (), v["latent_channels"]
    steps = int(math.log2(v["temporal_downsample_factor"]))
    c = base * mult[-1]
    total = n * _temporal_resnet(lat) + steps * _conv(lat, lat, 27) + _conv(lat, c, 9) + _middle(v, c, q)
    for level in reversed(range(len(mult))):
        for _ in range(n + 1):
            out = base * mult[level]
            total += _resnet(c, out, q) + (_attention(v) + _spatial_norm(q, out) if level in attn_at else 0)
            c = out
        total += _conv(c, c, 9) if level != 0 else 0
    return total + _spatial_norm(q, c) + _conv(c, v["out_channels"], 9)


def emu3_vq(v: Cfg) -> Counts:
    lat, e = v["latent_channels"], v["embed_dim"]
    return {
        "vqvae.encoder": _encoder(v),
        "vqvae.decoder": _decoder(v),
        "vqvae.quantizer": v["codebook_size"] * e + _conv(lat, e, 3) + _conv(e, lat, 3),
    }


VQ: dict[str, Callable[[Cfg], Counts]] = {"emu3_vqgan": emu3_vq}
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {
    "emu3": lambda c, v, dt: 0
}  # no projector: image tokens are ids of the language model's vocabulary
