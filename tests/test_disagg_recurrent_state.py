"""A disaggregated prefill worker sends a decode worker the request's KV cache of the prompt and its recurrent mixers'
fixed-size state (SGLang's KVArgs.state_type "mamba" and BaseKVSender.send(kv_indices, state_indices):
python/sglang/srt/disaggregation/base/conn.py at 5af4e125), the bytes the request counts in memory.

A Mamba-2 layer's state per sequence, as transformers 5.23's cache holds it (cache_utils.py LinearAttentionLayer:
conv_states of conv_dim = d_inner + 2·n_groups·d_state channels, recurrent_states of n_heads × head_dim × d_state)
and as the serving kernels keep it: the conv window is conv_kernel − 1 positions wide there (vLLM's
MambaStateShapeCalculator.mamba2_state_shape: conv (conv_kernel − 1, conv_dim), temporal (n_heads, head_dim,
d_state); vllm/model_executor/layers/mamba/mamba_utils.py), transformers' conv_kernel."""

from __future__ import annotations

import pytest

from llmath.deploy import engines
from llmath.deploy.disagg import kv_transfer_s
from llmath.deploy.serving import Decoding, Requests
from llmath.deploy.serving_memory import memory
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.model.registry import resolve

transformers = pytest.importorskip("transformers")
H100 = get("h100-sxm")
BF16 = Precision("bf16", "bf16", "bf16")
LINK = 450e9  # one direction of the H100's 900 GB/s NVLink (disagg.link_bytes_per_s)


def _device(spec) -> Device:
    return Device(spec, H100, BF16, efficiency("expected", H100), "flash", True, None)


def _mamba2_layer_state(d_inner, n_groups, d_state, conv_kernel, n_heads, head_dim, conv_bytes, ssm_bytes) -> int:
    conv = (d_inner + 2 * n_groups * d_state) * (conv_kernel - 1) * conv_bytes
    return conv + n_heads * head_dim * d_state * ssm_bytes


def test_a_hybrids_transfer_is_its_prompts_kv_plus_its_mamba_state():
    # Nemotron-H-8B (config.json): 52 layers, hybrid_override_pattern with 24 Mamba-2 layers (M) and 4 attention
    # layers (*); mamba_num_heads 128 × mamba_head_dim 64 = d_inner 8192, n_groups 8, ssm_state_size 128,
    # conv_kernel 4; attention 8 KV heads of 128. The SSM state in float32 (vLLM's Nemotron-H default), the conv
    # window in the KV cache's bf16:
    #   conv (8192 + 2·8·128)·3·2 = 61,440 B; ssm 128·64·128·4 = 4,194,304 B; 24 layers: 102,137,856 B
    #   KV of a 1024-token prompt: 4 layers · 2 (K, V) · 8 · 128 · 2 B · 1024 = 16,777,216 B
    state = 24 * _mamba2_layer_state(8192, 8, 128, 4, 128, 64, 2, 4)
    assert state == 102_137_856
    kv = 4 * 2 * 8 * 128 * 2 * 1024
    dev = _device(resolve("nemotron-h-8b-base-8k"))
    assert kv_transfer_s(Decoding(dev), 1024, H100, dev) == pytest.approx((kv + state) / LINK, rel=1e-12)
    # the same bytes a request counts in the engine's memory at its last position (prompt 1024 + 128 − 1)
    mem = memory(dev, engines.preset("vllm", H100), Requests(1024, 128))
    assert mem.kv_bytes_per_request == pytest.approx(4 * 2 * 8 * 128 * 2 * 1151 + state, rel=1e-12)


def test_a_pure_state_space_model_sends_its_state_whatever_the_prompt():
    # Mamba2Config's defaults: 64 layers, num_heads 128 × head_dim 64 = d_inner 8192 (expand 2 × hidden 4096),
    # n_groups 8, state_size 128, conv_kernel 4; no attention, so no KV cache; the SSM state in the KV cache's bf16:
    #   (8192 + 2·8·128)·3·2 + 128·64·128·2 = 61,440 + 2,097,152 = 2,158,592 B per layer; 64 layers 138,149,888 B
    c = transformers.Mamba2Config()
    per_layer = _mamba2_layer_state(
        c.num_heads * c.head_dim, c.n_groups, c.state_size, c.conv_kernel, c.num_heads, c.head_dim, 2, 2
    )
    assert c.num_hidden_layers * per_layer == 138_149_888
    dev = _device(spec_from_config(c.to_dict()))
    for prompt in (8, 1024):
        assert kv_transfer_s(Decoding(dev), prompt, H100, dev) == pytest.approx(138_149_888 / LINK, rel=1e-12)


def test_a_pure_attention_models_transfer_is_its_prompts_kv():
    # Llama-3-8B: 32 layers × (K and V) × 8 KV heads × 128 × 2 bytes = 131,072 B per token, no recurrent state
    dev = _device(resolve("llama-3-8b"))
    assert kv_transfer_s(Decoding(dev), 1024, H100, dev) == pytest.approx(131_072 * 1024 / LINK, rel=1e-12)
