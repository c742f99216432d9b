"""Every registry model, built by transformers on the meta device from the very config.json llmath reads:
the exact total and the per-component counts must equal the module's parameters."""

import pytest
from helpers import coarse_hf, coarse_llmath, registry_config

from llmath.model import registry
from llmath.model.hf import spec_from_config
from llmath.ops.params import param_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402

# model_types transformers 5.23 has no class for: llmath's original Transformer (tests/test_encoder_decoder.py) and
# Nemotron-NAS, remote code (tests/test_nemotron_nas.py proves its count by arithmetic)
NO_CLASS = {"transformer", "nemotron-nas"}
HF_NAMES = [n for n in registry.names() if registry_config(n)["model_type"] not in NO_CLASS]

# transformers 5.23's T5Config forces tie_word_embeddings=True (configuration_t5.py: "we tie weights always
# and force it to be True"); the released T5 v1.1 / Flan-T5 checkpoints keep a separate lm_head
# (V x d), and their config.json says tie_word_embeddings=false. llmath follows the file.
UNTIED_IN_FILE_TIED_IN_HF = {"flan-t5-base"}


@pytest.mark.parametrize("name", HF_NAMES, ids=str)
def test_params_equal_transformers(name):
    cfg = registry_config(name)
    rep = param_report(spec_from_config(cfg, name))
    model = oracle.build_meta(oracle.hf_config(cfg))
    hf_total = oracle.count_params(model)
    if name in UNTIED_IN_FILE_TIED_IN_HF:
        d, V = cfg["d_model"], cfg["vocab_size"]
        assert rep.total == hf_total + V * d
        return
    assert rep.total == hf_total
    hf_groups: dict[str, int] = {}
    seen = set()
    for n, p in model.named_parameters():  # named_parameters() yields a shared tensor once
        if id(p) in seen:
            continue
        seen.add(id(p))
        g = coarse_hf(n)
        hf_groups[g] = hf_groups.get(g, 0) + p.numel()
    ours: dict[str, int] = {}
    for k, v in rep.by_component.items():
        g = coarse_llmath(k)
        ours[g] = ours.get(g, 0) + v
    ours = {k: v for k, v in ours.items() if v}
    assert ours == hf_groups


def test_registry_names_unique_and_sourced():
    idx = registry.index()
    assert len(idx) >= 40
    for name, entry in idx.items():
        assert entry.get("source"), name
        assert name == name.lower() and "/" not in name
        registry_config(name)  # the snapshot exists and parses


def _one_per_model_type() -> list[str]:
    seen, out = set(), []
    for n in HF_NAMES:
        mt = registry_config(n)["model_type"]
        if mt not in seen and n not in UNTIED_IN_FILE_TIED_IN_HF:
            seen.add(mt)
            out.append(n)
    return out


@pytest.mark.parametrize("name", _one_per_model_type(), ids=str)
def test_config_vintages_without_optional_keys(name):
    """Older hub files omit keys that newer ones spell out: without tie_word_embeddings (each
    transformers config class has its own default) and with torch_dtype renamed dtype, the count
    still equals transformers'."""
    cfg = registry_config(name)
    cfg.pop("tie_word_embeddings", None)
    if "torch_dtype" in cfg:
        cfg["dtype"] = cfg.pop("torch_dtype")
    # t5, bart, whisper: their layer counts have aliases; keep them whole. A hybrid_override_pattern (Nemotron-H)
    # is the layer count itself (transformers 5.23 derives num_hidden_layers from it), so a shorter count would
    # contradict it: keep those whole too.
    if cfg["model_type"] not in ("t5", "bart", "whisper") and "hybrid_override_pattern" not in cfg:
        for k in ("num_hidden_layers", "n_layer", "num_layers"):
            if k in cfg:
                cfg[k] = min(cfg[k], 4)
        if isinstance(cfg.get("layer_types"), list):
            cfg["layer_types"] = cfg["layer_types"][:4]
        sub = cfg.get("linear_attn_config")
        if isinstance(sub, dict):  # Kimi-Linear's 1-based layer lists
            cfg["linear_attn_config"] = {
                k: [i for i in v if i <= 4] if k.endswith("_layers") else v for k, v in sub.items()
            }
    model = oracle.build_meta(oracle.hf_config(cfg))
    assert param_report(spec_from_config(cfg, name)).total == oracle.count_params(model)
