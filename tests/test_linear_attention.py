"""Linear-attention hybrids (ops/linear_attn.py): Gated DeltaNet, Kimi Delta Attention, lightning attention.

Against transformers on the meta device over several chunks / blocks (the causal-LM oracle test prompts 9
tokens: one chunk), then where the fused kernels differ from transformers' fallback, the fixed state and
its place in the roofline, with the arithmetic in the comments.
"""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath import Workload
from llmath.analysis import analyze, kv_cache_bytes
from llmath.deploy.layout import ParallelConfig
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.state import fixed_state_elements

B = 2


def _spec(mt, tmp_path, **extra):
    cfg = dict(default_config(mt, str(tmp_path)), **extra)
    return cfg, spec_from_config(cfg, mt)


def _total(spec, stage, attention, cls, sc, op=None):
    costs = evaluate(build_ops(spec, stage, attention), sc, spec)
    return sum(c.values.get(cls, 0) for c in costs if op is None or c.op.name.endswith(op))


def _first_kinds(spec) -> int:
    """Layers up to the first of each kind (mixer and attention) and one more."""
    seen, n = set(), 0
    for i, k in enumerate(spec.layer_kinds()):
        if k not in seen:
            seen.add(k)
            n = i + 1
    return max(n, 2)


# (model_type, config overrides, prompt): 70 tokens = two chunks of 64 (the second padded) for the delta
# rules; MiniMax with blocks of 4 over 9 tokens = blocks of 4, 4 and 1. Few experts keep the runs short.
CASES = [
    ("qwen3_next", {"num_experts": 8, "num_experts_per_tok": 2}, 70),
    ("qwen3_5_text", {}, 70),
    ("kimi_linear", {"num_experts": 8}, 70),
    ("bailing_hybrid", {"num_experts": 32}, 70),
    ("minimax", {"block_size": 4}, 9),
]


@pytest.mark.parametrize("mt,extra,prompt", CASES, ids=[c[0] for c in CASES])
def test_several_chunks_equal_transformers(mt, extra, prompt, tmp_path):
    pytest.importorskip("transformers")
    from llmath.measure import oracle

    cfg, spec = _spec(mt, tmp_path, **extra)
    n = _first_kinds(spec)
    small = spec.with_layers(n)
    model = oracle.build_meta(oracle.hf_config(cfg, n))
    hf_prefill, out = oracle.forward_flops(model, B, prompt)
    past = oracle.past_of(out)
    assert _total(small, "prefill", "eager", "flops", Scenario(B, prompt, 0)) == hf_prefill
    assert kv_cache_bytes(small, B, prompt, Precision(), layout="transformers") == oracle.cache_bytes(past)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=past, seen=prompt)
    assert _total(small, "decode", "eager", "flops", Scenario(B, 1, prompt)) == hf_decode


@pytest.fixture(scope="module")
def qwen3_next(tmp_path_factory):
    return _spec("qwen3_next", tmp_path_factory.mktemp("cfg"))[1]


def test_fixed_state_is_conv_window_plus_delta_state(qwen3_next):
    # Qwen3NextConfig defaults: 48 layers, every 4th full attention -> 36 Gated DeltaNet layers; key heads
    # G = 16 of N = 128, value heads H = 32 of P = 128, conv C = 4 over 2·16·128 + 32·128 = 8192 channels.
    # Serving kernels: (C − 1)·8192 + H·N·P = 24,576 + 524,288 = 548,864 per layer; · 36 = 19,759,104
    assert fixed_state_elements(qwen3_next) == 36 * 548_864 == 19_759_104
    # transformers' conv state keeps C = 4 positions: one more per channel, 36 · 8192 more
    assert fixed_state_elements(qwen3_next, "transformers") - fixed_state_elements(qwen3_next) == 36 * 8192
    # the KV cache grows only in the 12 attention layers: 2 · K=2 · 256 · 12 = 12,288 elements per position
    kv = kv_cache_bytes(qwen3_next, 1, 1000, Precision()) - kv_cache_bytes(qwen3_next, 1, 999, Precision())
    assert kv == 2 * 12_288


def test_decode_reads_and_writes_the_state(qwen3_next):
    # a decode step reads and writes each sequence's fixed state once (19,759,104 elements), plus the KV
    sc = Scenario(3, 1, 500)
    fixed = 3 * 19_759_104
    kv_read = _total(qwen3_next, "decode", "flash", "kv_read", sc) - fixed
    assert kv_read == 3 * 12_288 * 501  # the 12 attention layers read 500 cached + 1 new positions
    assert _total(qwen3_next, "decode", "flash", "kv_write", sc) == fixed + 3 * 12_288
    assert _total(qwen3_next, "prefill", "flash", "kv_read", Scenario(3, 64, 0), op="delta_rule") == 0


def test_chunked_delta_rule_eager_and_flash_differ_where_documented(qwen3_next):
    """Per chunk of Q = 64 and value head (H = 32, N = P = 128), transformers' matmuls are kβ·kᵀ, q·kᵀ
    (2·Q²·N each), attn·v_new (2·Q²·P) and three Q·N·P state products: 4·Q²·N + 2·Q²·P + 6·Q·N·P;
    its triangular solve is not a matmul FlopCounterMode sees. FLA's chunk_gated_delta_rule adds the
    inverse (Q(Q−1)(Q−2)/3), w and u from it (2·Q²·(N+P)), and its (q·kᵀ)·v_new over N as well:
    6·Q²·N + 4·Q²·P + 6·Q·N·P + Q(Q−1)(Q−2)/3. Both run whole chunks."""
    Q, N, P, H = 64, 128, 128, 32
    eager = H * (4 * Q * Q * N + 2 * Q * Q * P + 6 * Q * N * P)
    flash = H * (6 * Q * Q * N + 4 * Q * Q * P + 6 * Q * N * P + Q * (Q - 1) * (Q - 2) // 3)
    sc = Scenario(1, 100, 0)  # two chunks per sequence, 36 layers
    assert _total(qwen3_next, "prefill", "eager", "flops", sc, op="delta_rule") == 36 * 2 * eager
    assert _total(qwen3_next, "prefill", "flash", "flops", sc, op="delta_rule") == 36 * 2 * flash
    # a decode step is elementwise in both (no matmul): 7 FLOPs per state element, as vector work
    assert _total(qwen3_next, "decode", "eager", "flops", Scenario(1, 1, 100), op="delta_rule") == 0
    assert _total(qwen3_next, "decode", "flash", "vflops", Scenario(1, 1, 100), op="delta_rule") == 36 * 7 * H * N * P


def test_lightning_eager_computes_whole_blocks_flash_the_causal_pairs(tmp_path):
    """MiniMax defaults: 32 layers alternating, 16 lightning layers, H = 32 heads of P = 128, blocks of 256.
    One full block of b = 256: transformers' q·kᵀ and (·)·v run the whole b × b block (4·P·b² per head),
    the fused kernel the b(b+1)/2 causal pairs (4·P each): the difference is 4·H·P·(b² − b(b+1)/2)."""
    _, spec = _spec("minimax", tmp_path)
    sc = Scenario(1, 256, 0)
    diff = _total(spec, "prefill", "eager", "flops", sc, op="lightning") - _total(
        spec, "prefill", "flash", "flops", sc, op="lightning"
    )
    assert diff == 16 * 4 * 32 * 128 * (256 * 256 - 256 * 257 // 2)
    # its state is H · P · P per sequence and layer, no conv: 16 · 32 · 128² = 8,388,608 elements
    assert fixed_state_elements(spec) == fixed_state_elements(spec, "transformers") == 8_388_608


def test_gated_attention_projects_the_gate_with_the_query(qwen3_next):
    # Qwen3-Next's q_proj emits N·H queries and N·H gates: 2 · 2048 · 16 · 256 parameters per layer
    from llmath.ops.params import param_report

    by = param_report(qwen3_next.with_layers(4)).by_component
    assert by["attention.q.weight"] == by["attention.gate.weight"] == 2048 * 16 * 256


def test_layouts_refuse_tp_that_does_not_split_the_linear_attention_heads(qwen3_next):
    """Gated DeltaNet shards by key heads (vLLM GatedDeltaNetAttention; the rules: tests/test_hybrid_tp.py):
    tp = 32 does not divide Qwen3-Next's 16 key heads."""
    from llmath.errors import LayoutError

    with pytest.raises(LayoutError, match="must divide the Gated DeltaNet mixer's 16 key heads"):
        analyze(
            qwen3_next,
            "h100-sxm",
            workload=Workload(batch=8, prompt=64, gen=8),
            parallel=ParallelConfig(gpus=32, tp=32),
        )


def test_analysis_reports_fixed_state_and_kv_growth(qwen3_next):
    a = analyze(qwen3_next, None, workload=Workload(batch=2, prompt=128, gen=8)).to_dict()
    assert a["state"]["fixed_bytes_per_sequence"] == 2 * 19_759_104
    assert a["state"]["kv_growth_bytes_per_token"] == 2 * 12_288


# The flagship checkpoints bundled in data/models (index.json gives each file's source): llmath's count
# against the total their authors publish, which is rounded to whole billions.
PUBLISHED = [
    # Qwen3-Next-80B-A3B-Instruct model card: "80B in total and 3B activated"
    ("qwen3-next-80b-a3b-instruct", 80e9, True),
    # MiniMax-Text-01 model card: "Total Parameters: 456B"
    ("minimax-text-01-hf", 456e9, True),
    # MoonshotAI/Kimi-Linear README: 48B total; the file gives 49.12B, 48.37B without the two
    # 163840 x 2304 embedding tables, which is the figure that rounds to 48B
    ("kimi-linear-48b-a3b-instruct", 48e9, False),
]


@pytest.mark.parametrize("name,published,with_embeddings", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_bundled_flagships_match_their_published_totals(name, published, with_embeddings):
    from llmath.model import registry
    from llmath.ops.params import param_report

    spec = registry.spec(name)
    total = param_report(spec).total
    if not with_embeddings:
        total -= 2 * spec.vocab_size * spec.d_model
    assert abs(total - published) < 0.5e9, (name, total)
