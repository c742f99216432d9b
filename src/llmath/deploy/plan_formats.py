"""The weight formats a plan searches, each labelled by its weights' format name (the rows' ``weights``).

Without ``weights`` the plan searches the checkpoint's own formats, read by the function ``llmath analyze`` and
:func:`~.service.serve` read them with (:func:`llmath.model.checkpoint.precision_for`: a block-FP8 DeepSeek-V3,
gpt-oss's MXFP4 experts, a ``quantization_config``, a :class:`~llmath.model.checkpoint.Checkpoint` read from an
uploaded config; bf16 when the checkpoint states none), the KV cache in
``kv_dtype`` when given. With ``weights`` (``plan --weights F,...``) each named format is declared over a bf16
checkpoint (:func:`declared`). The plan's ``formats`` key says which it searched (:func:`formats_report`).
"""

from __future__ import annotations

from typing import Any

from llmath.model.checkpoint import Checkpoint, precision_for
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec


def searched_formats(
    model: str | ModelSpec | Checkpoint, weights: str | list[str] | None, kv_dtype: str | None
) -> list[tuple[str, Precision]]:
    """(label, precision) per format the plan searches: the checkpoint's formats without ``weights``, else each
    named format as :func:`declared` declares it."""
    if weights is None:
        p = precision_for(model, kv=kv_dtype)  # analyze's and serve's reading of the checkpoint
        return [(p.weights, p)]
    names = [weights] if isinstance(weights, str) else list(weights)
    return [(f, declared(f, kv_dtype)) for f in names]


def declared(fmt: str, kv_dtype: str | None) -> Precision:
    """A candidate weight format, declared as ``--weights`` declares it: 16/8-bit formats run their own activations,
    others bf16 activations and the GEMM input format the engine's kernel for the format takes on the device
    (:func:`.engine_device.engine_terms`: NVFP4 as W4A4 on Blackwell); the KV cache in the activations' format
    unless ``kv_dtype`` is given (fp32 activations keep a bf16 cache)."""
    act = fmt if fmt in ("bf16", "fp16", "fp8", "fp32") else "bf16"
    src = {"weights": "plan --weights"} | ({"activations": "plan --weights"} if act == fmt else {})
    return Precision(fmt, act, kv_dtype or (act if act != "fp32" else "bf16"), sources=src)


def formats_report(formats: list[tuple[str, Precision]], weights: str | list[str] | None) -> dict[str, Any]:
    """The plan's ``formats`` key: ``from`` (``checkpoint``: the checkpoint's own formats; ``--weights``: the named
    candidates) and ``by_weights``, each row's ``weights`` label to its formats (:meth:`Precision.to_dict`)."""
    source = "checkpoint" if weights is None else "--weights"
    return {"from": source, "by_weights": {f: p.to_dict() for f, p in formats}}
