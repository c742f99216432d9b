"""Speculative decoding: a draft proposes k tokens, the target verifies them in one pass of k + 1 tokens.

One decode *round* per sequence = k draft steps + one target verify pass of width k + 1, and yields on average
the stated **acceptance length** a (accepted draft tokens + the target's own token, 1 ≤ a ≤ k + 1; it is a
property of the draft, the data and the sampling, measured by the engines, not derivable from the model).
So TPOT = (k · t_draft + t_verify) / a, all from the operator lists:

* verify: the target's pass with B sequences each feeding k + 1 tokens after S cached positions (the decode
  operator list at T = k + 1, so MLA stays absorbed: k + 1 times the weight-GEMM FLOPs of a decode step,
  attention over S + k + 1 positions, the same weight bytes, the KV cache read once). The width k + 1 is
  what makes verify cost more than a decode step once the GEMMs stop being bandwidth-bound;
* ``draft``: a separate draft model (any registry model or config), k decode steps at batch B;
* ``eagle`` / ``mtp``: one extra decoder layer of the target's own shape (EAGLE's draft head, DeepSeek-V3's
  multi-token-prediction module) plus the LM head, run k times at batch B. Modelled as a one-layer model with
  the target's dimensions (its last layer's attention and FFN/MoE kind); EAGLE-3's feature fusion (a
  3d → d projection) is not counted.

An EAGLE head or MTP module runs under the target's TP, attention-DP and EP (it is a layer of the target's own
model); a separate draft model with the target's tensor parallelism; each where its shape allows (else on one
GPU). The KV cache of the draft is not added to the memory budget (EAGLE/MTP: one layer's worth, about 1/L of
the target's).

A Gemma 4 assistant as the ``draft`` (model/spec_assistant.py) keeps no cache: its k draft steps of a round
all sit at the last seen position and read the target's cache of S positions (transformers'
``SinglePositionMultiTokenCandidateGenerator``), each the assistant's decode step at S0 = S − 1
(ops/assistant.py), its K/V reads in the target's KV format. Its width, K/V heads and head widths must be
the target's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from llmath.deploy.layout import Layout, ParallelConfig, make_layout
from llmath.deploy.step import Device
from llmath.errors import LLMathError, WorkloadError
from llmath.model.registry import resolve
from llmath.model.spec import ModelSpec
from llmath.model.traits import draft_problem, traits

METHODS = ("draft", "eagle", "mtp")


@dataclass(frozen=True)
class Speculation:
    """``method`` (draft | eagle | mtp), ``k`` draft tokens per round, ``acceptance`` = mean tokens a round
    yields (1 ≤ a ≤ k + 1), ``draft_model`` for ``method='draft'``."""

    method: str
    k: int
    acceptance: float
    draft_model: str | ModelSpec | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise WorkloadError(
                f"speculative method {self.method!r} must be one of {', '.join(METHODS)}; e.g. --spec-method eagle"
            )
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise WorkloadError(f"speculative tokens k={self.k!r} must be an integer >= 1; e.g. --spec-tokens 3")
        if not 1 <= self.acceptance <= self.k + 1:
            raise WorkloadError(
                f"acceptance length {self.acceptance} must lie in [1, k + 1 = {self.k + 1}]: a round yields at"
                " least the target's own token and at most every draft token plus one; give the measured mean"
                " tokens per round in that range, or raise --spec-tokens"
            )
        if self.method == "draft" and self.draft_model is None:
            raise WorkloadError("speculative method 'draft' needs a draft model (--draft-model NAME)")


@lru_cache(maxsize=64)
def one_layer(spec: ModelSpec) -> ModelSpec:
    """The target's shape with one decoder layer (an EAGLE head or an MTP module, with embedding and head)."""
    return replace(
        spec,
        name=f"{spec.name}[1 layer]",
        n_layers=1,
        layer_moe=(spec.layer_moe[-1],),
        layer_windows=(spec.layer_windows[-1],),
        layer_mixers=(spec.layer_mixers[-1],),
        layer_indexer=(True,),
        layer_compress=(spec.layer_compress[-1],),
        layer_kv_shared=(False,),  # one layer computes its own K/V
        layer_ffn_sparse=(spec.layer_ffn_sparse[-1],),
        layer_d_ff=spec.layer_d_ff[-1:],
    )


def refuse_draft_only(spec: ModelSpec) -> None:
    """A Gemma 4 assistant has no prefill and no cache of its own: it runs only as a target's draft."""
    if traits(spec).reads_target_cache:
        raise WorkloadError(
            f"{spec.name!r} ({spec.model_type}) is a draft model that runs on its target's cache, not on its own: "
            "analyse its target with --concurrency C --spec-method draft --draft-model <this config> --acceptance A"
            " (or `llmath ops` --stage decode for one draft step)"
        )


def draft_device(target: Device, spec_cfg: Speculation) -> Device:
    if spec_cfg.method == "draft":
        if spec_cfg.draft_model is None:
            raise WorkloadError("speculative method 'draft' needs a draft model (--draft-model NAME)")
        d = resolve(spec_cfg.draft_model)
        if d.vocab_size != target.spec.vocab_size:
            raise WorkloadError(
                f"draft model {d.name!r} has vocabulary {d.vocab_size}, the target {target.spec.vocab_size}:"
                " a draft must share the target's tokenizer"
            )
        if why := draft_problem(d, target.spec):
            raise WorkloadError(why)
    else:
        if spec_cfg.method == "mtp" and not target.spec.mtp_modules:
            raise WorkloadError(
                f"--spec-method mtp: {target.spec.name!r} has no multi-token-prediction module (its config sets none"
                " of num_nextn_predict_layers / mtp_num_hidden_layers / num_mtp_modules); use --spec-method eagle"
                " with an EAGLE head, or --spec-method draft --draft-model NAME"
            )
        d = one_layer(target.spec)
    layout = _draft_layout(d, target.layout, spec_cfg.method)
    args = (target.hw, target.precision, target.eff, target.attention, target.cuda_graphs, layout)
    return Device(
        d,
        *args,
        eager_host_s=target.eager_host_s,
        graph_tokens=target.graph_tokens,
        eager_host_unit=target.eager_host_unit,
        piecewise_host_s=target.piecewise_host_s,
        decode_graph_requests=target.decode_graph_requests,
        decode_eager_host_s=target.decode_eager_host_s,
        moe_path=target.moe_path,
    )


def _draft_layout(d: ModelSpec, target: Layout | None, method: str) -> Layout | None:
    """The draft's layout on its target's GPUs. An EAGLE head or an MTP module is a decoder layer of the target's
    own model and runs under its parallel config: SGLang's ``DeepseekModelNextN`` builds a ``DeepseekV2DecoderLayer``
    (python/sglang/srt/models/deepseek_nextn.py), whose attention and MoE follow the server's
    ``enable_dp_attention`` and ``ep_size`` as the target's layers do; TensorRT-LLM's ``DeepseekV3MTP`` is a
    ``DeepseekV3DecoderLayer`` built with the model's ``mapping`` (tensorrt_llm/_torch/models/modeling_deepseekv3.py).
    So it takes the target's TP, attention-DP and EP where its shape allows; a separate draft model (and any draft
    beside a pipeline-parallel target) its TP alone; else one GPU (None)."""
    if target is None or target.trivial:
        return None
    tries = [ParallelConfig(tp=target.tp, dp=target.dp, ep=target.ep)] if method != "draft" and target.pp == 1 else []
    tries += [ParallelConfig(tp=target.tp)] if target.tp > 1 else []
    for cfg in tries:
        try:
            return make_layout(d, cfg)
        except LLMathError:
            continue
    return None


def round_time(target: Device, draft: Device, spec_cfg: Speculation, batch, context) -> np.ndarray:
    """Seconds of one speculative round for ``batch`` sequences at mean ``context``: k draft decode steps
    (contexts S … S + k − 1, taken at their mean) + one verify pass of k + 1 tokens per sequence."""
    k = spec_cfg.k
    b = np.asarray(batch, dtype=float)
    s = np.asarray(context, dtype=float)
    if traits(draft.spec).reads_target_cache:  # every draft step reads the target's S cached positions
        t_draft = draft.iteration(b, np.maximum(s - 1, 0)).time_s * k
    else:
        t_draft = draft.iteration(b, s + (k - 1) / 2).time_s * k
    t_verify = target.verify(b, k + 1, s).time_s
    return t_draft + t_verify


def tpot(target: Device, draft: Device, spec_cfg: Speculation, batch, context) -> np.ndarray:
    """Time per output token with speculation: one round over the tokens it yields on average."""
    return round_time(target, draft, spec_cfg, batch, context) / spec_cfg.acceptance
