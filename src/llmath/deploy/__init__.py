"""Deployment: parallel layouts (TP/PP/EP/DP) as transformations of the operator list, serving schedules
(continuous batching, chunked prefill, disaggregation, speculation) and the planner.

Depends on :mod:`llmath.hardware`, :mod:`llmath.ops` and :mod:`llmath.model`; it never recomputes a cost a
second way: it reshapes operators or composes per-step costs that the operator list gave.

Parallel layouts: :func:`make_layout` validates a :class:`Layout`; :func:`rank_plans` gives one GPU's
operators and collectives per pipeline stage; :func:`per_gpu_stage` times one pass (prefill or a decode
step) of a replica on the hardware (roofline + collectives on its topology); :func:`decode_totals` sums a
generation's decode steps in closed form.
"""

from llmath.deploy.cost import CommCost, PassCost, StageCost, decode_totals, per_gpu_stage, rank_table
from llmath.deploy.layout import Layout, make_layout, stage_layers
from llmath.deploy.shard import RankPlan, rank_plans

__all__ = [
    "CommCost",
    "Layout",
    "PassCost",
    "RankPlan",
    "StageCost",
    "decode_totals",
    "make_layout",
    "per_gpu_stage",
    "rank_plans",
    "rank_table",
    "stage_layers",
]
