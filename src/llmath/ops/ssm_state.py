"""The SSM state's format, which serving may keep apart from the KV cache's.

vLLM keeps a Mamba layer's state as two tensors, the conv window and the SSM ("temporal") state, and lets
the second take its own dtype: ``--mamba-ssm-cache-dtype`` (``auto``: as the conv state; ``float32``), or
the config's ``mamba_ssm_cache_dtype`` (``vllm/model_executor/layers/mamba/mamba_utils.py``,
``MambaStateDtypeCalculator``: ``mamba1_state_dtype``, ``mamba2_state_dtype`` and
``gated_delta_net_state_dtype`` take it; KDA, lightning attention and the short conv keep one dtype).
So the format applies to the state the Mamba / Mamba-2 scan and the Gated DeltaNet recurrence read and
write (their ``kv_read`` / ``kv_write`` terms); conv windows and every other state keep the KV cache's.

Resolution, first that is set: the precision's ``ssm`` (the ``--ssm-state-dtype`` flag), the config's
``mamba_ssm_cache_dtype`` (:attr:`~llmath.model.spec.ModelSpec.ssm_state_dtype`), the KV cache's format.
"""

from __future__ import annotations

from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops.core import Op

# the operator holding each kind's SSM state (its kv_read / kv_write terms)
SSM_STATE_OPS = {"mamba": "mixer.scan", "mamba2": "mixer.scan", "gated_delta": "mixer.delta_rule"}
STATE_CLASSES = ("kv_read", "kv_write")


def holds_ssm_state(op: Op, spec: ModelSpec) -> bool:
    """Whether ``op``'s state terms are the SSM state (module doc)."""
    return spec.mixer is not None and SSM_STATE_OPS.get(spec.mixer.kind) == op.name


def ssm_state_format(spec: ModelSpec, p: Precision) -> tuple[str, str]:
    """(format, where it came from) of ``spec``'s SSM state under ``p`` (module doc)."""
    if p.ssm is not None:
        return p.ssm, "flag --ssm-state-dtype"
    if spec.ssm_state_dtype is not None:
        return spec.ssm_state_dtype, "config mamba_ssm_cache_dtype"
    return p.kv, "KV-cache format"


def ssm_state_bytes(spec: ModelSpec, p: Precision) -> float:
    return p.bytes_per_element(ssm_state_format(spec, p)[0])


def class_bytes(op: Op, spec: ModelSpec, p: Precision, per: dict[str, float] | None = None) -> dict[str, float]:
    """Bytes per element of each cost class of ``op``: ``per`` (default ``p.per_class``), its state classes
    in the SSM state's format when ``op`` holds it."""
    per = p.per_class if per is None else per
    if not holds_ssm_state(op, spec):
        return per
    b = ssm_state_bytes(spec, p)
    return per | dict.fromkeys(STATE_CLASSES, b)


__all__ = ["SSM_STATE_OPS", "class_bytes", "holds_ssm_state", "ssm_state_bytes", "ssm_state_format"]
