"""Quantised formats run as the engine runs them on the device (llmath.hardware.kernels, data/format_kernels.json)."""

from __future__ import annotations

import pytest

import llmath
from llmath import Workload, hardware
from llmath.errors import WorkloadError
from llmath.hardware import kernels
from llmath.model.checkpoint import precision_for
from llmath.model.dtypes import Precision


def _kernel(weights, device, engine="vllm", **flags):
    p = precision_for("llama-3-8b", weights=weights, **flags)
    a = llmath.analyze("llama-3-8b", device, workload=Workload(batch=1, prompt=128, gen=2), precision=p, engine=engine)
    return a.to_dict()["precision"]["kernel"]


@pytest.mark.parametrize(
    ("weights", "device", "engine", "cls"),
    [
        # vLLM docs, FP8 W8A8: W8A8 on compute capability >= 8.9 (Ada, Hopper, Blackwell) and MI300x;
        # W8A16 (FP8 Marlin) below it (Ampere)
        ("fp8", "h100-sxm", "vllm", "W8A8"),
        ("fp8", "l40s", "sglang", "W8A8"),
        ("fp8", "mi300x", "vllm", "W8A8"),
        ("fp8", "a100-sxm-80gb", "vllm", "W8A16"),
        # NVFP4: W4A4 on Blackwell's FP4 tensor cores, FP4 Marlin W4A16 on Hopper
        ("nvfp4", "b200", "trtllm", "W4A4"),
        ("nvfp4", "h100-sxm", "vllm", "W4A16"),
        # AWQ / GPTQ: Marlin W4A16 everywhere
        ("awq", "h100-sxm", "vllm", "W4A16"),
        ("gptq", "rtx-4090", "sglang", "W4A16"),
        # MXFP4 (gpt-oss): vLLM's default SM100 backend is MXFP4 x BF16; TensorRT-LLM's guide lists MXFP8
        # activations on B200/GB200/B300/GB300 and BF16 on H200
        ("mxfp4", "b200", "vllm", "W4A16"),
        ("mxfp4", "b200", "trtllm", "W4A8"),
        ("mxfp4", "h200", "trtllm", "W4A16"),
    ],
)
def test_a_declared_weight_format_runs_in_the_engines_kernel_class(weights, device, engine, cls):
    k = _kernel(weights, device, engine)
    assert k["class"] == cls and k["engine"] == engine
    assert k["source"] and engine in k["why"]


def test_an_explicit_activations_format_is_kept():
    # --activations bf16 overrides the engine's choice: fp8 weights stay W8A16 on an H100
    k = _kernel("fp8", "h100-sxm", activations="bf16")
    assert k["class"] == "W8A16" and "flag" in k["why"]
    # a Precision built by the caller states exactly what runs
    p = Precision(weights="fp8", activations="bf16")
    assert kernels.engine_precision(p, hardware.get("h100-sxm")) is p
    # a checkpoint's own GEMM-input format (ModelOpt NVFP4: W4A4) is kept; on Hopper it falls back to W4A16
    p = Precision(weights="nvfp4", activations="bf16", act_quant="nvfp4", sources={"weights": "checkpoint"})
    assert kernels.engine_precision(p, hardware.get("h100-sxm"), "trtllm") is p
    assert kernels.kernel_report(p, hardware.get("h100-sxm"))["class"] == "W4A16"


def test_llama_cpp_has_no_activation_rule():
    assert _kernel("fp8", "h100-sxm", "llama.cpp")["class"] == "W8A16"


def test_an_unknown_engine_is_a_usage_error():
    with pytest.raises(WorkloadError, match="engine='foo' is not one of vllm"):
        kernels.engine_precision(Precision(), hardware.get("h100-sxm"), "foo")


def _fp8_devices():
    return [n for n in hardware.names() if "fp8" in hardware.get(n).peak_flops_per_s]


@pytest.mark.parametrize("device", _fp8_devices())
def test_w8a8_is_never_slower_than_w8a16_on_a_device_with_fp8_tensor_cores(device):
    """W8A8 reads the same fp8 weights as W8A16 and runs its GEMMs at a tensor rate at least the 16-bit one, so
    it cannot be slower at the same shape: batch-1 and batch-32 decode, and prefill of 512 and 4096 tokens."""
    w8a8, w8a16 = Precision(weights="fp8", activations="fp8"), Precision(weights="fp8", activations="bf16")
    for batch, prompt in ((1, 512), (32, 512), (1, 4096)):
        a = llmath.analyze("llama-3-8b", device, workload=Workload(batch=batch, prompt=prompt, gen=2), precision=w8a8)
        b = llmath.analyze("llama-3-8b", device, workload=Workload(batch=batch, prompt=prompt, gen=2), precision=w8a16)
        assert a.decode.time_s <= b.decode.time_s * (1 + 1e-9), (batch, prompt)
        assert a.prefill.time_s <= b.prefill.time_s * (1 + 1e-9), (batch, prompt)


@pytest.mark.parametrize(
    ("device", "tflops"),
    [
        # Ada whitepaper appendix: RTX 4090 FP16 tensor 330.3 dense with FP16 accumulate (165.2 with FP32)
        ("rtx-4090", 330.3),
        # GA102 whitepaper appendix A: RTX 3090 FP16 tensor 142 dense with FP16 accumulate (71 with FP32)
        ("rtx-3090", 142.0),
    ],
)
def test_llama_cpp_fp16_gemms_run_at_the_geforce_fp16_accumulate_rate(device, tflops):
    hw = hardware.get(device)
    assert kernels.engine_hardware(hw, "llama.cpp").peak_flops_per_s["fp16"] == pytest.approx(tflops * 1e12)
    assert kernels.engine_hardware(hw, "vllm") is hw  # vLLM accumulates in FP32: the registry's rate
    assert kernels.engine_hardware(hw, "llama.cpp").peak_flops_per_s["bf16"] == hw.peak_flops_per_s["bf16"]
    p = precision_for("llama-3-8b", dtype="fp16")
    fast, slow = (
        llmath.analyze(
            "llama-3-8b", device, workload=Workload(batch=1, prompt=512, gen=1), precision=p, engine=e
        ).prefill.time_s
        for e in ("llama.cpp", "vllm")
    )
    assert fast < slow
    rep = _kernel("fp16", device, engine="llama.cpp")
    assert rep["accumulate"]["flops_per_s"] == pytest.approx(tflops * 1e12)
    assert "COMPUTE_16F" in rep["accumulate"]["kernel"]


@pytest.mark.parametrize("device", ["l40s", "rtx-4000-ada", "h100-pcie", "a100-sxm-80gb", "apple-m2-ultra-76c"])
def test_parts_with_one_accumulate_rate_keep_their_peak_under_llama_cpp(device):
    # professional and datacenter parts run FP16 tensor math at one rate whatever the accumulator (datasheets)
    hw = hardware.get(device)
    assert kernels.engine_hardware(hw, "llama.cpp") is hw


def _q_proj(weights, device, engine, **kw):
    p = precision_for("llama-3.2-3b", dtype="fp16", weights=weights)
    a = llmath.analyze(
        "llama-3.2-3b", device, workload=Workload(batch=1, prompt=512, gen=1), precision=p, engine=engine, **kw
    )
    return next(o for o in a.prefill.ops if o.name == "attn.q_proj")


@pytest.mark.parametrize(("weights", "tflops"), [("q4_0", 4.50), ("q4_k_m", 4.66), ("q5_k_m", 4.50)])
def test_llama_cpp_prompt_gemms_on_gfx1151_run_at_the_measured_mul_mat_rate(weights, tflops):
    # test-backend-ops on a Radeon 8060S (gfx1151), MUL_MAT m=4096 n=512 k=14336: q4_0 4.50 TFLOPS, q4_K 4.66
    # (https://github.com/ROCm/legacy-rocm-build/issues/4748); q5_k_m's main type was not taken from there and
    # takes q4_0's rate (f32 5.63, f16 4.89, bf16 4.22, q4_0 4.50, q4_K 4.66: the rate does not follow the type)
    op = _q_proj(weights, "strix-halo", "llama.cpp")
    assert op.compute_s == pytest.approx(op.flops / (tflops * 1e12), rel=1e-9)
    assert _q_proj(weights, "strix-halo", "vllm").compute_s < op.compute_s / 5  # other engines: the default model
    ideal = _q_proj(weights, "strix-halo", "llama.cpp", efficiency_mode="ideal")
    assert ideal.compute_s == pytest.approx(op.flops / 59.392e12, rel=1e-9)  # ideal: the datasheet roof
    given = _q_proj(weights, "strix-halo", "llama.cpp", matmul=0.5)  # a fraction given applies as given
    assert given.compute_s == pytest.approx(op.flops / (0.5 * 59.392e12), rel=1e-9)


def test_mul_mat_rates_apply_only_where_measured():
    hw = hardware.get("strix-halo")
    assert kernels.mul_mat_rate(hw, "vllm", "q4_0") is None
    assert kernels.mul_mat_rate(hardware.get("rtx-4090"), "llama.cpp", "q4_0") is None
    assert kernels.mul_mat_rate(hw, "llama.cpp", "fp16")[0] == pytest.approx(4.89e12)
    assert kernels.mul_mat_rate(hardware.get("mi355x"), "llama.cpp", "q4_0") is None  # CDNA4: not measured
    for r in kernels.data()["mul_mat"]["rates"]:
        assert r["source"].startswith("https://") and r["n"] == 512
        assert all(hardware.get(d) for d in r["devices"])
        assert "transfer" not in r or r["transfer"]["why"]


def test_llama_cpp_prompt_gemms_on_mi300x_and_its_cdna3_sibling_run_at_the_measured_rate():
    # test-backend-ops on MI300X, hipBLAS path: MUL_MAT f16 m=4096 n=512 k=14336, 812.32 us/run, 74.02 TFLOPS;
    # q4_0 55.61 TFLOPS (https://github.com/ggml-org/llama.cpp/pull/14624). MI325X: the same gfx942 part and the
    # same 1,307.4 TFLOPS dense FP16 peak (AMD datasheets), so the same fraction gives the same rate
    for device in ("mi300x", "mi325x"):
        op = _q_proj("q4_0", device, "llama.cpp")
        assert op.compute_s == pytest.approx(op.flops / 55.61e12, rel=1e-9)
        hw = hardware.get(device)
        assert kernels.mul_mat_rate(hw, "llama.cpp", "fp16")[0] == pytest.approx(74.02e12 / 1307.4e12 * 1307.4e12)
    assert "measured rate on mi325x" in _kernel_rule("mi325x") and "carried to mi325x (cdna3)" in _kernel_rule("mi325x")


def _kernel_rule(device):
    p = precision_for("llama-3.2-3b", dtype="fp16", weights="q4_0")
    a = llmath.analyze(
        "llama-3.2-3b", device, workload=Workload(batch=1, prompt=512, gen=1), precision=p, engine="llama.cpp"
    )
    return a.to_dict()["efficiency"]["rule"]


def test_a_measured_engine_rate_replaces_a_fitted_gemm_models_compute_fraction_only(monkeypatch):
    # a device with a GEMM model fitted to TensorRT-LLM's kernels: an engine's own measured rate sets its weight
    # GEMMs' compute time (FLOPs / rate), while the fitted memory fraction and per-kernel time stay
    fitted = _q_proj("q4_0", "h100-sxm", "llama.cpp")
    assert kernels.mul_mat_rate(hardware.get("h100-sxm"), "llama.cpp", "q4_0") is None
    entry = {"engines": ["llama.cpp"], "devices": ["h100-sxm"], "n": 512, "tflops": {"q4_0": [100.0, "line"]}}
    table = kernels.data() | {"mul_mat": {"rates": [entry | {"source": "https://example.org"}]}}
    monkeypatch.setattr(kernels, "data", lambda: table)
    op = _q_proj("q4_0", "h100-sxm", "llama.cpp")
    assert op.compute_s == pytest.approx(op.flops / 100e12, rel=1e-9)
    assert op.memory_s == pytest.approx(fitted.memory_s, rel=1e-9)


def test_llama_cpp_16_bit_decode_on_ga102_streams_at_the_measured_mat_vec_fraction():
    # test-backend-ops with an RTX 3090 Ti (https://github.com/ggml-org/llama.cpp/pull/15131): MUL_MAT bf16
    # m=4096 n=1 k=14336 at 0.96 TFLOPS: 117.44 MFLOP in 122.3 us for 117.51 MB (weights, f32 input and output),
    # 960.6 GB/s of 1,008 GB/s = 0.953; the RTX 3090 (GA102, 936 GB/s) streams its weights at that fraction
    def q_proj(weights, engine):
        p = precision_for("llama-3-8b", dtype="fp16", weights=weights)
        a = llmath.analyze(
            "llama-3-8b", "rtx-3090", workload=Workload(batch=1, prompt=1, gen=2), precision=p, engine=engine
        )
        return next(o for o in a.decode.ops if o.name == "attn.q_proj")

    op = q_proj("fp16", "llama.cpp")
    assert op.memory_s == pytest.approx(sum(op.bytes.values()) / (0.953 * 936e9), rel=1e-9)
    assert q_proj("fp16", "vllm").memory_s > op.memory_s * 1.2  # other engines: the fitted Ampere fraction
    quantised = q_proj("q4_k_m", "llama.cpp")  # MMVQ, another kernel: not measured, the fit stays
    assert quantised.memory_s > sum(quantised.bytes.values()) / (0.953 * 936e9) * 1.2
