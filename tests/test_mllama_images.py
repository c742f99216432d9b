"""Llama 3.2 Vision (mllama) requests with images: the vision encoder pass (ops/vision_mllama.py), the
cross-attention layers' K/V projected once into the cross cache and their work in prefill and decode
(ops/vision_cross.py), against transformers 5.23 on CPU. The meta device cannot run it: the vision model
builds its attention mask from the aspect-ratio mask's values and the text model picks the rows that see an
image from the cross-attention mask's (data-dependent), so the tiny models below run for real."""

from __future__ import annotations

import json

import pytest
from helpers import matmul_flops

from llmath import Workload
from llmath.deploy.layout import ParallelConfig
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate

pytest.importorskip("torch")
pytest.importorskip("transformers")

# a tile of 28 x 28 pixels in patches of 14: 4 patches + the class token = 5 positions, padded to 8; 2 tiles
VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_global_layers=1, attention_heads=2,
              image_size=28, patch_size=14, max_num_tiles=2, vision_output_dim=64, intermediate_layers_indices=[0],
              supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]])  # fmt: skip
TEXT = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=300, cross_attention_layers=[1], pad_token_id=0, bos_token_id=1, eos_token_id=2)  # fmt: skip
B, P = 2, 7


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import MllamaConfig, MllamaForConditionalGeneration

    cfg = MllamaConfig(vision_config=VISION, text_config=TEXT, image_token_index=299)
    path = tmp_path_factory.mktemp("mllama") / "config.json"
    cfg.to_json_file(path, use_diff=False)
    model = MllamaForConditionalGeneration._from_config(cfg, attn_implementation="eager").eval()
    return model, spec_from_config(json.loads(path.read_text()), "mllama")


def _run(model, images: int):
    """FLOPs of transformers' prefill (pixels through the vision tower and projector, then the text model
    with every token seeing every image) and of one decode step, and the cache elements after the prefill."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    tiles = VISION["max_num_tiles"]
    pixels = dict(
        pixel_values=torch.randn(B, images, tiles, 3, 28, 28),
        aspect_ratio_ids=torch.full((B, images), 2, dtype=torch.long),  # [1, 2]: both tiles used
        aspect_ratio_mask=torch.ones(B, images, tiles, dtype=torch.long),
    )
    ids = torch.randint(3, 290, (B, P))
    seen = torch.ones(B, P, images, tiles, dtype=torch.long)
    with torch.no_grad():
        with FlopCounterMode(display=False) as prefill:
            out = model(input_ids=ids, cross_attention_mask=seen, use_cache=True, logits_to_keep=1, **pixels)
        held = sum(layer.keys.numel() + layer.values.numel() for layer in out.past_key_values.layers)
        with FlopCounterMode(display=False) as decode:
            model(input_ids=ids[:, :1], past_key_values=out.past_key_values, cross_attention_mask=seen[:, -1:],
                  use_cache=True)  # fmt: skip
    return prefill.get_total_flops(), decode.get_total_flops(), held


@pytest.mark.parametrize("images", [1, 2])
def test_image_request_flops_and_cross_cache_equal_transformers(tiny, images):
    model, spec = tiny
    v = spec.vision
    # vision tokens per image: 2 tiles x (4 patches + class token) = 10; the encoder runs 2 x 8 padded positions
    assert (v.tokens_per_image, v.encoder_positions) == (10, 16)
    hf_prefill, hf_decode, held = _run(model, images)
    src = images * v.tokens_per_image
    vision = matmul_flops(spec, "vision", Scenario(B * images, v.encoder_positions))
    assert vision + matmul_flops(spec, "prefill", Scenario(B, P, src=src)) == hf_prefill
    assert matmul_flops(spec, "decode", Scenario(B, 1, P, src=src)) == hf_decode
    # the cache after the prefill: 2 self-attention layers of P positions and the cross layer's src vision tokens,
    # K and V of 2 heads x 16 each: elements B·(2·P + src)·2·2·16
    written = sum(c.values.get("kv_write", 0) for c in evaluate(build_ops(spec, "prefill", "eager"),
                                                                 Scenario(B, P, src=src), spec))  # fmt: skip
    assert written == held == B * (2 * P + src) * 2 * 2 * 16


def test_text_only_request_runs_no_cross_layer_work(tiny):
    _, spec = tiny
    ops = build_ops(spec, "prefill", "eager")
    cross = [c for c in evaluate(ops, Scenario(B, P), spec) if c.op.name.startswith("xattn.")]
    assert cross and all(not any(c.values.values()) for c in cross)


def test_analyze_with_images_adds_the_vision_pass_and_the_cross_cache(tiny, tmp_path, capsys):
    from helpers import run_cli

    import llmath
    from llmath.errors import LayoutError, WorkloadError

    _, spec = tiny
    text, two = (llmath.analyze(spec, "h100-sxm", workload=Workload(prompt=P, gen=4, images=i)) for i in (0, 2))
    assert text.vision is None and "cross_bytes" not in text.kv_cache
    # 2 images x 10 vision tokens; the cross layer's K and V of 2 heads x 16 in bf16: 20 x 2 x 2 x 16 x 2 B
    assert two.kv_cache["source_positions"] == 20 and two.kv_cache["cross_bytes"] == 20 * 2 * 2 * 16 * 2
    assert two.generation["ttft_s"] == pytest.approx(two.vision.time_s + two.prefill.time_s)
    assert two.prefill.flops["matmul"] > text.prefill.flops["matmul"]  # the cross layer runs
    with pytest.raises(LayoutError, match="one device"):
        llmath.analyze(spec, "h100-sxm", workload=Workload(prompt=P, gen=4, images=1), parallel=ParallelConfig(tp=2))
    with pytest.raises(WorkloadError, match="has no image encoder"):
        llmath.analyze("llama-3-8b", "h100-sxm", workload=Workload(prompt=P, gen=4, images=1))
    path = tmp_path / "mllama.json"
    model, _ = tiny
    model.config.to_json_file(path, use_diff=False)
    code, out, err = run_cli(capsys, "analyze", str(path), "-H", "h100-sxm", "--prompt", str(P), "--gen", "4",
                             "--images", "2", "--json")  # fmt: skip
    d = json.loads(out)
    assert code == 0, err
    assert d["workload"]["images"] == 2 and d["vision_s"] == pytest.approx(two.vision.time_s) and "vision" in d
