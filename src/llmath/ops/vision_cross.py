"""Mllama's cross-attention layers (``layer_mixers`` kind ``xattn``), in a text-only request: weights, no work.

Llama 3.2 Vision interleaves cross-attention decoder layers (``cross_attention_layers``) that attend to the
image's vision states: RMSNorm, q/k/v/o projections with per-head RMS q/k norms, a tanh gate, RMSNorm, a
SwiGLU MLP and a second gate (transformers 5.23 ``MllamaCrossAttentionDecoderLayer``). Without an image,
transformers skips these layers (``MllamaTextModel.forward``: no cross-attention states and none cached), and
so do serving engines; llmath's stages analyse text-only requests, so each operator here carries the
layer's parameters (in the count and the weight memory) and no FLOPs, bytes moved or cache.
"""

from __future__ import annotations

from llmath.ops.core import Builder


def vision_cross_layers(b: Builder, count: int, lk: str) -> None:
    """The weights of ``count`` skipped cross-attention layers (an operator per weight group)."""
    s = b.spec
    D, H, K, hd, F = s.d_model, s.n_heads, s.n_kv_heads, s.head_dim, s.d_ff
    groups = (
        ("xattn.q_proj", "attention", [("attention.cross.q.weight", D * H * hd)]),
        ("xattn.k_proj", "attention", [("attention.cross.k.weight", D * K * hd)]),
        ("xattn.v_proj", "attention", [("attention.cross.v.weight", D * K * hd)]),
        ("xattn.o_proj", "attention", [("attention.cross.o.weight", H * hd * D)]),
        ("xattn.gates", "attention", [("attention.cross.gates", 2)]),  # tanh gates of attention and MLP
        ("xattn.norms", "norm", [("norm.layers", 2 * D + 2 * hd)]),  # input, post-attention; q, k norms
        ("xattn.ffn.gate", "ffn", [("ffn.gate.weight", D * F)]),
        ("xattn.ffn.up", "ffn", [("ffn.up.weight", D * F)]),
        ("xattn.ffn.down", "ffn", [("ffn.down.weight", F * D)]),
    )
    for name, component, params in groups:
        b.add(name, component, "memory", "skipped (text-only)", dict(D=D), count, params, lk)
