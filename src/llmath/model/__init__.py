"""What a model is: the typed spec, HF config adapters, precision/formats and the bundled registry.

The bottom layer of llmath (above :mod:`llmath.errors` only): it imports nothing else from the package.
"""
