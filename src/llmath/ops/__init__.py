"""The operator list of one forward pass: the single source of every figure llmath prints.

Conventions (FLOPs, bytes, stages, attention executions, causal pairs, MoE) are stated once in
:mod:`llmath.ops.core`. One module per operator family builds its operators (:mod:`.attention`,
:mod:`.mla`, :mod:`.ffn`, :mod:`.moe`, :mod:`.embed`), each operator declared once through a
:class:`~llmath.ops.core.Site` (signature, sizes, parameters, costs with their formulas) by a small step
function; a block is a table of steps (``STEPS``, ``EXECUTIONS``, ``KINDS``), so a new variant is one
function and one row. :mod:`.assemble` lays the blocks out per stage;
:mod:`.table` evaluates them (per-op totals, ``--explain`` formulas, compiled coefficient tables);
:mod:`.params` is the parameter view.
"""

from llmath.ops.assemble import build_ops
from llmath.ops.core import ATTENTIONS, CLASSES, Attention, Op, Stage, Term, Value, wkey
from llmath.ops.pair_counts import causal_pairs, held_positions, visible_keys
from llmath.ops.routing import experts_hit
from llmath.ops.scenario import Scenario
from llmath.ops.table import OpCost, Table, compile_table, evaluate, explain, one_hot, table

__all__ = [
    "ATTENTIONS",
    "CLASSES",
    "Attention",
    "Op",
    "OpCost",
    "Scenario",
    "Stage",
    "Table",
    "Term",
    "Value",
    "build_ops",
    "causal_pairs",
    "compile_table",
    "evaluate",
    "experts_hit",
    "explain",
    "held_positions",
    "one_hot",
    "table",
    "visible_keys",
    "wkey",
]
