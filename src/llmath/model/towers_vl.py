"""Vision towers of the Qwen-VL, Llama-4 and GOT-OCR2 wrappers, counted from ``vision_config`` the way
transformers 5.23 builds them (modeling_qwen2_vl.py, modeling_qwen2_5_vl.py, modeling_qwen3_vl.py,
modeling_llama4.py, modeling_got_ocr2.py); :mod:`llmath.model.towers` merges these rows into its tables and
``tests/test_multimodal.py`` proves each against the meta-device module.

The Qwen-VL patch mergers (and Qwen3-VL's DeepStack mergers) are built by the vision config inside the
vision module; they are reported as ``projector``, the role they play.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Counts = dict[str, int]
Cfg = Mapping[str, Any]


def vit_layer(D: int, F: int, *, bias: bool = True, gated: bool = False, norm: int = 2) -> int:
    """One pre-norm encoder layer of width ``D``: two norms (``norm`` parameters per element), fused or
    separate q/k/v plus an output projection (biases when ``bias``), an MLP fc1/fc2 of width ``F`` with
    biases, or (``gated``) gate/up/down with biases."""
    attn = 4 * D * D + (4 * D if bias else 0)
    ffn = 3 * D * F + 2 * F + D if gated else 2 * D * F + F + D
    return 2 * norm * D + attn + ffn


def _merger(ctx: int, m: int, out: int, norm: int) -> int:
    """Norm over ``ctx`` (``norm`` parameters per element), then Linear(ctx·m², ctx·m²) and
    Linear(ctx·m², out), both with biases."""
    h = ctx * m * m
    return norm * ctx + h * h + h + h * out + out


def _patch(v: Cfg, width: int) -> int:
    """The 3-D patch conv's weights (in_chans is the older files' spelling of in_channels)."""
    c = v.get("in_channels") or v.get("in_chans") or 3
    return c * v["temporal_patch_size"] * v["patch_size"] ** 2 * width


def qwen2_vl(v: Cfg) -> Counts:
    """Qwen2-VL: a 3-D patch conv (temporal × spatial, no bias), LayerNorm blocks with a fused biased qkv and
    an fc1/fc2 MLP of ``mlp_ratio`` × width, a LayerNorm patch merger to ``hidden_size``."""
    E, m = v["embed_dim"], v["spatial_merge_size"]
    return {
        "vision.embeddings": _patch(v, E),
        "vision.layers": v["depth"] * vit_layer(E, int(E * v["mlp_ratio"])),
        "projector": _merger(E, m, v["hidden_size"], 2),
    }


def qwen2_5_vl(v: Cfg) -> Counts:
    """Qwen2.5-VL: RMSNorm blocks with a gated biased MLP and an RMSNorm merger to ``out_hidden_size``."""
    D, m = v["hidden_size"], v["spatial_merge_size"]
    return {
        "vision.embeddings": _patch(v, D),
        "vision.layers": v["depth"] * vit_layer(D, v["intermediate_size"], gated=True, norm=1),
        "projector": _merger(D, m, v["out_hidden_size"], 1),
    }


def qwen3_vl(v: Cfg) -> Counts:
    """Qwen3-VL: a biased patch conv, a learned position table, LayerNorm blocks, a LayerNorm merger and one
    DeepStack merger per ``deepstack_visual_indexes`` entry (its LayerNorm over the merged width)."""
    D, m, out = v["hidden_size"], v["spatial_merge_size"], v["out_hidden_size"]
    deep = len(v.get("deepstack_visual_indexes") or ())
    return {
        "vision.embeddings": _patch(v, D) + D + v["num_position_embeddings"] * D,
        "vision.layers": v["depth"] * vit_layer(D, v["intermediate_size"]),
        "projector": _merger(D, m, out, 2) + deep * _merger(D * m * m, 1, out, 2),
    }


def llama4_vision(v: Cfg) -> Counts:
    """Llama-4's vision encoder: an unbiased patch linear, class token and (image/patch)² + 1 positions,
    LayerNorms before and after the layers, and the pixel-shuffle adapter MLP (fc1 from
    ``intermediate_size`` to ``projector_input_dim``, fc2 square in ``projector_output_dim``, no biases)."""
    D, p, img = v["hidden_size"], v["patch_size"], v["image_size"]
    out = v["projector_output_dim"]
    return {
        "vision.embeddings": v["num_channels"] * p * p * D + D + ((img // p) ** 2 + 1) * D,
        "vision.layers": v["num_hidden_layers"] * vit_layer(D, v["intermediate_size"]),
        "vision.norm": 4 * D,
        "vision.adapter": v["intermediate_size"] * v["projector_input_dim"] + out * out,
    }


def got_ocr2_vision(v: Cfg) -> Counts:
    """GOT-OCR2's SAM-style encoder: an absolute position grid, a biased patch conv, LayerNorm layers with
    a fused qkv (bias per ``qkv_bias``), relative position tables per layer (2·w − 1 rows of head width,
    w the window, or the whole grid on ``global_attn_indexes`` layers), then the neck: 1×1 and 3×3 convs
    without bias to ``output_channels``, each followed by a LayerNorm."""
    D, p, img, L = v["hidden_size"], v["patch_size"], v["image_size"], v["num_hidden_layers"]
    grid, hd, C = img // p, D // v["num_attention_heads"], v["output_channels"]
    rel = 0
    if v.get("use_rel_pos", True):
        glob = set(v.get("global_attn_indexes") or ())
        rel = sum(2 * (2 * (grid if i in glob else v["window_size"]) - 1) * hd for i in range(L))
    qkv_bias = 3 * D if v.get("qkv_bias", True) else 0
    layer = 4 * D + 4 * D * D + qkv_bias + D + 2 * D * v["mlp_dim"] + v["mlp_dim"] + D
    return {
        "vision.embeddings": (grid * grid * D if v.get("use_abs_pos", True) else 0) + v["num_channels"] * p * p * D + D,
        "vision.layers": L * layer + rel,
        "vision.neck": C * D + 2 * C + 9 * C * C + 2 * C,
    }


def got_ocr2_projector(cfg: Cfg, vision: Cfg, dt: int) -> int:
    """Two stride-2 3×3 convs without bias (channels → 2·channels → text width), then Linear(dt, dt)."""
    C = vision["output_channels"]
    return 9 * C * 2 * C + 9 * 2 * C * dt + dt * dt + dt


_QWEN = dict(patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
_QWEN3 = dict(_QWEN, depth=27, hidden_size=1152, intermediate_size=4304, patch_size=16, out_hidden_size=3584,
              num_position_embeddings=2304)  # fmt: skip
_LLAMA4 = dict(hidden_size=768, num_hidden_layers=34, num_channels=3, intermediate_size=5632, image_size=448,
               patch_size=14, projector_input_dim=4096, projector_output_dim=4096, vision_output_dim=7680)  # fmt: skip
_GOT_OCR2 = dict(hidden_size=768, output_channels=256, num_hidden_layers=12, num_attention_heads=12, num_channels=3,
                 image_size=1024, patch_size=16, window_size=14, mlp_dim=3072,
                 global_attn_indexes=[2, 5, 8, 11])  # fmt: skip
# Defaults of the transformers 5.23 vision config classes, for keys a hub file leaves out.
DEFAULTS: dict[str, dict[str, Any]] = {
    "qwen2_vl_vision": dict(_QWEN, depth=32, embed_dim=1280, hidden_size=3584, mlp_ratio=4),
    "qwen2_5_vl_vision": dict(_QWEN, depth=32, hidden_size=3584, intermediate_size=3420, out_hidden_size=3584),
    "qwen3_vl_vision": _QWEN3,
    "qwen3_vl_moe_vision": _QWEN3,
    "cohere_compass_vision": _QWEN3,  # configuration_cohere_compass.py: the same defaults
    "qwen4_exp_vision": _QWEN3,  # Qwen4ExpVisionConfig: Qwen3.5-MoE's vision config, Qwen3-VL's defaults
    "llama4_vision_model": _LLAMA4,
    "got_ocr2_vision": _GOT_OCR2,
}

VISION: dict[str, Callable[[Cfg], Counts]] = {
    "qwen2_vl_vision": qwen2_vl,
    "qwen2_5_vl_vision": qwen2_5_vl,
    "qwen3_vl_vision": qwen3_vl,
    "qwen3_vl_moe_vision": qwen3_vl,
    # Cohere Compass (North-Micro-Vision): transformers' CohereCompassVisionModel is Qwen3-VL's vision model
    # (modeling_cohere_compass.py CohereCompassVisionModel(Qwen3VLVisionModel))
    "cohere_compass_vision": qwen3_vl,
    "qwen4_exp_vision": qwen3_vl,  # Qwen3-VL's vision model without DeepStack mergers (modeling_qwen4_exp.py)
    "llama4_vision_model": llama4_vision,
    "got_ocr2_vision": got_ocr2_vision,
}

# wrapper -> its projector outside the vision module, from (wrapper config, vision config, text width)
PROJECTORS: dict[str, Callable[[Cfg, Cfg, int], int]] = {
    "qwen2_vl": lambda c, v, dt: 0,  # the patch merger is built inside the vision module (counted there)
    "qwen2_5_vl": lambda c, v, dt: 0,
    "qwen3_vl": lambda c, v, dt: 0,
    "qwen3_vl_moe": lambda c, v, dt: 0,
    "cohere_compass": lambda c, v, dt: 0,
    "qwen4_exp": lambda c, v, dt: 0,
    "llama4": lambda c, v, dt: v["vision_output_dim"] * dt,  # multi_modal_projector.linear_1, no bias
    "got_ocr2": got_ocr2_projector,
}
WRAPPER_TIES = {"qwen2_vl": False, "qwen2_5_vl": False, "qwen3_vl": False, "qwen3_vl_moe": False,
                "qwen4_exp": False, "llama4": False, "got_ocr2": True, "cohere_compass": False}  # fmt: skip

# wrappers without a vision sub-config whose image path is one layer of the wrapper itself: Fuyu embeds
# raw patches with Linear(patch_size²·num_channels, text width) with bias (modeling_fuyu.py)
PATCH_ONLY: dict[str, Callable[[Cfg, int], Counts]] = {
    "fuyu": lambda c, dt: {
        "vision.embeddings": (c.get("patch_size") or 30) ** 2 * (c.get("num_channels") or 3) * dt + dt
    },
}

# Wrappers whose hub files keep the language model's keys at the top level (no text_config): the text
# model_type transformers builds from them (configuration_qwen2_vl.py, configuration_qwen2_5_vl.py)
FLAT_WRAPPERS = {"qwen2_vl": "qwen2_vl_text", "qwen2_5_vl": "qwen2_5_vl_text"}
# vision_config model_types that hub files write (the wrapper's own name) -> the vision config kind
VISION_ALIASES = {
    "qwen2_vl": "qwen2_vl_vision",
    "qwen2_5_vl": "qwen2_5_vl_vision",
    "qwen3_vl": "qwen3_vl_vision",
    "qwen3_vl_moe": "qwen3_vl_moe_vision",
    "cohere_compass": "cohere_compass_vision",  # configuration_cohere_compass.py renames it so too
}

# Qwen3.5 (and its MoE): Qwen3-VL's vision tower and merger without DeepStack mergers (Qwen3_5VisionConfig has
# no deepstack_visual_indexes; modeling_qwen3_5.py), the same defaults; no separate projector, LM head untied
VISION.update({"qwen3_5_vision": qwen3_vl, "qwen3_5_moe_vision": qwen3_vl})
DEFAULTS.update({"qwen3_5_vision": _QWEN3, "qwen3_5_moe_vision": _QWEN3})
PROJECTORS.update({"qwen3_5": lambda c, v, dt: 0, "qwen3_5_moe": lambda c, v, dt: 0})
WRAPPER_TIES.update({"qwen3_5": False, "qwen3_5_moe": False})
