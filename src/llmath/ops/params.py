"""Parameter counts: a view over the operator list (sizes of the weight operands).

Tied weights are counted once (the LM head of a tied model owns no parameters). MoE active parameters
per token are the total minus the routed experts a token does not use: (E − k) experts per MoE layer.
The seeds' estimates are reproduced beside the exact count with their error:
``12Ld²`` (seeds 000/002/003/004), ``12Ld²+13Ld`` (seed 003/004: biases and two LayerNorms per layer,
d_ff = 4d) and ``12Ld²+13Ld+Vd`` (seed 004: plus one embedding matrix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from llmath.model.spec import ModelSpec
from llmath.ops import build_ops


@dataclass(frozen=True)
class ParamReport:
    model: str
    total: int
    by_component: dict[str, int]
    per_layer: dict[str, int]  # layer kind -> parameters of one such layer
    layer_counts: dict[str, int]  # layer kind -> how many layers
    active_per_token: int
    estimates: dict[str, int]
    estimate_error: dict[str, float] = field(default_factory=dict)  # (estimate - exact) / exact

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "total": self.total,
            "by_component": self.by_component,
            "per_layer": self.per_layer,
            "layer_counts": self.layer_counts,
            "active_per_token": self.active_per_token,
            "estimates": self.estimates,
            "estimate_error": self.estimate_error,
        }


def seed_estimates(spec: ModelSpec) -> dict[str, int]:
    """The seeds' closed-form estimates (L = decoder layers + encoder layers, d = d_model, V = vocab)."""
    L = spec.n_layers + (spec.encoder.n_layers if spec.encoder else 0)
    d, V = spec.d_model, spec.vocab_size
    return {
        "12Ld2": 12 * L * d * d,
        "12Ld2+13Ld": 12 * L * d * d + 13 * L * d,
        "12Ld2+13Ld+Vd": 12 * L * d * d + 13 * L * d + V * d,
    }


@lru_cache(maxsize=512)
def param_report(spec: ModelSpec) -> ParamReport:
    ops = build_ops(spec, "prefill", "flash")
    if spec.is_encoder_decoder:  # the decoder prefill holds the decoder's weights, the encoder pass the rest
        ops = build_ops(spec, "encoder", "flash") + ops
    by_component: dict[str, int] = {}
    per_layer: dict[str, int] = {}
    layer_counts: dict[str, int] = {}
    for op in ops:
        for key, n in op.params:
            by_component[key] = by_component.get(key, 0) + n * op.count
        if op.layer_kind and op.count > 0:
            per_layer[op.layer_kind] = per_layer.get(op.layer_kind, 0) + op.n_params
            layer_counts[op.layer_kind] = op.count
    total = sum(by_component.values())
    active = total
    if spec.moe is not None:
        experts = sum(n for k, n in by_component.items() if k.startswith("moe.experts."))
        active = total - experts // spec.moe.n_experts * (spec.moe.n_experts - spec.moe.top_k)
    est = seed_estimates(spec)
    return ParamReport(
        model=spec.name,
        total=total,
        by_component=dict(sorted(by_component.items())),
        per_layer=per_layer,
        layer_counts=layer_counts,
        active_per_token=active,
        estimates=est,
        estimate_error={k: (v - total) / total for k, v in est.items()},
    )
