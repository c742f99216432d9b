"""The closed-form rules of thumb for a decoder's FLOPs, computed exactly on a real model from its operator lists.

* FLOPs per generated token ≈ 24·L·d² + 4·L·d·N (projections + attention over N positions), and the context
  N = 6d at which attention overtakes the projections; batch prefill (N² score pairs, masked ones included)
  vs a token-by-token loop (N(N+1)/2 pairs);
* how the arithmetic intensity of the projection ("proj") and attention ("act-to-act") operators moves over
  a generation as the KV cache grows.

(The parameter rules 12·L·d², 12·L·d² + 13·L·d and 12·L·d² + 13·L·d + V·d are
:func:`llmath.ops.params.closed_form_estimates`.) "exact" always comes from the operator list; "layers only"
drops the embedding and LM head, as the rules do. Attention FLOPs per position use causal (flash) counting:
query i attends i positions. docs/estimates.md walks through every rule and where it errs.

Encoder-decoder models (the original Transformer): ``prompt`` is the source length, the encoder
runs once per sequence (reported apart), and the per-token figures are the decoder's: L = decoder layers,
each generated token cross-attending the ``prompt`` cached source positions (counted as attention) and
running no encoder layer; the generation starts from the decoder's start token (context 1).
"""

from __future__ import annotations

import numpy as np

from llmath.errors import WorkloadError
from llmath.model.dtypes import Precision
from llmath.model.notes import context_message
from llmath.model.spec import ModelSpec
from llmath.ops import Scenario, evaluate, table
from llmath.validation import MAX_BATCH, MAX_POINTS, MAX_TOKENS, check_int

MAX_CONTEXTS = 1000  # per-token rows in one report (each is a full evaluation)


def _is_proj(op) -> bool:
    """A weight GEMM (a tied LM head owns no parameters but still reads the embedding matrix)."""
    return op.kind == "matmul" and bool(op.terms("weight"))


def _is_attn(op) -> bool:
    return op.kind == "matmul" and not op.terms("weight") and op.component == "attention"


def _layer_op(op) -> bool:
    return bool(op.layer_kind)


def _sum(costs, pred, cls="flops"):
    return sum(c.values.get(cls, 0) for c in costs if pred(c.op))


def _bytes(costs, pred, p: Precision):
    per = p.per_class
    return sum(c.values.get(k, 0) * w for c in costs if pred(c.op) for k, w in per.items())


def per_token_flops(spec: ModelSpec, context: int, src: int = 0) -> dict:
    """Matmul FLOPs of the decode step whose new token attends ``context`` positions (B = 1; encoder-decoder:
    and cross-attends ``src`` source positions)."""
    t = table(spec, "decode", "flash")
    costs = evaluate(t.ops, Scenario(1, 1, context - 1, src=src), spec)
    exact = _sum(costs, lambda o: True)
    layers = _sum(costs, _layer_op)
    attn = _sum(costs, _is_attn)
    L, d = spec.n_layers, spec.d_model
    estimate = 24 * L * d * d + 4 * L * d * context
    return {
        "context": context,
        "exact": exact,
        "exact_layers": layers,
        "estimate": estimate,
        "seed": estimate,  # a stable --json key of `llmath seeds`, the deprecated name of `llmath estimates`
        "error": (estimate - layers) / layers,
        "attention_share": attn / exact,
    }


def crossover(spec: ModelSpec) -> dict:
    """Context where per-token attention FLOPs equal the layers' projection FLOPs, exact vs 6d."""
    t = table(spec, "decode", "flash")
    # two steps after the first (a model's prepended prefix, CPM-Ant's, is cached by then): one position apart
    c1 = evaluate(t.ops, Scenario(1, 1, 1), spec)
    c2 = evaluate(t.ops, Scenario(1, 1, 2), spec)
    proj = _sum(c1, lambda o: _is_proj(o) and _layer_op(o))
    per_pos = _sum(c2, _is_attn) - _sum(c1, _is_attn)
    exact = proj / per_pos
    six_d = 6 * spec.d_model
    return {
        "exact": round(exact),
        "six_d": six_d,
        "error": (six_d - exact) / exact,
        "proj_flops_per_token": proj,
        "attention_flops_per_position": per_pos,
    }


def prefill_vs_loop(spec: ModelSpec, prompt: int) -> dict:
    """Matmul FLOPs (layers only) of a batch prefill as eager executes it, vs a token-by-token loop
    (encoder-decoder: the decoder's self-attention over a ``prompt``-token target, without cross-attention)."""
    eager = evaluate(table(spec, "prefill", "eager").ops, Scenario(1, prompt, 0), spec)
    flash = evaluate(table(spec, "prefill", "flash").ops, Scenario(1, prompt, 0), spec)
    steps = evaluate(table(spec, "decode", "flash").ops, Scenario(1, 1, np.arange(prompt, dtype=np.int64)), spec)
    loop = int(sum(np.sum(c.values.get("flops", 0)) for c in steps if _layer_op(c.op)))
    be = _sum(eager, _layer_op)
    return {
        "prompt": prompt,
        "batch_eager": be,
        "batch_flash": _sum(flash, _layer_op),
        "loop": loop,
        "extra_fraction": be / loop - 1,
        "attention_eager": _sum(eager, _is_attn),
        "attention_loop": int(sum(np.sum(c.values.get("flops", 0)) for c in steps if _is_attn(c.op))),
    }


def intensity_over_generation(
    spec: ModelSpec, batch: int, prompt: int, gen: int, precision: Precision | None = None
) -> tuple[list[dict], dict]:
    """Decode steps 0 … gen − 2 (a generation of ``gen`` tokens: the prefill yields the first; encoder-decoder:
    the decoder starts from its start token and every step cross-attends the ``prompt`` source positions)."""
    p = precision or Precision()
    ctx0, src = (1, prompt) if spec.is_encoder_decoder else (prompt, 0)
    t = table(spec, "decode", "flash")
    steps = max(gen - 1, 1)
    picks = sorted({0, 1, 10, 100, 1000, 10000, 100000, steps - 1} & set(range(steps)))
    rows = []
    for i in picks:
        costs = evaluate(t.ops, Scenario(batch, 1, ctx0 + i, src=src), spec)

        def fl(pred, costs=costs):
            return _sum(costs, pred) + _sum(costs, pred, "vflops")

        rows.append(
            {
                "step": i,
                "context": ctx0 + i + 1,
                "proj": fl(_is_proj) / _bytes(costs, _is_proj, p),
                "attention": fl(_is_attn) / _bytes(costs, _is_attn, p),
                "total": fl(lambda o: True) / _bytes(costs, lambda o: True, p),
            }
        )
    allc = evaluate(t.ops, Scenario(batch, 1, ctx0 + np.arange(steps, dtype=np.int64), src=src), spec)

    def cum(pred):
        f = sum(np.sum(c.values.get("flops", 0)) + np.sum(c.values.get("vflops", 0)) for c in allc if pred(c.op))
        b = sum(np.sum(c.values.get(k, 0)) * w for c in allc if pred(c.op) for k, w in p.per_class.items())
        return float(f / b)

    return rows, {"proj": cum(_is_proj), "attention": cum(_is_attn), "total": cum(lambda o: True)}


def context_warnings(spec: ModelSpec, longest: int) -> list[str]:
    """The note when ``longest`` positions pass the model's trained table (:func:`context_message`)."""
    msg = context_message(spec, longest)
    return [msg] if msg else []


def encoder_pass(spec: ModelSpec, batch: int, prompt: int) -> dict | None:
    """Encoder-decoder models: the encoder pass over the source, once per sequence (matmul FLOPs, layers)."""
    if spec.encoder is None:
        return None
    costs = evaluate(table(spec, "encoder", "flash").ops, Scenario(batch, prompt), spec)
    return {"L": spec.encoder.n_layers, "tokens": batch * prompt, "matmul": _sum(costs, lambda o: True)}


def estimates_report(spec: ModelSpec, contexts, prompt: int, gen: int, batch: int) -> dict:
    """All of the above for one model. The token loop and the cumulative intensity evaluate every step at
    once (arrays of ``prompt`` and ``gen`` − 1 contexts), so both are capped at ``MAX_POINTS``."""
    batch = check_int("batch", batch, 1, MAX_BATCH)
    prompt = check_int("prompt", prompt, 1, MAX_POINTS)
    gen = check_int("gen", gen, 1, MAX_POINTS + 1)
    contexts = [check_int("context", c, 1, MAX_TOKENS) for c in np.atleast_1d(np.asarray(contexts)).tolist()]
    if not contexts or len(contexts) > MAX_CONTEXTS:
        raise WorkloadError(f"contexts: give 1 to {MAX_CONTEXTS} contexts (got {len(contexts)})")
    rows, cum = intensity_over_generation(spec, batch, prompt, gen)
    src = prompt if spec.is_encoder_decoder else 0
    longest = max(int(np.max(contexts)), gen if src else prompt + gen - 1, prompt)
    return {
        "warnings": context_warnings(spec, longest),
        "model": spec.name,
        "L": spec.n_layers,
        "encoder": encoder_pass(spec, batch, prompt),
        "d": spec.d_model,
        "batch": batch,
        "prompt": prompt,
        "gen": gen,
        "per_token": [per_token_flops(spec, int(n), src) for n in contexts],
        "crossover": crossover(spec),
        "prefill_vs_loop": prefill_vs_loop(spec, prompt),
        "intensity": rows,
        "cumulative": cum,
    }
