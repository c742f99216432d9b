"""Generate ``src/llmath/data/config_aliases.json``: every ``attribute_map`` alias of the transformers config
class of each model_type llmath supports, so the core reads a config.json in either spelling without
importing transformers.

Run with the pinned transformers (see pyproject's ``oracle`` extra) after adding a model family:

    PYTHONPATH=src python scripts/gen_config_aliases.py
"""

from __future__ import annotations

import json
from pathlib import Path

import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from llmath.model.hf import MODEL_TYPE_ALIASES, supported_model_types

OUT = Path(__file__).resolve().parents[1] / "src" / "llmath" / "data" / "config_aliases.json"


def main() -> None:
    table: dict[str, dict[str, str]] = {}
    not_in_transformers = []
    for mt in sorted(set(supported_model_types()) | set(MODEL_TYPE_ALIASES.values())):
        if mt not in CONFIG_MAPPING:
            not_in_transformers.append(mt)
            continue
        cls = CONFIG_MAPPING[mt]
        table[mt] = dict(sorted(getattr(cls, "attribute_map", {}).items()))
    doc = {
        "_source": (
            f"transformers {transformers.__version__}: the attribute_map (alias -> stored attribute) of the "
            "config class of each supported model_type, read by scripts/gen_config_aliases.py; "
            "https://github.com/huggingface/transformers/tree/main/src/transformers/models"
        ),
        "transformers_version": transformers.__version__,
        "not_in_transformers": not_in_transformers,
        "aliases": table,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT} ({len(table)} model_types)")


if __name__ == "__main__":
    main()
