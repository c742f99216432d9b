"""A served request longer than the model's context: refused, as the serving engines refuse it.

Every engine llmath models caps a request's tokens (prompt plus requested output) at a maximum model length
that it derives from the model's config in its own way (:mod:`.engine_context`: its length keys, its RoPE
scaling; the engine's rule is ``context_rule`` in ``data/engines.json``):

* vLLM: ``max_model_len`` defaults to the length derived from the model's config (``ModelConfig``,
  ``_get_and_verify_max_len``; a longer one is refused unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``). Its
  OpenAI server refuses a request whose prompt + ``max_tokens`` passes it ("'max_tokens' or
  'max_completion_tokens' is too large", ``vllm/entrypoints/openai/serving_engine.py``,
  ``OpenAIServing._validate_input``), its engine a prompt longer than it ("The decoder prompt (length …) is
  longer than the maximum model length", ``vllm/v1/engine/processor.py``, ``Processor._validate_model_input``).
* SGLang: ``--context-length`` defaults to the config's (``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` to set
  a longer one); ``TokenizerManager._validate_one_request`` (``python/sglang/srt/managers/tokenizer_manager.py``)
  refuses an input of ``context_len`` tokens or more and an input + ``max_new_tokens`` of ``context_len`` or
  more ("Requested token count exceeds the model's maximum context length"), or with ``--allow-auto-truncate``
  cuts the request short instead.
* TensorRT-LLM: ``max_seq_len``, "the maximum total length of one request, including prompt and outputs",
  deduced from the model config when not given (``TorchLlmArgs``,
  https://nvidia.github.io/TensorRT-LLM/llm-api/reference/TorchLlmArgs.html); the LLM API refuses a prompt +
  ``max_tokens`` above it ("should not exceed max_seq_len", ``tensorrt_llm/llmapi/llm.py``,
  ``_check_arguments``).

So a serving estimate (:func:`llmath.serve`, :func:`llmath.plan`,
:func:`llmath.deploy.disagg.serve_disaggregated`) of requests past the context times a run that no engine
accepts with its defaults: it is refused, a usage error that names the lengths, the engine's limit and how it
derived it, and the two ways on. The rule is vLLM's, P + G ≤ N tokens per request (SGLang's is one token
stricter: P + G < N); for an encoder-decoder model the decoder's sequence, its start token + G, and a
source that shares the decoder's position table (BART, T5), P, each within N. ``allow_long_context=True``
(``--allow-long-context``) times such requests anyway, as an engine started with a longer limit than its
default would run them, and the report says so in a note: the figures then extrapolate the architecture past
its trained positions.

The single-pass analysis (:func:`llmath.analyze`, a static batch) is not a served request: it keeps its
note (:func:`llmath.model.notes.context_message`) and runs, for a student extrapolating the architecture.
"""

from __future__ import annotations

from llmath.deploy.engine_context import context_limit
from llmath.deploy.workload import Workload
from llmath.errors import WorkloadError
from llmath.model.spec import ModelSpec

ENGINE_LIMITS = "vLLM max_model_len, SGLang context_length, TensorRT-LLM max_seq_len"
OVERRIDE = "pass --allow-long-context (allow_long_context=True)"


class ContextLengthError(WorkloadError):
    """Served requests past the model's context: ``problem`` (the lengths and the limit), then the two ways on,
    ``rule`` to shorten them or ``override`` (each front end names its own: a flag, a keyword, a control)."""

    def __init__(self, problem: str, rule: str, override: str = OVERRIDE) -> None:
        self.problem, self.rule = problem, rule
        super().__init__(f"{problem}; shorten prompt/gen so that {rule}, or {override} to time it anyway")

    def naming(self, override: str) -> ContextLengthError:
        """The same refusal with ``override`` named as the way to time it anyway."""
        return ContextLengthError(self.problem, self.rule, override)


def request_tokens(spec: ModelSpec, prompt: int, gen: int) -> int:
    """The tokens of one request that the engines hold against the context: prompt + output (decoder-only); an
    encoder-decoder's decoder sequence (its start token + output) or its source where the source shares the
    decoder's position table (BART, T5), whichever is longer."""
    if not spec.is_encoder_decoder:
        return prompt + gen
    return max(1 + gen, prompt if _source_shares_table(spec) else 0)


def _source_shares_table(spec: ModelSpec) -> bool:
    """An encoder-decoder's source reads the decoder's position table (BART, T5), not its own (an image or
    audio front end, an external encoder: TrOCR, Whisper), as :func:`llmath.ops.stages.context_end` reads it."""
    return not (spec.encoder is not None and (spec.encoder.external or spec.encoder.frontend))


def engine_length(spec: ModelSpec, workload: Workload, engine: str = "vllm") -> int | None:
    """The length limit ``engine`` must be started with to accept ``workload``'s requests (its longest output)
    when they pass the engine's default limit (vLLM's rule: prompt + output tokens); None when they fit it."""
    limit = context_limit(spec, engine)
    tokens = request_tokens(spec, workload.prompt, workload.longest_gen)
    return tokens if limit and tokens > limit.tokens else None


def _lengths(spec: ModelSpec, prompt: int, gen: int, dist: bool) -> str:
    g = f"the longest gen_dist output {gen}" if dist else f"gen {gen}"
    if spec.is_encoder_decoder:
        return f"prompt {prompt} (source) and {g} (decoder: start token + output)"
    return f"prompt {prompt} + {g} = {prompt + gen} tokens"


def _rule(spec: ModelSpec, top: int) -> str:
    if not spec.is_encoder_decoder:
        return f"prompt + gen <= {top}"
    return f"1 + gen <= {top}" + (f" and prompt <= {top}" if _source_shares_table(spec) else "")


def long_context_notes(spec: ModelSpec, workload: Workload, allow: bool, engine: str = "vllm") -> list[str]:
    """Nothing when each of ``workload``'s requests (prompt + its longest output) fits ``engine``'s default
    maximum model length for ``spec`` (:func:`.engine_context.context_limit`); past it a :class:`WorkloadError`,
    or with ``allow`` the note the report carries: the figures extrapolate."""
    if not isinstance(allow, bool):
        raise WorkloadError(f"allow_long_context={allow!r} must be True or False; True times requests past the context")
    prompt, gen = workload.prompt, workload.longest_gen
    limit = context_limit(spec, engine)
    if limit is None or request_tokens(spec, prompt, gen) <= limit.tokens:
        return []
    lengths, top = _lengths(spec, prompt, gen, bool(workload.gen_dist)), limit.tokens
    derived = f"{limit.engine}'s max model length {top} = {limit.how}"
    if not allow:
        raise ContextLengthError(
            f"{lengths} per request pass {spec.name}'s context: {derived}, the longest request it accepts by default",
            _rule(spec, top),
        )
    msg = (
        f"{spec.name}: {lengths} per request pass the model's context ({derived}): timed as --allow-long-context"
        f" asks, as an engine started with a longer limit than the config's ({ENGINE_LIMITS}) would run them; the"
        " figures extrapolate past the trained positions"
    )
    return [msg]
