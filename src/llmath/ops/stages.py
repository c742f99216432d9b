"""The stages of a workload as scenarios, for decoder-only and encoder-decoder models (stated once here).

Decoder-only: the prefill of ``prompt`` = P tokens after an optional cached ``prefix``, then decode steps at
contexts S = prefix + P, prefix + P + 1, …

Encoder-decoder (T5, BART, the original Transformer): ``prompt`` = P is the *source* length. The encoder
runs once over the P source tokens (bidirectional); the decoder prefill runs ``decoder_prompt`` tokens
(default 1, the start token, as translation and T5 generation begin), cross-attends the P encoder
positions and projects them to the cross-attention K/V once, into the cache; decode steps run at decoder
contexts S = decoder_prompt, decoder_prompt + 1, … and read that cross cache. TTFT = encoder + decoder
prefill. The KV cache is the self-attention cache (B × decoder positions, growing) plus the cross-attention
cache (B × P, fixed). A cached prefix does not apply (the decoder starts after the encoder pass).

A decoder with an image encoder (Llama 3.2 Vision) and a request with ``images``: the ``vision`` stage encodes
them (TTFT = vision + prefill), and the vision tokens are the source its cross-attention layers attend: their
K/V are projected once in the prefill into a fixed cross cache (B × vision tokens), read by every step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import numpy as np

from llmath.errors import WorkloadError
from llmath.model.dtypes import Precision
from llmath.model.spec import ModelSpec
from llmath.ops.assemble import build_ops
from llmath.ops.core import CLASSES, Attention, Stage
from llmath.ops.scenario import Scenario
from llmath.ops.table import evaluate, matmul_rows, table


def vision_tokens(spec: ModelSpec, images: int) -> int:
    """Vision tokens per sequence that ``images`` images give a decoder with an image encoder (Llama 3.2
    Vision: tiles · (patches + 1) each, model/spec_vision.py); 0 without images."""
    if not images:
        return 0
    if spec.vision is None:
        raise WorkloadError(
            f"images={images}: {spec.name!r} has no image encoder llmath runs (Llama 3.2 Vision, mllama, has); "
            "analyse it text-only (images=0)"
        )
    return images * spec.vision.tokens_per_image


def decode_start(
    spec: ModelSpec, prompt: int, prefix: int = 0, decoder_prompt: int = 1, images: int = 0
) -> tuple[int, int]:
    """(positions in the self-attention cache when the decode steps start, source positions cross-attended:
    an encoder-decoder's source, or a request's vision tokens)."""
    if spec.is_encoder_decoder:
        if prefix:
            raise WorkloadError(
                f"prefix={prefix}: {spec.name!r} is an encoder-decoder model, whose decoder starts after the "
                "encoder pass with no cached prefix; set the decoder's own prefill length with decoder_prompt"
            )
        _check_source(spec, prompt)
        return decoder_prompt, prompt
    if np.any(np.asarray(decoder_prompt) != 1):  # never silently ignored
        raise WorkloadError(
            f"decoder_prompt={decoder_prompt}: {spec.name!r} is a decoder-only model, whose prefill is the prompt;"
            " drop --decoder-prompt (encoder-decoder models only) and give the length as --prompt"
        )
    return prefix + prompt, vision_tokens(spec, images)


def context_end(spec: ModelSpec, prompt: int, prefix: int, decoder_prompt: int, gen: int) -> int:
    """The last position a position table must hold: the decoder's last, and the source's where the source
    shares a table of the same length (BART, T5); an image or audio source (TrOCR, Whisper) has its own."""
    own_source = spec.encoder is not None and bool(spec.encoder.external or spec.encoder.frontend)
    return max(decode_start(spec, prompt, prefix, decoder_prompt)[0] + gen - 1, 0 if own_source else prompt)


def _check_source(spec: ModelSpec, prompt) -> None:
    """Whisper's encoder takes exactly its window (transformers raises on any other length of input features)."""
    window = spec.encoder.source_positions if spec.encoder is not None else 0
    if window and np.any(np.asarray(prompt) != window):
        raise WorkloadError(
            f"prompt={prompt}: {spec.name!r} encodes a fixed audio window of {window} positions "
            f"({2 * window} mel frames; shorter audio is padded to it); pass prompt={window}"
        )


def stage_scenarios(
    spec: ModelSpec, batch, prompt, prefix=0, decoder_prompt: int = 1, images: int = 0
) -> dict[str, Scenario]:
    """The scenario of each stage, in execution order: ``encoder`` (encoder-decoder only) or ``vision`` (a
    request's images: one row per image, its tiles' padded positions, ops/vision_mllama.py), ``prefill`` and
    ``decode`` (step 0)."""
    ctx0, src = decode_start(spec, prompt, prefix, decoder_prompt, images)
    if not spec.is_encoder_decoder:
        vis = {"vision": Scenario(batch * images, spec.vision.encoder_positions)} if src and spec.vision else {}
        return {**vis, "prefill": Scenario(batch, prompt, prefix, src=src), "decode": Scenario(batch, 1, ctx0, src=src)}
    enc = {} if spec.encoder is not None and spec.encoder.external else {"encoder": Scenario(batch, prompt)}
    return {  # an external encoder (TrOCR's image encoder) is another model's pass: no encoder stage here
        **enc,
        "prefill": Scenario(batch, decoder_prompt, 0, src=src),
        "decode": Scenario(batch, 1, ctx0, src=src),
    }


def stage_flops(spec: ModelSpec, stage: str, attention: str, sc: Scenario) -> float:
    """Matmul FLOPs of one stage's pass (float; the compiled-table path)."""
    vals = table(spec, cast(Stage, stage), cast(Attention, attention)).values(sc)
    return float(vals[..., CLASSES.index("flops")].sum())


def cross_kv_elements_per_source(spec: ModelSpec, ops=None) -> int | float:
    """Cross-attention cache elements per source position (K and V of every decoder layer), read off the
    cross K/V projections of the decoder prefill (``ops``: one GPU's under a layout); 0 for decoder-only
    models."""
    if not spec.is_encoder_decoder and spec.vision is None:
        return 0
    ops = build_ops(spec, "prefill", "flash") if ops is None else ops
    n = sum(t.coef * op.count for op in ops for t in op.terms("kv_write") if t.mono == "X")
    return int(n) if float(n).is_integer() else float(n)


_ACT = tuple(float(c in ("act_in", "act_out")) for c in CLASSES)


def _act_peak(spec: ModelSpec, stage: str, sc: Scenario, attention: str, tab=None, mv=None):
    t = table(spec, cast(Stage, stage), cast(Attention, attention)) if tab is None else tab
    mv = t.monomial_matrix(sc) if mv is None else mv
    per_op = matmul_rows(mv, t.rhs(_ACT)) / t.kernels
    resid = np.asarray(sc.B) * (np.asarray(sc.T) + np.asarray(sc.src)) * spec.d_model  # + the encoder output
    return per_op.max(-1) + resid


def activation_peak_bytes(
    spec: ModelSpec,
    batch,
    prompt,
    attention: str,
    precision: Precision,
    prefix=0,
    tab=None,
    decoder_prompt=1,
    enc_tab=None,
    mv=None,
):
    """Largest live activation set of the prefill: the widest op's inputs + outputs, plus the residual.
    ``tab``: another compiled operator list of ``spec`` (one GPU's under a layout). Encoder-decoder: the
    larger of the encoder pass (``enc_tab``: its list on that GPU) and the decoder prefill, which keeps the
    encoder output live. ``mv``: the decoder-only prefill's monomial matrix, when the caller has it (a sweep)."""
    if not spec.is_encoder_decoder:
        sc = Scenario(batch, prompt, prefix)
        return _act_peak(spec, "prefill", sc, attention, tab, mv) * precision.act_bytes
    pre = _act_peak(spec, "prefill", Scenario(batch, decoder_prompt, 0, src=prompt), attention, tab)
    if spec.encoder is not None and spec.encoder.external:  # another model's encoder pass
        return pre * precision.act_bytes
    enc = _act_peak(spec, "encoder", Scenario(batch, prompt), attention, enc_tab)
    return np.maximum(enc, pre) * precision.act_bytes


def training_flops(spec: ModelSpec, batch: int, seq: int) -> dict[str, int]:
    """A training step on B sequences of ``seq`` tokens: the forward with logits at every position, and
    forward + backward = 3 × its matmul FLOPs (backward = 2 × forward), 4 × with full recomputation.
    Encoder-decoder: ``seq`` source tokens through the encoder and ``seq`` target tokens through the decoder;
    ProphetNet's decoder runs every predicting stream (its loss reads them all; ops/prophet.py)."""
    if spec.prophet is not None:
        spec = replace(spec, prophet=spec.prophet.training())
    src = seq if spec.is_encoder_decoder else 0
    passes = [("prefill", Scenario(batch, seq, 0, logits="all", src=src))]
    if spec.encoder is not None and not spec.encoder.external:
        passes.append(("encoder", Scenario(batch, seq)))
    fwd = int(
        sum(c.values.get("flops", 0) for st, sc in passes for c in evaluate(build_ops(spec, st, "flash"), sc, spec))
    )
    return {"tokens": batch * seq, "forward_matmul": fwd, "step_matmul": 3 * fwd, "step_matmul_recompute": 4 * fwd}
