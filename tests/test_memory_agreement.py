"""One memory model: the weights that serving (``analyze --concurrency``, ``plan``) subtracts before its KV pool
are the weights ``analyze`` reports, per GPU, for every weight format and on a parallel layout too (each module
in its own format: a quantised model keeps its embedding / LM head / router in 16 bit)."""

from __future__ import annotations

import pytest

from llmath import Workload
from llmath.analysis import analyze
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.service import serve
from llmath.deploy.serving_memory import draft_weight_bytes
from llmath.deploy.speculative import Speculation, draft_device
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model import formats
from llmath.model.checkpoint import precision_for
from llmath.model.registry import resolve
from llmath.ops.params import module_params, weight_bytes_per_element


@pytest.mark.parametrize("fmt", formats.names("weights"), ids=str)
def test_serving_weights_equal_analyze_weights_for_every_format(fmt):
    p = precision_for("llama-3.1-8b", None, fmt, None, None, None, None)
    a = analyze("llama-3.1-8b", "h100-sxm", precision=p, workload=Workload(prompt=128, gen=16))
    s = serve("llama-3.1-8b", "h100-sxm", workload=Workload(prompt=128, gen=16, concurrency=4), precision=p)
    assert s.to_dict()["memory"]["weights_bytes"] == pytest.approx(a.memory.weights_bytes, rel=1e-12)
    # and both are each module's parameters × that module's bytes per element, summed
    spec = resolve("llama-3.1-8b")
    bpe = weight_bytes_per_element(spec, p)
    assert a.memory.weights_bytes == pytest.approx(sum(n * bpe[m] for m, n in module_params(spec).items()), rel=1e-12)


@pytest.mark.parametrize(
    "model,fmt,layout",
    [
        ("llama-3.1-70b", "fp8", ParallelConfig(gpus=2)),  # fp8 layers, bf16 embedding and LM head, split over 2 GPUs
        ("qwen3-30b-a3b", "q4_k_m", None),  # a GGUF mix: each tensor kind in its own type
        ("llama-3.1-70b", "bf16", ParallelConfig(tp=2, pp=2)),  # the busiest pipeline stage holds the LM head
    ],
)
def test_serving_weights_equal_analyze_weights_per_gpu(model, fmt, layout):
    p = precision_for(model, None, fmt, None, None, None, None)
    a = analyze(model, "h100-sxm", precision=p, workload=Workload(prompt=128, gen=16), parallel=layout)
    s = serve(
        model, "h100-sxm", workload=Workload(prompt=128, gen=16, concurrency=4), precision=p, parallel=layout
    ).to_dict()
    per_gpu = [st["weights_bytes"] for st in a.parallel["stages"]] if a.parallel else [a.memory.weights_bytes]
    # serving reports the busiest pipeline stage: its weights are that stage's in analyze
    assert any(s["memory"]["weights_bytes"] == pytest.approx(w, rel=1e-12) for w in per_gpu)
    if len(per_gpu) == 1:
        assert s["memory"]["weights_bytes"] == pytest.approx(per_gpu[0], rel=1e-12)


def test_a_draft_model_adds_its_own_weights_per_gpu():
    # llama-3.2-1b beside llama-3.1-70b on 4 GPUs: the draft shares tp = 4, so each GPU holds what analyze puts
    # on one GPU of llama-3.2-1b at --gpus 4; the KV pool shrinks by exactly that much
    kw = {"workload": Workload(prompt=512, gen=128, concurrency=8), "parallel": ParallelConfig(gpus=4)}
    base = serve("llama-3.1-70b", "h100-sxm", **kw).to_dict()["memory"]
    spec_cfg = Speculation("draft", 4, 3.0, "llama-3.2-1b")
    with_draft = serve("llama-3.1-70b", "h100-sxm", speculation=spec_cfg, **kw).to_dict()["memory"]
    draft = analyze("llama-3.2-1b", "h100-sxm", parallel=ParallelConfig(gpus=4)).memory.weights_bytes
    assert with_draft["weights_bytes"] - base["weights_bytes"] == pytest.approx(draft, rel=1e-12)
    assert base["kv_pool_bytes"] - with_draft["kv_pool_bytes"] == pytest.approx(draft, rel=1e-9)


def test_an_mtp_module_adds_one_decoder_layer_without_embedding_and_head():
    # DeepSeek-V3 (config.json: hidden 7168, q_lora 1536, kv_lora 512, 128 heads of nope 128 + rope 64, v 128,
    # 256 routed + 1 shared experts of width 2048); its MTP module shares the embedding and the LM head
    # (arXiv:2412.19437 §2.2), so in bf16 it adds 2 bytes × one layer's parameters:
    D = 7168
    attn = D * 1536 + 1536 + 1536 * 128 * 192 + D * (512 + 64) + 512 + 512 * 128 * (128 + 128) + 128 * 128 * D
    moe = 257 * 3 * D * 2048 + 256 * D  # experts' gate/up/down + the router (its score bias is a buffer)
    norms = 3 * D  # the layer's two norms and the module's own final norm
    spec, hw = resolve("deepseek-v3"), get("h200")
    p = precision_for("deepseek-v3", None, "bf16", None, None, None, None)
    dev = Device(spec, hw, p, efficiency("expected", hw), "flash", True, None, 0)
    draft = draft_device(dev, Speculation("mtp", 1, 1.8))
    assert draft_weight_bytes(draft, "mtp") == 2 * (attn + moe + norms)


def test_mtp_needs_an_mtp_module():
    assert resolve("deepseek-v3").mtp_modules == 1  # config.json num_nextn_predict_layers = 1
    assert resolve("qwen3.5-397b-a17b").mtp_modules == 1  # config.json mtp_num_hidden_layers = 1
    assert resolve("llama-3.1-8b").mtp_modules == 0
    with pytest.raises(WorkloadError, match="has no multi-token-prediction module"):
        serve(
            "llama-3.1-8b",
            "h100-sxm",
            workload=Workload(prompt=128, gen=16, concurrency=4),
            speculation=Speculation("mtp", 1, 1.5),
        )
