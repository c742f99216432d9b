"""Per-rank parameters and weight-GEMM FLOPs of a tensor-parallel layout against transformers' own plan.

transformers 5.23 config classes carry ``base_model_tp_plan`` (``colwise``: nn.Linear weight [out, in]
split on ``out``, bias split too; ``rowwise``: split on ``in``, bias whole on every rank) and the
CausalLM class a ``_tp_plan`` (``lm_head: colwise_gather_output``). Applied to the module built on the
meta device, those rules give each rank's shapes; any module the plan does not name is replicated. One
difference is by design: transformers replicates the token embedding, vLLM (which llmath follows) splits
it by vocabulary rows; the test puts the whole table back on llmath's side.
"""

from __future__ import annotations

import re

import pytest
from helpers import registry_config

from llmath.deploy import make_layout, rank_plans
from llmath.deploy.layout import ParallelConfig
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, evaluate

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402


def _plan(model) -> list[tuple[re.Pattern, str]]:
    plan = {f"model.{k}": v for k, v in (model.config.base_model_tp_plan or {}).items()}
    plan.update(getattr(type(model), "_tp_plan", None) or {})
    return [(re.compile("^" + re.escape(k).replace(r"\*", r"\d+") + "$"), v) for k, v in plan.items()]


def _rank_linears(model, tp: int):
    """(module name, in, out, bias out) of every nn.Linear on one rank, and the rank's parameter count."""
    import torch

    rules = _plan(model)
    linears, n_params, seen = [], 0, set()
    for name, mod in model.named_modules():
        style = next((v for r, v in rules if r.match(name)), None)
        own = [p for p in mod.parameters(recurse=False) if id(p) not in seen]
        seen.update(id(p) for p in own)
        if isinstance(mod, torch.nn.Linear):
            out_f, in_f = mod.weight.shape
            bias = out_f if mod.bias is not None else 0
            if style is not None and style.startswith("colwise"):
                assert out_f % tp == 0
                out_f, bias = out_f // tp, bias // tp
            elif style == "rowwise":
                assert in_f % tp == 0
                in_f //= tp
            linears.append((name, in_f, out_f))
            n_params += in_f * out_f + bias
        else:
            assert style is None, f"{name}: plan style {style} not modelled by this test"
            n_params += sum(p.numel() for p in own)
    return linears, n_params


@pytest.mark.parametrize("name,tp", [("llama-3.1-8b", 2), ("llama-3.1-8b", 8), ("qwen2.5-7b", 4)])
def test_tp_rank_params_and_gemm_flops_equal_transformers_plan(name, tp):
    cfg = registry_config(name)
    spec = spec_from_config(cfg, name).with_layers(2)
    model = oracle.build_meta(oracle.hf_config(cfg, n_layers=2))
    linears, hf_params = _rank_linears(model, tp)
    (plan,) = rank_plans(spec, "prefill", "flash", make_layout(spec, ParallelConfig(tp=tp)))
    params = sum(n * op.count for op in plan.ops for _, n in op.params)
    embed = next(op for op in plan.ops if op.name == "embed.tokens")
    # transformers keeps the whole V x D embedding on each rank; llmath (vLLM) holds V/tp rows of it
    assert params - embed.params[0][1] + spec.vocab_size * spec.d_model == hf_params
    # weight GEMM FLOPs of one rank: 2 · rows · in · out per Linear; rows = B·T tokens, B for the LM head
    B, T = 3, 11
    hf_flops = sum(2 * (B if n == "lm_head" else B * T) * i * o for n, i, o in linears)
    ours = sum(
        c.values.get("flops", 0)
        for c in evaluate(plan.ops, Scenario(B, T), spec)
        if c.op.n_params and c.op.kind == "matmul"
    )
    assert ours == hf_flops
