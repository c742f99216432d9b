"""Short-conv and recurrent mixers (ops/recurrent.py): LFM2, RecurrentGemma, RWKV-4, xLSTM. Their bundled
checkpoints against published totals, their per-sequence state, and where eager (transformers' torch code)
and flash (fused serving kernels) differ and why. Arithmetic in the comments; the oracle tests
(test_oracle_causal_lm.py, test_oracle_params.py) prove them against transformers on the meta device."""

from __future__ import annotations

import pytest
from helpers import registry_config

from llmath import Workload
from llmath.analysis import analyze, kv_cache_bytes
from llmath.deploy.layout import ParallelConfig
from llmath.errors import LayoutError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report
from llmath.ops.state import fixed_state_elements, kv_elements_per_position


def _spec(name):
    return spec_from_config(registry_config(name), name)


def _total(spec, stage, attention, cls, sc, only=""):
    costs = evaluate(build_ops(spec, stage, attention), sc, spec)
    return sum(c.values.get(cls, 0) for c in costs if c.op.name.startswith(only))


def _diff(spec, stage, cls, sc, only=""):
    """eager − flash, over the operators whose name starts with ``only``."""
    return _total(spec, stage, "eager", cls, sc, only) - _total(spec, stage, "flash", cls, sc, only)


def test_bundled_totals_match_the_published_figures():
    # LFM2-1.2B model card: "Parameters 1,170,340,608"
    assert param_report(_spec("lfm2-1.2b")).total == 1_170_340_608
    # LFM2-8B-A1B model card table: 8.3B total parameters (one decimal)
    assert round(param_report(_spec("lfm2-8b-a1b")).total / 1e9, 1) == 8.3


def test_lfm2_state_is_the_conv_windows_plus_the_attention_cache():
    # LFM2-1.2B: 10 conv layers keep C − 1 = 2 inputs of D = 2048 (serving), 6 attention layers cache
    # K and V of 8 heads · 64 per position: 40,960 fixed elements, 6,144 per position
    s = _spec("lfm2-1.2b")
    assert fixed_state_elements(s) == 10 * 2 * 2048 == 40_960
    assert kv_elements_per_position(s) == {None: 6 * 2 * 8 * 64}
    # transformers' conv cache keeps C = 3 inputs: one more per channel and conv layer
    assert fixed_state_elements(s, "transformers") - fixed_state_elements(s) == 10 * 2048
    # bf16, one sequence of 1000 positions: 2 · (40,960 + 1000 · 6,144) bytes
    assert kv_cache_bytes(s, 1, 1000, Precision()) == 2 * (40_960 + 1000 * 6_144)


def test_recurrent_states_are_fixed_in_size():
    # RecurrentGemma-9B: 38 layers of (recurrent, recurrent, attention): 26 RG-LRU layers hold the conv
    # window ((4 − 1) · 4096) and the recurrence (4096); 12 local-attention layers of 1 KV head of 256
    # hold at most the 2048-position window
    g = _spec("recurrentgemma-9b")
    assert fixed_state_elements(g) == 26 * (3 * 4096 + 4096)
    assert kv_elements_per_position(g) == {2048: 12 * 2 * 256}
    assert kv_cache_bytes(g, 1, 10_000, Precision()) == kv_cache_bytes(g, 1, 2048, Precision())
    # RWKV-4 14B: 40 layers · (two token-shift vectors + the WKV numerator, denominator, maximum) of 5120
    assert fixed_state_elements(_spec("rwkv-4-14b-pile")) == 40 * 5 * 5120
    # xLSTM-7b: 32 layers · 8 heads · (256 × 512 matrix memory + 256 normaliser + 1 stabiliser)
    x = _spec("xlstm-7b")
    assert fixed_state_elements(x) == 32 * 8 * (256 * 512 + 256 + 1)
    assert kv_elements_per_position(x) == {}


def test_short_conv_eager_computes_the_padding_outputs():
    """transformers' fallback F.conv1d(padding=C − 1) computes T + C − 1 outputs per channel in a
    prefill and 2 in a decode step (the C cached inputs and the new one); causal_conv1d computes T."""
    s = _spec("lfm2-1.2b")
    # 10 conv layers · 2 · D · C · (C − 1) · B = 10 · 2 · 2048 · 3 · 2 · 2
    assert _diff(s, "prefill", "flops", Scenario(2, 9, 0), "mixer") == 10 * 2 * 2048 * 3 * 2 * 2
    assert _diff(s, "decode", "flops", Scenario(2, 1, 9), "mixer") == 10 * 2 * 2048 * 3 * 2


def test_rglru_eager_decode_convolves_elementwise():
    """RecurrentGemma's eager decode step multiplies the conv window by the weight and sums it (no conv
    kernel: FlopCounterMode sees no matmul FLOPs); a fused conv counts 2 · I · C per token as a GEMM."""
    g = _spec("recurrentgemma-9b")
    sc = Scenario(2, 1, 100)
    # 26 layers · 2 · 4096 · 4 · B = 2: matmul FLOPs flash has and eager moves to vector FLOPs
    assert _diff(g, "decode", "flops", sc, "mixer") == -26 * 2 * 4096 * 4 * 2
    assert _diff(g, "decode", "vflops", sc, "mixer") == 26 * 2 * 4096 * 4 * 2


def test_rwkv_eager_loop_moves_the_state_every_token():
    """transformers' CPU WKV loop reads and writes the three state vectors at every token; the WKV CUDA
    kernel keeps them in registers. Same FLOPs, different traffic: 3 · A in and out per token."""
    r = _spec("rwkv-4-14b-pile")
    sc = Scenario(1, 100, 0)
    assert _diff(r, "prefill", "flops", sc) == 0
    assert _diff(r, "prefill", "act_in", sc) == _diff(r, "prefill", "act_out", sc) == 40 * 3 * 5120 * 100


def test_mlstm_eager_chunks_run_the_full_block_flash_the_causal_pairs():
    """transformers' native chunkwise kernel runs whole chunks of Q = 64 over the full Q × Q block and the
    T mod Q remaining tokens step by step; the TFLA kernels run the causal pairs of every chunk."""
    x = _spec("xlstm-7b")
    K, I, H, Q = 2048, 4096, 8, 64
    step = 4 * K * I // H + 2 * K  # k·vᵀ and q·C (2 · K/H · I/H per head each), q·n (2 · K/H per head)
    # eager, T = 73: one chunk (2·Q²·(K+I) + Q·step) and 9 steps; the head runs every position (no
    # logits_to_keep in xLSTMForCausalLM): 73 · 2 · D · V more than flash's last position
    eager = 32 * (2 * Q * Q * (K + I) + Q * step + 9 * step)
    flash = 32 * (73 * step + 2 * (K + I) * (64 * 65 // 2 + 9 * 10 // 2))
    head = 72 * 2 * 4096 * 50304
    assert _diff(x, "prefill", "flops", Scenario(1, 73, 0)) == eager - flash + head
    assert _diff(x, "decode", "flops", Scenario(1, 1, 73)) == 0


def test_recurrentgemma_shards_by_channels():
    # RG-LRU has no engine implementation: llmath splits its channels and gate blocks (deploy/shard_mixers.py,
    # tests/test_tp_rules.py); a tp not dividing the 16 gate blocks is refused
    two = analyze(
        _spec("recurrentgemma-9b"),
        "h100-sxm",
        workload=Workload(batch=8, prompt=64, gen=8),
        parallel=ParallelConfig(gpus=2, tp=2),
    )
    # 38 layers cycling (recurrent, recurrent, attention): 26 RG-LRU layers, each all-reducing B·D = 8·4096
    # bf16 elements after its out_proj in a decode step
    assert two.comm["decode"]["mixer.all_reduce"]["bytes"] == 26 * 8 * 4096 * 2
    with pytest.raises(LayoutError, match="divide the RG-LRU mixer's 16 heads"):
        analyze(
            _spec("recurrentgemma-9b"),
            "h100-sxm",
            workload=Workload(batch=8, prompt=64, gen=8),
            parallel=ParallelConfig(gpus=32, tp=32),
        )


pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.mark.parametrize("prompt", [64, 73, 128])
def test_mlstm_chunkwise_prefill_equals_transformers(prompt):
    """Prompts of whole chunks and a remainder: the native chunkwise kernel plus the step loop, on meta."""
    from llmath.measure import oracle

    cfg = registry_config("xlstm-7b")
    spec = spec_from_config(cfg, "xlstm-7b").with_layers(2)
    flops, _ = oracle.forward_flops(oracle.build_meta(oracle.hf_config(cfg, 2)), 1, prompt)
    assert _total(spec, "prefill", "eager", "flops", Scenario(1, prompt, 0)) == flops
