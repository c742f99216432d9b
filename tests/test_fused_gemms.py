"""Weight GEMMs that serving engines run as one fused GEMM (ops/kernel.py): timed as that GEMM, counted apart."""

import math

import numpy as np
import pytest

from llmath import hardware
from llmath.hardware import efficiency_fit as ef
from llmath.hardware.roofline import efficiency, stage_times
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve
from llmath.ops import Scenario, table
from llmath.ops.kernel import Kernel

# Llama-3-8B (config.json): d_model 4096, 32 query heads and 8 KV heads of 128, intermediate 14336, 32 layers
D, Q, KV, F, L = 4096, 32 * 128, 8 * 128, 14336, 32


def _ops(t, names):
    idx = {op.name: i for i, op in enumerate(t.ops)}
    return [idx[n] for n in names]


def test_serving_tables_fuse_qkv_and_gate_up_eager_tables_do_not():
    spec = resolve("llama-3-8b")
    flash, eager = table(spec, "decode", "flash"), table(spec, "decode", "eager")
    qkv, gu = _ops(flash, ["attn.q_proj", "attn.k_proj", "attn.v_proj"]), _ops(flash, ["ffn.gate", "ffn.up"])
    # one fused QKV GEMM of n = 4096 + 2·1024 = 6144 outputs, one gate/up GEMM of 2·14336: one launch per layer each
    assert {flash.ops[i].kernel for i in qkv} == {Kernel.FUSED_QKV}
    assert flash.gemm_weights[qkv].tolist() == [D * (Q + 2 * KV)] * 3
    assert flash.gemm_weights[gu].tolist() == [D * 2 * F] * 2
    assert flash.launches[qkv].sum() == L and flash.launches[gu].sum() == L
    down = _ops(flash, ["ffn.down"])[0]
    assert flash.gemm_weights[down] == F * D and flash.launches[down] == L  # not fused: its own weights, 32
    # transformers' eager modules run q, k, v and gate, up apart: no trait, their own weights, one launch each
    e_qkv = _ops(eager, ["attn.q_proj", "attn.k_proj", "attn.v_proj"])
    assert {eager.ops[i].kernel for i in e_qkv} == {Kernel.NONE}
    assert eager.gemm_weights[e_qkv].tolist() == [D * Q, D * KV, D * KV] and eager.launches[e_qkv].sum() == 3 * L


def test_fusion_changes_no_flops_or_parameters():
    spec = resolve("llama-3-8b")
    flash, eager = table(spec, "decode", "flash"), table(spec, "decode", "eager")
    sc = Scenario(4, 1, 100)
    names = ["attn.q_proj", "attn.k_proj", "attn.v_proj", "ffn.gate", "ffn.up"]
    f, e = _ops(flash, names), _ops(eager, names)
    assert np.array_equal(flash.values(sc)[f], eager.values(sc)[e])  # FLOPs and bytes of every class
    own = [D * Q, D * KV, D * KV, D * F, D * F]
    assert [flash.ops[i].n_params for i in f] == [eager.ops[i].n_params for i in e] == own


@pytest.mark.parametrize("device", ["h100-sxm", "b200"])
def test_fused_qkv_takes_the_fitted_time_of_one_gemm(device):
    """The q, k and v operators of a decode step add up to the fitted GEMM model's time of the fused GEMM (m = 16
    tokens, n = 6144, k = 4096, bf16) per layer, with its per-kernel time once."""
    hw, p = hardware.get(device), Precision.uniform("bf16")
    t = table(resolve("llama-3-8b"), "decode")
    time_s = stage_times(t, Scenario(16, 1, 1000), hw, p, efficiency("expected", hw), decode=True)[0]
    got = time_s[_ops(t, ["attn.q_proj", "attn.k_proj", "attn.v_proj"])].sum() / L
    want = ef.kernel_time_on(hw, "gemm", m=16, n=Q + 2 * KV, k=D, fmt="bf16")
    # the roofline's memory feature is the weights' bytes where the kernel model's is all bytes (16 rows of
    # activations on 25M weights: < 0.2% apart)
    assert math.isclose(got, want, rel_tol=0.02)
    apart = sum(ef.kernel_time_on(hw, "gemm", m=16, n=n, k=D, fmt="bf16") for n in (Q, KV, KV))
    assert got < apart  # three GEMMs cost more: two more per-kernel times and smaller weight streams
