"""A family's knowledge lives in ``model/`` and ``ops/``; the layers above ask traits (checked like the imports).

Operators declare how they split (``ops/split.py``) and a family's spec part declares its execution traits
(``model/traits.py``), so ``deploy/``, ``hardware/`` and everything above apply generic rules and need neither:

* a **family sub-spec read**: an attribute access named after one of :data:`FAMILY_PARTS` (the optional parts
  and knobs one family owns: ``spec.blt``, ``spec.ngram``, ``spec.assistant``, ...);
* an **operator-name string**: a string constant (docstrings aside) equal to the name of an operator the
  bundled models build, or to a dotted prefix of one (``"attn."``, ``"moe.experts."``): what a table of names
  matched against ``op.name`` is made of.

Nothing remains: :data:`ALLOWED` (an exception with its reason) is empty; a new read or name fails here, and
so would an allowance that no longer matches anything.
"""

from __future__ import annotations

import ast
import typing
from collections import Counter
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from llmath.model.registry import names, resolve
from llmath.model.spec import ModelSpec
from llmath.model.spec_parts import CONCERN_PARTS
from llmath.ops import build_ops

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "llmath"
BELOW_OPS = ("model/", "ops/", "data/", "validation.py", "errors.py")  # the layers a family may live in
# one family's optional spec parts and knobs (the per-concern parts, mla, moe, mixer, encoder, vision, are not)
FAMILY_PARTS = frozenset(
    {
        "assistant", "blt", "block_index", "cca_kernels", "codebooks", "compressed", "hyper", "inkling",
        "mhc_streams", "ngram", "prophet", "qsa", "recurrence", "shared_block", "text_encoder",
    }
)  # fmt: skip

# (module, attribute or string) -> why: a read or name that would remain above ops/, each with its reason; none
# does (a family's layout rules and collectives are its spec part's traits, model/traits.py; the fitted attention
# kernel is the operators' kernel trait, ops/kernel.py)
ALLOWED: dict[tuple[str, str], str] = {}


def _modules_above_ops() -> list[tuple[str, ast.Module]]:
    out = []
    for p in sorted(PACKAGE.rglob("*.py")):
        rel = p.relative_to(PACKAGE).as_posix()
        if not rel.startswith(BELOW_OPS):
            out.append((rel, ast.parse(p.read_text())))
    return out


@pytest.fixture(scope="module")
def operator_names() -> frozenset[str]:
    """Every operator name the bundled models build, and each dotted prefix of one (``"attn."``); not the
    report classes (components and checkpoint modules such as ``"lm_head"``), which the layers above group by."""
    ops: set[str] = set()
    classes: set[str] = set()
    for n in names():
        spec = resolve(n)
        passes = [("prefill", "flash"), ("decode", "eager")] + ([("encoder", "flash")] if spec.encoder else [])
        for stage, attention in passes:
            built = build_ops(spec, stage, attention)
            ops |= {o.name for o in built}
            classes |= {o.component for o in built} | {o.module for o in built}
    prefixes = {n[: i + 1] for n in ops for i, c in enumerate(n) if c == "."}
    return frozenset((ops | prefixes) - classes)


def _found(operator_names: frozenset[str]) -> Counter:
    found: Counter = Counter()
    for rel, tree in _modules_above_ops():
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in FAMILY_PARTS:
                found[(rel, node.attr)] += 1
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if node.value in operator_names:
                    found[(rel, node.value)] += 1
    return found


def test_the_check_covers_every_family_part_of_the_spec():
    """Each optional part ModelSpec carries for one family (model/spec_parts.py: the part-typed fields outside the
    per-concern ones) is a name the check looks for, so a new family's part cannot be read above ops/ unseen.
    ``vision`` (Llama 3.2 Vision's image encoder) is also the analysis result's image pass (analysis.py), a name
    the attribute check cannot tell apart: that part is read in model/ and ops/ only."""
    hints = typing.get_type_hints(ModelSpec)
    parts = {
        f.name
        for f in fields(ModelSpec)
        if any(is_dataclass(t) for t in typing.get_args(hints[f.name]) or (hints[f.name],))
    }
    assert parts - CONCERN_PARTS - {"vision"} <= FAMILY_PARTS, sorted(parts - CONCERN_PARTS - FAMILY_PARTS)


def test_the_check_sees_operator_names(operator_names):
    # a few names every reader knows, so an empty list cannot pass the check by accident
    assert {"attn.q_proj", "ffn.down", "moe.experts.up", "lm_head.softcap", "attn."} <= operator_names


def test_no_family_read_or_operator_name_above_ops(operator_names):
    found = _found(operator_names)
    new = sorted(k for k in found if k not in ALLOWED)
    assert not new, (
        "modules above ops/ read a family sub-spec or match operator names: declare a split trait on the operator "
        "(ops/split.py) or an execution trait on the family's spec part (model/traits.py) instead: "
        + "; ".join(f"{m}: {s!r} ×{found[(m, s)]}" for m, s in new)
    )
    stale = sorted(k for k in ALLOWED if k not in found)
    assert not stale, f"allowances that match nothing any more (remove them): {stale}"


def test_nothing_remains_above_ops(operator_names):
    """No family read and no operator name above ops/, allowed or not."""
    found = _found(operator_names)
    assert sum(found.values()) == 0, sorted(found.items())
