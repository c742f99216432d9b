"""An engine's command started with a longer length limit than the model's context (``--allow-long-context``).

Each engine caps a request's prompt + output at a limit that defaults to the config's trained context
(:mod:`llmath.deploy.context_limit`); an estimate timed past it describes an engine started with a longer one, so
the command written for it (``--emit``) sets that limit, as ``data/engine_flags.json`` names it per engine
(``settings.max_model_len``, with its sources):

* vLLM ``--max-model-len N``; a value above the length derived from the config is refused unless
  ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (``vllm/config/model.py``, ``_get_and_verify_max_len``), written before
  the command.
* SGLang ``--context-length N + 1`` (it refuses input + output of ``context_len`` or more); a value above the
  derived one is refused unless ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``
  (``python/sglang/srt/configs/model_config.py``, ``ModelConfig._derive_context_length``).
* TensorRT-LLM ``--max_seq_len N`` (``trtllm-serve``; the LLM API's ``max_seq_len``).

Raising the limit only admits the requests: positions past the trained ones are extrapolated. A rotary model
runs them (vLLM warns that its outputs may be wrong); the usual remedy is a RoPE scaling override in the
engine's config override (vLLM ``--hf-overrides``, SGLang ``--json-model-override-args``), which llmath leaves
to the user: it changes the model's outputs, not the passes llmath times. A learned position table has no rows
past the context, so the engine cannot run such a request (vLLM: a CUDA out-of-bounds error).
"""

from __future__ import annotations

from dataclasses import replace

from llmath.deploy.engine_args import EngineCommand, engine_data
from llmath.deploy.engine_context import context_limit
from llmath.model.spec import ModelSpec

OVERRIDES = {"vllm": "--hf-overrides", "sglang": "--json-model-override-args"}


def with_length_limit(cmd: EngineCommand, spec: ModelSpec, tokens: int) -> EngineCommand:
    """``cmd`` started with a length limit that admits requests of ``tokens`` (prompt + output) past ``spec``'s
    context: the engine's flag, the environment variable that lets it pass the config's length, and notes."""
    setting = engine_data(cmd.engine)["settings"]["max_model_len"]
    limit = tokens + 1 if setting.get("exclusive") else tokens
    argv = list(cmd.argv)
    cut = argv.index("--config") if "--config" in argv else len(argv)
    argv[cut:cut] = [setting["flag"], str(limit)]
    env = dict(cmd.env)
    if setting.get("allow_env"):
        env[setting["allow_env"]] = "1"
    note = (
        f"{setting['flag']} {limit} admits requests of {tokens} tokens, past {spec.name}'s context:"
        f" {_derived(cmd.engine, spec)}"
    )
    return replace(cmd, argv=argv, env=env, notes=[*cmd.notes, note, _positions_note(cmd.engine, spec)])


def _derived(engine: str, spec: ModelSpec) -> str:
    own = context_limit(spec, engine)
    return f"{own.engine}'s max model length {own.tokens} = {own.how}" if own else "no length limit"


def _positions_note(engine: str, spec: ModelSpec) -> str:
    if spec.position == "learned":
        return (
            f"{spec.name} has a learned position table of {spec.max_positions} rows: the engine has no position for"
            " the tokens past it and cannot run these requests as written"
        )
    if spec.position == "rotary":
        where = OVERRIDES.get(engine, "the model's config.json")
        return (
            "positions past the trained context are extrapolated; a RoPE scaling override (rope_scaling in"
            f" {where}) is the usual remedy: it changes outputs, not the passes timed"
        )
    return f"positions past the trained context ({spec.position} positions) are extrapolated"
