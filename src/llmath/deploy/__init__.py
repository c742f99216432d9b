"""Deployment: parallel layouts (TP/PP/EP/DP) as transformations of the operator list, serving schedules
(continuous batching, chunked prefill, disaggregation, speculation) and the planner.

Depends on :mod:`llmath.hardware`, :mod:`llmath.ops` and :mod:`llmath.model`; it never recomputes a cost a
second way: it reshapes operators or composes per-step costs that the operator list gave.
"""
