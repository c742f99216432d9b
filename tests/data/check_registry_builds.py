"""Build every bundled config.json on the meta device with transformers and count parameters.

Plain script (not a pytest file):  python tests/data/check_registry_builds.py [name ...]
Prints: name, model_type, parameter count, published figure, ratio count/published.
"""
import json
import sys
from pathlib import Path

import torch
import transformers

DIR = Path(__file__).resolve().parents[2] / "src" / "llmath" / "data" / "models"
SEQ2SEQ = {"t5", "bart"}


def count(cfg: dict) -> int:
    cfg = dict(cfg)
    cfg.pop("auto_map", None)  # remote-code pointers; the in-library classes are used
    # pre-quantized checkpoints: build the unquantized module tree (quantizers need real weights / GPUs)
    cfg.pop("quantization_config", None)
    config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    auto = transformers.AutoModelForSeq2SeqLM if config.model_type in SEQ2SEQ else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    return sum(p.numel() for p in model.parameters())


def main(names):
    index = json.loads((DIR / "index.json").read_text())
    for name in names or sorted(index):
        cfg = json.loads((DIR / f"{name}.json").read_text())
        pub = index[name].get("published_params")
        try:
            n = count(cfg)
            ratio = f"{n / pub:.4f}" if pub else "-"
            print(f"{name:26s} {cfg['model_type']:12s} {n:>16,d} {pub or '-':>16} {ratio}", flush=True)
        except Exception as e:  # report and continue
            print(f"{name:26s} {cfg['model_type']:12s} FAILED: {type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
