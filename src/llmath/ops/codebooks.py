"""MusicGen's composite stages (model/families_musicgen.py states what is modelled of generation).

The encoder stage is the text encoder's own encoder pass (T5: ``ModelSpec.text_encoder``), its operators
and parameters under ``text_encoder.``; ``enc_to_dec_proj`` maps its output (width ``ModelSpec.enc_proj``)
to the decoder's width, with bias. Transformers runs that projection in every decoder forward
(MusicgenForConditionalGeneration.forward, over ``encoder_outputs`` each call): the eager list counts it in
the prefill and every decode step; flash in the prefill only, since the cross-attention K/V it feeds are
cached there.
"""

from __future__ import annotations

from dataclasses import replace

from llmath.ops.core import Builder


def text_encoder_pass(b: Builder) -> None:
    """The text encoder's encoder pass, its operators renamed under ``text_encoder.``."""
    from llmath.ops.assemble import build_ops  # the assembly imports this module

    t5 = b.spec.text_encoder
    if t5 is None:  # pragma: no cover - the assembly calls this for a text encoder only
        raise AssertionError(f"{b.spec.name}: no text encoder")
    for op in build_ops(t5, "encoder", b.attention):
        params = tuple((f"text_encoder.{k}", n) for k, n in op.params)
        b.ops.append(replace(op, name=f"text_encoder.{op.name}", params=params))


def enc_to_dec_proj(b: Builder) -> None:
    """``enc_to_dec_proj``: B·src positions of width E = ``enc_proj`` to D, with bias (none when E = 0)."""
    s, E = b.spec, b.spec.enc_proj
    if not E or (b.stage == "decode" and b.attention != "eager"):
        return
    b.linear("decoder.enc_to_dec_proj", "ffn", "BXE,ED->BXD", dict(E=E, D=s.d_model), E, s.d_model,
             bias=True, count=1, pkey="enc_to_dec_proj", rows="X", sym_in="E", sym_out="D")  # fmt: skip
