"""A grouped top-k router's expert groups are read as transformers builds them: ``n_group`` from the file, else the
family's config class default (DeepseekV3Config's is 8: configuration_deepseek_v3.py, transformers 5.23). Grouping
changes only which experts the router picks, not the parameters or FLOPs; the per-token time under expert parallelism
of the kernels that route grouped top-k follows it (hardware/moe_ep_token.py)."""

from __future__ import annotations

import pytest
from helpers import registry_config

from llmath import hardware
from llmath.deploy.layout import Layout
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.fitted_columns import columns
from llmath.hardware.kernels import run_efficiency
from llmath.model.checkpoint import precision_for
from llmath.model.config_check import aliases
from llmath.model.hf import spec_from_config, supported_model_types
from llmath.ops import Scenario, build_ops, evaluate, table
from llmath.ops.params import param_report
from llmath.pass_report import stage_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from llmath.measure import oracle  # noqa: E402

# every family llmath reads whose transformers config class has a grouped router's n_group
GROUPED = [
    t
    for t in supported_model_types()
    if t in CONFIG_MAPPING and "n_group" in getattr(CONFIG_MAPPING[t], "__dataclass_fields__", {})
]
# class defaults that leave a size llmath needs unset: DeepseekV2Config's top-k is None (DeepSeek-V2's 6) and
# Dots1Config's experts and top-k (dots.llm1's 128 routed, 2 shared, top-6: rednote-hilab/dots.llm1.inst config.json)
FILLED = {
    "deepseek_v2": dict(num_experts_per_tok=6),
    "dots1": dict(n_routed_experts=128, n_shared_experts=2, num_experts_per_tok=6),
}


def test_the_grouped_router_families_are_the_expected_ones():
    # the families whose modeling file routes with DeepseekV3TopkRouter's group mask (route_tokens_to_experts)
    assert {"deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe", "axk1", "bailing_hybrid", "beam"} <= set(GROUPED)


def _default_file(model_type: str) -> dict:
    """The config class's defaults as a file that leaves ``n_group`` (and its alias) out."""
    saved = CONFIG_MAPPING[model_type](**FILLED.get(model_type, {})).to_dict()
    alias = aliases().get(model_type, {}).get("n_group")  # the class's attribute_map: Kimi-Linear's num_expert_group
    return {k: v for k, v in saved.items() if k not in ("n_group", alias, "transformers_version")}


def _transformers_groups(file: dict) -> int:
    """The groups transformers routes over for ``file``: its config's n_group (None: a plain top-k)."""
    kw = {k: v for k, v in file.items() if k != "model_type"}
    return CONFIG_MAPPING[file["model_type"]](**kw).n_group or 1


@pytest.mark.parametrize("model_type", GROUPED)
def test_a_file_without_n_group_reads_the_config_class_default(model_type):
    file = _default_file(model_type)
    assert spec_from_config(file).moe.expert_groups == _transformers_groups(file)


@pytest.mark.parametrize("model_type", [t for t in GROUPED if t != "deepseek_v2"])
def test_a_files_n_group_is_read_under_its_own_spelling(model_type):
    file = _default_file(model_type)
    experts = spec_from_config(file).moe.n_experts
    groups = next(g for g in (4, 2) if experts % g == 0 and g != _transformers_groups(file))
    key = aliases().get(model_type, {}).get("n_group", "n_group")  # Kimi-Linear's spelling
    file = {**file, key: groups, "topk_group": 1}
    assert _transformers_groups(file) == groups
    assert spec_from_config(file).moe.expert_groups == groups


def test_deepseek_v2_groups_only_under_group_limited_greedy():
    # modeling_deepseek_v2.py DeepseekV2TopkRouter.forward: topk_method "greedy" (DeepseekV2Config's default) takes
    # a plain top-k whatever n_group says; "group_limited_greedy" masks all but the best topk_group of n_group groups
    file = {**_default_file("deepseek_v2"), "n_group": 8, "topk_group": 3}
    assert CONFIG_MAPPING["deepseek_v2"]().topk_method == "greedy"
    assert spec_from_config(file).moe.expert_groups == 1
    grouped = {**file, "topk_method": "group_limited_greedy"}
    assert spec_from_config(grouped).moe.expert_groups == 8


def _r1_file(**groups) -> dict:
    file = {k: v for k, v in registry_config("deepseek-r1").items() if k not in ("n_group", "topk_group")}
    return {**file, **groups}


def _eager_flops(spec, stage: str, B: int, T: int, S0: int) -> int:
    return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, "eager"), Scenario(B, T, S0), spec))


def test_groups_change_neither_parameters_nor_flops():
    # DeepSeek-R1's config.json without n_group / topk_group: DeepseekV3Config's 8 / 4, against one group; four
    # layers reach the first MoE layer (first_k_dense_replace 3)
    default, plain = _r1_file(), _r1_file(n_group=1, topk_group=1)
    specs = [spec_from_config(f).with_layers(4) for f in (default, plain)]
    assert [s.moe.expert_groups for s in specs] == [8, 1]
    models = [oracle.build_meta(oracle.hf_config(f, 4)) for f in (default, plain)]
    assert [m.config.n_group for m in models] == [8, 1]
    counts = [oracle.count_params(m) for m in models]
    assert counts[0] == counts[1] == param_report(specs[0], "eager").total == param_report(specs[1], "eager").total
    # FlopCounterMode's matmul FLOPs of a 9-token prefill: the same under both routers, and llmath's eager list's
    hf = [oracle.forward_flops(m, 1, 9)[0] for m in models]
    assert hf[0] == hf[1] == _eager_flops(specs[0], "prefill", 1, 9, 0) == _eager_flops(specs[1], "prefill", 1, 9, 0)


def _experts_ms_per_layer(spec, tokens: int, ep: int) -> float:
    hw = hardware.get("b200")
    p = precision_for("deepseek-r1", weights="nvfp4", activations="nvfp4")
    eff = run_efficiency("expected", hw, p, "sglang", {})
    rep = stage_report(spec, "prefill", Scenario(1, tokens), "flash", p, hw, eff, Layout(tp=ep, ep=ep))
    return sum(o.time_s for o in rep.ops if ".experts." in o.name) * 1e3 / sum(spec.layer_moe)


def test_the_ep_time_per_token_follows_the_default_groups():
    default, plain, given = (spec_from_config(f) for f in (_r1_file(), _r1_file(n_group=1), _r1_file(n_group=8)))
    assert columns(table(default)).grouped_routing and not columns(table(plain)).grouped_routing
    T, EP = 8192, 4
    assert _experts_ms_per_layer(default, T, EP) == pytest.approx(_experts_ms_per_layer(given, T, EP), rel=1e-12)
    # SGLang's B200 NVFP4 term: s · T · (1 − 1/EP) per layer on top of the experts' compute, s the grouped value
    # (137 ns) for a grouped router and the plain one (10.4 ns) otherwise: (137 − 10.4) ns · 8192 · 3/4 = 0.78 ms
    s_grouped, s_plain = (
        ef.moe_ep_token("b200", "nvfp4", "sglang", grouped=True),
        ef.moe_ep_token("b200", "nvfp4", "sglang"),
    )
    added = (s_grouped - s_plain) * T * (1 - 1 / EP) * 1e3
    assert _experts_ms_per_layer(default, T, EP) - _experts_ms_per_layer(plain, T, EP) == pytest.approx(added, rel=0.02)
