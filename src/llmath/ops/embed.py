"""Token and position embeddings, final norm and the LM head."""

from __future__ import annotations

from llmath.ops.core import ACT_FLOPS, SOFTCAP_FLOPS, Builder, Site
from llmath.ops.split import Split


def embedding(b: Builder, prefix: str = "embed", own_positions: bool = True, token_table: bool = True) -> None:
    """The token lookup (MusicGen: one row from each of C codebook tables, summed: (C − 1)·D adds per token),
    the position table, and the embedding's scale, affine and norm where the family has them. The token table
    splits by vocabulary rows (vLLM ``VocabParallelEmbedding``) but Whisper's decoder table, a plain
    ``nn.Embedding`` in vLLM's WhisperDecoder (vllm/model_executor/models/whisper.py): replicated."""
    s = b.spec
    D, V, C = s.d_model, s.vocab_size, max(1, s.codebooks)
    rows = V + s.extra_token_rows  # rows beyond the vocabulary (Mllama, CPM-Ant, Moshi, MusicGen's pad row)
    b.add(
        f"{prefix}.tokens",
        "embedding",
        "memory",
        "BT,VD->BTD" if C == 1 else "BTC,CVD->BTD",
        dict(V=rows, D=D) if C == 1 else dict(C=C, V=rows, D=D),
        1,
        [("embedding.token", C * rows * D if token_table else 0)],
        vflops=[((C - 1) * D, "BT", "(C−1)·D")],
        weight=[(C * D, "BT", "C·D" if C > 1 else "D")],
        act_out=[(D, "BT", "D")],
        split=Split.REPLICATED if s.encoder is not None and s.encoder.frontend else Split.VOCAB_ROWS,
    )
    if s.position == "learned" and own_positions and s.max_positions:  # the spec requires max_positions here
        position_table(b, f"{prefix}.positions", s.max_positions + s.position_table_offset)
    _input_affine(b, prefix)
    if s.segment_rows:  # CPM-Ant: each token's segment row added to its embedding
        b.add(
            f"{prefix}.segments",
            "embedding",
            "vector",
            "BT,GD->BTD",
            dict(G=s.segment_rows, D=D),
            1,
            [("embedding.segment", s.segment_rows * D)],
            vflops=[(D, "BT", "D")],
            weight=[(D, "BT", "D")],
            act_in=[(D, "BT", "D")],
            act_out=[(D, "BT", "D")],
        )
    if s.embedding_scale:
        b.add(
            f"{prefix}.scale",
            "embedding",
            "vector",
            "BTD->BTD",
            dict(D=D),
            1,
            (),
            vflops=[(D, "BT", "D")],
            act_in=[(D, "BT", "D")],
            act_out=[(D, "BT", "D")],
            split=Split.REPLICATED,
        )
    if s.embedding_norm:
        b.norm(f"{prefix}.norm", D, count=1, pkey="embedding.norm", component="embedding", split=Split.REPLICATED)


def _input_affine(b: Builder, prefix: str) -> None:
    """ZAYA (:attr:`ModelSpec.residual_affine`): the embeddings enter the residual stream as (e + b)·s with two
    learned vectors of width D (modeling_zaya.py ``input_hidden_states_bias`` / ``_scale``)."""
    D = b.spec.d_model
    if b.spec.residual_affine:
        b.add(f"{prefix}.affine", "residual", "vector", "BTD->BTD", dict(D=D), 1, [("residual.input", 2 * D)],
              vflops=[(2 * D, "BT", "2·D")], weight=[(2 * D, "1", "2·D")], act_in=[(D, "BT", "D")],
              act_out=[(D, "BT", "D")])  # fmt: skip


def position_table(b: Builder, name: str, rows: int) -> None:
    """A table of ``rows`` position vectors, each position's row added to its hidden state."""
    D = b.spec.d_model
    b.add(
        name,
        "embedding",
        "vector",
        "BT,PD->BTD",
        dict(P=rows, D=D),
        1,
        [("embedding.position", rows * D)],
        vflops=[(D, "BT", "D")],
        weight=[(D, "BT", "D")],
        act_in=[(D, "BT", "D")],
        act_out=[(D, "BT", "D")],
        split=Split.REPLICATED,
    )


def lm_head(b: Builder) -> None:
    """The vocabulary projection for the positions that need logits (monomial ``BL``; every position in
    eager for a family whose transformers head has no ``logits_to_keep``, :attr:`ModelSpec.eager_all_logits`)."""
    s = b.spec
    D, C = s.d_model, max(1, s.codebooks)
    V = s.vocab_size * C  # MusicGen: one head of vocab_size per codebook, C·V logits per position
    L = _logit_rows(b)
    params = [("lm_head.weight", 0 if s.tie_embeddings else V * D)]
    if s.lm_head_bias:
        params.append(("lm_head.bias", V))
    b.add(
        "lm_head",
        "lm_head",
        "matmul",
        "BLD,DV->BLV" if C == 1 else "BLD,CDV->BLCV",
        dict(D=D, V=V) if C == 1 else dict(C=C, D=D, V=s.vocab_size),
        1,
        params,
        flops=[(2 * D * V, L, "2·D·V" if C == 1 else "2·C·D·V")],
        vflops=[(V, L, "V")] if s.lm_head_bias else [],
        weight=[(D * V + (V if s.lm_head_bias else 0), "1", "D·V" if C == 1 else "C·D·V")],
        act_in=[(D, L, "D")],
        act_out=[(V, L, "V" if C == 1 else "C·V")],
        split=Split.VOCAB_COLUMN,
    )


def _logit_rows(b: Builder) -> str:
    return "BT" if b.spec.eager_all_logits and b.attention == "eager" else "BL"


def head_transform(b: Builder) -> None:
    """ModernBERT-decoder's prediction head before the vocabulary projection (modeling_modernbert_decoder.py
    ``ModernBertDecoderPredictionHead``): norm(act(dense(x))), dense D -> D (bias when ``classifier_bias``),
    on the rows that need logits (transformers slices ``logits_to_keep`` before it)."""
    s, L, D = b.spec, _logit_rows(b), b.spec.d_model
    bias = D if s.head_dense_bias else 0
    b.add(
        "lm_head.dense",
        "lm_head",
        "matmul",
        "BLD,DD->BLD",
        dict(D=D),
        1,
        [("lm_head.dense", D * D + bias)],
        flops=[(2 * D * D, L, "2·D·D")],
        vflops=[(D + ACT_FLOPS * D, L, f"D + {ACT_FLOPS}·D")] if bias else [(ACT_FLOPS * D, L, f"{ACT_FLOPS}·D")],
        weight=[(D * D + bias, "1", "D·D")],
        act_in=[(D, L, "D")],
        act_out=[(D, L, "D")],
    )
    b.norm("lm_head.norm", D, count=1, pkey="norm.head", rows=L)


def head(b: Builder) -> None:
    """Final norm, LM head and final logit soft-capping."""
    s = b.spec
    if s.final_norm:
        b.norm("norm.final", s.d_model, count=1, pkey="norm.final")
    if s.head_dense:
        head_transform(b)
    lm_head(b)
    if s.final_softcap:
        Site(b, 1, "", "lm_head", "lm_head", dict(V=s.vocab_size)).vector(
            "softcap", "BLV->BLV", SOFTCAP_FLOPS, s.vocab_size, _logit_rows(b), "V", split=Split.VOCAB_COLUMN
        )
