"""Dots 3 Note's towers (``dots3_note``), counted from its sub-configs the way transformers 5.23 builds them
(modeling_dots3_note.py ``Dots3NoteVisionModel`` / ``Dots3NoteAudioModel``, configuration_dots3_note.py);
:mod:`llmath.model.towers` merges the row and ``tests/test_multimodal.py`` / ``tests/test_towers.py`` prove it
against the meta-device module.

Vision: a biased patch conv and its RMSNorm; blocks of two RMSNorms, a fused qkv and a projection (biases per
``attention_bias``), q/k RMSNorms of the head width, then per ``mlp_layer_types`` a dense gated MLP or routed
experts without shared ones (gate_up and down per expert, a router row per expert); a final RMSNorm; the
patch merger (LayerNorm, two biased linears: ctx·m² -> ctx·m² -> adapter_out_dim) under ``vision.merger``,
where the module lives. A layer's ``per_layer_config`` overrides its expert count and widths; the config
class's ``pyramid_num_routed`` (the released schedule: 25 dense layers, then 4, 8, ..., 64, 64 experts) is
what a file without ``mlp_layer_types`` gets.

Audio: three biased 3×3 convs (1 -> S -> S -> S channels), a bias-free Linear(S·⌈mel/8⌉, A); layers of two
RMSNorms, q/v/o (biases per ``attention_bias``) and a bias-free k, a biased gated MLP (gate_up, down); a final
RMSNorm; the adapter (LayerNorm, two biased linears to ``adapter_out_dim``) under ``audio.adapter``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Counts = dict[str, int]
Cfg = Mapping[str, Any]

# Dots3NoteVisionConfig / Dots3NoteAudioConfig defaults (transformers 5.23), for keys a file leaves out
VISION_DEFAULTS: dict[str, Any] = dict(
    hidden_size=1536, intermediate_size=4224, num_hidden_layers=42, num_attention_heads=24, num_channels=3,
    patch_size=14, moe_intermediate_size=2112, attention_bias=False, mlp_bias=False, num_local_experts=64,
    adapter_in_dim=1536, adapter_out_dim=5120, adapter_merge_size=2,
)  # fmt: skip
AUDIO_DEFAULTS: dict[str, Any] = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32,
                                      num_attention_heads=20, feature_size=128, downsample_hidden_size=480,
                                      attention_bias=True, adapter_input_size=1280, adapter_out_dim=5120)  # fmt: skip
PYRAMID = [-1] * 25 + list(range(4, 65, 4)) + [64]  # Dots3NoteVisionConfig.__post_init__'s pyramid_num_routed
# the per-layer keys that change only what is counted below; any other override is not modelled (not counted)
_LAYER_KEYS = frozenset({"num_local_experts", "num_experts_per_tok", "intermediate_size", "moe_intermediate_size"})
# legacy spellings the config classes read (configuration_dots3_note.py __post_init__)
_VISION_LEGACY = {"embed_dim": "hidden_size", "num_heads": "num_attention_heads", "use_bias": "attention_bias"}
_WHISPER_LEGACY = {"d_model": "hidden_size", "encoder_attention_heads": "num_attention_heads",
                   "encoder_layers": "num_hidden_layers", "encoder_ffn_dim": "intermediate_size",
                   "num_mel_bins": "feature_size"}  # fmt: skip


def _vision_config(raw: Cfg) -> tuple[dict[str, Any], list[str], dict[int, dict[str, Any]]] | None:
    """The vision config with defaults and legacy keys applied, its per-layer MLP kinds and overrides (None
    when an override is not modelled or the kinds do not cover the layers)."""
    v = {**VISION_DEFAULTS, **{k: x for k, x in raw.items() if x is not None}}
    v.update({new: raw[old] for old, new in _VISION_LEGACY.items() if raw.get(old) is not None})
    kinds, over = raw.get("mlp_layer_types"), raw.get("per_layer_config")
    pyramid = raw.get("pyramid_num_routed") or (PYRAMID if kinds is None else None)
    if pyramid is not None:
        kinds = ["sparse" if n > 0 else "dense" for n in pyramid]
        if over is None:
            over = {i: {"num_local_experts": n} for i, n in enumerate(pyramid) if n > 0}
    layers = {int(i): dict(o) for i, o in (over or {}).items()}
    if (not isinstance(kinds, list) or len(kinds) != v["num_hidden_layers"]
            or any(set(o) - _LAYER_KEYS for o in layers.values())):  # fmt: skip
        return None
    return v, kinds, layers


def _mlp(v: Cfg, kind: str, o: Cfg) -> int:
    D = v["hidden_size"]
    if kind == "sparse":
        E, Fm = (
            o.get("num_local_experts", v["num_local_experts"]),
            o.get("moe_intermediate_size", v["moe_intermediate_size"]),
        )
        return E * (3 * D * Fm + D)  # gate_up (2·Fm × D), down (D × Fm), the router's row
    F = o.get("intermediate_size", v["intermediate_size"])
    return 3 * D * F + (2 * F + D if v["mlp_bias"] else 0)


def vision(raw: Cfg) -> Counts | None:
    got = _vision_config(raw)
    if got is None:
        return None
    v, kinds, over = got
    D, C, p = v["hidden_size"], v["num_channels"], v["patch_size"]
    attn = 4 * D * D + (4 * D if v["attention_bias"] else 0) + 2 * (D // v["num_attention_heads"])
    ctx, m = v["adapter_in_dim"], v["adapter_merge_size"]
    wide = ctx * m * m
    return {
        "vision.embeddings": C * p * p * D + D + D,
        "vision.layers": sum(2 * D + attn + _mlp(v, k, over.get(i, {})) for i, k in enumerate(kinds)),
        "vision.norm": D,
        "vision.merger": 2 * ctx + wide * wide + wide + wide * v["adapter_out_dim"] + v["adapter_out_dim"],
    }


def audio(raw: Cfg) -> Counts:
    a = {**AUDIO_DEFAULTS, **{k: x for k, x in raw.items() if x is not None}}
    got = raw.get("whisper_config")
    whisper: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    a.update({new: whisper[old] for old, new in _WHISPER_LEGACY.items() if old in whisper})
    a["adapter_input_size"] = raw.get("whisper_adapter_in_dim", a["adapter_input_size"])
    a["adapter_out_dim"] = raw.get("whisper_adapter_out_dim", raw.get("adapter_output_size", a["adapter_out_dim"]))
    A, F, S = a["hidden_size"], a["intermediate_size"], a["downsample_hidden_size"]
    bias = bool(a["attention_bias"])
    layer = 4 * A * A + (3 * A if bias else 0) + 2 * A + 2 * A * F + 2 * F + F * A + A  # k_proj has no bias
    ain, aout = a["adapter_input_size"], a["adapter_out_dim"]
    return {
        "audio.embeddings": 9 * S + S + 2 * (9 * S * S + S) + S * ((a["feature_size"] + 7) // 8) * A,
        "audio.layers": a["num_hidden_layers"] * layer,
        "audio.norm": A,
        "audio.adapter": 2 * ain + ain * aout + aout + aout * aout + aout,
    }


def dots3_note(cfg: Cfg, dt: int) -> Counts | None:
    """Both towers (None, both named, when a sub-config is missing or the vision layers' plan is not
    modelled); the text width ``dt`` is the adapters' ``adapter_out_dim``, which the config states."""
    v, a = cfg.get("vision_config"), cfg.get("audio_config")
    if not isinstance(v, Mapping) or not isinstance(a, Mapping):
        return None
    counted = vision(v)
    return None if counted is None else {**counted, **audio(a)}


WHOLE: dict[str, Callable[[Cfg, int], Counts | None]] = {"dots3_note": dots3_note}
