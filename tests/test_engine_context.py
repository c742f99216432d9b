"""Each engine's default maximum model length, derived from the config as the engine's own code derives it
(docs/context.md, "Each engine's limit"; ``deploy/engine_context.py``). The rules, read in:

* vLLM: vllm/config/model.py at 0052a5b818980ce8a0477706aaf9f75bd5af72cd, ``_get_and_verify_max_len``: the
  smallest of its length keys; times ``factor`` for rope types other than su/longrope/llama3; for yarn
  ``original_max_position_embeddings × factor``.
* SGLang: python/sglang/srt/utils/hf_transformers_utils.py at 2aa2e2d0ffda0a44ed9a022fdd9d5d042f365eee,
  ``get_context_length``: the first of CONTEXT_LENGTH_KEYS (n_positions is not one: 2048), times ``factor``
  unless rope_scaling holds ``original_max_position_embeddings`` or its rope_type is llama3.
* TensorRT-LLM: tensorrt_llm/_torch/models/modeling_utils.py at cb4c622cf5bb97009451f7f44609498a48a2b11d,
  ``DecoderModelForCausalLM.infer_max_seq_len``: ``max_position_embeddings`` (2048 without it), times
  ceil(factor) for rope types other than su/longrope/llama3/yarn.
* llama.cpp: n_ctx_train, the GGUF's context_length.

The configs are written out here; each expected limit carries its arithmetic."""

import pytest
from helpers import run_cli

from llmath.deploy.context_limit import engine_length, long_context_notes
from llmath.deploy.engine_context import context_limit
from llmath.deploy.workload import Workload
from llmath.errors import WorkloadError
from llmath.model.hf import spec_from_config

SMALL = {  # a small Qwen2 body: the length keys below are what the rules read
    "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256,
    "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False, "rope_theta": 1e6,
}  # fmt: skip
# Qwen2.5-7B-Instruct's model card: "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768,
# "type": "yarn"} added to its config (max_position_embeddings 32768) for 128K
QWEN_YARN = SMALL | {
    "max_position_embeddings": 32768,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
}
LINEAR = SMALL | {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}
# Llama-3.1-8B's config.json (huggingface.co/meta-llama/Llama-3.1-8B)
LLAMA3 = SMALL | {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 131072,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}  # fmt: skip
# DeepSeek-V3's shipped config.json (huggingface.co/deepseek-ai/DeepSeek-V3): its length keys
DEEPSEEK_V3_LENGTHS = {
    "max_position_embeddings": 163840,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
}  # fmt: skip
# gpt2's config.json (huggingface.co/openai-community/gpt2): n_positions only
GPT2 = {
    "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_head": 4, "n_layer": 2,
    "n_positions": 1024, "n_ctx": 1024, "vocab_size": 256, "activation_function": "gelu_new",
}  # fmt: skip


def _limits(cfg: dict) -> dict:
    spec = spec_from_config(cfg, name="test")
    limits = {e: context_limit(spec, e) for e in ("vllm", "sglang", "trtllm", "llama.cpp")}
    return {e: (lim.tokens, lim.how) for e, lim in limits.items() if lim}


def test_qwen_yarn_factor_4():
    lim = _limits(QWEN_YARN)
    assert lim["vllm"] == (131072, "original_max_position_embeddings 32768 × yarn factor 4")  # 32768 × 4
    assert lim["sglang"][0] == 32768  # original_max_position_embeddings in rope_scaling: factor 1 → 32768
    assert lim["trtllm"][0] == 32768  # yarn is not scaled: max_position_embeddings 32768
    assert lim["llama.cpp"][0] == 32768  # context_length (max_position_embeddings) 32768


def test_linear_scaling_doubles_every_engines_limit_but_llama_cpp():
    lim = _limits(LINEAR)
    assert lim["vllm"] == (8192, "max_position_embeddings 4096 × linear factor 2")  # 4096 × 2
    assert lim["sglang"][0] == 8192  # 4096 × 2 (no original_max_position_embeddings, not llama3)
    assert lim["trtllm"][0] == 8192  # ceil(4096 × 2.0)
    assert lim["llama.cpp"][0] == 4096  # n_ctx_train: context_length as written


def test_llama3_rope_is_not_scaled():
    lim = _limits(LLAMA3)
    # llama3 is excluded from the factor by all three: max_position_embeddings 131072 as written
    assert {e: t for e, (t, _) in lim.items()} == dict.fromkeys(("vllm", "sglang", "trtllm", "llama.cpp"), 131072)


def test_deepseek_v3_yarn_factor_40():
    spec = spec_from_config(SMALL | DEEPSEEK_V3_LENGTHS, name="dsv3-lengths")
    assert context_limit(spec, "vllm").tokens == 163840  # original 4096 × yarn factor 40 = 163840
    assert context_limit(spec, "vllm").how == "original_max_position_embeddings 4096 × yarn factor 40"
    assert context_limit(spec, "sglang").tokens == 163840  # original in rope_scaling: max_position_embeddings
    assert context_limit(spec, "trtllm").tokens == 163840  # yarn not scaled: max_position_embeddings 163840


def test_gpt2_n_positions_only():
    lim = _limits(GPT2)
    # vLLM: transformers' GPT2Config maps max_position_embeddings to n_positions, both 1024; the first key it
    # reads at the smallest value names it
    assert lim["vllm"] == (1024, "max_position_embeddings 1024")
    # SGLang reads max_position_embeddings, which transformers' GPT2Config maps to n_positions: 1024
    assert lim["sglang"][0] == 1024 and lim["trtllm"][0] == 1024


def test_refusal_names_the_engines_derivation():
    spec = spec_from_config(QWEN_YARN, name="qwen-yarn")
    w = Workload(prompt=100000, gen=10, concurrency=1)  # 100010 tokens: within vLLM's 131072, past SGLang's 32768
    assert long_context_notes(spec, w, False, "vllm") == [] and engine_length(spec, w, "vllm") is None
    with pytest.raises(WorkloadError) as e:
        long_context_notes(spec, w, False, "sglang")
    msg = str(e.value)
    assert "\n" not in msg and "SGLang's max model length 32768 = max_position_embeddings 32768" in msg
    assert engine_length(spec, w, "sglang") == 100010 and engine_length(spec, w, "trtllm") == 100010


def test_cli_refusal_and_emit_follow_the_engine(capsys, tmp_path):
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN_YARN))
    base = ("analyze", str(path), "-H", "h100", "--prompt", "100000", "--gen", "10", "-c", "1")
    code, _, err = run_cli(capsys, *base, "--engine", "sglang")
    assert code == 2 and "SGLang's max model length 32768" in err, err
    code, out, err = run_cli(capsys, *base, "--engine", "vllm", "--emit", "vllm")
    assert code == 0 and "--max-model-len" not in out, (code, out, err)  # 100010 <= 131072 = 32768 × 4
    code, out, err = run_cli(capsys, *base, "--engine", "trtllm", "--emit", "trtllm", "--allow-long-context")
    assert code == 0 and "--max_seq_len 100010" in out, (code, out, err)  # past 32768: prompt + gen
