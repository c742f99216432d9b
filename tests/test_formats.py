"""Number formats: bytes per element from their block layouts, per-module precision, what devices execute."""

import pytest

from llmath import Precision, Workload, analyze
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.execution import executed
from llmath.model import formats as fmt
from llmath.model import registry
from llmath.ops.params import module_params, weight_bytes

# bytes per element, each from the layout written out (group 128 where a format is grouped)
EXPECTED_BPE = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,  # e4m3, one fp32 scale per tensor (not counted)
    "fp8-channel": 1,  # one fp32 scale per row (not counted)
    "fp8-block": (128 * 128 + 4) / (128 * 128),  # one fp32 scale per 128x128 block
    "int8": 1 + 2 / 128,  # int8 + fp16 scale per 128
    "int8-channel": 1,
    "int4": 0.5 + 2 / 128,  # 4 bits + fp16 scale per 128
    "awq": 0.5 + (2 + 0.5) / 128,  # 4 bits + fp16 scale + 4-bit zero per 128
    "gptq": 0.5 + (2 + 0.5) / 128,
    "gptq-int8": 1 + (2 + 1) / 128,  # 8 bits + fp16 scale + 8-bit zero per 128
    "nvfp4": (16 * 4 / 8 + 1) / 16,  # e2m1 x16 + one e4m3 scale = 9 bytes per 16 (4.5 bits)
    "mxfp4": (32 * 4 / 8 + 1) / 32,  # e2m1 x32 + one e8m0 scale = 17 bytes per 32 (4.25 bits)
    "nf4": (64 * 4 / 8 + 4) / 64,  # 4 bits + fp32 absmax per 64 (QLoRA: +0.5 bit)
    "nf4-dq": (256 * 64 * 4 / 8 + 256 + 4) / (256 * 64),  # 8-bit absmax per 64 + fp32 per 256 blocks (+0.127 bit)
    "fp4-bnb": (64 * 4 / 8 + 4) / 64,
    "int8-bnb": 1,
    "q4_0": (2 + 16) / 32,  # fp16 d + 32 nibbles
    "q4_1": (2 + 2 + 16) / 32,  # d, m + 32 nibbles
    "q5_0": (2 + 4 + 16) / 32,  # d + 32 high bits + 32 nibbles
    "q5_1": (2 + 2 + 4 + 16) / 32,
    "q8_0": (2 + 32) / 32,
    "q2_k": (16 + 64 + 2 + 2) / 256,  # scales, 2-bit quants, d, dmin
    "q3_k": (32 + 64 + 12 + 2) / 256,  # hmask, 2-bit low quants, 6-bit scales, d
    "q4_k": (2 + 2 + 12 + 128) / 256,  # d, dmin, scales, nibbles
    "q5_k": (2 + 2 + 12 + 32 + 128) / 256,
    "q6_k": (128 + 64 + 16 + 2) / 256,  # low 4 bits, high 2 bits, int8 scales, d
}


def test_every_format_has_its_bytes_per_element_checked():
    assert set(EXPECTED_BPE) == set(fmt.formats())


@pytest.mark.parametrize("name", sorted(EXPECTED_BPE))
def test_bytes_per_element_from_the_layout(name):
    assert fmt.bytes_per_element(name) == pytest.approx(EXPECTED_BPE[name], rel=1e-15)
    assert fmt.get(name).source  # every format names its source


def test_gguf_layouts_equal_the_gguf_package():
    # an independent table: gguf-py's GGML_QUANT_SIZES (block size, type size) per quantisation type
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    for name in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "mxfp4"):
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType[name.upper()]]
        assert fmt.bytes_per_element(name) == size / block, name


def test_grouped_formats_follow_the_group_size():
    # awq at group 64: 0.5 + 2.5 / 64
    assert Precision(weights="awq", group_size=64).weight_bytes == 0.5 + 2.5 / 64
    assert Precision(weights="int4").weight_bytes == 0.5 + 2 / 128


def test_names_are_checked_per_role():
    assert Precision(weights="Q4_K_M").weights == "q4_k_m"  # case-insensitive llama.cpp names
    with pytest.raises(WorkloadError, match="'q4_k' is not a known precision for kv"):
        Precision(kv="q4_k")
    with pytest.raises(WorkloadError, match="activations format 'awq'"):
        Precision(activations="awq")


def test_compute_format_of_weight_and_activation_pairs():
    assert fmt.compute_format("awq", "bf16") == "bf16"  # W4A16 dequantises
    assert fmt.compute_format("fp8-block", "fp8") == "fp8"  # W8A8
    assert fmt.compute_format("fp8", "bf16") == "bf16"  # W8A16: the wider operand
    assert fmt.compute_format("nvfp4", "nvfp4") == "fp4"  # W4A4
    assert fmt.compute_format("bf16", "fp8") == "bf16"  # bf16 weights with fp8 inputs run in bf16
    assert fmt.compute_format("int4", "int8") == "int8"  # W4A8 (QServe-style) in int8


def test_int4_keeps_embedding_and_lm_head_in_16_bit():
    # AWQ/GPTQ checkpoints quantise only the decoder blocks' linear layers: Llama-3-8B with --weights int4
    spec = registry.spec("llama-3-8b")
    D, V, F, L, KV = 4096, 128256, 14336, 32, 1024
    linear = L * (2 * D * D + 2 * D * KV + 3 * D * F)  # q, o; k, v; gate, up, down
    norms = L * 2 * D + D
    expected = 2 * V * D * 2 + linear * (0.5 + 2 / 128) + norms * 2  # embedding + untied LM head in bf16
    p = Precision(weights="int4")
    assert sum(weight_bytes(spec, p).values()) == pytest.approx(expected, rel=1e-12)
    assert p.weight_format("embedding") == "bf16" and p.weight_format("lm_head") == "bf16"
    # quantising them too (modules=...) is an explicit choice, and it is faster: fewer bytes per token
    allq = Precision(weights="int4", modules={"embedding": "int4", "lm_head": "int4"})
    a = analyze("llama-3-8b", "h100-sxm", precision=p, workload=Workload(gen=16))
    b = analyze("llama-3-8b", "h100-sxm", precision=allq, workload=Workload(gen=16))
    assert a.generation["tpot_s"] > b.generation["tpot_s"]
    assert a.memory.weights_bytes == pytest.approx(expected, rel=1e-12)


def test_gguf_mix_keeps_output_q6_k_and_router_f32():
    p = Precision(weights="q4_k_m")
    assert p.weight_format("lm_head") == "q6_k"  # llama-quant.cpp: output.weight -> Q6_K
    assert p.weight_format("embedding") == "q4_k"  # token_embd keeps the base type
    assert p.weight_format("router") == "fp32"
    assert Precision(weights="q8_0").weight_format("lm_head") == "q8_0"


def test_q4_k_m_mix_bytes_follow_llama_cpp_rules():
    # Llama-3-8B (32 layers): use_more_bits(i, 32) = i < 4 or i >= 28 or (i - 4) % 3 == 2 -> 16 layers
    # (0-3, 6, 9, ..., 27: 8 of the 24 middle ones, 28-31) get attn_v and ffn_down in q6_k, the rest q4_k
    from llmath.model.checkpoint import expand_mix

    spec = registry.spec("llama-3-8b")
    more = [i for i in range(32) if i < 4 or i >= 28 or (i - 4) % 3 == 2]
    assert len(more) == 16
    q4k, q6k = 144 / 256, 210 / 256
    D, KV, F = 4096, 1024, 14336
    att = 32 * (2 * D * D + D * KV) * q4k + (32 * D * KV) * (16 * q6k + 16 * q4k) / 32  # q, o, k; v
    ffn = 32 * 2 * D * F * q4k + D * F * (16 * q6k + 16 * q4k)  # gate, up; down
    p = expand_mix(spec, Precision(weights="q4_k_m", activations="fp16", kv="fp16"))
    wb = weight_bytes(spec, p)
    assert wb["attention"] == pytest.approx(att, rel=1e-12)
    assert wb["ffn"] == pytest.approx(ffn, rel=1e-12)
    assert wb["lm_head"] == module_params(spec)["lm_head"] * q6k


@pytest.mark.parametrize(
    "hw, asked, runs",
    [
        ("a100-sxm-80gb", "fp8", "bf16"),  # no fp8 tensor cores: W8A16 (Marlin) in bf16
        ("h100-sxm", "fp4", "bf16"),  # Hopper has no fp4: NVFP4/MXFP4 dequantised (W4A16)
        ("b200", "fp4", "fp4"),
        ("apple-m3-max", "bf16", "fp16"),  # Apple GPUs: bf16 requests run in fp16
        ("v100-sxm-32gb", "bf16", "fp16"),
    ],
)
def test_devices_run_what_they_have(hw, asked, runs):
    got, note = executed(get(hw), asked)
    assert got == runs
    assert (note is None) == (asked == runs)


def test_apple_bf16_default_is_not_an_error():
    a = analyze("llama-3.2-1b", "apple-m3-max", workload=Workload(gen=4))
    assert a.precision["compute"] == {"bf16": "fp16"}
    assert any("no bf16 peak" in w for w in a.warnings)


def test_nvfp4_w4a4_uses_the_fp4_peak_on_b200_only():
    # NVFP4 W4A4 prefill: on B200 the weight GEMMs run at the fp4 peak, on H100 at bf16 (fallback)
    p = Precision(weights="nvfp4", activations="bf16", act_quant="nvfp4")
    b = analyze("llama-3-8b", "b200", precision=p, workload=Workload(prompt=4096, gen=2), efficiency_mode="ideal")
    h = analyze("llama-3-8b", "h100-sxm", precision=p, workload=Workload(prompt=4096, gen=2), efficiency_mode="ideal")
    assert b.precision["compute"] == {"bf16": "bf16", "fp4": "fp4"}
    assert h.precision["compute"] == {"bf16": "bf16", "fp4": "bf16"}
    # q_proj's compute time = its FLOPs / the peak it runs at
    bq = next(r for r in b.prefill.ops if r.name == "attn.q_proj")
    assert bq.compute_s == pytest.approx(bq.flops / get("b200").peak_flops_per_s["fp4"], rel=1e-9)


@pytest.mark.parametrize(
    "mix, published_gb",
    # Meta-Llama-3-8B GGUF file sizes on the hub (https://huggingface.co/armx40/Meta-Llama-3-8B-Instruct-GGUF,
    # tree at e6abf31): Q2_K 3.18 GB, Q3_K_M 4.02, Q4_0 4.66, Q4_K_S 4.69, Q4_K_M 4.92 (same 4.92 GB in
    # eric-musa/, mmnga/, sdkramer10/ copies). A file also holds the tokenizer and metadata (a few MB), so the
    # weights llmath derives from llama.cpp's type rules must land just below, within 0.5%.
    [("q2_k", 3.18), ("q3_k_m", 4.02), ("q4_0", 4.66), ("q4_k_s", 4.69), ("q4_k_m", 4.92)],
)
def test_llama_cpp_mixes_match_published_gguf_sizes(mix, published_gb):
    from llmath.model.checkpoint import precision_for

    spec = registry.spec("llama-3-8b")
    got = sum(weight_bytes(spec, precision_for("llama-3-8b", weights=mix)).values()) / 1e9
    assert published_gb * 0.995 < got < published_gb + 0.005


def test_docs_list_every_format_and_mix():
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "docs" / "formats.md").read_text()
    for name in list(fmt.formats()) + list(fmt.gguf_mixes()):
        assert f"`{name}`" in doc or name in doc, name
