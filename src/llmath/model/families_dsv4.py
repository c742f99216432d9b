"""Adapter rows of DeepSeek-V4 and HY-V4 (merged into :mod:`llmath.model.families`' ``ADAPTERS`` by one line there).

What transformers 5.23 builds from the file (configuration_deepseek_v4.py, modeling_deepseek_v4.py): every
layer attends a sliding window of ``sliding_window`` positions of one shared K=V head, plus, per its
``layer_types`` entry, a compressor (``compressed_sparse_attention``: CSA with a lightning indexer;
``heavily_compressed_attention``: HCA) or none (``sliding_attention``); every layer is MoE (``hash_moe``
routes by a token-id table, a buffer, with the same router matmul as ``moe``) with one shared expert of
``moe_intermediate_size`` (``n_shared_experts`` is not read by the modeling file); the residual is
``hc_mult`` hyper-connection streams. Keys a file leaves out take the config class's defaults, as
transformers does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.family_facts import LLAMA_NO_BIAS, _dense_prefix, _mlp_types_else, moe_keys, router_groups
from llmath.model.spec import CompressedSpec

_KINDS = {"sliding_attention": "", "compressed_sparse_attention": "csa", "heavily_compressed_attention": "hca"}
_LEGACY_RATIOS = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
# DeepseekV4Config's class defaults (configuration_deepseek_v4.py, transformers 5.23)
_DEFAULTS = dict(q_lora_rank=1024, o_groups=8, o_lora_rank=1024, index_n_heads=64, index_head_dim=128,
                 index_topk=512, hc_mult=4, sliding_window=128)  # fmt: skip
_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _get(cfg: Mapping[str, Any], key: str) -> int:
    v = cfg.get(key)
    v = _DEFAULTS[key] if v is None else v
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ConfigError(f"deepseek_v4: {key}={v!r} must be a positive integer (configuration_deepseek_v4.py)")
    return v


def _layer_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    """``layer_types``, else the legacy per-layer ``compress_ratios`` (0 / 4 / 128), else the class default:
    two HCA layers, then HCA and CSA alternating (DeepseekV4Config.__post_init__)."""
    types = cfg.get("layer_types")
    if types is None and cfg.get("compress_ratios") is not None:
        types = [_LEGACY_RATIOS.get(r, str(r)) for r in cfg["compress_ratios"]]
    if types is None:
        types = ["heavily_compressed_attention"] * min(n, 2)
        types += ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention" for i in range(n - 2)]
    bad = sorted({str(t) for t in types[:n]} - set(_KINDS))
    if bad or len(types) < n:
        raise ConfigError(
            f"deepseek_v4: layer_types needs {n} entries from {sorted(_KINDS)} (got {len(types)}, unknown {bad})"
        )
    return list(types[:n])


def _rates(cfg: Mapping[str, Any]) -> dict[str, int]:
    rates = dict(_RATES, **(cfg.get("compress_rates") or {}))
    for legacy, kind in (("compress_rate_csa", "compressed_sparse_attention"),
                         ("compress_rate_hca", "heavily_compressed_attention")):  # fmt: skip
        if cfg.get(legacy) is not None:
            rates[kind] = cfg[legacy]
    return rates


def _dsv4_fields(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    rates = _rates(cfg)
    spec = CompressedSpec(
        q_lora_rank=_get(cfg, "q_lora_rank"),
        o_groups=_get(cfg, "o_groups"),
        o_lora_rank=_get(cfg, "o_lora_rank"),
        csa_rate=rates["compressed_sparse_attention"],
        hca_rate=rates["heavily_compressed_attention"],
        index_heads=_get(cfg, "index_n_heads"),
        index_head_dim=_get(cfg, "index_head_dim"),
        index_topk=_get(cfg, "index_topk"),
    )
    return dict(
        compressed=spec,
        layer_compress=tuple(_KINDS[t] for t in _layer_types(cfg, n)),
        layer_windows=(_get(cfg, "sliding_window"),) * n,
        mhc_streams=_get(cfg, "hc_mult"),
    )


_SHARED_ONE = moe_keys("n_routed_experts", "moe_intermediate_size", shared_width="moe_intermediate_size")

ADAPTERS: dict[str, dict[str, Any]] = {
    "deepseek_v4": dict(LLAMA_NO_BIAS, ffn_keys=("moe_intermediate_size",), moe=_SHARED_ONE, fields=_dsv4_fields),
}


def _hy_indexer(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """HY-V4: ``indexer_types`` ("full" / "shared"), else the config class's default: layer 0 and every fourth
    from layer 1 run their own indexer, the others reuse the last top-k (configuration_hy_v4.py)."""
    types = cfg.get("indexer_types") or ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)]
    return [t != "shared" for t in types[:n]]


def _hy_fields(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    v = cfg.get("hc_mult")
    return dict(layer_indexer=tuple(_hy_indexer(cfg, n)), mhc_streams=4 if v is None else v, mhc_comb=False)


ADAPTERS.update(
    {
        # HY-V4 (Tencent Hy4): GLM-5's MLA + DSA (shared top-k layers) with a learned sink per head, a sigmoid
        # output gate per channel (gate_proj D -> N·v_head_dim), DeepSeek-style MoE after one dense layer, and
        # independent hyper-connections of hc_mult streams (modeling_hy_v4.py HYV4Attention, HYV4HyperConnection)
        # MoE layers: ``mlp_layer_types``, else one dense layer, then MoE (configuration_hy_v4.py)
        "hy_v4": dict(
            LLAMA_NO_BIAS,
            mla=True,
            dsa=True,
            attn_sinks=True,
            attn_gate="full",
            fields=_hy_fields,
            moe=moe_keys(
                "n_routed_experts",
                "moe_intermediate_size",
                shared_count="n_shared_experts",
                layers=_mlp_types_else(_dense_prefix(1)),
                **router_groups(1),  # n_group: int = 1 (configuration_hy_v4.py)
            ),
        ),
    }
)
