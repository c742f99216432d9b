"""CPM-Ant's prompt prefix and Phi-4-multimodal's towers, beyond the defaults that
tests/test_oracle_causal_lm.py proves: small configs with the arithmetic written out, options switched on,
and what transformers' CPM-Ant decode step executes that a serving engine does not."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath.analysis import kv_cache_bytes
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.params import param_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402

# D=64, N=4 heads of H=16, F=128, L=2 layers, V=100, 3 prompt positions of 2 prompt types, 2 segment types,
# 8 position buckets
SMALL_CPMANT = dict(hidden_size=64, num_attention_heads=4, dim_head=16, dim_ff=128, num_hidden_layers=2,
                    vocab_size=100, prompt_length=3, prompt_types=2, segment_types=2,
                    position_bias_num_buckets=8)  # fmt: skip


def _cpmant(tmp_path, **extra):
    return dict(default_config("cpmant", str(tmp_path)), **SMALL_CPMANT, **extra)


def _matmul(spec, stage, T, S0, B=1):
    return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, "eager"), Scenario(B, T, S0), spec))


def test_cpmant_prompt_prefix_runs_in_the_prefill_and_stays_cached(tmp_path):
    cfg = _cpmant(tmp_path)
    spec = spec_from_config(cfg, "cpmant")
    # token table (100 + 2·3)·64 = 6784, segments 2·64 = 128, bias (2² + 8)·4 = 48, untied head 100·64 = 6400;
    # per layer 2 norms 2·64, q/k/v/o 4·64·64 = 16384, FFN 3·64·128 = 24576; final norm 64
    assert param_report(spec).total == 6784 + 128 + 48 + 6400 + 2 * (128 + 16384 + 24576) + 64
    assert param_report(spec).total == oracle.count_params(oracle.build_meta(oracle.hf_config(cfg)))
    # prefill of 5 tokens runs 5 + 3 = 8 positions: per layer 2·8·(4·64·64 + 3·64·128) projections and
    # 2 · 2·4·16·8·8 score and context products; the head 2·64·100 for the last position only
    layer = 2 * 8 * (4 * 64 * 64 + 3 * 64 * 128) + 2 * 2 * 4 * 16 * 8 * 8
    assert _matmul(spec, "prefill", 5, 0) == 2 * layer + 2 * 64 * 100
    # the decode step after it attends 5 + 3 + 1 = 9 positions
    step = 2 * (4 * 64 * 64 + 3 * 64 * 128) + 2 * 2 * 4 * 16 * 9
    assert _matmul(spec, "decode", 1, 5) == 2 * step + 2 * 64 * 100
    # the cache holds K and V of 8 positions per layer: 2 layers · 2 · 4·16 · 8 · 2 bytes
    assert kv_cache_bytes(spec, 1, 5, Precision(), layout="transformers") == 2 * 2 * 64 * 8 * 2


def test_cpmant_decode_reembeds_the_whole_sequence_in_transformers_only(tmp_path):
    """CpmAntForCausalLM.prepare_inputs_for_generation hands every decode step the whole input_ids: its
    forward embeds all prompt + S + 1 positions and builds the (prompt + S + 1)² position bias, then keeps
    the last row. Neither is a matmul (FlopCounterMode counts the same FLOPs as a one-token step, proven in
    test_oracle_causal_lm.py); it is an O(S) gather and an O(S²) bias per step that serving engines, which
    feed the new token alone, do not run. llmath's decode step (eager and flash) embeds the new token only."""
    cfg = _cpmant(tmp_path)
    model = oracle.build_meta(oracle.hf_config(cfg))
    seen: list[tuple[int, ...]] = []
    model.cpmant.input_embedding.register_forward_hook(lambda m, i, o: seen.append(tuple(i[0].shape)))
    _, out = oracle.forward_flops(model, 1, 5)
    oracle.forward_flops(model, 1, 1, past=oracle.past_of(out), seen=5)
    assert seen == [(1, 3 + 5), (1, 3 + 5 + 1)]
    spec = spec_from_config(cfg, "cpmant")
    for attention in ("eager", "flash"):
        tokens = next(c for c in evaluate(build_ops(spec, "decode", attention), Scenario(1, 1, 5), spec)
                      if c.op.name == "embed.tokens")  # fmt: skip
        assert tokens.values["weight"] == 64  # one row of D = 64 elements


@pytest.mark.parametrize(
    "vision,audio",
    [
        ({}, {}),
        ({"num_hidden_layers": 2, "image_size": 224, "patch_size": 16},
         {"num_blocks": 2, "time_reduction": 4, "bias_symmetric": True, "downsample_rate": 2, "kernel_size": 5,
          "depthwise_multiplier": 2, "nemo_final_size": 20, "intermediate_size": 512}),
    ],
)  # fmt: skip
def test_phi4_multimodal_towers_equal_transformers(tmp_path, vision, audio):
    cfg = default_config("phi4_multimodal", str(tmp_path))
    cfg["vision_config"] = dict(cfg["vision_config"], **vision)
    cfg["audio_config"] = dict(cfg["audio_config"], **audio)
    model = oracle.build_meta(oracle.hf_config(cfg))
    parts = {"vision": 0, "audio": 0, "projector": 0}
    for n, p in model.named_parameters():
        if ".embed_tokens_extend." in n:
            key = "vision" if ".img_processor." in n else "audio" if ".audio_embed.encoder." in n else "projector"
            parts[key] += p.numel()
    towers = param_report(spec_from_config(cfg, "phi4_multimodal")).towers
    assert towers == parts
