"""Errors that reach users. Each message names the value, the rule and what to do next.

The CLI maps every :class:`LLMathError` to one line on stderr and exit code 1 (tracebacks only with
``LLMATH_DEBUG=1``).
"""

from __future__ import annotations


class LLMathError(Exception):
    """Base class: a user-facing problem with the input, never a bug."""


class SpecError(LLMathError, ValueError):
    """A model spec breaks a rule (non-positive size, heads not dividing, ...)."""


class ConfigError(LLMathError, ValueError):
    """A config.json cannot be read or converted."""


class UnknownNameError(LLMathError, KeyError):
    """An unknown registry name (model or hardware); the message lists the closest names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0] if self.args else ""


class WorkloadError(LLMathError, ValueError):
    """Nonsensical lengths, batch or flags."""


class HardwareError(LLMathError, ValueError):
    """A hardware spec is malformed, or lacks what was asked of it (e.g. a dtype)."""


class LayoutError(LLMathError, ValueError):
    """A parallel layout (--gpus/--tp/--pp/--ep/--dp) the model or the GPU count cannot run."""
