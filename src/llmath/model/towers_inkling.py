"""Towers of the Inkling and Inkling-2 wrappers, counted from their sub-configs the way transformers 5.23
builds them (modeling_inkling.py ``InklingAudioModel`` / ``InklingVisionModel``, modeling_inkling2.py
``Inkling2VisionModel``); :mod:`llmath.model.towers` merges these rows and ``tests/test_multimodal.py``
proves each against the meta-device module.

Inkling-2's patch merger (the projection to the language model) is built inside its vision tower
(``model.vision_tower.merger``): it is reported under ``vision.merger``, where the module lives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

Counts = dict[str, int]
Cfg = Mapping[str, Any]


def inkling2_vision(v: Cfg) -> Counts:
    """A ViT: a bias-free patch Linear (channels·p² -> D), a grid² position table, class token and its
    position (D each), a pre-LayerNorm, layers of LayerNorms, biased q/k/v/out, a biased fc1/fc2 MLP and two
    layer scales (D each), and the merger: spatial_merge_size² · D -> projection_hidden_dim -> the text width
    (biases per projector_bias)."""
    D, F, m = (
        v["hidden_size"],
        v.get("intermediate_size") or int(v["hidden_size"] * v["mlp_ratio"]),
        v["spatial_merge_size"],
    )
    hidden, out, bias = v["projection_hidden_dim"], v["text_hidden_size"], bool(v["projector_bias"])
    layer = 4 * D * D + 4 * D + 2 * D * F + F + D + 4 * D + 2 * D
    return {
        "vision.embeddings": v["num_channels"] * v["patch_size"] ** 2 * D + v["posemb_grid_size"] ** 2 * D + 2 * D,
        "vision.norm": 2 * D,
        "vision.layers": v["num_hidden_layers"] * layer,
        "vision.merger": m * m * D * hidden + hidden * out + ((hidden + out) if bias else 0),
    }


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _cumprod(xs: list[int]) -> list[int]:
    out, acc = [], 1
    for x in xs:
        acc *= x
        out.append(acc)
    return out


# An assignment whose cost is within this of the runner-up's is a near tie: transformers scores it in float32
# (torch.log, linspace) and could pick either, so llmath does not count it.
_TIE = 1e-4
_MAX_SCALES = 16  # the exact assignment below walks 2^scales column sets


def _assign(cost: list[list[float]]) -> list[int] | None:
    """The columns (one per row, all distinct) of least total cost, as scipy's ``linear_sum_assignment``
    returns them for a matrix with no more rows than columns: a walk over the sets of columns used by the
    first rows, keeping the two best distinct assignments per set. None when the best two totals are within
    :data:`_TIE` (the pick would rest on rounding) or there are too many columns to walk."""
    rows, cols = len(cost), len(cost[0])
    if cols > _MAX_SCALES:
        return None
    best: dict[int, list[tuple[float, tuple[int, ...]]]] = {0: [(0.0, ())]}
    for i in range(rows):
        nxt: dict[int, list[tuple[float, tuple[int, ...]]]] = {}
        for mask, heads in best.items():
            for j in range(cols):
                if not mask >> j & 1:
                    keep = nxt.setdefault(mask | 1 << j, [])
                    keep.extend((c + cost[i][j], a + (j,)) for c, a in heads)
        best = {m: sorted(v)[:2] for m, v in nxt.items()}
    ranked = sorted(x for v in best.values() for x in v)
    if len(ranked) > 1 and ranked[1][0] - ranked[0][0] < _TIE:
        return None
    return list(ranked[0][1])


def _nearest(cost: list[list[float]]) -> list[int] | None:
    """Each row's column of least cost (None at a near tie, as in :func:`_assign`)."""
    out = []
    for row in cost:
        ranked = sorted(range(len(row)), key=lambda j: row[j])
        if len(ranked) > 1 and row[ranked[1]] - row[ranked[0]] < _TIE:
            return None
        out.append(ranked[0])
    return out


def hmlp_scales(t_patch: int, patch: int, layers: int, channels: int) -> list[tuple[int, int, int, int]] | None:
    """(t, h, w, channels) before each of Inkling's HMLP vision layers and after the last, as
    ``plan_out_scales`` plans them: candidate scales grow h = w by the prime factors of ``patch`` (largest
    first; channels h²·c rounded up to a multiple of 64), then t by those of ``t_patch`` (channels
    ⌈h²·c·t⌉·64, as transformers writes it); the ``layers`` + 1 steps of a log-linear ramp from 1 to
    t·p²·c cost |log step − log(t·h·w)| against each candidate. With at least as many layers as candidates
    each step takes its nearest candidate; with fewer, transformers gives the steps distinct candidates of
    least total cost (scipy's linear_sum_assignment; :func:`_assign` is the same assignment in pure Python).
    The first and last are then pinned. A patch or temporal patch of 1 (no prime factor) makes its scales
    non-integer and the module fails, and a near tie (a step halfway between two candidates) could go either
    way: None, not counted."""
    if layers < 1 or patch < 2 or t_patch < 2:
        return None
    h = _cumprod(_prime_factors(patch)[::-1])
    t = _cumprod(_prime_factors(t_patch)[::-1])
    scales = [(1, 1, 1, channels)] + [(1, x, x, math.ceil(x * x * channels / 64) * 64) for x in h]
    scales += [(y, h[-1], h[-1], h[-1] ** 2 * channels * y * 64) for y in t]
    top = math.log(patch * patch * t_patch * channels)
    logs = [math.log(a * b * c) for a, b, c, _ in scales]
    cost = [[abs(top * i / layers - x) for x in logs] for i in range(layers + 1)]
    idx = _nearest(cost) if layers >= len(scales) else _assign(cost)
    if idx is None:
        return None
    idx[0], idx[-1] = 0, len(scales) - 1
    return [scales[j] for j in idx]


def inkling_towers(cfg: Cfg, text_width: int) -> Counts | None:
    """Inkling: the audio tower (a table of n_mel_bins · mel_vocab_size rows of the text width, an RMSNorm)
    and the HMLP vision tower (per layer a bias-free Linear from the folded input to the next scale's
    channels, the last to the text width, an RMSNorm on all but the last; a final RMSNorm). None when a
    sub-config is missing or :func:`hmlp_scales` has no exact plan."""
    a, v = cfg.get("audio_config"), cfg.get("vision_config")
    if not isinstance(a, Mapping) or not isinstance(v, Mapping):
        return None
    a, v = {**AUDIO_DEFAULTS, **a}, {**VISION_DEFAULTS, **v}
    L = v.get("n_layers") or v["num_hidden_layers"]
    scales = hmlp_scales(v["temporal_patch_size"], v["patch_size"], L, v["num_channels"])
    if scales is None:
        return None
    weights = norms = 0
    for i, (s0, s1) in enumerate(zip(scales[:-1], scales[1:], strict=True)):
        fold = (s1[0] // s0[0]) * (s1[1] // s0[1]) * (s1[2] // s0[2])
        out = text_width if i == L - 1 else s1[3]
        weights += s0[3] * fold * out
        norms += out if i != L - 1 else 0
    return {
        "audio.embeddings": a["n_mel_bins"] * a["mel_vocab_size"] * text_width,
        "audio.norm": text_width,
        "vision.layers": weights,
        "vision.norm": norms + text_width,
        "projector": 0,
    }


# Defaults of the transformers 5.23 config classes, for keys a hub file leaves out.
AUDIO_DEFAULTS: dict[str, Any] = dict(n_mel_bins=80, mel_vocab_size=256)
VISION_DEFAULTS: dict[str, Any] = dict(patch_size=40, temporal_patch_size=2, num_channels=3, num_hidden_layers=24)
DEFAULTS: dict[str, dict[str, Any]] = {
    "inkling2_vision": dict(hidden_size=1024, num_hidden_layers=23, num_channels=3, patch_size=20, mlp_ratio=4.0,
                            spatial_merge_size=2, posemb_grid_size=32, projection_hidden_dim=4096,
                            projector_bias=False, text_hidden_size=4608),
}  # fmt: skip
VISION: dict[str, Callable[[Cfg], Counts]] = {"inkling2_vision": inkling2_vision}
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {"inkling2": lambda c, v, dt: 0}  # the merger: above
# wrappers whose several towers are counted together (model/towers.py WHOLE; None: named, not counted)
WHOLE: dict[str, Callable[[Cfg, int], Counts | None]] = {"inkling_mm_model": inkling_towers}
