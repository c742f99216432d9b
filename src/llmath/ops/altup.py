"""Gemma 3n's additions to the decoder (transformers 5.23 ``modeling_gemma3n.py``; AltUp: Baykal et al., NeurIPS
2023, "Alternating Updates for Efficient Transformers"), and the prefill rows of Gemma 4's KV-shared layers.

AltUp keeps A copies of the hidden state (``altup_inputs``; letter A). Once per pass, copies 1..A−1 are
projections D -> D of the embeddings, each rescaled to the embeddings' RMS magnitude; after the last layer
copies 1..A−1 go through their own D -> D "unembed" projections, are rescaled the same way, and the A copies
are averaged before the final norm (every position: transformers slices the logit rows after the model).

Each layer (``Gemma3nTextDecoderLayer``):
- predict: router = tanh(W_r · norm(x₀)/D), W_r D -> A (``modality_router``); coefficients A -> A²
  (``prediction_coefs``); every copy += Σ_j coef · copy_j (a matmul of 2·D·A·A per token);
- the layer runs on copy 0 (``altup_active_idx`` 0): norm, LAuReL beside attention (D -> R -> D, a norm,
  added to its input), attention, residual, (residual + LAuReL)/√2, FFN, residual;
- correct: the router again (same weights) on the layer output, coefficients A -> A (+1), every copy +=
  coef · (output − copy 0);
- copy 0 × ``correct_output_scale`` (D) feeds the per-layer input (ops/per_layer.py), added to copies 1..A−1.

Vector FLOPs per element, as elsewhere (ops/core.py): a norm NORM_FLOPS, tanh ACT_FLOPS, a scale or add 1;
an RMS magnitude 2 (square, sum) and a rescale 2 (× target, ÷ own). The gaussian top-k on a sparse layer's
FFN gate (``activation_sparsity_pattern`` > 0: mean, standard deviation, subtract the cutoff, ReLU): 6 per
element of the gate (mean 1; deviation, square, sum 3; subtract 1; ReLU 1); the FFN's matmuls stay dense.
"""

from __future__ import annotations

from dataclasses import replace

from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, Builder, Op, Site, Term
from llmath.ops.split import Split

TOPK_FLOPS = 6  # gaussian top-k per gate element (see the module docstring)


def altup_inputs(b: Builder) -> None:
    """Copies 1..A−1 of the embeddings: A−1 projections D -> D, then each rescaled to the embeddings' RMS."""
    if _projected_copies(b, "projections", "rescale"):
        b.ops[-2:] = [replace(op, first_stage=True) for op in b.ops[-2:]]  # on the embeddings, before the first layer


def _projected_copies(b: Builder, projections: str, rescale: str) -> bool:
    """Copies 1..A−1 through their own D -> D projections, then rescaled (:func:`_rescale`); False without AltUp."""
    A, D = b.spec.altup_inputs, b.spec.d_model
    if not A:
        return False
    site = Site(b, A - 1, "", "altup", "altup", dict(A=A, D=D), Split.REPLICATED)
    site.linear(projections, "BTD,DD->BTD", D, D, bias=False, pkey=f"altup.{projections}")
    _rescale(b, rescale)
    return True


def _rescale(b: Builder, name: str) -> None:
    """Copies 1..A−1 each scaled to the reference copy's RMS: its RMS (2·D), each copy's RMS and rescale (4·D)."""
    A, D = b.spec.altup_inputs, b.spec.d_model
    n = (4 * (A - 1) + 2) * D
    Site(b, 1, "", "altup", "altup", dict(A=A, D=D), Split.REPLICATED).op(
        name, "vector", "ABTD->ABTD", vflops=[(n, "BT", "(4·(A−1) + 2)·D")], act_in=[(A * D, "BT", "A·D")],
        act_out=[((A - 1) * D, "BT", "(A−1)·D")],
    )  # fmt: skip


def altup_outputs(b: Builder) -> None:
    """Copies 1..A−1 through their unembed projections D -> D, rescaled to copy 0's RMS; the A copies averaged."""
    if not _projected_copies(b, "unembed_projections", "unembed_rescale"):
        return
    A, D = b.spec.altup_inputs, b.spec.d_model
    Site(b, 1, "", "altup", "altup", dict(A=A, D=D), Split.REPLICATED).vector(
        "mean", "ABTD->BTD", 1, A * D, "BT", "A·D"
    )


def _router(site: Site, own_weights: bool) -> None:
    """tanh(W_r · norm(x)/D): the router's norm, scale, D -> A matmul and tanh (its weights once per layer)."""
    s, A, D = site.spec, site.spec.altup_inputs, site.spec.d_model
    tag = "" if own_weights else "correct_"
    if own_weights:
        site.norm("router_norm", D, pkey="altup.router_norm")
        site.linear("router", "BTD,DA->BTA", D, A, bias=False, pkey="altup.router", sym_out="A")
    else:  # the same norm and router weights, applied to the layer's output
        site.vector(f"{tag}router_norm", "BTD->BTD", NORM_FLOPS[s.norm], D, "BT", "D", weight=[(D, "1", "D")])
        site.op(
            f"{tag}router", "matmul", "BTD,DA->BTA", flops=[(2 * D * A, "BT", "2·D·A")], weight=[(D * A, "1", "D·A")],
            act_in=[(D, "BT", "D")], act_out=[(A, "BT", "A")],
        )  # fmt: skip
    site.vector(f"{tag}router_act", "BTA->BTA", 1 + ACT_FLOPS, A, "BT", "A")  # × 1/D, tanh


def _routed_site(b: Builder, count: int, lk: str, own_weights: bool) -> Site | None:
    """The layer's AltUp site with its router's operators (see :func:`_router`); None without AltUp."""
    A, D = b.spec.altup_inputs, b.spec.d_model
    if not A:
        return None
    site = Site(b, count, lk, "altup", "altup", dict(A=A, D=D), Split.REPLICATED)
    _router(site, own_weights)
    return site


def altup_predict(b: Builder, count: int, lk: str) -> None:
    """Every copy += the copies mixed by per-token coefficients (A -> A² from the router)."""
    if (site := _routed_site(b, count, lk, own_weights=True)) is None:
        return
    A, D = b.spec.altup_inputs, b.spec.d_model
    site.linear("prediction_coefs", "BTA,AC->BTC", A, A * A, bias=False, pkey="altup.prediction_coefs",
                sym_in="A", sym_out="A·A")  # fmt: skip
    site.op(
        "predict", "matmul", "BTDA,BTAA->BTDA", flops=[(2 * D * A * A, "BT", "2·D·A·A")],
        vflops=[(A * D, "BT", "A·D")], act_in=[(A * D + A * A, "BT", "A·D + A·A")], act_out=[(A * D, "BT", "A·D")],
    )  # fmt: skip


def altup_correct(b: Builder, count: int, lk: str) -> None:
    """Every copy += (coefficient + 1) · (layer output − copy 0); copy 0 × ``correct_output_scale``."""
    if (site := _routed_site(b, count, lk, own_weights=False)) is None:
        return
    A, D = b.spec.altup_inputs, b.spec.d_model
    site.linear("correction_coefs", "BTA,AA->BTA", A, A, bias=False, pkey="altup.correction_coefs", sym_in="A",
                sym_out="A")  # fmt: skip
    site.op(
        "correct", "vector", "BTD,ABTD->ABTD", vflops=[(D + A + 2 * A * D, "BT", "D + A + 2·A·D")],
        act_in=[(A * D + D + A, "BT", "A·D + D + A")], act_out=[(A * D, "BT", "A·D")],
    )  # fmt: skip
    site.vector("output_scale", "BTD->BTD", 1, D, "BT", "D", params=[("altup.output_scale", D)],
                weight=[(D, "1", "D")])  # fmt: skip


def laurel(b: Builder, count: int, lk: str) -> None:
    """LAuReL (learned augmented residual): x + norm(W_right · W_left · x), D -> R -> D beside attention; its
    output joins the attention residual as (residual + LAuReL)/√2."""
    R, D = b.spec.laurel_rank, b.spec.d_model
    if not R:
        return
    site = Site(b, count, lk, "laurel", "laurel", dict(D=D, R=R), Split.REPLICATED)
    site.linear("left", "BTD,DR->BTR", D, R, bias=False, pkey="laurel.left", sym_out="R")
    site.linear("right", "BTR,RD->BTD", R, D, bias=False, pkey="laurel.right", sym_in="R")
    site.norm("norm", D, pkey="norm.layers")
    site.vector("combine", "BTD,BTD,BTD->BTD", 3, D, "BT", "D")  # + x; (residual + it) / √2


def gaussian_topk(b: Builder, count: int, lk: str, width: int) -> None:
    """A sparse layer's gate keeps what exceeds mean + σ·Φ⁻¹(sparsity) per token (``_gaussian_topk``)."""
    site = Site(b, count, lk, "ffn", "ffn", dict(F=width))
    site.vector("gaussian_topk", "BTF->BTF", TOPK_FLOPS, width, "BT", "F", split=Split.SHARE)


_ONE_ROW = {"BT": "BL"}  # per token -> per logit row


def logit_rows_only(op: Op) -> Op:
    """``op`` run for the logit rows only (Gemma 4's eager prefill, ``_maybe_slice_kv_shared_inputs``: the
    KV-shared layers write no cache, so transformers runs them on the ``logits_to_keep`` positions): terms per
    token become per logit row, and a query's score entries / causal pairs its visible keys."""

    def row(m: str) -> str:
        if m[:2] in ("E:", "P:"):
            return "K:" + m[2:]
        return _ONE_ROW.get(m, m)

    costs = tuple((c, tuple(Term(t.coef, row(t.mono), t.sym) for t in ts)) for c, ts in op.costs)
    return replace(op, costs=costs)
