"""Shared test helpers (the tests directory is on sys.path under pytest's default import mode)."""

import importlib.util
import json
import sys
from pathlib import Path

from llmath.model import registry

MODELS_DIR = Path(registry.__file__).parents[1] / "data" / "models"
SCRIPTS_DIR = Path(__file__).resolve().parents[1] / "scripts"
# serving_runs.csv's header (../shared/validation/README.md)
SERVING_RUNS_HEADER = (
    "id,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,batch_size,"
    "tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,prefill_num_workers,"
    "prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,"
    "decode_batch_size,decode_num_workers,decode_tp_size,decode_pp_size,decode_attention_dp_size,"
    "decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms,source_notes"
)


def script_module(name: str):
    """``scripts/<name>.py`` imported as a module (the scripts directory goes on sys.path: scripts import their
    siblings, such as doc_section)."""
    if str(SCRIPTS_DIR) not in sys.path:
        sys.path.insert(0, str(SCRIPTS_DIR))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS_DIR / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def registry_config(name: str) -> dict:
    return json.loads((MODELS_DIR / f"{name}.json").read_text())


def coarse_hf(name: str) -> str:
    """A transformers parameter name -> the coarse component llmath reports it under."""
    import re

    if re.search(r"^(text_encoder|enc_to_dec_proj|audio_enc_to_dec_proj)\.", name):  # MusicGen's conditioning
        return name.split(".")[0]
    if re.search(r"^audio_encoder\.", name):  # MusicGen's EnCodec
        return "audio"
    if re.search(r"^model\.patcher\.", name):  # BLT's entropy model (ops/blt.py): one component
        return "patcher"
    if re.search(r"^model\.encoder_hash_tok_embedding\.", name):  # BLT's hash n-gram tables
        return "embedding"
    if re.search(r"^model\.\w+\.(patch|token)_embedding_projection\.", name):  # BLT's patch projections
        return "projection"
    # a wrapper's towers (model/towers.py components), before the language model's patterns
    if re.search(r"embed_tokens_extend\.(image_embed\.img_processor|audio_embed\.encoder)\.", name):  # Phi-4-mm
        return "vision" if ".image_embed." in name else "audio"
    if re.search(r"embed_tokens_extend\.", name):
        return "projector"
    if re.search(
        r"(^|\.)(multi_modal_projector|visual\.merger|visual\.deepstack_merger_list|visual_projection|img_temporal_embedding"
        r"|embed_vision|mm_projector)\.",
        name,
    ):
        return "projector"
    if re.search(r"(^|\.)(visual|vision_tower|vision_model|image_encoder)\.", name):
        return "vision"
    if re.search(r"(^|\.)audio_tower\.", name):
        return "audio"
    if re.search(r"^(pre|post)_projection\.", name):  # Gemma 4 assistants' input and output projections
        return "assistant"
    if re.search(r"^masked_embedding\.centroids\.", name):  # their ordered-embedding head
        return "lm_head"
    if re.search(r"^model\.encoder\.conv\d\.", name):  # Whisper's audio front end (ops/frontend.py)
        return "frontend"
    if re.search(r"\.norm_attn_norm\.attn\.", name):  # DBRX keeps its attention inside a "norm_attn_norm" block
        return "attention"
    if re.search(r"\.post_(attention|mlp)_residual_scale\.|^model\.input_hidden_states_(scale|bias)$", name):  # ZAYA
        return "residual"
    if re.search(r"^model\.z_L_init$", name):  # HRM-Text's initial low-level state
        return "recurrence"
    if re.search(r"(^|\.)(attn_hc|ffn_hc|hc_head)\.", name):  # DeepSeek-V4's hyper-connections
        return "hyper"
    if re.search(r"\.(input|post_attention)_residual$", name):  # Doge's learned residual scales
        return "residual"
    if re.search(r"(norm|Norm|(^|\.)ln_|\bln_f\b|\.(ln1|ln2|pre_ln)\.)", name):
        return "norm"
    if re.search(r"\.per_layer_(model_projection|input_gate|projection)\.", name):  # Gemma 4's per-layer inputs
        return "per_layer"
    if re.search(r"\.(altup|altup_projections|altup_unembed_projections)\.", name):  # Gemma 3n's AltUp
        return "altup"
    if re.search(r"\.laurel\.", name):  # Gemma 3n's LAuReL
        return "laurel"
    if re.search(r"hyper_connection", name):  # Qwen4-Exp's hyper-connection mixers (their norms: above)
        return "hyper"
    if re.search(r"\.ple\.ple_embedding\.", name):  # Qwen4-Exp's n-gram tables
        return "embedding"
    if re.search(r"\.ple\.(key_proj|value_proj|conv1d)\.", name):  # Qwen4-Exp's n-gram embedding layers
        return "ple"
    if re.search(r"^(backbone|model)\.embeddings\.", name):  # Mamba's, Nemotron-H's token table
        return "embedding"
    if re.search(r"^model\.layers\.\d+\.linear\.weight$", name):  # Zamba's per-hybrid-layer linear
        return "shared"
    if re.search(r"\.mixer\.[qkvo]_proj\.", name):  # Nemotron-H's attention layers name it their mixer
        return "attention"
    if re.search(
        r"\.(mixer|mamba)\.(in_proj|conv1d|x_proj|dt_proj|out_proj|A_log|D$|dt_bias)", name
    ):  # state-space mixers
        return "mixer"
    if re.search(r"\.conv\.(in_proj|conv|out_proj)\.", name):  # LFM2's short convs
        return "mixer"
    if re.search(r"\.temporal_block\.(linear_[xyo]|linear_out|conv_1d|rg_lru)", name):  # RecurrentGemma's RG-LRU
        return "mixer"
    if re.search(r"\.temporal_block\.[qkvo]_proj\.", name):  # RecurrentGemma's local attention
        return "attention"
    if re.search(r"^rwkv\.blocks\.\d+\.attention\.|\.mlstm_layer\.(?!multihead_norm)", name):  # RWKV, xLSTM
        return "mixer"
    if re.search(r"^rwkv\.embeddings\.", name):
        return "embedding"
    if re.search(r"^head\.", name):  # RWKV's LM head
        return "lm_head"
    if re.search(r"(^|\.)(lm_heads?|embed_out)\.|^output\.|^decoder\.(weight|bias)$", name):  # ModernBERT: decoder
        return "lm_head"
    if re.search(
        r"(embed_tokens|input_embedding|segment_embedding|wte|wpe|word_embeddings|ngram_embeddings|embed_in|(^|\.)shared\.weight$|embed_positions|tokens_embed|"
        r"positions_embed|position_embeddings|^transformer\.w\.weight$)",
        name,
    ):
        return "embedding"
    if re.search(r"(attn|attention|Attention|query_key_value|sinks)", name):
        return "attention"
    return "ffn"


def coarse_llmath(key: str) -> str:
    if key.startswith("patcher."):  # BLT's entropy model, norms included
        return "patcher"
    if key.split(".")[0] in ("vision", "audio", "projector", "text_encoder"):  # towers, MusicGen's text encoder
        return key.split(".")[0]
    if "norm" in key:
        return "norm"
    return {"moe": "ffn"}.get(key.split(".")[0], key.split(".")[0])


def hf_groups(model) -> dict[str, int]:
    """A transformers model's parameters by coarse component (a shared tensor once)."""
    out: dict[str, int] = {}
    seen = set()
    for n, p in model.named_parameters():
        if id(p) not in seen:
            seen.add(id(p))
            out[coarse_hf(n)] = out.get(coarse_hf(n), 0) + p.numel()
    return out


def llmath_groups(rep) -> dict[str, int]:
    """A ParamReport's parameters by the same coarse components (components of 0 left out)."""
    out: dict[str, int] = {}
    for k, v in rep.by_component.items():
        if v:
            out[coarse_llmath(k)] = out.get(coarse_llmath(k), 0) + v
    return out


def matmul_flops(spec, stage: str, scenario, attention: str = "eager") -> int:
    """Matmul FLOPs of one pass of ``spec``'s operator list."""
    from llmath.ops import build_ops, evaluate

    return sum(c.values.get("flops", 0) for c in evaluate(build_ops(spec, stage, attention), scenario, spec))


def values_by_op(spec, stage: str, attention: str, scenario) -> dict[str, dict]:
    """Each operator's evaluated cost classes, summed over operators of the same name."""
    from llmath.ops import build_ops, evaluate

    out: dict[str, dict] = {}
    for c in evaluate(build_ops(spec, stage, attention), scenario, spec):
        for k, v in c.values.items():
            out.setdefault(c.op.name, {}).setdefault(k, 0)
            out[c.op.name][k] += v
    return out


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``llmath ARGS`` run in-process."""
    from llmath.cli import main

    code = 0
    try:
        main(list(args))
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def decoder_alone_costs(model, enc, ids, key: str = "encoder_hidden_states", itemsize: int = 2):
    """A transformers decoder-alone model (TrOCR, *ForCausalLM of an encoder-decoder) given another model's
    encoder output ``enc`` (under ``key``): matmul FLOPs of a prefill of ``ids`` and of one decode step after it,
    and the bytes of its self- and cross-attention caches after the prefill (``itemsize`` bytes per element)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from llmath.measure import oracle

    def counted(**kw):
        with torch.no_grad(), FlopCounterMode(display=False) as c:
            out = model(use_cache=True, **{key: enc}, **kw)
        return c.get_total_flops(), out

    prefill, out = counted(input_ids=ids)
    past = out.past_key_values
    cache = oracle.cache_bytes(past.self_attention_cache, itemsize) + oracle.cache_bytes(
        past.cross_attention_cache, itemsize
    )
    decode, _ = counted(input_ids=ids[:, :1], past_key_values=past)
    return prefill, decode, cache


def saved_config(config, path) -> dict:
    """A transformers config object as the config.json it saves (every attribute: ``to_json_file(use_diff=False)``),
    read back as llmath reads a file."""
    import json

    config.to_json_file(path, use_diff=False)
    return json.loads(Path(path).read_text())


class StandInHub:
    """A loopback HTTP server answering the routes ``hf_hub_download`` uses (HEAD/GET
    ``/{org}/{name}/resolve/{revision}/{file}``) from ``files`` = {(repo id, file name): bytes}; a file it lacks is
    a 404 with the hub's ``X-Error-Code`` (``EntryNotFound`` in a repo it has, else ``RepoNotFound``). ``seen``
    records (method, path, authorization header) of every request. A context manager: the server stops on exit."""

    def __init__(self, files: dict[tuple[str, str], bytes]):
        self.files, self.seen = files, []
        self.repos = {repo for repo, _ in files}

    def __enter__(self) -> "StandInHub":
        import threading
        from http.server import ThreadingHTTPServer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _handler(self):
        import hashlib
        from http.server import BaseHTTPRequestHandler

        hub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: bool):
                hub.seen.append((self.command, self.path, self.headers.get("authorization")))
                parts = self.path.split("?")[0].strip("/").split("/")
                key = ("/".join(parts[:2]), "/".join(parts[4:])) if len(parts) > 4 and parts[2] == "resolve" else None
                data = hub.files.get(key) if key else None
                if data is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound" if key and key[0] in hub.repos else "RepoNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", '"' + hashlib.sha1(data).hexdigest() + '"')
                self.send_header("X-Repo-Commit", "0" * 40)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_HEAD(self):
                self._answer(False)

            def do_GET(self):
                self._answer(True)

            def log_message(self, *a):
                pass

        return Handler


def write_llama_gguf(path, keys: dict[str, int]) -> None:
    """A GGUF llama header (gguf-py's writer) with ``llama.<key>`` = value as uint32 for each of ``keys`` and one
    fp16 tensor, ``token_embd.weight`` (8 × 64)."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    for k, v in keys.items():
        w.add_uint32(f"llama.{k}", v)
    w.add_tensor("token_embd.weight", np.zeros((8, 64), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
