"""Files beside a config (safetensors headers, the index, hf_quant_config.json, quantization_config) and hardware
files are read as strictly as config.json: a bad one is one line naming the file, the field and the rule (exit 1,
never an internal error, never a silently trusted value)."""

import json
import re
import struct

import pytest
from helpers import run_cli

from llmath.model import registry

BASE = registry.config("llama-3.2-1b")
W = {"dtype": "BF16", "shape": [2, 2]}
UP = "model.layers.0.mlp.up_proj.weight"


def st(header) -> bytes:
    """A safetensors file: an 8-byte little-endian header length, then the JSON header (no tensor data)."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h


def index(weight_map, total):
    return json.dumps({"weight_map": weight_map, "metadata": {"total_size": total}})


SIDECARS = [
    ({"model.safetensors": st({UP: W})}, r"model.safetensors: tensor '.*up_proj.weight': data_offsets=None must be"),
    ({"model.safetensors": st({UP: {**W, "data_offsets": [0, 1, 2]}})}, r"data_offsets=\[0, 1, 2\] must be"),
    ({"model.safetensors": st({UP: {**W, "data_offsets": [8, 0]}})}, r"data_offsets=\[8, 0\] must be \[begin, end\]"),
    ({"model.safetensors": st(b'{"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, NaN]}}')}, r"=NaN is not"),
    ({"model.safetensors": st({UP: [1, 2]})}, r"tensor '.*' is \[1, 2\], not an object"),
    ({"model.safetensors": st([1, 2])}, r"the safetensors header is list, not an object"),
    ({"model.safetensors": st({UP: {"dtype": 5, "shape": [2], "data_offsets": [0, 4]}})}, r"needs dtype"),
    ({"model.safetensors.index.json": index(["a"], 100)}, r"index.json: weight_map=\['a'\] must be an object"),
    ({"model.safetensors.index.json": index({"a": 3}, 100)}, r"weight_map\['a'\]=3 must be a file name"),
    ({"model.safetensors.index.json": index({"a": "x"}, "1")}, r"metadata.total_size='1' must be a positive integer"),
    ({"model.safetensors.index.json": json.dumps("hello")}, r"index.json='hello' must be a JSON object"),
    ({"model.safetensors.index.json": '{"weight_map": {}, "weight_map": {}}'}, r"key 'weight_map' appears twice"),
    ({"model.safetensors.index.json": index({"a": "x"}, 2**80)}, r"'metadata.total_size'=1.209e\+24 is out of range"),
    ({"hf_quant_config.json": json.dumps("fp8")}, r"hf_quant_config.json='fp8' must be a JSON object"),
    ({"hf_quant_config.json": json.dumps({"quantization": {"quant_algo": "FP8", "exclude_modules": 5}})},
     r"hf_quant_config.json: quantization.exclude_modules=5 must be a list of strings"),
    ({"hf_quant_config.json": json.dumps({"quantization": [1]})}, r"quantization=\[1\] must be an object"),
    ({"hf_quant_config.json": '{"quantization": {"quant_algo": "FP8", "quant_algo": "NVFP4"}}'},
     r"key 'quant_algo' appears twice"),
]  # fmt: skip
QUANT_CONFIGS = [
    ({"quant_method": "compressed-tensors", "config_groups": [1, 2]}, r"config_groups=\[1, 2\] must be an object"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": "x"}}, r"config_groups.g='x' must be a JSON obj"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": "int4"}}}, r"g.weights='int4' must"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": "4"}}}},
     r"weights.num_bits='4' must be an integer"),
    ({"quant_method": "compressed-tensors", "kv_cache_scheme": "fp8"}, r"kv_cache_scheme='fp8' must be an object"),
    ({"quant_method": "gptq", "bits": "x"}, r"quantization_config.bits='x' must be an integer"),
    ({"quant_method": "gptq", "bits": 4, "group_size": [1]}, r"group_size=\[1\] must be an integer"),
    ({"quant_method": "fp8", "weight_block_size": "128"}, r"weight_block_size='128' must be a list of integers"),
    ({"quant_method": "fp8", "modules_to_not_convert": 5}, r"modules_to_not_convert=5 must be a list of strings"),
    ({"quant_method": "torchao", "quant_type": {"default": 5}}, r"quant_type.default=5 must be a JSON object"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_compute_dtype": [1]}, r"must be a string"),
    ({"quant_method": ["fp8"]}, r"quant_method=\['fp8'\] must be a string"),
    ([1], r"config.json quantization_config=\[1\] must be a JSON object"),
]  # fmt: skip


def _folder(tmp_path, cfg, files=None):
    (tmp_path / "config.json").write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    for name, data in (files or {}).items():
        (tmp_path / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(tmp_path)


def _one_line_1(capsys, args, pattern):
    code, out, err = run_cli(capsys, *args)
    assert code == 1 and not out and len(err.strip().splitlines()) == 1, (code, err)
    assert "internal error" not in err and re.search(pattern, err), err


@pytest.mark.parametrize("files,pattern", SIDECARS)
def test_bad_sidecar_is_one_line_naming_file_and_field(tmp_path, capsys, files, pattern):
    _one_line_1(capsys, ("analyze", _folder(tmp_path, BASE, files), "-p", "8", "-n", "2"), pattern)


@pytest.mark.parametrize("q,pattern", QUANT_CONFIGS)
def test_bad_quantization_config_is_one_line(tmp_path, capsys, q, pattern):
    _one_line_1(capsys, ("analyze", _folder(tmp_path, {**BASE, "quantization_config": q}), "-p", "8"), pattern)


def test_index_total_size_must_fit_the_parameter_count(tmp_path, capsys):
    # llama-3.2-1b: 1,235,814,400 parameters (tied embeddings); 1 byte is ~1e-9 bytes per parameter
    wm = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}
    folder = _folder(tmp_path, BASE, {"model.safetensors.index.json": index(wm, 1)})
    _one_line_1(capsys, ("analyze", folder, "-p", "8"), r"total_size=1 bytes is 8.09e-10 bytes per parameter")
    # 2 bytes per parameter (bf16) is what such a checkpoint stores: accepted, weights = the stated total
    (ok := tmp_path / "ok").mkdir()
    folder = _folder(ok, BASE, {"model.safetensors.index.json": index(wm, 2 * 1_235_814_400)})
    code, out, err = run_cli(capsys, "analyze", folder, "-p", "8", "--json")
    assert code == 0, err
    assert json.loads(out)["memory"]["weights_bytes"] == pytest.approx(2 * 1_235_814_400, rel=1e-9)


def test_config_fields_read_strictly(tmp_path, capsys):
    _one_line_1(capsys, ("params", _folder(tmp_path, {**BASE, "intermediate_size": [8192, 8192]})),
                r"'intermediate_size'=\[8192, 8192\] must be one integer")  # fmt: skip
    dup = json.dumps(BASE)[:-1] + ', "num_hidden_layers": 3}'
    _one_line_1(capsys, ("params", _folder(tmp_path, dup)), r"key 'num_hidden_layers' appears twice")


def test_nemotron_h_pattern_must_cover_every_layer(tmp_path, capsys):
    cfg = registry.config("nemotron-h-8b-base-8k")
    pattern = cfg["hybrid_override_pattern"]
    assert len(pattern) == cfg["num_hidden_layers"] == 52  # the hub config: one character per layer
    short = {**cfg, "hybrid_override_pattern": "M*"}
    _one_line_1(capsys, ("params", _folder(tmp_path, short)), r"hybrid_override_pattern has 2 layers but num_hidden")


HW = {"name": "x", "memory_bytes": 80e9, "memory_bandwidth_bytes_per_s": 3.35e12, "peak_flops_per_s": {"bf16": 1e15}}


@pytest.mark.parametrize(
    "change,pattern",
    [
        ({"peak_flops_per_s": {"bf16": 1e-300}}, r"peak_flops_per_s\['bf16'\]=1e-300 must be a finite number in"),
        ({"memory_bandwidth_bytes_per_s": 1e-300}, r"memory_bandwidth_bytes_per_s=1e-300 must be a finite number"),
        ({"peak_flops_per_s": {"bf16": "1e15"}}, r"peak_flops_per_s\['bf16'\]='1e15' must be"),
        ({"peak_flops_per_s": [1]}, r"peak_flops_per_s"),
        ({"memory_bytes": None}, r"memory_bytes"),
    ],
)
def test_bad_hardware_file_is_one_line(tmp_path, capsys, change, pattern):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({**HW, **change}))
    _one_line_1(capsys, ("analyze", "llama-3.2-1b", "-H", str(path), "-p", "8"), pattern)


def test_hardware_file_duplicate_key(tmp_path, capsys):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(HW)[:-1] + ', "memory_bytes": 1e12}')
    _one_line_1(capsys, ("analyze", "llama-3.2-1b", "-H", str(path)), r"key 'memory_bytes' appears twice")
