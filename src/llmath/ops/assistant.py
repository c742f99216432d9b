"""A draft step of a model that runs on its target's cache (Gemma 4's assistants, model/spec_assistant.py).

Input: the target's embedding of the last seen token (its table, Db wide, scaled by √Db as Gemma's scaled
embedding does) concatenated with the target's last hidden state, projected 2·Db -> D (``pre_projection``).
Then the assistant's layers, every one KV-shared (queries only; the K/V are read from the target's cache,
ops/attention.py ``shared_kv``). Head: the final norm, ``post_projection`` D -> Db (the hidden state the next
draft step takes) and the logits: the LM head over the whole vocabulary, or (``use_ordered_embeddings``) a
D × C centroid projection whose top-k centroids select top_k · V/C rows of the LM head, scored with one
dot product each (``Gemma4AssistantMaskedEmbedder``; the top-k and the scatter into the V-wide output are
not matmuls). The token table is the tied LM head's weight: the draft never looks its own table up.

Stage ``decode`` at context S0 with T = 1 is one draft step whose query sits at position S0 and reads the
target's S0 + 1 cached positions (S0 + 1 = the target's context; a sliding layer reads min(S0 + 1, W)
of them, the window the target's sliding layer hands over after a decode step): the monomials of an
ordinary decode step, minus the K/V of the token itself, which the target has cached.
"""

from __future__ import annotations

from llmath.model.spec import AssistantSpec, ModelSpec
from llmath.ops.core import Builder
from llmath.ops.embed import lm_head


def _assistant(s: ModelSpec) -> AssistantSpec:
    if s.assistant is None:  # pragma: no cover - build_ops sends assistant specs only
        raise AssertionError(s.name)
    return s.assistant


def assistant_input(b: Builder) -> None:
    s = b.spec
    D, Db, V = s.d_model, _assistant(s).backbone_d, s.vocab_size
    b.add("embed.tokens", "embedding", "memory", "VD", dict(V=V, D=D), 1, [("embedding.token", V * D)])
    b.add(
        "assistant.target_embed", "embedding", "vector", "BT,VE->BTE", dict(V=V, E=Db), 1,
        vflops=[(Db, "BT", "Db")], weight=[(Db, "BT", "Db")], act_out=[(Db, "BT", "Db")],
    )  # fmt: skip
    b.linear(
        "assistant.pre_projection", "assistant", "BTE,ED->BTD", dict(E=2 * Db, D=D), 2 * Db, D, bias=False,
        count=1, pkey="assistant.pre_projection", sym_in="2·Db", sym_out="D",
    )  # fmt: skip


def assistant_head(b: Builder) -> None:
    s, a = b.spec, _assistant(b.spec)
    D, Db, V = s.d_model, a.backbone_d, s.vocab_size
    b.norm("norm.final", D, count=1, pkey="norm.final")
    b.linear(
        "assistant.post_projection", "assistant", "BTD,DE->BTE", dict(D=D, E=Db), D, Db, bias=False, count=1,
        pkey="assistant.post_projection", sym_out="Db",
    )  # fmt: skip
    if not a.centroids:
        lm_head(b)
        return
    C, R = a.centroids, a.head_rows(V)
    b.linear(
        "lm_head.centroids", "lm_head", "BTD,DC->BTC", dict(D=D, C=C), D, C, bias=False, count=1,
        pkey="lm_head.centroids", sym_out="C",
    )  # fmt: skip
    b.add(
        "lm_head.selected", "lm_head", "matmul", "BTD,BTRD->BTR", dict(D=D, R=R), 1,
        [("lm_head.weight", 0 if s.tie_embeddings else V * D)],
        flops=[(2 * D * R, "BT", "2·D·R")], weight=[(R * D, "BT", "R·D")], act_in=[(D, "BT", "D")],
        act_out=[(V, "BT", "V")],
    )  # fmt: skip
