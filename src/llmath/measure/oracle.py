"""The oracle: the real transformers implementation on the meta device (optional extra ``oracle``).

It builds the module from the very config.json llmath reads, with no weights and no memory, counts its
parameters, counts the FLOPs its forward executes with ``torch.utils.flop_counter.FlopCounterMode``
(eager attention, ``logits_to_keep=1``; MoE experts with ``experts_implementation="batched_mm"``, which
runs on meta and counts only the routed experts), and measures the tensors its cache holds.

Import cost: torch and transformers are imported lazily, inside the functions.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from llmath.model.family_facts import MODEL_TYPE_ALIASES

SEQ2SEQ = (
    "t5", "bart", "marian", "mbart", "plbart", "mvp", "blenderbot", "blenderbot-small", "pegasus", "prophetnet",
    "bigbird_pegasus",
)  # fmt: skip
SPEECH_SEQ2SEQ = ("whisper",)  # the audio encoder-decoders (AutoModelForSpeechSeq2Seq)
# text-to-audio encoder-decoders (AutoModelForTextToWaveform); their decoder alone is MusicgenForCausalLM
TEXT_TO_WAVEFORM = ("musicgen", "musicgen_melody")
CODEBOOK_DECODERS = {"musicgen_decoder": "MusicgenForCausalLM", "musicgen_melody_decoder": "MusicgenMelodyForCausalLM"}
# xLSTM-7b's config.json names the Triton kernels of mlstm_kernels; transformers' xLSTMConfig (5.23) admits
# only the native torch ones, which compute the same layer
XLSTM_NATIVE = {
    "chunkwise_kernel": "chunkwise--native_autograd",
    "sequence_kernel": "native_sequence__native",
    "step_kernel": "native",
}
# families whose forward fills the cache passed in but returns none (RecurrentGemmaForCausalLM returns a
# CausalLMOutput; generate() keeps the cache it created): the oracle passes one in, as generate() does
CACHE_NOT_RETURNED = {"recurrent_gemma"}
# DeepSeek-V4's CSA / HCA cache layers (modeling_deepseek_v4.py DeepseekV4HCACache, DeepseekV4CSACache): per
# compressor ("compressor", "indexer") the emitted entries, the positions awaiting a full window and the overlap
COMPRESSOR_STATES = ("compressed_kv", "buffer_kv", "buffer_gate", "overlap_kv", "overlap_gate")
# families whose forward builds its mask before it creates its cache (MoshiModel): without a cache the mask
# checks the position ids for packed sequences, which needs their values (not on meta); generate() passes a
# cache in, and so does the oracle. Cohere Compass's text model creates its cache only outside training mode
# (modeling_cohere_compass.py CohereCompassTextModel.forward; a model built from a config trains), likewise
CACHE_PASSED_IN = {"moshi", "cohere_compass_text"}
# families whose decode step takes the whole sequence's input_ids, as generate() passes them
# (CpmAntForCausalLM.prepare_inputs_for_generation; its forward slices off the positions already cached)
FULL_IDS_EACH_STEP = {"cpmant"}
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_blocks")
PATTERN_KEYS = ("layers_block_type", "layer_types", "hybrid_override_pattern")


def hf_config(cfg: Mapping[str, Any], n_layers: int | None = None):
    """A transformers config object from a config.json mapping (optionally with fewer layers)."""
    import transformers

    kw: dict[str, Any] = copy.deepcopy(dict(cfg))
    kw.pop("auto_map", None)
    kw.pop("quantization_config", None)
    model_type = kw.pop("model_type")
    if model_type not in transformers.models.auto.configuration_auto.CONFIG_MAPPING:
        # remote-code types llmath reads as a transformers class with the same keys (kimi_k2, mimo, RefinedWeb)
        model_type = MODEL_TYPE_ALIASES.get(model_type, model_type)
    if n_layers is not None:
        _truncate(kw, n_layers)
        if isinstance(kw.get("text_config"), dict):  # a wrapper: its language model's layers
            _truncate(kw["text_config"], n_layers)
    kw = {k: _floats(v) for k, v in kw.items()}
    if model_type == "xlstm":  # transformers 5.23 accepts only its native kernels, not the hub file's Triton ones
        kw.update({k: v for k, v in XLSTM_NATIVE.items() if k in kw})
        if n_layers is not None:  # its blocks follow num_blocks, its cache num_hidden_layers: a copy sets both
            kw["num_blocks"] = kw["num_hidden_layers"] = n_layers
    config = transformers.AutoConfig.for_model(model_type, **kw)
    return config


def _truncate(cfg: dict[str, Any], n_layers: int) -> None:
    """Keep the first ``n_layers`` layers: the layer counts and the per-layer lists (layer_types,
    no_rope_layers, ...) and patterns."""
    full = next((cfg[k] for k in LAYER_KEYS if isinstance(cfg.get(k), int)), None)
    if full is None:  # Nemotron-H: the layer count is the length of its pattern (a list or a string)
        full = len(next((cfg[k] for k in PATTERN_KEYS if cfg.get(k)), "")) or None
    for k in LAYER_KEYS:
        if k in cfg:
            cfg[k] = n_layers
    if full and cfg.get("num_kv_shared_layers"):  # Gemma 3n / 4: the same first layer still reuses K/V
        cfg["num_kv_shared_layers"] = max(0, n_layers - (full - cfg["num_kv_shared_layers"]))
    for k, v in list(cfg.items()):
        if isinstance(v, list | str) and len(v) == full and (isinstance(v, list) or k in PATTERN_KEYS):
            cfg[k] = v[:n_layers]
    if isinstance(cfg.get("per_layer_config"), dict):  # Gemma 4: overrides keyed by layer index
        cfg["per_layer_config"] = {k: v for k, v in cfg["per_layer_config"].items() if int(k) < n_layers}
    sub = cfg.get("linear_attn_config")  # Kimi-Linear: 1-based layer lists of each kind
    if isinstance(sub, dict):
        cfg["linear_attn_config"] = {
            k: [i for i in v if i <= n_layers] if k.endswith("_layers") and isinstance(v, list) else v
            for k, v in sub.items()
        }


def _floats(v: Any) -> Any:
    """``to_json_file`` writes non-finite floats as ``{"__float__": "Infinity"}``; read them back as floats."""
    if isinstance(v, dict) and set(v) == {"__float__"}:
        return float(v["__float__"])
    if isinstance(v, list):
        return [_floats(x) for x in v]
    return v


def build_meta(config, attn_implementation: str = "eager"):
    import torch
    import transformers

    kw: dict[str, Any] = {"attn_implementation": attn_implementation}
    with torch.device("meta"):
        if config.model_type in SEQ2SEQ:
            return transformers.AutoModelForSeq2SeqLM.from_config(config, **kw)
        if config.model_type in SPEECH_SEQ2SEQ:
            return transformers.AutoModelForSpeechSeq2Seq.from_config(config, **kw)
        if config.model_type in TEXT_TO_WAVEFORM:
            return transformers.AutoModelForTextToWaveform.from_config(config, **kw)
        if config.model_type in CODEBOOK_DECODERS:
            return getattr(transformers, CODEBOOK_DECODERS[config.model_type])._from_config(config, **kw)
        try:
            return transformers.AutoModelForCausalLM.from_config(config, experts_implementation="batched_mm", **kw)
        except TypeError:
            return transformers.AutoModelForCausalLM.from_config(config, **kw)
        except ValueError:  # a multimodal wrapper without a *ForCausalLM (Qwen2.5-VL): its generation class
            return _build_wrapper(config, kw)


def _build_wrapper(config, kw: dict[str, Any]):
    import transformers

    for auto in (transformers.AutoModelForImageTextToText, transformers.AutoModelForMultimodalLM):
        try:
            return auto.from_config(config, **kw)
        except ValueError:
            continue
    return transformers.AutoModelForCausalLM.from_config(config, **kw)


def count_params(model) -> int:
    """Parameters as PyTorch counts them (shared tensors once)."""
    return sum(p.numel() for p in model.parameters())


def past_of(out):
    """The cache a forward returned (``past_key_values``; Mamba-style models name it ``cache_params``)."""
    for name in ("past_key_values", "cache_params", "state"):  # RWKV returns its state as a list of tensors
        past = getattr(out, name, None)
        if past is not None:
            return past
    return None


def forward_flops(model, batch: int, tokens: int, past=None, logits_to_keep: int = 1, seen: int | None = None):
    """(matmul FLOPs counted by FlopCounterMode, the model output) for one forward pass on meta.
    ``seen``: positions already in ``past`` (needed when it holds no attention layer to ask, or is RWKV's
    state list)."""
    import inspect

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    dev = next(model.parameters()).device  # meta, or a small model on the CPU (data-dependent expert loops)
    full = past is not None and model.config.model_type in FULL_IDS_EACH_STEP
    if full and seen is None:  # CPM-Ant's cache also holds its prompt_length prompt positions
        seen = past.get_seq_length() - model.config.prompt_length
    ids = torch.zeros(batch, (seen or 0) + tokens if full else tokens, dtype=torch.long, device=dev)
    kw: dict[str, Any] = {"input_ids": ids, "use_cache": True, "logits_to_keep": logits_to_keep}
    if past is not None:
        params = inspect.signature(model.forward).parameters
        named = next((k for k in ("cache_params", "state") if k in params), "past_key_values")
        kw[named] = past
        seen = past.get_seq_length() if seen is None else seen
        kw["position_ids"] = torch.arange(seen, seen + tokens, device=dev).expand(batch, -1)
        kw["cache_position"] = torch.arange(seen, seen + tokens, device=dev)
    fresh = None
    if past is None and model.config.model_type in CACHE_NOT_RETURNED | CACHE_PASSED_IN:
        from transformers import DynamicCache

        fresh = kw["past_key_values"] = DynamicCache(config=model.config)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(**kw)
    if fresh is not None:
        out.past_key_values = fresh  # as generate() keeps the cache it passed in
    return counter.get_total_flops(), out


def cache_bytes(past, bytes_per_element: int = 2, model=None) -> int:
    """Bytes of every tensor the HF cache holds (keys and values of every layer, a sparse-attention indexer's
    keys, DeepSeek-V4's compressor states (:data:`COMPRESSOR_STATES`), and the conv and recurrent states of
    linear-attention / state-space layers; MiniMax's lightning states; RWKV's state list and xLSTM's
    ``rnn_state``), plus, given the ``model``, the states its modules keep themselves (RecurrentGemma's
    ``conv1d_state`` and ``recurrent_states``)."""
    if isinstance(past, list | tuple):  # RWKV: five (batch, hidden, layers) tensors
        return sum(t.numel() for t in past) * bytes_per_element
    if hasattr(past, "rnn_state"):  # xLSTM: (C, n, m) per layer
        return sum(t.numel() for state in past.rnn_state.values() for t in state) * bytes_per_element
    total = _module_state_elements(model) * bytes_per_element if model is not None else 0
    for layer in past.layers:
        tensors = [getattr(layer, k, None) for k in ("keys", "values", "indexer_keys", "idx_keys")]  # idx: MiniMax-M3
        for states in ("conv_states", "recurrent_states", *COMPRESSOR_STATES):
            tensors += list((getattr(layer, states, None) or {}).values())
        seen: set[int] = set()  # DeepSeek-V4's compressed layers hold K = V: one tensor, counted once
        for t in tensors:
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                total += t.numel() * bytes_per_element
    for t in getattr(past, "linear_cache", None) or []:  # MiniMaxCache: each lightning layer's K·V state
        if hasattr(t, "numel"):
            total += t.numel() * bytes_per_element
    return total


def _module_state_elements(model) -> int:
    n = 0
    for module in model.modules():
        for name in ("conv1d_state", "recurrent_states"):
            t = module.__dict__.get(name)
            if t is not None and hasattr(t, "numel"):
                n += t.numel()
    return n


def seq2seq_flops(model, batch: int, src: int, tokens: int) -> dict[str, Any]:
    """An encoder-decoder model's three stages as ``generate`` runs them, on meta: the encoder over ``src``
    source tokens, a decoder prefill of ``tokens`` tokens (computing and caching the cross-attention K/V),
    then one decode step reusing ``encoder_outputs`` and ``past_key_values``. Matmul FLOPs per stage, and
    the (self-attention, cross-attention) bytes of the ``EncoderDecoderCache`` after the prefill (2 bytes
    per element)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    def counted(fn):
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = fn()
        return counter.get_total_flops(), out

    # MusicGen: one code per codebook and position, decoder_input_ids of (batch · C, tokens)
    codebooks = getattr(getattr(model.config, "decoder", None), "num_codebooks", 1)
    dev = next(model.parameters()).device  # meta, or a small model on the CPU (ProphetNet's decode step)
    dec = torch.zeros(batch * codebooks, tokens, dtype=torch.long, device=dev)
    if model.config.model_type in SPEECH_SEQ2SEQ:  # 2 mel frames per encoder position (Whisper's stride 2)
        mels = torch.zeros(batch, model.config.num_mel_bins, 2 * src, device=dev)
        f_enc, enc = counted(lambda: model.get_encoder()(input_features=mels))
    else:
        ids = torch.zeros(batch, src, dtype=torch.long, device=dev)
        f_enc, enc = counted(lambda: model.get_encoder()(input_ids=ids))
    f_pre, out = counted(lambda: model(encoder_outputs=enc, decoder_input_ids=dec, use_cache=True))
    past = out.past_key_values
    sizes = (cache_bytes(past.self_attention_cache), cache_bytes(past.cross_attention_cache))
    f_dec, _ = counted(
        lambda: model(encoder_outputs=enc, decoder_input_ids=dec[:, :1], past_key_values=past, use_cache=True)
    )
    return {"encoder": f_enc, "prefill": f_pre, "decode": f_dec, "cache_bytes": sizes}
