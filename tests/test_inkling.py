"""Inkling and Inkling-2: the arithmetic that is not obvious from the oracle test alone (which proves params,
eager FLOPs and transformers' cache on the first six layers, tests/test_oracle_causal_lm.py).

Defaults used below (transformers 5.23 configuration_inkling.py / configuration_inkling2.py):
Inkling: D = 6144, 66 layers, every sixth full (11 full, 55 sliding), full K = 8, sliding K = 16, H = 128,
window 512, conv width C = 4. Inkling-2: D = 4608, 48 layers (8 full, 40 sliding), N = 48, K = 8, H = 128,
r = 16, window = rel_extent = 1024, blocks of 6 layers.
"""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.inkling import block_sources
from llmath.ops.state import fixed_state_elements, kv_cache_bytes, kv_growth

pytest.importorskip("transformers")


def _spec(mt: str, tmp_path, **extra):
    return spec_from_config(dict(default_config(mt, str(tmp_path)), **extra), mt)


def test_conv_state_serving_keeps_one_input_less_than_transformers(tmp_path):
    """Four conv windows per layer: K and V (K·H channels each), after attention and after the FFN (D each).
    Channels: sliding 2·16·128 + 2·6144 = 16384, full 2·8·128 + 2·6144 = 14336;
    Σ = 55·16384 + 11·14336 = 901120 + 157696 = 1058816. causal_conv1d (serving) keeps C − 1 = 3 inputs
    per channel, transformers' cache C = 4 (update_conv_state(..., conv_kernel_size))."""
    spec = _spec("inkling_text", tmp_path)
    assert fixed_state_elements(spec) == 3 * 1058816
    assert fixed_state_elements(spec, layout="transformers") == 4 * 1058816


def test_sliding_kv_stops_growing_at_the_window(tmp_path):
    """Per position: full layers 2·K·H = 2·8·128 = 2048 elements × 11 layers = 22528 → 45056 B (2 B each);
    sliding layers 2·16·128 = 4096 × 55 = 225280 elements, held for at most 512 positions:
    225280 · 512 · 2 B = 230686720 B."""
    spec = _spec("inkling_text", tmp_path)
    g = kv_growth(spec, Precision())
    assert g["growth_bytes_per_token"] == 45056
    assert g["window_bytes"] == 230686720
    assert g["windows_full_at"] == 512
    # beyond the window only the full layers grow: 1000 more positions add 1000 · 45056 B per sequence
    grow = kv_cache_bytes(spec, 1, 3000, Precision()) - kv_cache_bytes(spec, 1, 2000, Precision())
    assert grow == 1000 * 45056


def test_block_residual_sources(tmp_path):
    """Layer i closes a block when i ≡ 0 mod 6. Attention inputs of layers 1..47 see ⌈i/6⌉ blocks + the
    running state: m = 2 for i = 1..6, 3 for 7..12, ..., 9 for 43..47; the full layers (i = 5, 11, ..., 47;
    3 queries) one each at m = 2..9, so the sliding ones: 5 per m for m = 2..8 (i = 1,2,3,4,6 at m = 2)
    and 4 at m = 9 (43..46). FFN inputs: m = ⌈(i+1)/6⌉ + 1, six layers at each m = 2..9. Final: ⌈48/6⌉ + 1 = 9."""
    spec = _spec("inkling2_text", tmp_path)
    want = {("attn", 3, m): 1 for m in range(2, 10)}
    want |= {("attn", 1, m): 5 for m in range(2, 9)} | {("attn", 1, 9): 4}
    want |= {("ffn", 1, m): 6 for m in range(2, 10)} | {("final", 1, 9): 1}
    assert block_sources(spec) == want


def test_block_residual_and_relative_logit_flops(tmp_path):
    """Per token: a block residual's SDPA is 2·q·m·D for the scores and as much for the weighted sum;
    Σ over the groups above of 4·q·m·D:
      attention: 3·(2+…+9) = 3·44 = 132, sliding 5·(2+…+8) + 4·9 = 5·35 + 36 = 211; FFN 6·44 = 264;
      final 9 → (132 + 211 + 264 + 9) · 4 · 4608 = 616 · 18432 = 11354112.
    Relative logits: 2·N·r·R = 2·48·16·1024 = 1572864 per token per layer, × 48 layers = 75497472."""
    spec = _spec("inkling2_text", tmp_path)
    vals = evaluate(build_ops(spec, "decode", "flash"), Scenario(1, 1, 100), spec)
    block = sum(c.values.get("flops", 0) for c in vals if c.op.name.startswith("block_res"))
    rel = sum(c.values.get("flops", 0) for c in vals if c.op.name.endswith("rel_logits"))
    assert block == 11354112
    assert rel == 75497472


def test_dynamic_conv_taps_are_a_projection_plus_static_weights(tmp_path):
    """Inkling-2's full layers: weight_proj D -> K·C = 4608 × 8·4 and static taps C × K·H = 4 × 1024, for each
    of K and V: 2 · (4608·32 + 4·1024) = 2 · (147456 + 4096) = 303104 parameters per full layer; the taps
    multiply the window elementwise (no matmul FLOPs beyond weight_proj's 2·D·K·C = 294912 per token)."""
    spec = _spec("inkling2_text", tmp_path)
    ops = tuple(
        op
        for op in build_ops(spec, "decode", "eager")
        if op.window is None and op.name.startswith(("attn.k_conv", "attn.v_conv"))
    )
    assert all(op.count == 8 for op in ops)  # the 8 full layers
    assert sum(op.n_params for op in ops) == 303104
    flops = sum(c.values.get("flops", 0) for c in evaluate(ops, Scenario(1, 1, 10), spec))
    assert flops == 8 * 2 * 294912


def test_bad_layer_type_is_one_clear_error(tmp_path):
    cfg = dict(default_config("inkling_text", str(tmp_path)), layer_types=["sliding_attention"] * 66)
    with pytest.raises(ConfigError, match="'hybrid'.*'hybrid_sliding'"):
        spec_from_config(cfg, "inkling_text")


# the last five have fewer layers than candidate scales: transformers assigns them with scipy's
# linear_sum_assignment, llmath with its own exact assignment (towers_inkling._assign)
@pytest.mark.parametrize(
    "patch,t,layers",
    [(14, 2, 6), (28, 4, 12), (40, 2, 24), (30, 2, 7), (40, 2, 4), (14, 2, 2), (16, 2, 3), (32, 2, 4), (28, 4, 3)],
)
def test_hmlp_vision_scales_and_count_equal_transformers(patch, t, layers):
    """Inkling's HMLP vision tower: llmath's plan of (t, h, w, channels) per layer is transformers'
    ``plan_out_scales``, and the tower's parameters (bias-free projections, RMSNorms) equal its module's."""
    import torch
    from transformers.models.inkling.configuration_inkling import InklingVisionConfig
    from transformers.models.inkling.modeling_inkling import InklingVisionModel, plan_out_scales

    from llmath.model.towers_inkling import hmlp_scales, inkling_towers

    want = [tuple(int(x) for x in row) for row in plan_out_scales(t, patch, layers, 3).tolist()]
    assert hmlp_scales(t, patch, layers, 3) == want
    with torch.device("meta"):
        model = InklingVisionModel(
            InklingVisionConfig(patch_size=patch, temporal_patch_size=t, num_hidden_layers=layers, text_hidden_size=512)
        )
    vision = dict(patch_size=patch, temporal_patch_size=t, n_layers=layers, num_channels=3)
    got = inkling_towers(dict(audio_config={}, vision_config=vision), 512)
    assert got is not None and got["vision.layers"] + got["vision.norm"] == sum(p.numel() for p in model.parameters())


def test_hmlp_with_fewer_layers_than_scales_counts_both_towers(tmp_path):
    """Patch 40 = 2·2·2·5 and temporal patch 2 give 1 + 4 + 1 = 6 candidate scales; with 4 layers transformers
    assigns them with scipy's linear_sum_assignment: the wrapper's towers equal the meta-device module's."""
    from test_multimodal import _build, _hf_towers, _llmath_towers

    cfg = default_config("inkling_mm_model", str(tmp_path))
    cfg["vision_config"] = dict(cfg["vision_config"], n_layers=4)
    spec = spec_from_config(cfg, "inkling_mm_model")
    assert spec.towers_not_counted == () and _llmath_towers(spec) == _hf_towers(_build(cfg))


def test_hmlp_assignment_at_a_tie_is_named_not_counted(tmp_path):
    """Patch 14, temporal patch 4, 4 layers: candidates t·h·w = 1, 49, 196, 392, 784 and ramp steps
    i·ln(14²·4·3)/4 = i·1.9406. Steps 1 (1.941) and 2 (3.881) both lie below ln 49 = 3.892 and ln 196 = 5.278,
    so 1→49, 2→196 costs (3.892 − 1.941) + (5.278 − 3.881) = 3.348, and 1→196, 2→49 the same
    (5.278 − 1.941) + (3.892 − 3.881): transformers' pick rests on float32 rounding, so neither tower is counted."""
    from llmath.model.towers_inkling import hmlp_scales

    assert hmlp_scales(4, 14, 4, 3) is None
    cfg = default_config("inkling_mm_model", str(tmp_path))
    cfg["vision_config"] = dict(cfg["vision_config"], n_layers=4, patch_size=14, temporal_patch_size=4)
    spec = spec_from_config(cfg, "inkling_mm_model")
    assert spec.towers_not_counted == ("audio_config", "vision_config") and spec.tower_params == ()


@pytest.mark.parametrize("mt", ["inkling_text", "inkling2_text"])
def test_a_file_without_the_inkling_keys_reads_the_class_defaults(mt, tmp_path):
    """A hub file may leave out the keys only these families have; transformers then uses its config class's
    defaults, and so does llmath (the parameter count of the module transformers builds from the same file)."""
    from llmath.measure import oracle
    from llmath.ops.params import param_report

    drop = {"swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "d_rel", "rel_extent",
            "conv_kernel_size", "sliding_window_size", "n_shared_experts", "n_layers_per_attn_res_block"}  # fmt: skip
    cfg = {
        k: v for k, v in default_config(mt, str(tmp_path)).items() if k not in drop | {"layer_types", "mlp_layer_types"}
    }
    cfg["num_hidden_layers"] = 6  # the layer patterns derived for 6 layers
    want = oracle.count_params(oracle.build_meta(oracle.hf_config(cfg)))
    assert param_report(spec_from_config(cfg, mt)).total == want
