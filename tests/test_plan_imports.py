"""The planner's start-up imports only what a plan of a common model runs: the families, towers and operator
modules of other architectures load on first use (docs/speed.md: the planner's start-up)."""

import importlib
import pkgutil
import subprocess
import sys

import llmath.model
from llmath.model.families import ADAPTERS

# modules a Llama or DeepSeek plan never runs: other families' adapter tables, multimodal towers, the operators
# of other architectures, and the closed-form decode sum that analyze uses
DEFERRED = {
    "llmath.model.families_moe",
    "llmath.model.families_multimodal",
    "llmath.model.families_musicgen",
    "llmath.model.families_blt",
    "llmath.model.towers",
    "llmath.model.towers_mllama",
    "llmath.model.towers_gemma4",
    "llmath.ops.assistant",
    "llmath.ops.blt",
    "llmath.ops.compressed",
    "llmath.ops.frontend",
    "llmath.ops.hyper",
    "llmath.ops.inkling",
    "llmath.ops.mixers",
    "llmath.ops.prophet",
    "llmath.ops.vision_mllama",
    "llmath.hardware.decode",
}


def _modules(code: str) -> set[str]:
    code += "\nimport sys\nprint(' '.join(sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    return set(out.stdout.split())


def test_importing_the_planner_leaves_other_architectures_modules_unloaded():
    mods = _modules("import llmath.deploy.plan")
    assert "llmath.deploy.plan" in mods and "llmath.model.families" in mods
    assert not mods & DEFERRED


def test_a_llama_plan_loads_none_of_them_and_a_hybrid_spec_loads_its_family():
    plan = (
        "import contextlib, io\nfrom llmath.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['plan', 'llama-3-8b', '-H', 'h100-sxm', '--gpus', '1', '--json'])\n"
        "    except SystemExit:\n        pass\n"
    )
    mods = _modules(plan)
    assert "llmath.deploy.plan" in mods
    assert not mods & DEFERRED
    # Nemotron-H's row lives in families_ssm (model_type nemotron_h), its Mamba-2 layers in ops/mixers.py
    mods = _modules("from llmath.model.registry import spec\nfrom llmath.ops import build_ops\n"
                    "build_ops(spec('nemotron-h-8b-base-8k'))")  # fmt: skip
    assert {"llmath.model.families_ssm", "llmath.ops.mixers"} <= mods


def test_the_table_holds_every_family_modules_rows_unchanged():
    tables = {}
    for info in pkgutil.iter_modules(llmath.model.__path__):
        if info.name.startswith("families_"):
            module = importlib.import_module(f"llmath.model.{info.name}")
            tables[info.name] = getattr(module, "ADAPTERS", {})
    seen: dict[str, str] = {}
    for name, table in tables.items():
        for model_type, row in table.items():
            assert model_type not in seen, f"{model_type} in {name} and {seen[model_type]}"  # one row per type
            seen[model_type] = name
            assert ADAPTERS[model_type] is row
    assert set(seen) <= set(ADAPTERS)
    assert "llama" in ADAPTERS and "llama" not in seen  # the common families' rows are the table's own
    assert ADAPTERS.get("no_such_family") is None and "no_such_family" not in ADAPTERS
