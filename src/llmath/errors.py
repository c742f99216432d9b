"""Errors that reach users. Each message names the value, the rule and what to do next.

The CLI maps every :class:`LLMathError` to one line on stderr (tracebacks only with ``LLMATH_DEBUG=1``):
exit code 2 for a :class:`UsageError` (an argument that breaks its rule: the caller's to fix), 1 for the rest
(a file or a spec that cannot be read or run).
"""

from __future__ import annotations


class LLMathError(Exception):
    """Base class: a user-facing problem with the input, never a bug."""


class SpecError(LLMathError, ValueError):
    """A model spec breaks a rule (non-positive size, heads not dividing, ...)."""


class ConfigError(LLMathError, ValueError):
    """A config.json cannot be read or converted."""


class UsageError(LLMathError, ValueError):
    """An argument (option, keyword, workload, layout, name) breaks its rule: wrong type, not finite, out of
    range, unknown, in conflict with another, or doing nothing in the chosen mode. The CLI exits with code 2."""


class UnknownNameError(UsageError, KeyError):
    """An unknown registry name (model or hardware); the message lists the closest names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0] if self.args else ""


class HubError(LLMathError, KeyError):
    """The hub cannot be reached, is offline without a cached copy, or answered an error: the environment's
    problem, not the arguments' (exit code 1)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0] if self.args else ""


class WorkloadError(UsageError):
    """Nonsensical lengths, batch or flags."""


class RateError(WorkloadError):
    """A request rate above what a deployment sustains: the message names both rates, ``what`` says which limit
    (e.g. "deployment sustains"), ``detail`` how it is reached."""

    def __init__(self, rate: float, sustained: float, what: str, detail: str = ""):
        self.rate, self.sustained, self.what, self.detail = rate, sustained, what, detail
        super().__init__(
            f"request rate {rate:g}/s exceeds what this {what} ({sustained:.3g} requests/s{detail}); lower the rate"
            " or add GPUs"
        )

    def over_replicas(self, n: int) -> RateError:
        """The same limit for ``n`` replicas that each take 1/n of the requests."""
        detail = f" over {n} attention-DP replicas, each {self.sustained:.3g} requests/s{self.detail}"
        return RateError(self.rate * n, self.sustained * n, self.what, detail)


class HardwareError(LLMathError, ValueError):
    """A hardware spec is malformed, or lacks what was asked of it (e.g. a dtype)."""


class Abandoned(LLMathError):
    """The caller gave up on a computation (:func:`llmath.deploy.budget.poll`): nothing to answer."""


class LayoutError(UsageError):
    """A parallel layout (--gpus/--tp/--pp/--ep/--dp) the model or the GPU count cannot run."""
