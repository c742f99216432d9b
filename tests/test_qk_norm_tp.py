"""q/k norms over all heads under tensor parallelism: the all-reduce a rank needs (deploy/comm.py).

transformers ``models/minimax_m2/modeling_minimax_m2.py``: MiniMaxM2Attention's ``q_norm`` is
``MiniMaxM2RMSNorm(num_attention_heads * head_dim)`` on the flattened q (``k_norm`` over ``num_key_value_heads *
head_dim``), so a rank holding some heads cannot normalise alone; vLLM (``vllm/model_executor/layers/mamba/
linear_attn.py``, ``MiniMaxText01RMSNormTP.forward_qk``) concatenates each token's q and k mean squares and
all-reduces them once per layer. Expected values are the arithmetic in the comments.
"""

from __future__ import annotations

from helpers import registry_config

from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.shard import rank_plans
from llmath.model import registry
from llmath.model.hf import spec_from_config


def _collectives(spec, tp: int) -> dict:
    (plan,) = rank_plans(spec, "decode", "flash", make_layout(spec, ParallelConfig(tp=tp)))
    return {c.name: c for c in plan.collectives}


def test_minimax_m2_all_reduces_its_qk_norm_statistics_once_per_layer():
    spec = registry.spec("minimax-m2.5")
    assert spec.qk_norm_spans_heads
    colls = _collectives(spec, 4)
    qk = colls["attn.qk_norm.all_reduce"]
    # config.json: 62 layers, every one attention + MoE; one all-reduce each of 2 values (q's and k's) per token
    assert qk.count == colls["attn.all_reduce"].count == 62
    assert qk.kind == "all_reduce" and qk.n == 4
    assert [(t.coef, t.mono) for t in qk.message] == [(2, "BT")]


def test_no_qk_norm_collective_on_one_gpu_or_for_per_head_norms():
    assert "attn.qk_norm.all_reduce" not in _collectives(registry.spec("minimax-m2.5"), 1)
    # Qwen3-MoE normalises each head on its own (Qwen3MoeRMSNorm(head_dim)): nothing to share between ranks
    qwen = spec_from_config(registry_config("qwen3-30b-a3b"), "qwen3-30b-a3b")
    assert not qwen.qk_norm_spans_heads
    assert "attn.qk_norm.all_reduce" not in _collectives(qwen, 4)
