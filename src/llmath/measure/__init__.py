"""Measurement: calibrate this machine, validate predictions against measured runs and published results,
and the transformers oracle (optional extra: torch and transformers are imported lazily, never by the core).
"""
