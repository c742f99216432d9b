"""Adapter row of Gemma 3n's language model (``gemma3n_text``), and the KV-sharing reader it shares with Gemma 4.

Read as transformers 5.23's Gemma3nTextConfig reads the file (configuration_gemma3n.py): every 5th layer full
attention unless ``layer_types`` says otherwise, ``intermediate_size`` one width or one per layer (MatFormer
slices of E4B give layers different widths), the
first 10 layers' FFN gates sparse (0.95) unless ``activation_sparsity_pattern`` says otherwise (when there are
more than 10 layers), the last ``num_kv_shared_layers`` (default 15) reusing K/V, AltUp's
``altup_num_inputs`` (4) copies, LAuReL's ``laurel_rank`` (64), per-layer embeddings as Gemma 4's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import GEMMA3_LIKE


def kv_shared_layers(cfg: Mapping[str, Any], n_layers: int) -> tuple[bool, ...]:
    """The layers that reuse an earlier layer's K/V: the last ``num_kv_shared_layers`` (``kv_sharing_modes``
    of configuration_gemma3n.py / configuration_gemma4.py); the spec checks each has an earlier producer."""
    k = cfg.get("num_kv_shared_layers") or 0
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < n_layers:
        raise ConfigError(f"num_kv_shared_layers={k!r} must be an integer in 0..{n_layers - 1} (num_hidden_layers − 1)")
    return tuple(i >= n_layers - k for i in range(n_layers))


def _types(cfg: Mapping[str, Any], n_layers: int) -> list[str]:
    """Gemma3nTextConfig's default ``layer_types``: every 5th layer full attention."""
    return ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n_layers)]


def _d_ff(cfg: Mapping[str, Any]) -> int:
    """The FFN width (the first layer's where ``intermediate_size`` lists one per layer)."""
    f = cfg.get("intermediate_size", 16384)
    return int(f[0] if isinstance(f, list) and f else f)


def _layer_d_ff(cfg: Mapping[str, Any], n_layers: int) -> tuple[int, ...]:
    """Each layer's FFN width when a list gives them different widths (MatFormer slices), else () (all d_ff)."""
    f = cfg.get("intermediate_size", 16384)
    if not isinstance(f, list) or len(set(f)) == 1:
        return ()
    if len(f) != n_layers or not all(isinstance(x, int) and not isinstance(x, bool) for x in f):
        raise ConfigError(f"gemma3n_text: intermediate_size={f!r} must give one integer width per layer ({n_layers})")
    return tuple(f)


def gemma3n_layers(cfg: Mapping[str, Any], get: Callable[..., int], n_layers: int) -> dict[str, Any]:
    """AltUp, LAuReL, per-layer embeddings, sparse FFN gates and KV sharing of a gemma3n_text config."""
    if cfg.get("altup_correct_scale") is False or cfg.get("altup_active_idx", 0) != 0:
        raise ConfigError(
            "gemma3n_text: altup_correct_scale=false or altup_active_idx other than 0 is not modelled yet; "
            "open an issue with the config.json"
        )
    sparse = cfg.get("activation_sparsity_pattern")
    if sparse is None:
        sparse = [0.95] * (10 if n_layers > 10 else 0) + [0.0] * n_layers
    if not isinstance(sparse, list) or len(sparse) < n_layers:
        raise ConfigError(f"gemma3n_text: activation_sparsity_pattern={sparse!r} must give one value per layer")
    P = get("hidden_size_per_layer_input", 256)
    return dict(
        per_layer_width=P,
        per_layer_vocab=get("vocab_size_per_layer_input", 262144) if P else 0,
        altup_inputs=get("altup_num_inputs", 4),
        laurel_rank=get("laurel_rank", 64),
        layer_ffn_sparse=tuple(bool(x and x > 0) for x in sparse[:n_layers]),
        layer_d_ff=_layer_d_ff(cfg, n_layers),
        layer_kv_shared=kv_shared_layers(dict(cfg, num_kv_shared_layers=cfg.get("num_kv_shared_layers", 15)), n_layers),
    )


ADAPTERS: dict[str, dict[str, Any]] = {
    # Gemma 3n's language model (modeling_gemma3n.py): Gemma 3's layer (four norms, q/k norms per head, a v norm
    # without weight, GELU-tanh gated FFN, embeddings × √D, final soft-capping) inside AltUp, with LAuReL beside
    # attention, per-layer embeddings, KV sharing (ops/altup.py, ops/per_layer.py, ops/attention.py)
    "gemma3n_text": dict(GEMMA3_LIKE, windows=_types, d_ff=_d_ff, mixers=gemma3n_layers),
}
