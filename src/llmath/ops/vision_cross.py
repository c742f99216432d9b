"""Mllama's cross-attention layers (``layer_mixers`` kind ``xattn``): text-only requests skip them; a request
with images (``Scenario.src`` = its vision tokens, model/spec_vision.py) runs them.

Llama 3.2 Vision interleaves cross-attention decoder layers (``cross_attention_layers``) that attend to the
image's vision states: RMSNorm, q/k/v/o projections with per-head RMS q/k norms, a tanh gate, RMSNorm, a
SwiGLU MLP and a second gate (transformers 5.23 ``MllamaCrossAttentionDecoderLayer``). Without an image,
transformers skips these layers (``MllamaTextModel.forward``: no cross-attention states and none cached), and
so do serving engines: every cost here is on a monomial that is 0 without a source (``BTI`` = B·T·[src>0],
``I``, ``X`` = B·src, ``XE`` = B·T·src), so a text-only request gets the layers' parameters and no work.
With images, the prefill projects the B·src vision tokens to K/V once (written to the cross cache) and every
pass runs the queries, the eager products over the src cached positions (K/V repeated to every query head),
o_proj and the MLP on its T tokens (``MllamaTextCrossAttention``: a later step reads K/V from the cache).
"""

from __future__ import annotations

from llmath.ops.core import NORM_FLOPS, SOFTMAX_FLOPS, Builder
from llmath.ops.split import Split


def vision_cross_layers(b: Builder, count: int, lk: str) -> None:
    """``count`` cross-attention layers (an operator per weight group)."""
    s = b.spec
    D, H, K, hd, F = s.d_model, s.n_heads, s.n_kv_heads, s.head_dim, s.d_ff
    rows = (
        ("xattn.q_proj", "attention", [("attention.cross.q.weight", D * H * hd)], D, H * hd, Split.COLUMN),
        ("xattn.o_proj", "attention", [("attention.cross.o.weight", H * hd * D)], H * hd, D, Split.ROW),
        ("xattn.ffn.gate", "ffn", [("ffn.gate.weight", D * F)], D, F, Split.COLUMN),
        ("xattn.ffn.up", "ffn", [("ffn.up.weight", D * F)], D, F, Split.COLUMN),
        ("xattn.ffn.down", "ffn", [("ffn.down.weight", F * D)], F, D, Split.ROW),
    )  # split as vLLM's mllama.py MllamaTextCrossAttention and its MLP
    m = "BTI"
    for name, component, params, din, dout, split in rows:
        b.add(name, component, "matmul", "BTE,EF->BTF", dict(E=din, F=dout), count, params, lk, split,
              flops=[(2 * din * dout, m, "2·E·F")], weight=[(din * dout, "I", "E·F")], act_in=[(din, m, "E")],
              act_out=[(dout, m, "F")])  # fmt: skip
    # the cross cache as one operator: K and V of the vision tokens projected once (prefill) and written; read
    # by the products in every pass (kept here, so the products' operator is no cached-attention kernel)
    kv = (
        dict(
            flops=[(4 * D * K * hd, "X", "2·2·D·K·H")],
            weight=[(2 * D * K * hd, "I", "2·D·K·H")],
            act_in=[(D, "X", "D")],
            kv_write=[(2 * K * hd, "X", "2·K·H")],
        )
        if b.stage == "prefill"
        else {}
    )
    b.add("xattn.kv_proj", "attention", "matmul", "BXD,DKH->BXKH", dict(D=D, K=K, H=hd), count,
          [("attention.cross.k.weight", D * K * hd), ("attention.cross.v.weight", D * K * hd)], lk,
          kv_read=[(2 * K * hd, "X", "2·K·H")], **kv, split=Split.KV_HEADS)  # fmt: skip
    # scores, softmax and context as one operator (with the K/V one, a layer keeps the nine kernels a text-only
    # request charges): the eager products over the src cached positions, 2·N·H each per query and position
    b.add("xattn.attention", "attention", "matmul", "BTNH,BXNH->BTNH", dict(N=H, H=hd), count, (), lk,
          flops=[(4 * H * hd, "XE", "4·N·H")], vflops=[(SOFTMAX_FLOPS * H, "XE", "N")], split=Split.HEADS)  # fmt: skip
    b.add("xattn.gates", "attention", "vector", "BTD->BTD", dict(D=D), count, [("attention.cross.gates", 2)], lk,
          vflops=[(2 * D, "BTI", "2·D")], split=Split.REPLICATED)  # fmt: skip
    b.add("xattn.norms", "norm", "vector", "BTD->BTD", dict(D=D), count, [("norm.layers", 2 * D + 2 * hd)], lk,
          vflops=[(NORM_FLOPS[s.norm] * 2 * D, "BTI", "2·D")])  # fmt: skip
