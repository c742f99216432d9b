"""A command line imports only the command group it runs (llmath.cli.COMMANDS), and the map is complete; a command
imports only the libraries it runs (docs/speed.md: the CLI's start-up)."""

import subprocess
import sys

from typer.main import get_command, get_command_name

import llmath.cli as cli


def test_every_registered_command_is_mapped_to_the_module_that_registers_it():
    app = cli.app  # every group registered
    registered = {
        c.name or get_command_name(c.callback.__name__): c.callback.__module__.rsplit(".", 1)[1]
        for c in app.registered_commands
    }
    assert registered == cli.COMMANDS
    assert set(cli.COMMANDS.values()) == set(cli.GROUPS)


def _modules_after(args: list[str]) -> set[str]:
    code = (
        "import sys, contextlib, io\n"
        "from llmath.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({args!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(' '.join(sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(out.stdout.split())


def test_analyze_imports_neither_the_other_groups_nor_the_planner():
    mods = _modules_after(["analyze", "llama-3-8b", "-H", "h100-sxm", "--json"])
    assert "llmath.cli.analyze" in mods
    assert not mods & {"llmath.cli.plan", "llmath.cli.serve", "llmath.cli.measure", "llmath.cli.compare"}
    assert not mods & {"llmath.deploy.plan", "llmath.web", "llmath.plots", "llmath.sweep"}


def test_plan_imports_no_other_command_group():
    # typer builds the options of every registered command before running one: the planner's start-up pays
    # for its own group only; its speculative-decoding options are the ones analyze offers
    code = "import sys, llmath.cli as c\nc.load(['plan'])\nprint(' '.join(sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    mods = set(out.stdout.split())
    assert "llmath.cli.plan" in mods
    assert not mods & {f"llmath.cli.{g}" for g in cli.GROUPS if g != "plan"}
    commands = get_command(cli.app).commands  # every group registered
    for name in ("plan", "analyze"):
        opts = {o for p in commands[name].params for o in p.opts}
        assert {"--spec-method", "--spec-tokens", "--acceptance", "--draft-model"} <= opts


NEVER_ON_ANALYZE = {"pydantic", "pydantic_core", "typer._adapters", "matplotlib", "torch", "transformers", "rich"}


def test_analyze_json_imports_no_validation_plotting_or_oracle_library():
    mods = _modules_after(["analyze", "llama-3-8b", "-H", "h100-sxm", "--json"])
    assert "llmath.analysis" in mods
    assert not mods & NEVER_ON_ANALYZE


def test_a_bad_option_value_still_gets_typers_message():
    code = "from llmath.cli import main\nmain(['analyze', 'llama-3-8b', '-H', 'h100-sxm', '--batch', 'x'])\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "Invalid value for '--batch'" in out.stderr and "valid integer" in out.stderr


def test_help_lists_every_command_without_importing_the_library_core():
    mods = _modules_after(["--help"])
    assert {f"llmath.cli.{g}" for g in cli.GROUPS} <= mods
    assert not mods & {"llmath.analysis", "llmath.ops", "llmath.deploy"}
    assert not mods & {"numpy", *NEVER_ON_ANALYZE}


def test_a_commands_help_imports_neither_numpy_nor_pydantic():
    mods = _modules_after(["analyze", "--help"])
    assert "llmath.cli.analyze" in mods
    assert not mods & {"numpy", "llmath.analysis", *NEVER_ON_ANALYZE}
