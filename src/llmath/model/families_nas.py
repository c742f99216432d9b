"""NVIDIA's Nemotron-NAS checkpoints (model_type ``nemotron-nas``, remote code ``DeciLMForCausalLM``): Llama layers
whose attention and FFN a neural architecture search reshaped per layer, as ``block_configs``.

Each block's ``attention`` is either grouped-query attention with ``num_attention_heads / n_heads_in_group`` KV
heads, or ``no_op`` (the layer has no attention and no attention norm); its ``ffn`` is a gated MLP of width
``_find_multiple(int(2 * ffn_mult * hidden_size / 3), 256)``. Sources: the checkpoints' modeling_decilm.py as
vLLM (vllm/model_executor/models/nemotron_nas.py, DeciLMDecoderLayer, ``_ffn_mult_to_intermediate_size``) and
SGLang (python/sglang/srt/models/nemotron_nas.py) port it. llmath reads a no-op attention layer as mixer kind
"none" (norm, FFN, residual) and each layer's FFN width as ``layer_d_ff``. Options these checkpoints leave off
(``replace_with_linear``, ``sparsify``, sink or window attention, an FFN ``no_op``, KV groups that differ
between layers) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import LLAMA_LIKE

_ATTN_OFF = ("replace_with_linear", "sparsify", "num_sink_tokens", "window_length", "unshifted_sink")
_FFN_OFF = ("no_op", "replace_with_linear", "sparsify")


def ffn_width(ffn_mult: float, d: int) -> int:
    """DeciLM's FFN width: 2/3 of ``ffn_mult`` × D, rounded up to a multiple of 256."""
    n = int(2 * ffn_mult * d / 3)
    return n if n % 256 == 0 else n + 256 - n % 256


def _blocks(cfg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    blocks, n = cfg.get("block_configs"), cfg.get("num_hidden_layers")
    if not isinstance(blocks, list) or len(blocks) != n or not all(isinstance(b, Mapping) for b in blocks):
        raise ConfigError(
            f"nemotron-nas: block_configs must list one {{attention, ffn}} object per layer "
            f"(num_hidden_layers={n!r}); fix the config.json"
        )
    for i, b in enumerate(blocks):
        for part, keys in (("attention", _ATTN_OFF), ("ffn", _FFN_OFF)):
            on = [k for k in keys if (b.get(part) or {}).get(k)]
            if on:
                raise ConfigError(
                    f"nemotron-nas: block_configs[{i}].{part}.{on[0]}={b[part][on[0]]!r} is not modelled yet; "
                    "open an issue with the config.json"
                )
    return blocks


def _kv_group(blocks: list[Mapping[str, Any]]) -> int:
    groups = {b["attention"].get("n_heads_in_group") for b in blocks if not b["attention"].get("no_op")}
    if len(groups) != 1 or not isinstance(g := next(iter(groups)), int) or isinstance(g, bool) or g < 1:
        raise ConfigError(
            f"nemotron-nas: the attention layers' n_heads_in_group are {sorted(map(str, groups))}; llmath models "
            "one positive KV group size for every attention layer"
        )
    return g


def _prepare(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The Llama keys the blocks imply: KV heads from the shared group size, a stand-in dense width."""
    blocks = _blocks(cfg)
    heads, d = cfg.get("num_attention_heads"), cfg.get("hidden_size")
    if not isinstance(heads, int) or not isinstance(d, int):
        raise ConfigError("nemotron-nas: num_attention_heads and hidden_size must be integers")
    g = _kv_group(blocks)
    if heads % g:
        raise ConfigError(f"nemotron-nas: num_attention_heads={heads} is not a multiple of n_heads_in_group={g}")
    return dict(cfg, num_key_value_heads=heads // g, intermediate_size=_width(blocks[0], d))


def _width(block: Mapping[str, Any], d: int) -> int:
    mult = block.get("ffn", {}).get("ffn_mult")
    if isinstance(mult, bool) or not isinstance(mult, int | float) or not mult > 0:
        raise ConfigError(f"nemotron-nas: ffn_mult={mult!r} must be a number > 0")
    return ffn_width(mult, d)


def _fields(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    blocks, d = cfg["block_configs"][:n], cfg["hidden_size"]
    return dict(
        layer_mixers=tuple("none" if b["attention"].get("no_op") else "attention" for b in blocks),
        layer_d_ff=tuple(_width(b, d) for b in blocks),
    )


ADAPTERS: dict[str, dict[str, Any]] = {
    "nemotron-nas": dict(LLAMA_LIKE, prepare=_prepare, fields=_fields),
}
