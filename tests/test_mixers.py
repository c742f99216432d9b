"""State-space mixers (ops/mixers.py): per-sequence fixed state, its place in the roofline, and where
transformers' cache differs from what serving kernels hold. Arithmetic in the comments."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config

from llmath import Workload
from llmath.analysis import analyze, kv_cache_bytes
from llmath.deploy.layout import ParallelConfig
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops, evaluate
from llmath.ops.state import fixed_state_elements


@pytest.fixture(scope="module")
def mamba(tmp_path_factory):
    return spec_from_config(default_config("mamba", str(tmp_path_factory.mktemp("cfg"))), "mamba")


def _total(spec, stage, attention, cls, sc):
    return sum(c.values.get(cls, 0) for c in evaluate(build_ops(spec, stage, attention), sc, spec))


def test_fixed_state_is_conv_window_plus_ssm_state(mamba):
    # MambaConfig defaults: 32 layers, I = 1536, N = 16, C = 4. Serving kernels keep C − 1 conv inputs:
    # 32 · ((4 − 1)·1536 + 1536·16) = 32 · 29,184 = 933,888 elements, 1,867,776 bytes in bf16
    assert fixed_state_elements(mamba) == 933_888
    assert kv_cache_bytes(mamba, 1, 10, Precision()) == kv_cache_bytes(mamba, 1, 100_000, Precision()) == 1_867_776
    a = analyze(mamba, None, workload=Workload(batch=3, prompt=64, gen=8)).to_dict()
    assert a["state"]["fixed_bytes_per_sequence"] == 1_867_776 and a["state"]["kv_bytes_per_token"] == 0
    assert a["kv_cache"]["bytes"] == a["memory"]["kv_cache_bytes"] == 3 * 1_867_776


def test_transformers_keeps_one_more_conv_position_than_serving_kernels(mamba):
    """transformers' cache keeps conv_kernel = C inputs per channel (its fallback convolves the whole
    window and keeps the last output); causal_conv1d_update (state-spaces/causal-conv1d, used by vLLM)
    keeps C − 1, the minimum a width-C causal conv needs. The oracle test proves the C figure against
    transformers' tensors; here the difference: 32 layers · 1536 channels."""
    p = Precision()
    assert fixed_state_elements(mamba, "transformers") - fixed_state_elements(mamba) == 32 * 1536
    assert kv_cache_bytes(mamba, 2, 9, p, layout="transformers") == 2 * 2 * 32 * (4 * 1536 + 1536 * 16)


def test_decode_step_reads_and_writes_the_state(mamba):
    # a decode step reads and writes each sequence's state once: 933,888 elements · 2 B · B = 4
    sc = Scenario(4, 1, 100)
    assert _total(mamba, "decode", "flash", "kv_read", sc) == 4 * 933_888
    assert _total(mamba, "decode", "flash", "kv_write", sc) == 4 * 933_888
    # a prefill from an empty state writes it, reads none
    assert _total(mamba, "prefill", "flash", "kv_read", Scenario(4, 64, 0)) == 0


def test_eager_convolves_the_padding_flash_does_not(mamba):
    # eager F.conv1d(padding=C−1) computes T + C − 1 outputs per channel; the fused kernel T:
    # difference = 2 · I · C · (C − 1) · B · L = 2 · 1536 · 4 · 3 · 2 · 32 = 2,359,296
    sc = Scenario(2, 9, 0)
    diff = _total(mamba, "prefill", "eager", "flops", sc) - _total(mamba, "prefill", "flash", "flops", sc)
    assert diff == 2 * 1536 * 4 * 3 * 2 * 32


def test_data_parallel_mixer_layers_hold_the_whole_model_per_gpu(mamba):
    """dp = 2 (tp = 1): each GPU holds every mixer weight, as on one GPU (its mixer ops are unsharded)."""
    one = analyze(mamba, "h100-sxm", workload=Workload(batch=8, prompt=64, gen=8))
    two = analyze(
        mamba, "h100-sxm", workload=Workload(batch=8, prompt=64, gen=8), parallel=ParallelConfig(gpus=2, tp=1, dp=2)
    )
    assert two.memory.weights_bytes == one.memory.weights_bytes


def test_prefill_after_a_cached_prefix_reads_the_state_once(mamba):
    # continuing a cached prefix starts from its state: read once per sequence, 4 · 933,888 elements
    assert _total(mamba, "prefill", "flash", "kv_read", Scenario(4, 64, 100)) == 4 * 933_888
    assert _total(mamba, "prefill", "eager", "kv_read", Scenario(4, 64, 100)) == 4 * 933_888
