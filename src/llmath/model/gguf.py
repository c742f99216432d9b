"""GGUF files (llama.cpp): the architecture as a config, the type and bytes of every tensor, and the
llama.cpp k-quant mixes as per-module bytes.

Reading uses the ``gguf`` package (optional dependency; ``pip install gguf``): ``GGUFReader`` memory-maps
the file and parses the header and tensor infos; no tensor data is read. The architecture's metadata
(``{arch}.embedding_length``, ``.block_count``, ``.attention.head_count`` ...; keys of
https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) becomes a config.json-like mapping for the
HF adapters. Tensor names follow llama.cpp (``token_embd``, ``blk.N.attn_q``, ``ffn_down_exps``,
``output``) and map to llmath modules by :func:`llmath.model.quant.module_of`.

Mix rules (a ``--weights q4_k_m`` without a file) follow ``llama_tensor_get_type`` in
https://github.com/ggml-org/llama.cpp/blob/master/src/llama-quant.cpp: attn_v and ffn_down of some
layers are quantised higher (see ``data/formats.json`` ``gguf_mixes``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from llmath.errors import ConfigError
from llmath.model import formats as fmt
from llmath.model.quant import module_of
from llmath.model.spec import ModelSpec

ARCH_TO_MODEL_TYPE = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "phi3": "phi3",
    "starcoder2": "starcoder2",
    "olmo2": "olmo2",
    "gpt-oss": "gpt_oss",
}
KEYS = {  # config.json key <- GGUF key under the architecture's prefix
    "hidden_size": "embedding_length",
    "num_hidden_layers": "block_count",
    "intermediate_size": "feed_forward_length",
    "num_attention_heads": "attention.head_count",
    "num_key_value_heads": "attention.head_count_kv",
    "head_dim": "attention.key_length",
    "max_position_embeddings": "context_length",
    "rms_norm_eps": "attention.layer_norm_rms_epsilon",
    "rope_theta": "rope.freq_base",
    "sliding_window": "attention.sliding_window",
    "num_local_experts": "expert_count",
    "num_experts_per_tok": "expert_used_count",
    "moe_intermediate_size": "expert_feed_forward_length",
    "shared_expert_intermediate_size": "expert_shared_feed_forward_length",
    "attn_logit_softcapping": "attn_logit_softcapping",
    "final_logit_softcapping": "final_logit_softcapping",
}


def _reader(path: Path):
    try:
        import gguf
    except ImportError:
        raise ConfigError(f"{path}: reading GGUF files needs the 'gguf' package; pip install gguf") from None
    try:
        return gguf.GGUFReader(str(path), "r")
    except Exception as e:  # the reader raises ValueError/struct errors on a bad magic or truncation
        raise ConfigError(f"{path}: not a readable GGUF file ({e}); pass a .gguf written by llama.cpp") from None


def _value(field) -> Any:
    v = field.contents()
    if isinstance(v, list) and v and not isinstance(v[0], str):
        return max(v)  # per-layer arrays (feed_forward_length): the widest
    return v


def _info(t) -> tuple[str, str, int, int]:
    return t.name, t.tensor_type.name.lower(), int(t.n_elements), int(t.n_bytes)


def _other_shards(p: Path, fields) -> list[Path]:
    """The sibling shards of a split GGUF (``name-00001-of-00003.gguf``); missing ones are an error."""
    f = fields.get("split.count")
    n = int(f.contents()) if f is not None else 1
    m = re.match(r"^(.*)-(\d{5})-of-(\d{5})\.gguf$", p.name)
    if n <= 1:
        return []
    if m is None:
        raise ConfigError(f"{p}: a split GGUF ({n} shards) needs its name-0000i-of-0000n.gguf file name")
    shards = [p.with_name(f"{m.group(1)}-{i:05d}-of-{n:05d}.gguf") for i in range(1, n + 1)]
    missing = [s.name for s in shards if not s.exists()]
    if missing:
        raise ConfigError(f"{p}: split GGUF shards missing: {', '.join(missing)}; keep all shards together")
    return [s for s in shards if s != p]


def read_gguf(path: str | Path) -> tuple[dict[str, Any], list[tuple[str, str, int, int]]]:
    """(config mapping, [(tensor name, type name, elements, bytes)]) of a GGUF file, from its header."""
    p = Path(path)
    r = _reader(p)
    fields = {k: f for k, f in r.fields.items()}
    if "general.architecture" not in fields:
        raise ConfigError(f"{p}: GGUF metadata has no general.architecture; not a llama.cpp model file")
    arch = str(fields["general.architecture"].contents())
    model_type = ARCH_TO_MODEL_TYPE.get(arch)
    if model_type is None:
        raise ConfigError(f"{p}: GGUF architecture {arch!r} is not mapped; supported: {', '.join(ARCH_TO_MODEL_TYPE)}")
    cfg: dict[str, Any] = {"model_type": model_type, "torch_dtype": "float16"}
    for key, gkey in KEYS.items():
        f = fields.get(f"{arch}.{gkey}")
        if f is not None:
            cfg[key] = _value(f)
    tensors = [_info(t) for t in r.tensors]
    for shard in _other_shards(p, fields):  # split files (llama-gguf-split): every shard lists its tensors
        tensors += [_info(t) for t in _reader(shard).tensors]
    names = {t[0] for t in tensors}
    cfg["tie_word_embeddings"] = "output.weight" not in names
    vocab = fields.get(f"{arch}.vocab_size")
    if vocab is not None:
        cfg["vocab_size"] = int(vocab.contents())
    elif "tokenizer.ggml.tokens" in fields:
        cfg["vocab_size"] = len(fields["tokenizer.ggml.tokens"].data)
    else:
        emb = next((t for t in r.tensors if t.name == "token_embd.weight"), None)
        if emb is None:
            raise ConfigError(f"{p}: no vocabulary size (no {arch}.vocab_size, tokens or token_embd.weight)")
        cfg["vocab_size"] = int(emb.shape[-1])
    if model_type == "llama" and cfg.get("num_local_experts"):
        cfg["model_type"] = "mixtral"
    if model_type in ("qwen2_moe", "qwen3_moe") and "num_local_experts" in cfg:
        cfg["num_experts"] = cfg.pop("num_local_experts")  # these configs name it num_experts
    ftype = fields.get("general.file_type")
    if ftype is not None:
        cfg["_gguf_file_type"] = int(ftype.contents())
    cfg["_gguf_architecture"] = arch
    return cfg, tensors


#: The spec's own names of sizes read from GGUF keys (``n_heads=4`` in a spec rule's message).
SPEC_NAMES = {"n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads", "n_layers": "num_hidden_layers"}


def in_gguf_terms(message: str, arch: str) -> str:
    """An error about the config fields a GGUF header was read into, reworded with the GGUF keys they came
    from: ``'num_hidden_layers' / 'n_layer' / …`` -> ``'llama.block_count'``, ``n_heads=3`` ->
    ``llama.attention.head_count=3``, "the config" -> "the GGUF metadata"."""
    keys = KEYS | {"num_experts": "expert_count", "vocab_size": "vocab_size"}

    def quoted(m: re.Match) -> str:
        first = m.group(1)
        return f"'{arch}.{keys[first]}'" if first in keys else m.group(0)

    message = re.sub(r"'(\w+)'(?: / '\w+')*", quoted, message)
    for spec_name, key in SPEC_NAMES.items():
        message = re.sub(rf"\b{spec_name}=", f"{arch}.{KEYS[key]}=", message)
    return message.replace("to the config", "to the GGUF metadata")


def file_type_name(code: int | None) -> str | None:
    """llama.cpp's file type (general.file_type) as a lowercase mix name (MOSTLY_Q4_K_M -> q4_k_m)."""
    if code is None:
        return None
    try:
        from gguf.constants import LlamaFileType

        name = LlamaFileType(code).name.lower()
    except (ImportError, ValueError):
        return None
    return name.removeprefix("mostly_").replace("all_f32", "fp32").replace("f16", "fp16")


def module_summary(tensors) -> tuple[dict[str, int], dict[str, str], dict[str, int]]:
    """Per module: bytes, dominant type (by bytes), elements."""
    by: dict[str, dict[str, int]] = {}
    elems: dict[str, int] = {}
    for name, typ, n, b in tensors:
        m = module_of(name)
        if m is None:
            continue
        by.setdefault(m, {})
        by[m][typ] = by[m].get(typ, 0) + b
        elems[m] = elems.get(m, 0) + n
    total = {m: sum(d.values()) for m, d in by.items()}
    dominant = {m: max(d.items(), key=lambda kv: kv[1])[0] for m, d in by.items()}
    return total, dominant, elems


def gguf_type_format(typ: str) -> str:
    """A GGUF tensor type name as a llmath format name (f16 -> fp16, q4_k -> q4_k)."""
    t = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}.get(typ, typ)
    return t if t in fmt.formats() else "fp32"


# ---- k-quant mixes from llama.cpp's rules ---------------------------------------------------------


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _layer_types(mix: str, i: int, n: int, n_gqa: int, is_70b: bool, n_expert: int) -> dict[str, str]:
    """Types of attn_v, ffn_down, attn_output and attn_k in layer i of n for a llama.cpp file type."""
    base = fmt.gguf_mixes()[mix]["base"]
    v = down = o = k = base
    if mix == "q2_k":
        v, down, o = ("q4_k" if n_gqa >= 4 else "q3_k"), "q3_k", "q3_k"
    elif mix == "q3_k_m":
        v, o = ("q5_k" if i < 2 else "q4_k"), "q4_k"
        down = "q5_k" if i < n // 16 else "q4_k"
    elif mix == "q4_k_s":
        v = "q5_k" if i < 4 else base
        down = "q5_k" if i < n // 8 else base
    elif mix in ("q4_k_m", "q5_k_m"):
        v = "q6_k" if _use_more_bits(i, n) else base
        down = "q6_k" if _use_more_bits(i, n) else base
    if is_70b and v in ("q3_k", "q4_k"):
        v = "q5_k"
    if n_expert == 8:
        v = k = "q8_0"
        if mix in ("q2_k", "q3_k_m", "q4_k_s", "q4_k_m"):
            o = "q5_k"
    return {"v": v, "down": down, "o": o, "k": k}


def mix_module_bytes(spec: ModelSpec, mix: str) -> dict[str, float]:
    """Bytes per weight element of attention and FFN/expert modules for a llama.cpp file type, averaged over
    the layers as llama.cpp assigns their types (embedding, LM head, router, norms: see Precision)."""
    if mix not in fmt.gguf_mixes():
        return {}
    D, N, K, H, L = spec.d_model, spec.n_heads, spec.n_kv_heads, spec.head_dim, spec.n_layers
    base = fmt.gguf_mixes()[mix]["base"]
    bpe = fmt.bytes_per_element
    n_exp = spec.moe.n_experts if spec.moe is not None else 0
    is_70b = spec.model_type == "llama" and L == 80
    att_b = att_n = ffn_b = ffn_n = 0.0
    gate_up = 2 if spec.ffn == "gated" else 1
    for i in range(L):
        t = _layer_types(mix, i, L, N // K, is_70b, n_exp)
        q, kv, o = D * N * H, D * K * H, N * H * D
        att_b += q * bpe(base) + kv * bpe(t["k"]) + kv * bpe(t["v"]) + o * bpe(t["o"])
        att_n += q + 2 * kv + o
        ffn_b += gate_up * bpe(base) + bpe(t["down"])
        ffn_n += gate_up + 1
    out = {"attention": att_b / att_n} if spec.mla is None else {}
    for m in ("ffn", "experts", "shared_experts"):
        out[m] = ffn_b / ffn_n  # gate/up at the base type, down per layer (same split for every width)
    return out
