"""Shared test helpers (the tests directory is on sys.path under pytest's default import mode)."""

import json
from pathlib import Path

from llmath.model import registry

MODELS_DIR = Path(registry.__file__).parents[1] / "data" / "models"


def registry_config(name: str) -> dict:
    return json.loads((MODELS_DIR / f"{name}.json").read_text())
