"""Nemotron-3 Super/Ultra's latent MoE (``moe_latent_size``): the routed experts run in an L-wide latent between a
D -> L and an L -> D projection (transformers 5.23 modeling_nemotron_h.py NemotronHMoE / NemotronHExperts).
Parameters and FLOPs against transformers: tests/test_oracle_causal_lm.py (a nemotron_h variant with
moe_latent_size) and tests/test_oracle_params.py (the bundled Super and Ultra configs). Here: the widths read from
the hub config and the tensor-parallel rule, ReplicatedLinear in vLLM and SGLang (nemotron_h.py NemotronHMoE)."""

from __future__ import annotations

from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.shard import rank_plans
from llmath.model import registry
from llmath.ops import build_ops

SUPER = "nvidia-nemotron-3-super-120b-a12b-fp8"


def _per_layer(ops, name):
    op = next(o for o in ops if o.name == name)
    return {k: n for k, n in op.params}, op.count


def test_super_reads_its_latent_and_expert_widths():
    cfg, spec = registry.config(SUPER), registry.spec(SUPER)
    assert spec.moe.latent == cfg["moe_latent_size"] == 1024
    ops = build_ops(spec, "decode", "flash")
    D, L, F, E = cfg["hidden_size"], 1024, cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    assert _per_layer(ops, "moe.latent_in")[0] == {"moe.latent.in.weight": D * L}  # mlp_bias false: no bias
    assert _per_layer(ops, "moe.latent_out")[0] == {"moe.latent.out.weight": L * D}
    # non-gated experts: up L -> F and down F -> L, E of each
    assert _per_layer(ops, "moe.experts.up")[0] == {"moe.experts.up.weight": E * L * F}
    assert _per_layer(ops, "moe.experts.down")[0] == {"moe.experts.down.weight": E * F * L}


def test_latent_projections_are_whole_on_every_rank():
    spec = registry.spec(SUPER)
    whole = build_ops(spec, "decode", "flash")
    (plan,) = rank_plans(spec, "decode", "flash", make_layout(spec, ParallelConfig(tp=4)))
    for name in ("moe.latent_in", "moe.latent_out"):
        assert _per_layer(plan.ops, name) == _per_layer(whole, name)
    # the routed experts are split over the 4 ranks (expert tensor parallelism)
    w, _ = _per_layer(whole, "moe.experts.up")
    r, _ = _per_layer(plan.ops, "moe.experts.up")
    assert r["moe.experts.up.weight"] * 4 == w["moe.experts.up.weight"]
