"""A family's knowledge lives in ``model/`` and ``ops/``; the layers above ask traits (checked like the imports).

Operators declare how they split (``ops/split.py``) and a family's spec part declares its execution traits
(``model/traits.py``), so ``deploy/``, ``hardware/`` and everything above apply generic rules and need neither:

* a **family sub-spec read**: an attribute access named after one of :data:`FAMILY_PARTS` (the optional parts
  and knobs one family owns: ``spec.blt``, ``spec.ngram``, ``spec.assistant``, ...);
* an **operator-name string**: a string constant (docstrings aside) equal to the name of an operator the
  bundled models build, or to a dotted prefix of one (``"attn."``, ``"moe.experts."``): what a table of names
  matched against ``op.name`` is made of.

What remains is listed in :data:`ALLOWED` with its reason; a new read or name fails here, and so does an
allowance that no longer matches anything (remove it).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from llmath.model.registry import names, resolve
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

# (module, attribute or string): reads and names that remain above ops/, each with why
ALLOWED = {
    # divisibility checks of a layout, with the engine that imposes each
    ("deploy/shard_hyper.py", "compressed"): "tp must divide DeepSeek-V4's output groups (vLLM wo_a)",
    ("deploy/shard_hyper.py", "ngram"): "tp must divide Qwen4-Exp's n-gram row width",
    ("deploy/shard_shared.py", "shared_block"): "tp must divide Zamba2's LoRA rank (vLLM Zamba2LoRA)",
    # collectives are named per block (deploy/comm.py), not derived from the operators' row / reduce traits
    ("deploy/comm.py", "shared_block"): "Zamba2's shared block: its all-reduces and the adapters' all-gather",
    ("deploy/comm.py", "ngram"): "Qwen4-Exp's n-gram lookups: an all-gather of E per token",
    # the fitted attention kernels describe dense causal attention; QSA's block-sparse kernel keeps the fractions
    ("hardware/fitted_ops.py", "qsa"): "QSA's block-sparse attention is not the dense kernel the fit measured",
    ("hardware/fitted_ops.py", "attn.flash"): "the fused attention operator the kernel fit measured",
}


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


def test_the_remaining_reads_are_few(operator_names):
    """What remains above ops/ (the allowances), counted: 6 family reads and 1 operator name in 7 places."""
    found = _found(operator_names)
    assert sum(found.values()) <= 7, sorted(found.items())
