"""Adapter rows of the families with a sparse-attention indexer (merged into
:mod:`llmath.model.families`' ``ADAPTERS`` by one line there): A.X K2 and Dots 3 Note (MLA + DeepSeek Sparse
Attention), MiniMax-M3 (GQA + block-sparse attention). Each row states what its transformers 5.23 modeling
file builds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmath.errors import ConfigError
from llmath.model.families_moe import _deepseek_moe
from llmath.model.family_facts import LLAMA_LIKE, LLAMA_NO_BIAS, _mlp_layer_types, moe_keys, router_groups
from llmath.model.spec import BlockIndexSpec
from llmath.model.spec_mla import MLASpec


def _axk2_fields(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    """A.X K2's gated-norm rank (configuration_axk2.py: ``gated_norm_rank``, default 16)."""
    r = cfg.get("gated_norm_rank")
    return dict(norm_gate_rank=16 if r is None else int(r))


# Dots 3 Note's sliding-window layers' MLA widths when the file gives neither per_layer_config nor swa_* keys
# (configuration_dots3_note.py Dots3NoteTextConfig.__post_init__: sliding_config defaults)
_SWA_DEFAULTS = dict(
    num_attention_heads=64, num_key_value_heads=64, q_lora_rank=1024, kv_lora_rank=1024, head_dim=256,
    qk_nope_head_dim=192, v_head_dim=128,
)  # fmt: skip
_SWA_KEYS = (*_SWA_DEFAULTS, "qk_rope_head_dim")


def _dots3_prepare(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The keys Dots3NoteTextConfig.__post_init__ derives: ``layer_types`` (indexed (DSA) layers 0, 1 and
    i % 4 == 1, the others sliding, unless ``use_sliding_window`` is false; ``use_dsa`` false makes the DSA
    layers plain "full_attention"), ``sliding_window`` (else ``sliding_window_size``, default 512) and
    ``mlp_layer_types`` (MoE from ``first_k_dense_replace``, default 1, where ``moe_layer_freq`` says), and
    ``shared_experts_intermediate_size`` (the hub file's ``moe_shared_expert_intermediate_size`` wins)."""
    n = int(cfg.get("num_hidden_layers") or 46)
    use_dsa = cfg.get("use_dsa", None if "per_layer_config" in cfg else True)
    types = cfg.get("layer_types")
    if types is None:
        full = "full_attention" if use_dsa is False else "indexed_attention"
        slide = cfg.get("use_sliding_window", True)
        types = [full if not slide or i < 2 or i % 4 == 1 else "sliding_attention" for i in range(n)]
    if use_dsa is not None:
        old, new = ("full_attention", "indexed_attention") if use_dsa else ("indexed_attention", "full_attention")
        types = [new if t == old else t for t in types]
    window = cfg.get("sliding_window")
    window = cfg.get("sliding_window_size", 512) if window is None else window
    mlp = cfg.get("mlp_layer_types")
    if mlp is None:
        k, freq = int(cfg.get("first_k_dense_replace", 1)), cfg.get("moe_layer_freq", 1)
        moe = [i >= k and (bool(freq[i]) if isinstance(freq, list) else i % int(freq) == 0) for i in range(n)]
        mlp = ["sparse" if m else "dense" for m in moe]
    shared = cfg.get("moe_shared_expert_intermediate_size", cfg.get("shared_experts_intermediate_size", 1536))
    return dict(
        cfg,
        layer_types=list(types),
        sliding_window=window,
        mlp_layer_types=mlp,
        shared_experts_intermediate_size=shared,
    )


def _dots3_window_widths(cfg: Mapping[str, Any], n: int) -> dict[str, Any] | None:
    """The sliding layers' attention widths: their ``per_layer_config`` overrides over the top-level keys
    (as ``to_dict`` writes them), else the hub file's ``swa_*`` keys (defaults: :data:`_SWA_DEFAULTS`)."""
    slide = [i for i, t in enumerate(cfg["layer_types"][:n]) if t == "sliding_attention"]
    if not slide:
        return None
    over = cfg.get("per_layer_config")
    if over is None:
        w = {k: cfg.get(f"swa_{k}", d) for k, d in _SWA_DEFAULTS.items()}
        w["qk_rope_head_dim"] = cfg.get("swa_qk_rope_head_dim", w["head_dim"] - w["qk_nope_head_dim"])
        return w
    rows = {int(k): dict(v) for k, v in over.items() if int(k) < n} if isinstance(over, Mapping) else None
    mine = [rows.get(i, {}) for i in slide] if rows is not None else []
    if rows is None or any(r != mine[0] for r in mine) or set(rows) - set(slide) or set(mine[0]) - set(_SWA_KEYS):
        raise ConfigError(
            f"dots3_note_text: per_layer_config={over!r} is modelled as one set of attention widths "
            f"({', '.join(_SWA_KEYS)}) for the sliding layers only; open an issue with the config.json"
        )
    return {k: mine[0].get(k, cfg.get(k)) for k in _SWA_KEYS}


def _pos(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ConfigError(f"dots3_note_text: sliding layers' {key}={v!r} must be a positive integer")
    return v


def _dots3_fields(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The sliding layers' own MLA widths (no indexer), with the shared rotary key's RMSNorm."""
    w = _dots3_window_widths(cfg, n)
    if w is None:
        return {}
    heads = _pos("num_attention_heads", w["num_attention_heads"])
    if w.get("num_key_value_heads") not in (None, heads):
        raise ConfigError("dots3_note_text: sliding layers' num_key_value_heads must equal num_attention_heads")
    q, c, r, h, j = (_pos(k, w[k]) for k in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                                           "v_head_dim"))  # fmt: skip
    mla = MLASpec(q, c, r, h, j, heads=heads, k_rope_norm=True)
    return dict(window_mla=mla)


# MiniMax-M3's legacy sparse_attention_config keys -> the config class's flat keys (configuration_minimax_m3_vl.py)
_M3_LEGACY = dict(
    index_n_heads="sparse_num_index_heads", index_head_dim="sparse_index_dim", index_block_size="sparse_block_size",
    index_topk_blocks="sparse_topk_blocks", index_local_blocks="sparse_local_block",
)  # fmt: skip
_M3_DEFAULTS = dict(
    index_n_heads=4, index_head_dim=128, index_block_size=128, index_topk_blocks=16, index_local_blocks=1
)


def _m3_prepare(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """What MiniMaxM3VLTextConfig.__post_init__ derives: the indexer keys (``sparse_attention_config``'s
    legacy names win), ``layer_types`` (else from ``sparse_attention_freq``, else all dense),
    ``mlp_layer_types`` (else from ``moe_layer_freq``, else all MoE); ``dense_intermediate_size`` default 12288."""
    n = int(cfg.get("num_hidden_layers") or 60)
    sparse = cfg.get("sparse_attention_config") or {}
    if not isinstance(sparse, Mapping):
        raise ConfigError(f"minimax_m3_vl_text: sparse_attention_config={sparse!r} must be a JSON object")
    out = dict(cfg, dense_intermediate_size=cfg.get("dense_intermediate_size", 12288))
    for flat, legacy in _M3_LEGACY.items():
        out[flat] = sparse.get(legacy, cfg.get(flat, _M3_DEFAULTS[flat]))
    types = cfg.get("layer_types")
    if types is None and "sparse_attention_freq" in sparse:
        types = ["minimax_m3_sparse" if f else "full_attention" for f in sparse["sparse_attention_freq"]]
    out["layer_types"] = list(types or ["full_attention"] * n)
    if set(out["layer_types"]) - {"full_attention", "minimax_m3_sparse"}:
        raise ConfigError(
            f"minimax_m3_vl_text: layer_types {sorted(set(out['layer_types']))} are not modelled (full_attention "
            "and minimax_m3_sparse are); open an issue with the config.json"
        )
    mlp = cfg.get("mlp_layer_types")
    if mlp is None and cfg.get("moe_layer_freq") is not None:
        mlp = ["sparse" if f else "dense" for f in cfg["moe_layer_freq"]]
    out["mlp_layer_types"] = mlp or ["sparse"] * n
    return out


def _m3_fields(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The block-sparse layers (``minimax_m3_sparse``) and their indexer; none: a dense GQA model."""
    sparse = [t == "minimax_m3_sparse" for t in cfg["layer_types"][:n]]
    if not any(sparse):
        return {}
    k = {f: cfg[f] for f in _M3_DEFAULTS}
    for f, v in k.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if f == "index_local_blocks" else 1):
            raise ConfigError(f"minimax_m3_vl_text: {f}={v!r} must be a positive integer")
    bi = BlockIndexSpec(k["index_n_heads"], k["index_head_dim"], k["index_block_size"], k["index_topk_blocks"],
                        k["index_local_blocks"])  # fmt: skip
    return dict(block_index=bi, layer_indexer=tuple(sparse))


ADAPTERS: dict[str, dict[str, Any]] = {
    # A.X K2 (SK Telecom): DeepSeek-V3.2 (MLA + DSA indexer in every layer + MoE) without q_b_proj: a fused
    # q_gate_proj from the query latent gives the query and a sigmoid output gate; gated RMSNorms before
    # attention and before each MoE (modeling_axk2.py AXK2Attention, AXK2GatedRMSNorm)
    "axk2": dict(
        LLAMA_LIKE,  # attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj
        ffn_bias=False,
        mla=True,
        dsa=True,
        q_gate=True,
        fields=_axk2_fields,
        moe=_deepseek_moe(1, None),  # n_group: int | None = None, no groups (configuration_axk2.py)
    ),
    # Dots 3 Note (rednote dots-studio) text model: MLA in every layer with an RMSNorm on the shared rotary key
    # and a per-head sigmoid gate g_proj (D -> N); the indexed layers run GLM-5's DSA indexer, the sliding
    # layers (window sliding_window) their own MLA widths and no indexer; DeepSeek-V3 MoE whose shared FFN is
    # n_shared_experts × shared_experts_intermediate_size (modeling_dots3_note.py Dots3NoteTextAttention,
    # Dots3NoteTextMoE)
    "dots3_note_text": dict(
        LLAMA_LIKE,  # attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj
        ffn_bias=False,
        mla=True,
        dsa=lambda c: "indexed_attention" in c["layer_types"],
        k_rope_norm=True,
        attn_gate="head",
        prepare=_dots3_prepare,
        fields=_dots3_fields,
        moe=moe_keys(
            "n_routed_experts",
            "moe_intermediate_size",
            shared_width="shared_experts_intermediate_size",
            shared_count="n_shared_experts",
            layers=_mlp_layer_types,
            **router_groups(1),  # n_group: int = 1 (configuration_dots3_note.py)
        ),
    ),
    # MiniMax-M3 (MiniMaxAI) language model: GQA with per-head (Gemma-style) q/k RMSNorms and partial rotary; on
    # its minimax_m3_sparse layers a lightning indexer picks key blocks (ops/block_sparse.py); MoE layers of
    # sigmoid-routed SwiGLU-OAI experts plus one shared expert (shared_intermediate_size), dense layers of
    # dense_intermediate_size; no bias (modeling_minimax_m3_vl.py MiniMaxM3VLAttention, MiniMaxM3VLSparseMoeBlock)
    "minimax_m3_vl_text": dict(
        LLAMA_NO_BIAS,
        qk_norm="head",
        prepare=_m3_prepare,
        fields=_m3_fields,
        ffn_keys=("dense_intermediate_size",),
        moe=moe_keys(
            "num_local_experts", "intermediate_size", shared_width="shared_intermediate_size", layers=_mlp_layer_types
        ),
    ),
}
