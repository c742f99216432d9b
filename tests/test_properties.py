"""Invariants on random valid specs (hypothesis)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from llmath import ModelSpec, MoESpec, Precision
from llmath.ops import Scenario, build_ops, evaluate
from llmath.pass_report import stage_report


@st.composite
def specs(draw):
    k = draw(st.integers(1, 4))
    g = draw(st.integers(1, 4))
    h = draw(st.sampled_from([8, 16, 32]))
    n_layers = draw(st.integers(1, 4))
    windows = tuple(draw(st.sampled_from([None, None, 3, 8])) for _ in range(n_layers))
    moe = draw(st.booleans())
    return ModelSpec(
        name="random",
        n_layers=n_layers,
        d_model=draw(st.sampled_from([32, 64, 96])),
        vocab_size=draw(st.integers(10, 500)),
        n_heads=k * g,
        n_kv_heads=k,
        head_dim=h,
        d_ff=draw(st.integers(8, 256)),
        ffn=draw(st.sampled_from(["mlp", "gated"])),
        norm=draw(st.sampled_from(["rms", "layer"])),
        position=draw(st.sampled_from(["rotary", "alibi"])),
        q_bias=draw(st.booleans()),
        o_bias=draw(st.booleans()),
        ffn_bias=draw(st.booleans()),
        parallel_block=draw(st.booleans()),
        tie_embeddings=draw(st.booleans()),
        layer_windows=windows,
        moe=MoESpec(n_experts=4, top_k=2, d_ff_expert=16, d_ff_shared=draw(st.sampled_from([0, 16]))) if moe else None,
    )


def flops(spec, stage, att, sc):
    return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, att), sc, spec))


@settings(max_examples=60, deadline=None)
@given(specs(), st.integers(1, 3), st.integers(1, 20), st.integers(1, 12))
def test_prefill_plus_decode_steps_equals_longer_prefill(spec, B, P, n):
    # flash counting, logits excluded on both sides (each decode step computes its own logits row)
    def body(stage, sc):
        return sum(
            c.values.get("flops", 0)
            for c in evaluate(build_ops(spec, stage, "flash"), sc, spec)
            if c.op.name != "lm_head"
        )

    steps = sum(body("decode", Scenario(B, 1, P + i)) for i in range(n))
    assert body("prefill", Scenario(B, P, 0)) + steps == body("prefill", Scenario(B, P + n, 0))


@settings(max_examples=60, deadline=None)
@given(specs(), st.integers(1, 5), st.integers(1, 30), st.sampled_from(["eager", "flash"]))
def test_flops_linear_in_batch(spec, B, P, att):
    assert flops(spec, "prefill", att, Scenario(B, P, 0)) == B * flops(spec, "prefill", att, Scenario(1, P, 0))
    assert flops(spec, "decode", att, Scenario(B, 1, P)) == B * flops(spec, "decode", att, Scenario(1, 1, P))


@settings(max_examples=60, deadline=None)
@given(specs(), st.integers(1, 4), st.integers(1, 30), st.integers(0, 10))
def test_eager_at_least_flash_and_bytes_at_least_weights(spec, B, P, prefix):
    sc = Scenario(B, P, prefix)
    assert flops(spec, "prefill", "eager", sc) >= flops(spec, "prefill", "flash", sc)
    d = Scenario(B, 1, P)
    assert flops(spec, "decode", "eager", d) >= flops(spec, "decode", "flash", d)
    for stage, s in (("prefill", sc), ("decode", d)):
        rep = stage_report(spec, stage, s, "flash", Precision())
        assert rep.bytes["total"] >= rep.bytes["weights"] > 0


@settings(max_examples=30, deadline=None)
@given(specs(), st.integers(1, 4), st.integers(1, 40))
def test_vectorised_equals_scalar(spec, B, P):
    S = np.arange(1, P + 1)
    arr = evaluate(build_ops(spec, "decode", "flash"), Scenario(B, 1, S), spec)
    one = evaluate(build_ops(spec, "decode", "flash"), Scenario(B, 1, P), spec)
    for a, o in zip(arr, one, strict=True):
        for k, v in o.values.items():
            assert float(np.asarray(a.values[k])[-1]) == float(v)
