"""What checkpoints say: quantization_config blocks of real checkpoints, ModelOpt sidecars, safetensors and GGUF
headers written here, hub ids (bundled, and fetched from a loopback stand-in for the hub)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import StandInHub, registry_config, write_llama_gguf

from llmath import Workload, analyze
from llmath.errors import ConfigError, HubError, SpecError, UnknownNameError
from llmath.model import checkpoint, registry
from llmath.model.quant import checkpoint_reading, module_of, read_quantization_config
from llmath.ops.params import module_params, weight_bytes

DATA = Path(__file__).parent / "data" / "quant"


def _read(name):
    d = json.loads((DATA / name).read_text())
    return read_quantization_config(d["quantization_config"])


def test_fp8_block_checkpoint():
    # {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}: block-scaled fp8
    # weights, fp8 GEMM inputs; nothing listed as not converted, so embedding/LM head/router keep the 16-bit rule
    p = _read("fp8_qwen3-32b-fp8.json").precision()
    assert p.weights == "fp8-block" and p.act_quant == "fp8"
    assert {m: p.weight_format(m) for m in ("attention", "ffn", "embedding", "lm_head")} == {
        "attention": "fp8-block",
        "ffn": "fp8-block",
        "embedding": "bf16",
        "lm_head": "bf16",
    }


def test_mxfp4_gpt_oss():
    # modules_to_not_convert: self_attn, mlp.router, embed_tokens, lm_head -> bf16; the experts are mxfp4
    p = _read("mxfp4_gpt-oss-120b.json").precision()
    fm = {m: p.weight_format(m) for m in ("experts", "attention", "router", "embedding", "lm_head")}
    assert fm == {"experts": "mxfp4", "attention": "bf16", "router": "bf16", "embedding": "bf16", "lm_head": "bf16"}
    assert p.act_quant is None  # the config states no activation format: W4A16


def test_modelopt_nvfp4_sidecar():
    # quant_algo NVFP4 (W4A4), kv_cache_quant_algo FP8, exclude_modules [lm_head]
    side = json.loads((DATA / "modelopt_deepseek-r1-distill-qwen-32b-nvfp4.hf_quant_config.json").read_text())
    r = checkpoint_reading({}, side)
    p = r.precision()
    assert (p.weights, p.act_quant, p.kv) == ("nvfp4", "nvfp4", "fp8")
    assert p.weight_format("lm_head") == "bf16" and p.weight_format("ffn") == "nvfp4"
    assert dict(p.sources)["kv"] == "hf_quant_config.json kv_cache_quant_algo"


def test_awq_and_gptq():
    # awq: bits 4, group 128, zero_point true -> 0.5 + (2 + 0.5) / 128 bytes per weight; gptq likewise
    for name, f in (("awq_qwen2.5-72b-instruct-ko-awq.json", "awq"), ("gptq_shuttle-3-gptq-int4.json", "gptq")):
        p = _read(name).precision()
        assert p.weights == f and p.group_size == 128
        assert p.weight_bytes == 0.5 + 2.5 / 128
        assert p.weight_format("embedding") == "bf16" and p.act_quant is None


def test_compressed_tensors_variants():
    # W8A8 int8: weights int8 per channel, activations int8 per token (dynamic), ignore [lm_head];
    # targets Linear, so the router (a Linear) is quantised too
    p = _read("compressed-tensors_w8a8_deepseek-coder-v2-lite.json").precision()
    assert (p.weights, p.act_quant) == ("int8-channel", "int8")
    assert p.weight_format("lm_head") == "bf16" and p.weight_format("router") == "int8-channel"
    # FP8 per tensor weights and activations
    p = _read("compressed-tensors_fp8_phi-3-mini-128k.json").precision()
    assert (p.weights, p.act_quant) == ("fp8", "fp8")
    # NVFP4: 4-bit float in groups of 16 for weights and inputs, ignore [] -> the LM head is nvfp4 too
    p = _read("compressed-tensors_nvfp4_devstral-2-123b.json").precision()
    assert (p.weights, p.act_quant, p.weight_format("lm_head")) == ("nvfp4", "nvfp4", "nvfp4")
    assert p.weight_format("embedding") == "bf16"  # not a Linear


def test_bitsandbytes():
    # load_in_4bit nf4 with double quant, compute dtype bfloat16
    p = _read("bitsandbytes_nf4_llama-3-8b-instruct-bnb-4bit.json").precision()
    assert (p.weights, p.activations) == ("nf4-dq", "bf16")
    # load_in_8bit: LLM.int8
    assert _read("bitsandbytes_int8_mnlp-m3.json").precision().weights == "int8-bnb"


def test_fbgemm_and_torchao_field_names():
    # field names of transformers' FbgemmFp8Config (per-channel fp8 weights, per-token fp8 activations) and
    # TorchAoConfig (quant_type + kwargs)
    p = read_quantization_config({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}).precision()
    assert (p.weights, p.act_quant) == ("fp8-channel", "fp8")
    q = {"quant_method": "torchao", "quant_type": "int4_weight_only", "quant_type_kwargs": {"group_size": 64}}
    p = read_quantization_config(q).precision()
    assert (p.weights, p.group_size, p.act_quant) == ("int4", 64, None)
    with pytest.raises(ConfigError, match="torchao quant_type 'autoquant'"):
        read_quantization_config({"quant_method": "torchao", "quant_type": "autoquant"})


def test_unknown_quant_method_is_one_clear_error():
    with pytest.raises(ConfigError, match="quant_method='hqq' is not one llmath reads"):
        read_quantization_config({"quant_method": "hqq"})


def test_module_names_map_to_modules():
    assert module_of("model.layers.3.self_attn.q_proj.weight") == "attention"
    assert module_of("model.layers.3.mlp.gate.weight") == "router"
    assert module_of("model.layers.3.mlp.gate_proj.weight") == "ffn"
    assert module_of("model.layers.3.mlp.experts.7.down_proj.weight_scale_inv") == "experts"
    assert module_of("model.layers.3.mlp.shared_experts.up_proj.weight") == "shared_experts"
    assert module_of("blk.0.ffn_down_exps.weight") == "experts"
    assert module_of("blk.0.attn_norm.weight") == "norm"
    assert module_of("output.weight") == "lm_head" and module_of("token_embd.weight") == "embedding"


# ---- the checkpoints of the "done when", offline --------------------------------------------------


def test_hub_ids_of_bundled_models_case_insensitive():
    assert registry.lookup("meta-llama/Llama-2-70b-hf") == "llama-2-70b"
    assert registry.lookup("MISTRALAI/mixtral-8x7b-v0.1") == "mixtral-8x7b"
    assert registry.resolve("Qwen/Qwen3-32B-FP8").name == "qwen3-32b-fp8"
    # every entry taken from the hub names its repo (transformer-base comes from the paper, not the hub)
    assert all(e.get("repo") for e in registry.index().values() if "huggingface.co" in e["source"])


def test_llama_3_3_70b_has_the_llama_3_1_70b_architecture():
    # meta-llama/llama-stack llama_stack/models/llama/sku_list.py at 5d65c017: llama3_3_instruct_models has
    # dim 8192, 80 layers, 64 heads, 8 KV heads, vocabulary 128256, ffn_dim_multiplier 1.3, multiple_of 4096:
    # FFN = 4096 * ceil(1.3 * (2/3 * 4 * 8192) / 4096) = 4096 * ceil(6.93) = 28672
    spec = registry.resolve("meta-llama/Llama-3.3-70B-Instruct")
    cfg = registry.config(spec.name)
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (8192, 80, 64)
    assert (cfg["num_key_value_heads"], cfg["vocab_size"], cfg["intermediate_size"]) == (8, 128256, 28672)
    assert cfg["rope_theta"] == 500000.0 and cfg["rope_scaling"]["rope_type"] == "llama3"
    assert analyze("llama-3.3-70b-instruct").params.total == analyze("llama-3.1-70b").params.total


def test_qwen3_32b_fp8_weights_are_fp8():
    # 64 layers x (q, o: 5120x8192; k, v: 5120x1024; gate, up, down: 5120x25600) in fp8 with one fp32 scale
    # per 128x128 block; embedding and LM head (151936 x 5120 each) and the norms in bf16
    D, L, V = 5120, 64, 151936
    linear = L * (2 * D * 8192 + 2 * D * 1024 + 3 * D * 25600)
    norms = L * (2 * D + 2 * 128) + D  # input/post norms, q/k norms (head_dim 128), final norm
    expected = linear * (1 + 4 / 16384) + 2 * V * D * 2 + norms * 2
    a = analyze("Qwen/Qwen3-32B-FP8", "h100-sxm", workload=Workload(gen=4))
    assert a.memory.weights_bytes == pytest.approx(expected, rel=1e-12)
    assert a.precision["modules"]["ffn"] == "fp8-block"
    assert a.precision["compute"] == {"bf16": "bf16", "fp8": "fp8"}


def test_qwen3_235b_fp8_checkpoint_is_block_fp8():
    # the hub config.json of Qwen/Qwen3-235B-A22B-FP8: quant_method fp8, weight_block_size [128, 128], dynamic
    # activations; lm_head, every layer's mlp.gate (the router) and the norms in modules_to_not_convert.
    # 94 layers x (q, o: 4096x8192; k, v: 4096x512; 128 experts x gate, up, down 4096x1536) in fp8 with one fp32
    # scale per 128x128 block; router 4096x128, embedding and LM head (151936 x 4096 each), norms in bf16
    assert registry.resolve("Qwen/Qwen3-235B-A22B-FP8").name == "qwen3-235b-a22b-fp8"
    p = registry.checkpoint("qwen3-235b-a22b-fp8").precision
    assert (p.weights, p.act_quant) == ("fp8-block", "fp8")
    fm = {m: p.weight_format(m) for m in ("attention", "experts", "router", "embedding", "lm_head")}
    assert fm == {"attention": "fp8-block", "experts": "fp8-block", "router": "bf16", "embedding": "bf16",
                  "lm_head": "bf16"}  # fmt: skip
    D, L, V = 4096, 94, 151936
    linear = L * (2 * D * 8192 + 2 * D * 512 + 128 * 3 * D * 1536)
    router, norms = L * D * 128, L * (2 * D + 2 * 128) + D
    assert linear + router + norms + 2 * V * D == 235_093_634_560  # the same weights as Qwen/Qwen3-235B-A22B
    wb = weight_bytes(registry.spec("qwen3-235b-a22b-fp8"), p)
    expected = linear * (1 + 4 / 16384) + (router + norms + 2 * V * D) * 2
    assert sum(wb.values()) == pytest.approx(expected, rel=1e-12)


def test_gpt_oss_120b_experts_in_mxfp4():
    # experts: 36 layers x 128 experts x (gate_up 2880x5760 + down 2880x2880) at 17 bytes per 32; the rest bf16
    a = analyze("openai/gpt-oss-120b", "b200", workload=Workload(gen=4))
    spec = registry.spec("gpt-oss-120b")
    n_exp = module_params(spec)["experts"]
    assert n_exp >= 36 * 128 * 3 * 2880 * 2880  # weights (+ biases)
    rest = sum(n for m, n in module_params(spec).items() if m != "experts")
    assert a.memory.weights_bytes == pytest.approx(n_exp * 17 / 32 + rest * 2, rel=1e-12)
    assert 60e9 < a.memory.weights_bytes < 70e9  # ~65 GB, as the checkpoint is


def test_deepseek_v4_routed_experts_in_mxfp4():
    # config.json: quantization_config fp8 [128, 128] and expert_dtype "fp4". Routed experts: 43 layers x 256
    # experts x (gate, up, down) 4096 x 2048, at 17 bytes per 32 (MXFP4: 16 bytes of e2m1 + one e8m0 scale)
    spec = registry.spec("deepseek-v4-flash")
    p = registry.checkpoint("deepseek-v4-flash").precision
    n_exp = module_params(spec)["experts"]
    assert n_exp == 43 * 256 * 3 * 4096 * 2048
    wb = weight_bytes(spec, p)
    assert wb["experts"] == pytest.approx(n_exp * 17 / 32, rel=1e-12)
    assert p.weights == "fp8-block" and dict(p.modules) == {"experts": "mxfp4"}
    # without the field the experts keep the fp8 default of the rest
    cfg = registry.config("deepseek-v4-flash")
    del cfg["expert_dtype"]
    assert checkpoint_reading(cfg).modules == {}


def test_gemma4_nvfp4_keeps_what_its_sidecar_excludes_layer_by_layer():
    # nvidia/Gemma-4-31B-IT-NVFP4's hf_quant_config.json: NVFP4 (16 e2m1 values + one fp8 scale: 9 bytes per 16),
    # excluding lm_head, model.embed_vision*, model.vision_tower* and the self_attn of each of the 60 layers one
    # by one: attention, the vision tower and its projector stay bf16 (2 bytes)
    name = "gemma-4-31b-it-nvfp4"
    ck = registry.checkpoint(name)
    n, wb = module_params(ck.spec), weight_bytes(ck.spec, ck.precision)
    assert dict(ck.precision.modules) == {m: "bf16" for m in ("attention", "lm_head", "projector", "vision")}
    for m in ("attention", "vision", "projector"):
        assert wb[m] == n[m] * 2
    assert wb["ffn"] == pytest.approx(n["ffn"] * 9 / 16, rel=1e-12)
    # one layer left out of the list: attention is counted quantised, and a note says so
    side = registry.sidecar(name)
    side["quantization"]["exclude_modules"].remove("model.language_model.layers.7.self_attn*")
    partial = checkpoint.from_config(registry.config(name), ck.spec, side, name)
    assert "attention" not in dict(partial.precision.modules)
    assert any("59 of 60 layers" in note for note in partial.notes)


def test_flags_override_the_checkpoint():
    from llmath.model.checkpoint import precision_for

    p = precision_for("qwen3-32b-fp8", weights="bf16")
    assert p.weights == "bf16" and not p.modules and p.act_quant is None
    assert dict(p.sources)["weights"] == "flag"
    p = precision_for("qwen3-32b-fp8", kv="fp8")
    assert (p.weights, p.kv) == ("fp8-block", "fp8")


# ---- safetensors headers ----------------------------------------------------------------------------------


def _tiny_llama(d: Path, quant: dict | None = None) -> dict:
    cfg = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 256,
        "max_position_embeddings": 512,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    if quant:
        cfg["quantization_config"] = quant
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return cfg


def test_safetensors_headers_give_exact_bytes(tmp_path):
    from safetensors.numpy import save_file

    _tiny_llama(tmp_path, {"quant_method": "fp8", "activation_scheme": "dynamic"})
    t = {
        "model.embed_tokens.weight": np.zeros((256, 64), np.float16),
        "lm_head.weight": np.zeros((256, 64), np.float16),
    }
    for i in range(2):
        pre = f"model.layers.{i}."
        for n, shape in (("q_proj", (64, 64)), ("k_proj", (32, 64)), ("v_proj", (32, 64)), ("o_proj", (64, 64))):
            t[pre + f"self_attn.{n}.weight"] = np.zeros(shape, np.uint8)  # fp8 stored as bytes
            t[pre + f"self_attn.{n}.weight_scale"] = np.zeros((1,), np.float32)
        for n, shape in (("gate_proj", (128, 64)), ("up_proj", (128, 64)), ("down_proj", (64, 128))):
            t[pre + f"mlp.{n}.weight"] = np.zeros(shape, np.uint8)
        t[pre + "input_layernorm.weight"] = np.zeros((64,), np.float16)
        t[pre + "post_attention_layernorm.weight"] = np.zeros((64,), np.float16)
    t["model.norm.weight"] = np.zeros((64,), np.float16)
    save_file(dict(list(t.items())[:20]), str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file(dict(list(t.items())[20:]), str(tmp_path / "model-00002-of-00002.safetensors"))
    # attention per layer: (64*64*2 + 32*64*2) fp8 bytes + 4 fp32 scales = 12288 + 16; ffn: 3*128*64 bytes
    att = 2 * (64 * 64 * 2 + 32 * 64 * 2 + 4 * 4)
    ffn = 2 * 3 * 128 * 64
    emb = 256 * 64 * 2
    norms = (2 * 2 + 1) * 64 * 2
    ck = checkpoint.load(str(tmp_path))
    assert ck.header_bytes == att + ffn + 2 * emb + norms
    wb = weight_bytes(ck.spec, ck.precision)
    assert wb["attention"] == pytest.approx(att) and wb["ffn"] == pytest.approx(ffn)
    assert "safetensors" in ck.origin


def test_safetensors_index_total_scales_modules(tmp_path):
    _tiny_llama(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456}}))
    ck = checkpoint.load(str(tmp_path))
    assert sum(weight_bytes(ck.spec, ck.precision).values()) == pytest.approx(123456)


def test_damaged_safetensors_is_one_line(tmp_path):
    _tiny_llama(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(ConfigError, match="exceeds 100 MB"):
        checkpoint.load(str(tmp_path))


# ---- GGUF ---------------------------------------------------------------------------------------------------


def _write_gguf(path: Path, layers: int = 2) -> int:
    """A tiny llama written as llama.cpp's Q4_K_M would type it; returns the bytes of its tensors."""
    import gguf
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.constants import GGMLQuantizationType as T

    D, F, V, N, K = 256, 512, 512, 4, 2  # k-quant rows need a multiple of 256 columns
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(layers)
    w.add_embedding_length(D)
    w.add_feed_forward_length(F)
    w.add_head_count(N)
    w.add_head_count_kv(K)
    w.add_context_length(4096)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(V)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    total = 0

    def q(name, rows, cols, typ):
        nonlocal total
        block, size = GGML_QUANT_SIZES[typ]
        raw = np.zeros((rows, cols // block * size), np.uint8)
        w.add_tensor(name, raw, raw_dtype=typ)  # the byte shape; gguf derives (rows, cols)
        total += raw.nbytes

    def f32(name, n):
        nonlocal total
        w.add_tensor(name, np.zeros(n, np.float32))
        total += 4 * n

    q("token_embd.weight", V, D, T.Q4_K)
    for i in range(layers):
        b = f"blk.{i}."
        q(b + "attn_q.weight", D, D, T.Q4_K)
        q(b + "attn_k.weight", D // 2, D, T.Q4_K)
        q(b + "attn_v.weight", D // 2, D, T.Q6_K)  # use_more_bits(i, 2): every layer of a 2-layer model
        q(b + "attn_output.weight", D, D, T.Q4_K)
        q(b + "ffn_gate.weight", F, D, T.Q4_K)
        q(b + "ffn_up.weight", F, D, T.Q4_K)
        q(b + "ffn_down.weight", D, F, T.Q6_K)
        f32(b + "attn_norm.weight", D)
        f32(b + "ffn_norm.weight", D)
    f32("output_norm.weight", D)
    q("output.weight", V, D, T.Q6_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return total


def test_gguf_header_gives_config_and_tensor_types(tmp_path):
    path = tmp_path / "model-Q4_K_M.gguf"
    total = _write_gguf(path)
    ck = checkpoint.load(str(path))
    s = ck.spec
    assert (s.d_model, s.n_layers, s.n_heads, s.n_kv_heads, s.d_ff, s.vocab_size) == (256, 2, 4, 2, 512, 512)
    assert ck.precision.weights == "q4_k_m"
    assert ck.header_bytes == total
    wb = weight_bytes(s, ck.precision)
    # attention per layer: q, o 256x256 and k 128x256 in q4_k (144 B / 256), v 128x256 in q6_k (210 B / 256)
    assert wb["attention"] == pytest.approx(2 * ((2 * 256 * 256 + 128 * 256) * 144 / 256 + 128 * 256 * 210 / 256))
    assert wb["lm_head"] == pytest.approx(512 * 256 * 210 / 256)
    assert sum(wb.values()) == pytest.approx(total)


def test_gguf_analyze_on_apple(tmp_path, capsys):
    from llmath.cli import main

    path = tmp_path / "model-Q4_K_M.gguf"
    _write_gguf(path)
    main(["analyze", str(path), "-H", "apple-m3-max", "--gen", "4", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert d["precision"]["weights"] == "q4_k_m" and d["precision"]["modules"]["lm_head"] == "q6_k"
    assert d["precision"]["compute"] == {"fp16": "fp16"}
    assert d["memory"]["weights_bytes"] == pytest.approx(checkpoint.load(str(path)).header_bytes)


def test_not_a_gguf_is_one_line(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"not gguf at all")
    with pytest.raises(ConfigError, match="not a readable GGUF file"):
        checkpoint.load(str(p))


def _write_bad_gguf(path: Path, drop: str | None = None, **sizes: int) -> None:
    """A one-tensor llama header with llama.cpp's size keys, one left out or changed."""
    keys = {"block_count": 2, "embedding_length": 64, "feed_forward_length": 128, "attention.head_count": 4}
    keys |= {"attention.head_count_kv": 2, "context_length": 256} | {k.replace("__", "."): v for k, v in sizes.items()}
    write_llama_gguf(path, {k: v for k, v in keys.items() if k != drop})


@pytest.mark.parametrize(
    ("drop", "sizes", "named"),
    [
        ("block_count", {}, "'llama.block_count' is missing"),
        ("embedding_length", {}, "'llama.embedding_length' is missing"),
        ("attention.head_count", {}, "'llama.attention.head_count' is missing"),
        ("feed_forward_length", {}, "'llama.feed_forward_length'"),
        (None, {"block_count": 0}, "'llama.block_count'=0 must be a positive integer"),
        (None, {"context_length": 0}, "'llama.context_length'=0"),
        # 64 / 3 heads is no whole head size: the key that would give it is llama.attention.key_length
        (None, {"attention__head_count": 3}, "no 'llama.attention.key_length' is given"),
        # 4 query heads over 3 KV heads: no whole group
        (None, {"attention__head_count_kv": 3}, "llama.attention.head_count=4 is not a multiple of"),
    ],
)
def test_gguf_errors_name_gguf_keys(tmp_path, drop, sizes, named):
    """A .gguf's bad or missing size is named by its GGUF key, not by the config.json field it becomes."""
    pytest.importorskip("gguf")
    path = tmp_path / "m.gguf"
    _write_bad_gguf(path, drop, **sizes)
    with pytest.raises((ConfigError, SpecError)) as e:
        checkpoint.load(str(path))
    msg = str(e.value)
    assert named in msg, msg
    hf_fields = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "head_dim")
    assert not any(f in msg for f in (*hf_fields, "num_key_value_heads", "max_position_embeddings", "config"))


# ---- hub ids not bundled: a loopback stand-in for the hub --------------------------------------------------


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """A loopback stand-in for the hub (tests/helpers.StandInHub) serving one AWQ config."""
    cfg = registry_config("llama-3.2-1b") | {
        "quantization_config": json.loads((DATA / "awq_qwen2.5-72b-instruct-ko-awq.json").read_text())[
            "quantization_config"
        ]
    }
    with StandInHub({("acme/tiny-awq", "config.json"): json.dumps(cfg).encode()}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setenv("HF_TOKEN", "hf_test_token")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        _reload_hf(monkeypatch)
        checkpoint.load.cache_clear()
        yield hub.seen
    checkpoint.load.cache_clear()


def _reload_hf(monkeypatch):
    """huggingface_hub reads its environment at import: point its constants at the test's values."""
    import os

    from huggingface_hub import constants

    ep = os.environ["HF_ENDPOINT"]
    monkeypatch.setattr(constants, "ENDPOINT", ep)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", ep + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", os.environ["HF_HUB_CACHE"])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE") == "1")


def test_hub_fetch_from_loopback(fake_hub, monkeypatch):
    ck = checkpoint.load("acme/tiny-awq")
    assert ck.spec.d_model == 2048 and ck.precision.weights == "awq"
    assert any(p.endswith("/resolve/main/config.json") for _, p, _ in fake_hub)
    assert any(auth == "Bearer hf_test_token" for _, _, auth in fake_hub)  # HF_TOKEN sent
    # cached: offline now answers from the HF cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _reload_hf(monkeypatch)
    checkpoint.load.cache_clear()
    assert checkpoint.load("acme/tiny-awq").precision.weights == "awq"


def test_hub_unknown_repo_and_offline_are_one_line(fake_hub, monkeypatch):
    with pytest.raises(UnknownNameError, match="no such repo"):
        checkpoint.load("acme/nothing-here")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _reload_hf(monkeypatch)
    with pytest.raises(HubError, match="not in the HF cache"):
        checkpoint.load("acme/other-model")


def test_hub_unreachable_is_one_line(tmp_path, monkeypatch):
    import socket

    from huggingface_hub.utils import _http

    monkeypatch.setattr(_http.time, "sleep", lambda s: None)  # huggingface_hub retries 5 times with backoff

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _reload_hf(monkeypatch)
    checkpoint.load.cache_clear()
    with pytest.raises(HubError, match="acme/unreachable"):
        checkpoint.load("acme/unreachable")
    shutil.rmtree(tmp_path / "c", ignore_errors=True)


def test_bundled_sidecar_is_read(monkeypatch):
    # a registry model with a bundled hf_quant_config.json (ModelOpt NVFP4, FP8 KV) is analysed in those formats
    side = json.loads((DATA / "modelopt_deepseek-r1-distill-qwen-32b-nvfp4.hf_quant_config.json").read_text())
    monkeypatch.setattr(registry, "sidecar", lambda name: side if name == "qwen2.5-7b" else None)
    ck = registry.checkpoint("qwen2.5-7b")
    assert (ck.precision.weights, ck.precision.kv, ck.precision.weight_format("lm_head")) == ("nvfp4", "fp8", "bf16")
    assert ck.origin.endswith("hf_quant_config.json")


def test_sweep_grid_equals_the_report_for_a_quantised_checkpoint():
    # the vectorised grid and the exact report evaluate the same per-module bytes and per-op peaks
    from llmath.sweep import grid

    a = analyze("qwen3-32b-fp8", "h100-sxm", workload=Workload(batch=4, prompt=300, gen=50))
    g = grid("qwen3-32b-fp8", "h100-sxm", np.array([4]), np.array([300]), np.array([50]))
    assert g["ttft_s"][0] == pytest.approx(a.generation["ttft_s"], rel=1e-9)
    assert g["tpot_s"][0] == pytest.approx(a.generation["tpot_s"], rel=1e-9)


def test_gguf_moe_experts_router_and_shared(tmp_path):
    # a tiny qwen3moe GGUF: 4 experts of width 256, top-2; router (ffn_gate_inp) in f32, experts in q4_k
    import gguf
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.constants import GGMLQuantizationType as T

    D, E, F, V = 256, 4, 256, 256
    w = gguf.GGUFWriter(str(tmp_path / "moe.gguf"), "qwen3moe")
    for add, v in (
        (w.add_block_count, 1),
        (w.add_embedding_length, D),
        (w.add_head_count, 4),
        (w.add_head_count_kv, 2),
    ):
        add(v)
    w.add_key_length(64)
    w.add_value_length(64)
    w.add_feed_forward_length(F)
    w.add_expert_count(E)
    w.add_expert_used_count(2)
    w.add_expert_feed_forward_length(F)
    w.add_context_length(4096)
    w.add_vocab_size(V)

    def q(name, shape):  # q4_k rows of D columns
        block, size = GGML_QUANT_SIZES[T.Q4_K]
        w.add_tensor(name, np.zeros((*shape, D // block * size), np.uint8), raw_dtype=T.Q4_K)

    q("token_embd.weight", (V,))
    for n, rows in (("attn_q", 256), ("attn_k", 128), ("attn_v", 128), ("attn_output", 256)):
        q(f"blk.0.{n}.weight", (rows,))
    w.add_tensor("blk.0.ffn_gate_inp.weight", np.zeros((E, D), np.float32))
    q("blk.0.ffn_gate_exps.weight", (E, F))
    q("blk.0.ffn_up_exps.weight", (E, F))
    q("blk.0.ffn_down_exps.weight", (E, D))  # F = D here, so rows of D columns again
    for n in ("attn_norm", "ffn_norm"):
        w.add_tensor(f"blk.0.{n}.weight", np.zeros(D, np.float32))
    for n in ("attn_q_norm", "attn_k_norm"):
        w.add_tensor(f"blk.0.{n}.weight", np.zeros(64, np.float32))
    w.add_tensor("output_norm.weight", np.zeros(D, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ck = checkpoint.load(str(tmp_path / "moe.gguf"))
    s = ck.spec
    assert (s.model_type, s.moe.n_experts, s.moe.top_k, s.tie_embeddings) == ("qwen3_moe", 4, 2, True)
    wb = weight_bytes(s, ck.precision)
    assert wb["experts"] == pytest.approx(3 * E * F * D * 144 / 256)  # gate, up, down of 4 experts in q4_k
    assert wb["router"] == pytest.approx(E * D * 4)  # f32


def test_split_gguf_reads_every_shard(tmp_path):
    # gguf's writer splits 2 tensors per file: model-00001-of-0000N.gguf ...; the bytes are those of all shards
    import gguf

    w = gguf.GGUFWriter(str(tmp_path / "model.gguf"), "llama", split_max_tensors=2)
    for add, v in ((w.add_block_count, 1), (w.add_embedding_length, 8), (w.add_head_count, 2)):
        add(v)
    w.add_feed_forward_length(16)
    w.add_vocab_size(32)
    names = ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"]
    names += ["blk.0.attn_output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"]
    shapes = [(32, 8), (8, 8), (8, 8), (8, 8), (8, 8), (16, 8), (16, 8), (8, 16)]
    for n, s in zip(names, shapes, strict=True):
        w.add_tensor(n, np.zeros(s, np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    first = sorted(tmp_path.glob("*.gguf"))[0]
    assert first.name == "model-00001-of-00004.gguf"
    ck = checkpoint.load(str(first))
    # fp16 everywhere: 2 bytes x (32*8 + 4*8*8 + 3*16*8) elements, spread over 4 files
    assert ck.header_bytes == 2 * (32 * 8 + 4 * 64 + 3 * 128)
    (tmp_path / "model-00003-of-00004.gguf").unlink()
    checkpoint.load.cache_clear()
    with pytest.raises(ConfigError, match="shards missing: model-00003-of-00004.gguf"):
        checkpoint.load(str(first))


def test_partial_safetensors_download_uses_the_index_total(tmp_path):
    from safetensors.numpy import save_file

    _tiny_llama(tmp_path)
    save_file({"lm_head.weight": np.zeros((256, 64), np.float16)}, str(tmp_path / "model-00001-of-00002.safetensors"))
    index = {
        "metadata": {"total_size": 200_000},
        "weight_map": {
            "lm_head.weight": "model-00001-of-00002.safetensors",
            "model.norm.weight": "model-00002-of-00002.safetensors",
        },
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    ck = checkpoint.load(str(tmp_path))
    assert ck.header_bytes == 200_000 and any("absent" in n for n in ck.notes)


def test_reading_notes_reach_the_report(tmp_path):
    # an exclude entry naming one layer is noted (that layer's attention is counted as quantised)
    _tiny_llama(tmp_path)
    side = {"quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head", "model.layers.1.self_attn*"]}}
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(side))
    a = analyze(str(tmp_path), "h100-sxm", workload=Workload(prompt=64, gen=2))
    assert any("model.layers.1.self_attn*" in w for w in a.warnings)
    assert a.precision["modules"]["attention"] == "fp8" and a.precision["modules"]["lm_head"] == "bf16"


def test_web_api_takes_a_hub_id(fake_hub):
    """The page's API fetches a hub id the registry lacks the same way the CLI does (loopback stand-in hub)."""
    from llmath.web import api

    d = api.analyze_view({"model": "acme/tiny-awq", "hardware": "h100-sxm"})
    assert d["precision"]["weights"] == "awq" and d["params"]["total"] > 0


# DeepSeek-R1's MLA projections from its config.json (hidden_size 7168, q_lora_rank 1536, num_attention_heads 128,
# qk_nope_head_dim 128, qk_rope_head_dim 64, kv_lora_rank 512, v_head_dim 128), 61 layers:
Q_A, Q_B = 7168 * 1536, 1536 * 128 * (128 + 64)  # 11,010,048 and 37,748,736
KV_A, KV_B = 7168 * (512 + 64), 512 * 128 * (128 + 128)  # 4,128,768 and 16,777,216
O = 128 * 128 * 7168  # 117,440,512
NVFP4 = 9 / 16  # 16 e2m1 values (8 bytes) + one fp8 scale (1 byte) per 16 weights


def test_deepseek_r1_nvfp4_keeps_the_mla_projections_its_exclude_list_names():
    # the bundled sidecar of nvidia/DeepSeek-R1-0528-FP4-V2 (ModelOpt NVFP4) excludes lm_head and every layer's
    # q_a/q_b/kv_a/kv_b projections: those stay bf16 (2 bytes), o_proj (the model card's wo) is NVFP4
    p = checkpoint.precision_for("deepseek-r1", weights="nvfp4")
    spec = registry.spec("deepseek-r1")
    wb, n = weight_bytes(spec, p), module_params(spec)
    per_layer = (Q_A + Q_B + KV_A + KV_B) * 2 + O * NVFP4  # 139,329,536 + 66,060,288 = 205,389,824 bytes
    assert wb["attention"] == pytest.approx(61 * per_layer, rel=1e-12)
    assert wb["lm_head"] == n["lm_head"] * 2
    assert wb["experts"] == pytest.approx(n["experts"] * NVFP4, rel=1e-12)
    assert (p.weights, p.act_quant, p.kv) == ("nvfp4", "nvfp4", "fp8")
    assert p.weight_format("attention") == "nvfp4"  # the module's GEMMs keep the checkpoint's format
    assert "kept 16-bit" in p.weight_source("attention")
    # without the published checkpoint (a model the registry bundles none for) --weights nvfp4 reads all of it NVFP4
    llama = checkpoint.precision_for("llama-3.1-70b", weights="nvfp4")
    assert not llama.projections and llama.weight_format("attention") == "nvfp4"


def test_projections_named_in_only_some_layers_are_counted_quantised_with_a_note():
    models = Path(checkpoint.__file__).parents[1] / "data" / "models"
    side = json.loads((models / "deepseek-r1-0528-fp4-v2.hf_quant_config.json").read_text())
    side["quantization"]["exclude_modules"].remove("model.layers.7.self_attn.kv_b_proj")
    ck = checkpoint.from_config(registry.config("deepseek-r1"), registry.spec("deepseek-r1"), side, "x")
    assert dict(ck.precision.projections) == {p: "bf16" for p in ("attn.q_a_proj", "attn.q_b_proj", "attn.kv_a_proj")}
    assert any("attn.kv_b_proj kept unquantised in 60 of 61 layers" in note for note in ck.notes)
    per_layer = (Q_A + Q_B + KV_A) * 2 + (KV_B + O) * NVFP4
    assert weight_bytes(ck.spec, ck.precision)["attention"] == pytest.approx(61 * per_layer, rel=1e-12)


def test_minimax_m25_nvfp4_keeps_attention_and_router_whole():
    # nvidia/MiniMax-M2.5-NVFP4's hf_quant_config.json: lm_head, every layer's self_attn* and block_sparse_moe.gate
    # excluded. Attention per layer (hidden 3072, 48 query heads, 8 KV heads, head_dim 128): q and o 3072 x 6144,
    # k and v 3072 x 1024 = 2 x 18,874,368 + 2 x 3,145,728 = 44,040,192 parameters, in bf16, 62 layers
    p = checkpoint.precision_for("minimax-m2.5", weights="nvfp4")
    spec = registry.spec("minimax-m2.5")
    wb, n = weight_bytes(spec, p), module_params(spec)
    assert wb["attention"] == 62 * 44_040_192 * 2
    assert wb["router"] == n["router"] * 2 and wb["lm_head"] == n["lm_head"] * 2
    assert wb["experts"] == pytest.approx(n["experts"] * NVFP4, rel=1e-12)
