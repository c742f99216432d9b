"""The collectives one rank of a pipeline stage runs in a pass, with their message sizes.

Messages are in activation elements over the rank's replica scenario (monomial ``BT`` = its B·T tokens,
``BL`` = its logit rows). With T = tp, D = d_model, k = top_k, e = expert_tp:

* TP (T > 1): an all-reduce of B·T·D after every row-parallel block: attention's o_proj and the
  FFN's down projection (one per layer for parallel-block models, which sum both before reducing);
  one after the vocabulary-parallel embedding (stage 0); an all-gather of the B·V logits (last stage).
* MoE layers: with dp = 1 (attention tensor-parallel) every rank of the TP group holds every token after
  the attention's all-reduce, so the experts, TP-sharded (ep = 1) or split over ep groups of the same GPUs,
  run on the tokens already there and the layer ends in one all-reduce over the group, like a dense FFN: no
  all-to-all (vLLM ``FusedMoEParallelConfig.use_all2all_kernels`` = dp_size > 1 and use_ep; SGLang
  ``ServerArgs.moe_a2a_backend`` = "none" by default; TensorRT-LLM's fused MoE ``enable_alltoall`` requires
  ``mapping.enable_attention_dp``). With attention-DP (dp > 1) each rank owns 1/T of its replica's tokens
  (B·T/T) and: dispatches them to their k experts
  (all-to-all over the ep expert groups, k·B·T·D/T elements sent); if e > 1 all-gathers what its expert
  group received (e × that) and reduce-scatters the partial outputs back; combines them (all-to-all, the
  same size); then, if T > 1, all-reduces B·T·D within the TP group (restores every token on every TP
  rank and sums the TP-sharded shared experts).
* q/k norms over all heads (``ModelSpec.qk_norm_spans_heads``, MiniMax-M2) under TP: each rank holds some heads,
  so every attention layer all-reduces each token's q and k mean squares, 2 values (vLLM
  ``MiniMaxText01RMSNormTP.forward_qk``: ``torch.cat([q_var, k_var])``, one ``tensor_model_parallel_all_reduce``;
  vllm/model_executor/layers/mamba/linear_attn.py, called from models/minimax_m2.py).
* A family's own layers (Zamba2's shared block, Qwen4-Exp's n-gram layers): the collectives its spec part
  declares (``tp_collectives``, model/part_traits.py), per layer of the kinds it names.
* PP: a point-to-point send of the hidden state and the residual (2·D per token, as vLLM's
  ``IntermediateTensors`` carry them) from every stage but the last.
* Encoder-decoder (:func:`encdec_collectives`): the TP all-reduces after every row-parallel block (the
  encoder's self-attention and FFN; the decoder's self-attention, cross-attention and FFN), the embedding's
  all-reduce on stage 0 of each pass and the logits' all-gather on the decoder's last stage. Under PP a
  stage sends its hidden state (D per token: these stacks carry no separate residual stream); at the end
  of the encoder pass the last stage sends the encoder output (B·P·D) to each of the pp − 1 other stages,
  whose decoder layers project it to their cross-attention K/V in the decoder prefill.
"""

from __future__ import annotations

from fractions import Fraction as Fr

from llmath.deploy.collectives import Collective
from llmath.deploy.layout import Layout
from llmath.model.spec import ModelSpec
from llmath.model.traits import layer_collectives
from llmath.ops.core import Term


def _msg(coef: Fr, mono: str, sym: str) -> tuple[Term, ...]:
    return (Term(int(coef) if coef.denominator == 1 else float(coef), mono, sym),)


def _moe(spec: ModelSpec, L: Layout, n: int, first: int) -> list[Collective]:
    D, T, E, e = spec.parts.embeddings.d_model, L.tp, L.ep, L.expert_tp
    if L.dp == 1:
        return (
            []
            if T == 1
            else [Collective("moe.all_reduce", "all_reduce", T, T, n, _msg(Fr(D), "BT", "D"), "tp", first=first)]
        )
    moe = spec.parts.ffn.moe
    k = moe.top_k if E > 1 and moe is not None else 1
    share = Fr(k * D, T)  # elements this rank sends per replica token
    tbo = L.overlap == "tbo"
    out = []
    if E > 1:
        a2a = _msg(share, "BT", f"{k}·D/{T}")
        out.append(Collective("moe.dispatch", "all_to_all", E, T * L.dp, n, a2a, "ep", tbo, first))
    if e > 1:
        gathered = _msg(share * e, "BT", f"{e}·{k}·D/{T}")
        out.append(Collective("moe.all_gather", "all_gather", e, e, n, gathered, "expert_tp", first=first))
        out.append(Collective("moe.reduce_scatter", "reduce_scatter", e, e, n, gathered, "expert_tp", first=first))
    if E > 1:
        out.append(Collective("moe.combine", "all_to_all", E, T * L.dp, n, a2a, "ep", tbo, first))
    if T > 1:
        out.append(Collective("moe.all_reduce", "all_reduce", T, T, n, _msg(Fr(D), "BT", "D"), "tp", first=first))
    return out


def _mixer(spec: ModelSpec, T: int, counts: dict[str, int], g0: int) -> list[Collective]:
    """Mixer layers under TP (layer kinds ``<kind>/...``, or ``.../...+<kind>`` beside attention as in
    Falcon-H1): out_proj's all-reduce of D; Mamba's row-parallel x_proj all-reduces its R + 2·N outputs
    (vLLM ``MambaMixer``); Mamba-2's gated norm with one group (``Mixer2RMSNormGated``) and lightning
    attention's norm over I (``MiniMaxText01RMSNormTP``) all-reduce each token's sum of squares."""
    m, D = spec.parts.mixers.mixer, spec.parts.embeddings.d_model
    if m is None:
        return []
    n = sum(c for lk, c in counts.items() if m.kind in lk.split("/")[0].split("+") or lk.endswith(f"+{m.kind}"))
    if not n:
        return []
    out = [Collective("mixer.all_reduce", "all_reduce", T, T, n, _msg(Fr(D), "BT", "D"), "tp", first=g0)]
    if m.kind == "mamba":
        xp = _msg(Fr(m.dt_rank + 2 * m.d_state), "BT", "R+2·N")
        out.append(Collective("mixer.x_proj.all_reduce", "all_reduce", T, T, n, xp, "tp", first=g0))
    elif m.kind == "rwkv":  # the channel mix's row-parallel value projection (deploy/shard_mixers.py)
        hidden = _msg(Fr(D), "BT", "D")
        out.append(Collective("ffn.all_reduce", "all_reduce", T, T, n, hidden, "tp", first=g0))
    elif (m.kind == "mamba2" and m.gated_norm and m.n_groups == 1) or m.kind == "lightning":
        out.append(Collective("mixer.norm.all_reduce", "all_reduce", T, T, n, _msg(Fr(1), "BT", "1"), "tp", first=g0))
    return out


def _part_collectives(spec: ModelSpec, T: int, counts: dict[str, int], g0: int) -> list[Collective]:
    """What a family's layers add under TP, as its spec part declares it (``tp_collectives``,
    model/part_traits.py): each collective once per layer of the kinds it names (Zamba2's shared block: its
    o_proj and down all-reduces and the LoRA adapters' all-gathers; Qwen4-Exp's n-gram layers: the all-gather
    of each token's E-wide lookup)."""
    out = []
    for c in layer_collectives(spec):
        n = sum(v for lk, v in counts.items() if lk.startswith(c.layers))
        if n:
            msg = _msg(Fr(c.elements), "BT", c.label)
            out.append(Collective(c.name, c.kind, T, T, n * c.per_layer, msg, "tp", first=g0))
    return out


def stage_collectives(
    spec: ModelSpec, L: Layout, counts: dict[str, int], s: int, first_stage: bool, last_stage: bool
) -> tuple[Collective, ...]:
    """The collectives of a rank of stage ``s`` whose layer kinds run ``counts`` times."""
    emb, ffn, T = spec.parts.embeddings, spec.parts.ffn, L.tp
    D = emb.d_model
    g0 = s * L.tp * L.dp  # first GPU of the stage (rank order: TP, DP, PP)
    hidden = _msg(Fr(D), "BT", "D")
    out: list[Collective] = []
    if T > 1 and first_stage:
        out.append(Collective("embed.all_reduce", "all_reduce", T, T, 1, hidden, "tp", first=g0))
    dense = sum(c for lk, c in counts.items() if lk.startswith("dense"))
    moe = sum(c for lk, c in counts.items() if lk.startswith("moe"))
    only = sum(c for lk, c in counts.items() if lk.startswith("attention only"))  # Nemotron-H: no FFN
    attn_n = 0 if ffn.parallel_block else dense + moe + only
    dense += sum(c for lk, c in counts.items() if lk.endswith("/dense"))  # mixer layers' (kind/ffn) FFNs
    moe += sum(c for lk, c in counts.items() if lk.endswith("/moe"))
    if ffn.beside_moe:  # Gemma 4: the dense FFN beside the MoE is row-parallel too
        dense += moe
    if T > 1:
        if attn_n:
            out.append(Collective("attn.all_reduce", "all_reduce", T, T, attn_n, hidden, "tp", first=g0))
        if spec.qk_norm_spans_heads and (n_attn := dense + moe + only):
            qk = _msg(Fr(2), "BT", "2")
            out.append(Collective("attn.qk_norm.all_reduce", "all_reduce", T, T, n_attn, qk, "tp", first=g0))
        out += _mixer(spec, T, counts, g0)
        out += _part_collectives(spec, T, counts, g0)
        if dense:
            out.append(Collective("ffn.all_reduce", "all_reduce", T, T, dense, hidden, "tp", first=g0))
    if moe:
        out += _moe(spec, L, moe, g0)
    if T > 1 and last_stage:
        V = -(-emb.vocab_size // T) * T
        out.append(Collective("lm_head.all_gather", "all_gather", T, T, 1, _msg(Fr(V), "BL", "V"), "tp", first=g0))
    if not last_stage:
        # stage s's GPU g sends to g + tp·dp: a span of tp·dp + 1 GPUs from g0
        send = _msg(Fr(2 * D), "BT", "2·D")
        out.append(Collective("pp.send", "p2p", 2, T * L.dp + 1, 1, send, "pp", first=g0))
    return tuple(out)


def encdec_collectives(
    spec: ModelSpec, L: Layout, counts: dict[str, int], s: int, first_stage: bool, last_stage: bool, encoder: bool
) -> tuple[Collective, ...]:
    """The collectives of a rank of stage ``s`` of an encoder-decoder model in the encoder pass
    (``encoder``) or a decoder pass; ``counts``: the stage's encoder and decoder layers (module doc)."""
    emb, T = spec.parts.embeddings, L.tp
    D = emb.d_model
    g0 = s * L.tp * L.dp
    hidden = _msg(Fr(D), "BT", "D")
    n = counts["encoder" if encoder else "decoder"]
    out: list[Collective] = []
    if T > 1:
        if first_stage:
            out.append(Collective("embed.all_reduce", "all_reduce", T, T, 1, hidden, "tp", first=g0))
        if n:  # o_proj of self-attention (and of cross-attention in the decoder), then the FFN's down
            out.append(
                Collective("attn.all_reduce", "all_reduce", T, T, n * (1 if encoder else 2), hidden, "tp", first=g0)
            )
            out.append(Collective("ffn.all_reduce", "all_reduce", T, T, n, hidden, "tp", first=g0))
        if last_stage and not encoder:
            V = -(-emb.vocab_size // T) * T
            out.append(Collective("lm_head.all_gather", "all_gather", T, T, 1, _msg(Fr(V), "BL", "V"), "tp", first=g0))
    if not last_stage:
        out.append(Collective("pp.send", "p2p", 2, T * L.dp + 1, 1, hidden, "pp", first=g0))
    elif encoder and L.pp > 1:  # the encoder output to every other stage, from the last one
        out.append(Collective("pp.encoder_output", "p2p", 2, L.gpus, L.pp - 1, hidden, "pp", first=0))
    return tuple(out)
