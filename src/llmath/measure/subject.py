"""What a validation run times: the model's config (registry, file, dict, or a tiny variant), its layers cut
to fit the free memory, the transformers model with random weights, and the hardware it is predicted on."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmath.errors import ConfigError, HardwareError, LLMathError, WorkloadError

# a tiny Llama-shaped model for quick runs (seconds on a laptop CPU)
TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 704,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": 2048,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "rope_theta": 10000.0,
    "attention_bias": False,
    "mlp_bias": False,
}
_SHRINKABLE = ("llama", "mistral", "qwen2", "qwen3")


def _model_config(model) -> tuple[str, dict[str, Any], str]:
    """(name, config.json dict, source) from a registry name, a config.json path or a dict."""
    from llmath.model import registry
    from llmath.model.hf import read_config

    if model is None:
        return "tiny-llama", dict(TINY_LLAMA), "llmath built-in tiny Llama config"
    if isinstance(model, Mapping):
        cfg = dict(model)
        return str(cfg.get("_name_or_path") or cfg.get("model_type") or "config"), cfg, "config dict"
    if not isinstance(model, str):
        raise WorkloadError(f"model={model!r} must be a registry name, a config.json path or a config dict")
    if model in registry.index():
        return model, registry.config(model), registry.info(model).get("source", "")
    p = Path(model)
    if p.suffix == ".json" or p.is_dir() or p.exists():
        cfg = read_config(p)
        stem = p.parent.name if p.name == "config.json" else (p.name if p.is_dir() else p.stem)
        return stem, cfg, str(p)
    raise registry.unknown_model(model)


def _with_layers(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    out = copy.deepcopy(dict(cfg))
    for k in ("num_hidden_layers", "n_layer", "num_layers"):
        if k in out:
            out[k] = n
    if isinstance(out.get("layer_types"), list):
        out["layer_types"] = out["layer_types"][:n]
    return out


def _n_layers(cfg: Mapping[str, Any]) -> int | None:
    for k in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(cfg.get(k), int):
            return cfg[k]
    return None


def _tiny_variant(name: str, cfg: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
    """The model's own architecture at tiny sizes (Llama-like types), else the built-in tiny Llama."""
    if cfg.get("model_type") in _SHRINKABLE and all(
        k in cfg for k in ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size")
    ):
        out = _with_layers(cfg, 2)
        for k in (
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "vocab_size",
            "tie_word_embeddings",
        ):
            if k in TINY_LLAMA:
                out[k] = TINY_LLAMA[k]
        out.pop("rope_scaling", None)
        out["max_position_embeddings"] = TINY_LLAMA["max_position_embeddings"]
        out.pop("sliding_window", None)
        out["use_sliding_window"] = False
        return f"{name} (tiny: 2 layers, hidden 256)", out, "its config at tiny sizes"
    return "tiny-llama", dict(TINY_LLAMA), f"built-in tiny Llama (quick run; {name}'s type is not shrunk)"


def _resolve_hardware(hardware, device: str, dtype: str, quick: bool, progress: bool):
    """(Hardware, profile dict or None, how it was obtained)."""
    from llmath import hardware as hwmod
    from llmath.measure.calibrate import calibrate

    if hardware is None:
        prof = calibrate(device=device, dtypes=[dtype], quick=quick, progress=progress)
        return hwmod.from_dict(prof, "calibration"), prof, "calibrated now (no --hardware given)"
    if isinstance(hardware, hwmod.Hardware):
        return hardware, None, "given"
    if isinstance(hardware, Mapping):
        return hwmod.from_dict(dict(hardware), "hardware profile"), dict(hardware), "given profile"
    if isinstance(hardware, str | Path):
        h = hwmod.get(str(hardware))
        return h, None, f"{hardware}"
    raise HardwareError(f"hardware={hardware!r} must be a profile dict, a file path or a registry name")


def _fit_layers(
    cfg: dict[str, Any], name: str, device: str, dtype: str, max_batch: int, max_ctx: int, max_prompt: int
) -> tuple[dict[str, Any], str | None]:
    """The config, with fewer layers if the whole model would not fit in 60% of the free memory."""
    from llmath.analysis import activation_peak_bytes, kv_cache_bytes
    from llmath.measure.calibrate import available_memory_bytes
    from llmath.model.dtypes import Precision
    from llmath.model.hf import spec_from_config
    from llmath.ops.params import param_report

    p = Precision.uniform(dtype)
    budget = 0.6 * available_memory_bytes(device)

    def need(c):
        s = spec_from_config(c, name=name)
        w = param_report(s).total * p.weight_bytes
        kv = kv_cache_bytes(s, max_batch, max_ctx + 2, p, layout="transformers") * 2  # a copy while growing
        act = float(activation_peak_bytes(s, 1, max_prompt, "eager", p)) * 4  # fp32 softmax, temporaries
        return w + kv + act

    L = _n_layers(cfg)
    if need(cfg) <= budget:
        return cfg, None
    if L is None or L <= 1:
        raise WorkloadError(
            f"{name} needs about {need(cfg) / 1e9:.1f} GB in {dtype} but {budget / 1e9:.1f} GB is available; "
            "pick a smaller model or --quick"
        )
    n = L
    while n > 1 and need(_with_layers(cfg, n)) > budget:
        n -= 1
    c = _with_layers(cfg, n)
    if need(c) > budget:
        raise WorkloadError(
            f"{name} does not fit even with 1 layer ({need(c) / 1e9:.1f} GB > {budget / 1e9:.1f} GB available in "
            f"{dtype}); pick a smaller model or --quick"
        )
    return c, f"{L} layers do not fit in {budget / 1e9:.1f} GB (60% of free memory): timed with {n} of {L} layers"


def build_model(cfg: Mapping[str, Any], device: str, dtype: str):
    """A transformers causal LM with random weights, eager attention, eval mode, on ``device``."""
    from llmath.measure.calibrate import _torch, torch_dtype
    from llmath.measure.oracle import hf_config

    torch = _torch()
    try:
        import transformers
    except ImportError:
        raise LLMathError("validate needs transformers: pip install 'llmath[oracle]'") from None
    try:
        config = hf_config(cfg)
    except (ValueError, KeyError) as e:
        raise ConfigError(f"transformers cannot build this config ({e}); pass a decoder-only config.json") from None
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(
            config, attn_implementation="eager", dtype=torch_dtype(dtype)
        )
    return model.eval()
