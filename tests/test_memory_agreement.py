"""One memory model: the weights that serving (``analyze --concurrency``, ``plan``) subtracts before its KV pool
are the weights ``analyze`` reports, per GPU, for every weight format and on a parallel layout too (each module
in its own format: a quantised model keeps its embedding / LM head / router in 16 bit)."""

from __future__ import annotations

import pytest

from llmath.analysis import analyze
from llmath.deploy.service import serve
from llmath.model import formats
from llmath.model.checkpoint import precision_for
from llmath.model.registry import resolve
from llmath.ops.params import module_params, weight_bytes_per_element


@pytest.mark.parametrize("fmt", formats.names("weights"), ids=str)
def test_serving_weights_equal_analyze_weights_for_every_format(fmt):
    p = precision_for("llama-3.1-8b", None, fmt, None, None, None, None)
    a = analyze("llama-3.1-8b", "h100-sxm", precision=p, prompt=128, gen=16)
    s = serve("llama-3.1-8b", "h100-sxm", prompt=128, gen=16, concurrency=4, precision=p)
    assert s.to_dict()["memory"]["weights_bytes"] == pytest.approx(a.memory.weights_bytes, rel=1e-12)
    # and both are each module's parameters × that module's bytes per element, summed
    spec = resolve("llama-3.1-8b")
    bpe = weight_bytes_per_element(spec, p)
    assert a.memory.weights_bytes == pytest.approx(sum(n * bpe[m] for m, n in module_params(spec).items()), rel=1e-12)


@pytest.mark.parametrize(
    "model,fmt,layout",
    [
        ("llama-3.1-70b", "fp8", {"gpus": 2}),  # fp8 layers, bf16 embedding and LM head, split over 2 GPUs
        ("qwen3-30b-a3b", "q4_k_m", {}),  # a GGUF mix: each tensor kind in its own type
        ("llama-3.1-70b", "bf16", {"tp": 2, "pp": 2}),  # the busiest pipeline stage holds the LM head
    ],
)
def test_serving_weights_equal_analyze_weights_per_gpu(model, fmt, layout):
    p = precision_for(model, None, fmt, None, None, None, None)
    a = analyze(model, "h100-sxm", precision=p, prompt=128, gen=16, **layout)
    s = serve(model, "h100-sxm", prompt=128, gen=16, concurrency=4, precision=p, **layout).to_dict()
    per_gpu = [st["weights_bytes"] for st in a.parallel["stages"]] if a.parallel else [a.memory.weights_bytes]
    # serving reports the busiest pipeline stage: its weights are that stage's in analyze
    assert any(s["memory"]["weights_bytes"] == pytest.approx(w, rel=1e-12) for w in per_gpu)
    if len(per_gpu) == 1:
        assert s["memory"]["weights_bytes"] == pytest.approx(per_gpu[0], rel=1e-12)
