"""Adapter rows of the state-space hybrids whose layers are not one attention + FFN block each:
Nemotron-H (one block per layer: Mamba-2, attention, MLP or MoE), Falcon-H1 (attention and Mamba-2 in
parallel in every layer), Zamba and Zamba2 (Mamba layers with shared attention blocks). The widths and the
per-layer kinds are read by :mod:`llmath.model.mixer_configs`; merged into ``families.ADAPTERS``."""

from __future__ import annotations

from typing import Any

from llmath.model import mixer_configs
from llmath.model.family_facts import LLAMA_LIKE, LLAMA_NO_BIAS, _attn_bias, _k, moe_keys, router_groups

ADAPTERS: dict[str, dict[str, Any]] = {
    # Nemotron-H (NVIDIA, arXiv:2504.03624): squared-ReLU MLPs, NoPE attention, no biases but the file's;
    # MoE layers (Nemotron-3) route to non-gated experts beside one shared expert; Nemotron-3 Super/Ultra run them in
    # a latent (moe_latent_size)
    "nemotron_h": dict(
        LLAMA_LIKE,
        **_attn_bias(False),
        ffn="mlp",
        activation="relu2",
        ffn_bias=_k("mlp_bias", False),
        position="none",
        norms_per_layer=1,
        prepare=mixer_configs.nemotron_h_prepare,
        moe=moe_keys(
            "n_routed_experts",
            "moe_intermediate_size",
            shared_width="moe_shared_expert_intermediate_size",
            shared_bias="mlp_bias",
            layers=mixer_configs.nemotron_h_moe_layers,
            latent="moe_latent_size",
            **router_groups(1),  # n_group: int = 1 (configuration_nemotron_h.py)
        ),
        mixers=mixer_configs.nemotron_h,
    ),
    # Falcon-H1 (TII, arXiv:2507.22448): attention ∥ Mamba-2 then a gated MLP in every layer; µP multipliers
    "falcon_h1": dict(LLAMA_LIKE, mixers=mixer_configs.falcon_h1),
    # Zamba (Zyphra, arXiv:2405.16712) and Zamba2 (arXiv:2411.15242): Mamba layers; "hybrid" layers first run a
    # transformer block shared across them (ops/shared_block.py); no positions but Zamba2's optional rotary
    "zamba": dict(LLAMA_NO_BIAS, position="none", norms_per_layer=1, mixers=mixer_configs.zamba),
    "zamba2": dict(
        LLAMA_LIKE,
        **_attn_bias(False),
        ffn_bias=_k("add_bias_linear", False),
        norms_per_layer=1,
        position=lambda c: "rotary" if c.get("use_mem_rope") else "none",
        mixers=mixer_configs.zamba2,
    ),
}
