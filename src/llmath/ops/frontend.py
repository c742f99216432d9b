"""Whisper's audio front end: the encoder's input, in place of a token embedding (:class:`EncoderSpec`).

Per source position (monomial ``BT``, T = P positions) with M mel bins and width D:

* ``conv1``: kernel 3, stride 1, over the 2·P input frames: 2 frames × 2·(3·M)·D FLOPs, + bias and GELU;
* ``conv2``: kernel 3, stride 2, from 2·P frames to P positions: 2·(3·D)·D FLOPs, + bias and GELU;
* ``positions``: the fixed table (``source_positions`` rows, stored as a parameter) added to each position.

A convolution is a product of each output frame's 3 input frames (3·C_in values) with the (3·C_in, C_out)
kernel, which is what ``FlopCounterMode`` counts for ``conv1d`` (2 × output elements × C_in × kernel).
"""

from __future__ import annotations

from llmath.ops.core import ACT_FLOPS, Builder
from llmath.ops.embed import position_table
from llmath.ops.split import Split


def audio_frontend(b: Builder) -> None:
    """The three operators that turn 2·P mel frames into the encoder's P input positions."""
    s, e = b.spec, b.spec.encoder
    assert e is not None and e.frontend == "conv"
    D, M = s.d_model, e.in_features
    for name, c_in, frames in (("conv1", M, 2), ("conv2", D, 1)):
        b.add(
            f"encoder.{name}",
            "frontend",
            "matmul",
            "BFK,KD->BFD",
            dict(K=3 * c_in, D=D),
            1,
            [(f"frontend.{name}.weight", 3 * c_in * D), (f"frontend.{name}.bias", D)],
            flops=[(frames * 2 * 3 * c_in * D, "BT", f"{frames}·2·3·{'M' if c_in == M else 'D'}·D")],
            vflops=[(frames * D * (1 + ACT_FLOPS), "BT", f"{frames}·D·(1+act)")],  # bias, then GELU
            weight=[(3 * c_in * D + D, "1", "3·C·D")],
            act_in=[(2 * c_in, "BT", "2·C")],  # both convolutions read 2 frames per output position
            act_out=[(frames * D, "BT", f"{frames}·D")],
            split=Split.REPLICATED,
        )
    position_table(b, "encoder.positions", e.source_positions)
