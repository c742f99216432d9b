"""State-space hybrids whose layers are not one attention + FFN block each (model/families_ssm.py):
Nemotron-H (one block per layer from a pattern), Falcon-H1 (attention and Mamba-2 side by side). The oracle
test (test_oracle_causal_lm.py) proves them against transformers; here the reading rules, a bundled
checkpoint against its authors' figures and where transformers' cache differs from serving kernels.
Arithmetic in the comments."""

from __future__ import annotations

import pytest
from causal_lm_types import default_config
from helpers import registry_config

from llmath import Workload
from llmath.deploy.layout import ParallelConfig
from llmath.errors import ConfigError
from llmath.model.hf import spec_from_config
from llmath.ops.params import param_report
from llmath.ops.state import fixed_state_elements, kv_elements_per_position


def _nemotron(pattern: str, **extra):
    cfg = {k: v for k, v in default_config("nemotron_h").items() if k != "layers_block_type"}
    return spec_from_config(dict(cfg, hybrid_override_pattern=pattern, **extra), "nemotron_h")


def test_nemotron_h_pattern_string_reads_as_the_block_list():
    spec = _nemotron("M-*E")
    listed = {k: v for k, v in default_config("nemotron_h").items()}
    listed["layers_block_type"] = ["linear_attention", "mlp", "full_attention", "moe"]
    assert spec.layer_mixers == ("mamba2", "none", "attention", "none")
    assert spec.layer_moe == (False, False, False, True)
    assert param_report(spec).total == param_report(spec_from_config(listed, "nemotron_h")).total


def test_nemotron_h_refuses_an_unknown_block_letter():
    with pytest.raises(ConfigError, match=r"hybrid_override_pattern has \['X'\]"):
        _nemotron("M-X*")


def test_nemotron_h_8b_has_its_published_layout_and_size():
    """NVIDIA ADLR (research.nvidia.com/labs/adlr/nemotronh, arXiv:2504.03624): Nemotron-H-8B is 24 Mamba-2,
    24 MLP and 4 self-attention layers, '8B' parameters."""
    spec = spec_from_config(registry_config("nemotron-h-8b-base-8k"), "nemotron-h-8b-base-8k")
    kinds = spec.layer_mixers
    assert (kinds.count("mamba2"), kinds.count("none"), kinds.count("attention")) == (24, 24, 4)
    assert abs(param_report(spec).total - 8e9) / 8e9 < 0.02
    # per sequence, serving kernels: 24 Mamba-2 layers × (conv (C−1)·(I + 2·G·N) + state H·P·N)
    # I = 128·64 = 8192, G·N = 8·128 = 1024: 3·10240 + 128·64·128 = 30,720 + 1,048,576 = 1,079,296
    assert fixed_state_elements(spec) == 24 * 1_079_296
    # KV per position: 4 attention layers × K and V × 8 heads × 128 = 8192
    assert kv_elements_per_position(spec) == {None: 4 * 2 * 8 * 128}


def test_falcon_h1_layers_hold_both_a_kv_cache_and_a_mamba_state():
    """Every Falcon-H1 layer runs attention and Mamba-2 side by side: each caches K/V per position and a
    fixed state. FalconH1Config defaults: 32 layers, 8 KV heads of 128, I = 1024 (128 heads of 8),
    G·N = 1·256, C = 4."""
    spec = spec_from_config(default_config("falcon_h1"), "falcon_h1")
    assert set(spec.layer_mixers) == {"attention+mamba2"}
    assert kv_elements_per_position(spec) == {None: 32 * 2 * 8 * 128}
    # 3·(1024 + 512) + 128·8·256 = 4,608 + 262,144 = 266,752 per layer
    assert fixed_state_elements(spec) == 32 * 266_752


def test_transformers_keeps_a_whole_conv_window_in_hybrids_too():
    """transformers' hybrid caches keep conv_kernel = C inputs per conv channel (its torch fallback
    convolves the whole window); causal_conv1d_update, which vLLM and state-spaces/mamba run, keeps C − 1.
    The oracle test proves the C figure against transformers' tensors; the difference is one position of
    every conv channel of every Mamba layer: Falcon-H1 defaults 32 · (1024 + 2·256), Nemotron-H-8B
    24 · (8192 + 2·1024)."""
    falcon = spec_from_config(default_config("falcon_h1"), "falcon_h1")
    assert fixed_state_elements(falcon, "transformers") - fixed_state_elements(falcon) == 32 * 1536
    nemo = spec_from_config(registry_config("nemotron-h-8b-base-8k"), "nemotron-h-8b-base-8k")
    assert fixed_state_elements(nemo, "transformers") - fixed_state_elements(nemo) == 24 * 10240


def test_tensor_parallel_refusal_speaks_of_the_mixer_not_placeholder_heads():
    """A pure Mamba spec's attention fields are placeholders (1 head): a --tp is judged by its mixer's
    I = 1536 inner channels (vLLM MambaMixer splits them), never by the placeholder heads."""
    from llmath.analysis import analyze
    from llmath.errors import LayoutError

    mamba = spec_from_config(default_config("mamba"), "mamba")
    assert mamba.mixer is not None and mamba.mixer.d_inner == 1536 and mamba.n_heads == 1
    with pytest.raises(LayoutError, match="tp=5 must divide the Mamba mixer's 1536 inner channels"):
        analyze(mamba, "h100-sxm", workload=Workload(batch=8, prompt=64, gen=8), parallel=ParallelConfig(gpus=5, tp=5))
    analyze(
        mamba, "h100-sxm", workload=Workload(batch=8, prompt=64, gen=8), parallel=ParallelConfig(gpus=2, tp=2)
    )  # 1536 / 2: accepted
