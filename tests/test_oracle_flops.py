"""FLOPs and KV bytes proven against the real transformers module on the meta device.

For one registry model of every model_type (and both Falcon architectures), with the first few layers
(per-layer costs do not depend on depth; enough layers are kept to include every layer kind), the matmul
FLOPs that ``torch.utils.flop_counter.FlopCounterMode`` counts for a prefill and for one decode step, at
batch 1 and 8, must equal llmath's ``eager`` operator list; the bytes of the tensors in transformers'
cache after the prefill must equal llmath's KV cache in its ``transformers`` layout.
"""

import pytest
from causal_lm_types import ONE_SEQUENCE
from helpers import registry_config

from llmath.analysis import kv_cache_bytes
from llmath.model import registry
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402

SKIP_TYPES = {"t5", "bart", "transformer", "whisper"}  # encoder-decoder: stages proven in tests/test_encoder_decoder.py
# DBRX's experts loop over the experts hit (torch.nonzero), which the meta device cannot run: proven on a
# small CPU model in tests/test_moe_families.py
SKIP_TYPES |= {"dbrx"}
SKIP_TYPES |= {"nemotron-nas"}  # remote code, no transformers class: proven by arithmetic in tests/test_nemotron_nas.py


def _families() -> list[str]:
    seen, out = set(), []
    for n in registry.names():
        cfg = registry_config(n)
        mt = cfg["model_type"]
        key = (mt, bool(cfg.get("new_decoder_architecture")))
        if mt in SKIP_TYPES or key in seen:
            continue
        seen.add(key)
        out.append(n)
    return out


FAMILIES = _families()


def _keep_layers(spec) -> int:
    # enough layers to reach every kind of layer (dense-first MoE, 1-in-6 full attention, hybrid mixers, ...)
    kinds, n = set(), 0
    for i, k in enumerate(spec.layer_kinds()):
        if k not in kinds:
            kinds.add(k)
            n = i + 1
    return max(n, 2)


def _matmul_flops(spec, stage, B, T, S0):
    return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, "eager"), Scenario(B, T, S0), spec))


# Wrappers whose full model transformers cannot run on meta as it serves: Gemma 4's mask preparation looks for
# packed sequences in the position ids (masking_utils.find_packed_sequence_indices calls .item()); Kimi-K2.5's
# wrapper, built on meta, gives FlopCounterMode no routed-expert matmuls (its prefill came out short by exactly
# top-8 x 3 x 7168 x 2048 x 2 per token), while its DeepSeek-V3 language model alone counts them. Their language
# model runs alone, from the text_config (the stages are the language model's)
TEXT_ONLY = {"gemma4", "kimi_k25"}


@pytest.fixture(scope="module", params=FAMILIES, ids=str)
def family(request):
    name = request.param
    cfg = registry_config(name)
    if cfg["model_type"] in TEXT_ONLY:
        cfg = cfg["text_config"]
    full = spec_from_config(cfg, name)
    n = _keep_layers(full)
    model = oracle.build_meta(oracle.hf_config(cfg, n))
    return name, full.with_layers(n), model


@pytest.mark.parametrize("B", [1, 8])
def test_prefill_and_decode_flops_equal_transformers(family, B):
    name, spec, model = family
    if B > 1 and spec.model_type in ONE_SEQUENCE:
        pytest.skip("transformers' decode step for this family is wrong at batch > 1 (see causal_lm_types)")
    P = 9
    hf_prefill, out = oracle.forward_flops(model, B, P)
    # bf16 cache: 2 bytes per element (measured before the decode step grows the cache in place)
    past = oracle.past_of(out)
    assert kv_cache_bytes(spec, B, P, Precision(), layout="transformers") == oracle.cache_bytes(past, 2, model=model)
    hf_decode, _ = oracle.forward_flops(model, B, 1, past=past, seen=P)
    assert _matmul_flops(spec, "prefill", B, P, 0) == hf_prefill
    assert _matmul_flops(spec, "decode", B, 1, P) == hf_decode


def test_sliding_window_beyond_the_window():
    """gpt-oss alternates 128-token sliding layers with full ones; prompt longer than the window."""
    cfg = registry_config("gpt-oss-20b")
    spec = spec_from_config(cfg, "gpt-oss-20b").with_layers(2)
    assert spec.layer_windows == (128, None)
    model = oracle.build_meta(oracle.hf_config(cfg, 2))
    P = 150
    hf_prefill, out = oracle.forward_flops(model, 2, P)
    # transformers' sliding layer keeps W - 1 = 127 positions, the full layer all 150
    assert kv_cache_bytes(spec, 2, P, Precision(), layout="transformers") == oracle.cache_bytes(out.past_key_values, 2)
    hf_decode, _ = oracle.forward_flops(model, 2, 1, past=out.past_key_values)
    assert _matmul_flops(spec, "prefill", 2, P, 0) == hf_prefill
    assert _matmul_flops(spec, "decode", 2, 1, P) == hf_decode


def test_falcon_cache_layout_differs_from_serving():
    """transformers' Falcon (new architecture) caches K/V broadcast to all N query heads; serving engines
    cache the K KV heads. llmath's default models the serving engine."""
    spec = registry.spec("falcon-40b")
    N, K = spec.n_heads, spec.n_kv_heads  # 128, 8
    p = Precision()
    serving = kv_cache_bytes(spec, 1, 100, p)
    hf = kv_cache_bytes(spec, 1, 100, p, layout="transformers")
    assert hf == serving * N // K
    # 2 (K and V) x 60 layers x 8 heads x 64 head width x 2 bytes x 100 positions
    assert serving == 2 * 60 * 8 * 64 * 2 * 100


def test_mla_absorbed_decode_differs_from_transformers_by_design():
    """transformers re-expands the latent cache through kv_b_proj for every cached position each decode
    step (eager, proven equal above); serving engines absorb W_UK/W_UV (flash): far fewer FLOPs, the
    same latent cache."""
    spec = registry.spec("deepseek-v3")
    eager = _matmul_flops(spec, "decode", 1, 1, 4096)
    flash = sum(
        c.values.get("flops", 0) for c in evaluate(build_ops(spec, "decode", "flash"), Scenario(1, 1, 4096), spec)
    )
    assert flash < eager / 5
    # latent cache: (kv_lora_rank 512 + rope 64) x 61 layers x 2 bytes per position
    assert kv_cache_bytes(spec, 1, 1, Precision()) == (512 + 64) * 61 * 2


@pytest.mark.parametrize(
    "name,extra",
    [
        ("gemma-2-2b", {}),
        ("gemma-3-1b-pt", {}),
        ("gpt-oss-20b", {}),
        ("mistral-7b-v0.1", {}),
        ("qwen2.5-0.5b", {"use_sliding_window": True, "max_window_layers": 10, "sliding_window": 4096}),
        ("qwen3-0.6b", {"use_sliding_window": True, "max_window_layers": 20, "sliding_window": 4096}),
    ],
)
def test_window_patterns_without_layer_types(name, extra):
    """Older files have no layer_types: llmath derives the sliding layers as transformers' config does."""
    cfg = registry_config(name)
    cfg.pop("layer_types", None)
    cfg.update(extra)
    hf = oracle.hf_config(cfg)
    types = getattr(hf, "layer_types", None) or ["sliding_attention"] * hf.num_hidden_layers
    ours = spec_from_config(cfg, name).layer_windows
    assert [w is not None for w in ours] == [t == "sliding_attention" for t in types]
