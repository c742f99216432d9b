"""The shape of the code, checked on every test run (CI runs ``python -m pytest``):

* the import-linter contracts of ``pyproject.toml`` hold (each layer imports only the layers below it; the
  core never imports torch or transformers);
* mypy finds no error in any package (``[tool.mypy]`` in ``pyproject.toml``);
* no function is longer than 60 lines and no module longer than 600 lines.

The first two run the tools as subprocesses on this checkout's ``src`` and are skipped, with the reason,
only where the tool is not installed (``pip install -e '.[test]'`` installs both).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "llmath"

MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 600


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _needs(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{package} is not installed here: pip install -e '.[test]' (CI installs it)")


def test_import_layers_hold():
    _needs("importlinter", "import-linter")
    cmd = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    r = _run([sys.executable, "-c", cmd, "--no-cache"])
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean():
    _needs("mypy", "mypy")
    r = _run([sys.executable, "-m", "mypy", "--no-incremental"])
    assert r.returncode == 0, r.stdout + r.stderr


def _modules() -> list[tuple[str, Path]]:
    return [(p.relative_to(PACKAGE).as_posix(), p) for p in sorted(PACKAGE.rglob("*.py"))]


def test_the_checks_see_the_package():
    names = {name for name, _ in _modules()}
    # the layers of docs/architecture.md: each has at least its anchor module here
    assert {"ops/core.py", "model/hf.py", "hardware/roofline.py", "analysis.py", "measure/validate.py"} <= names


def test_no_function_over_60_lines():
    long = []
    for name, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{name}:{node.lineno} {node.name} ({n} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: split them: " + "; ".join(long)


def test_no_module_over_600_lines():
    big = []
    for name, path in _modules():
        n = len(path.read_text().splitlines())
        if n > MAX_MODULE_LINES:
            big.append(f"{name} ({n} lines)")
    assert not big, f"modules over {MAX_MODULE_LINES} lines: split them: " + "; ".join(big)
