"""Llama 3.2 Vision's image encoder pass (stage ``vision``, model/spec_vision.py), eager as transformers 5.23
runs it (modeling_mllama.py ``MllamaVisionModel`` and ``MllamaMultiModalProjector``).

Evaluated at ``Scenario(B = images, T = tiles · padded tile positions)``: one row of B per image, T the
positions its layers attend over bidirectionally (every tile of the image, padding included: the eager
score rectangle is T × T, monomial ``E:full``). The patch convolution (a C·p² → D matmul per patch) and the
projector (vision_output_dim → text width, per vision token: tiles · (patches + 1) of them) are per image
(monomial ``B``). The tower's weights are counted once, in the wrapper's towers (``tower_params``): these
operators read them and declare no parameters. Norms, GELU, gates and the positional tables are vector work.
Both executions compute the whole T × T rectangle (bidirectional); eager writes the scores, flash does not.
"""

from __future__ import annotations

from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, SOFTMAX_FLOPS, Builder


def _mm(b: Builder, name: str, din: int, dout: int, count: int, rows: str, lk: str, bias: bool = False) -> None:
    """A matmul of the tower: ``din`` -> ``dout`` per row of ``rows``, its weights read once per pass."""
    b.add(
        name, "vision", "matmul", "BTE,EF->BTF", dict(E=din, F=dout), count, (), lk,
        flops=[(2 * din * dout, rows, "2·E·F")], vflops=[(dout, rows, "F")] if bias else [],
        weight=[(din * dout + (dout if bias else 0), "1", "E·F")], act_in=[(din, rows, "E")],
        act_out=[(dout, rows, "F")],
    )  # fmt: skip


def _vec(b: Builder, name: str, per: int, count: int, lk: str, rows: str = "BT") -> None:
    b.add(name, "vision", "vector", "BTE->BTE", dict(E=per), count, (), lk, vflops=[(per, rows, "E")])


def _layers(b: Builder, count: int, lk: str) -> None:
    """``count`` encoder layers: LayerNorm, q/k/v (no bias), eager scores, softmax, context, o, LayerNorm,
    fc1 (bias), GELU, fc2 (bias); a gated layer's tanh gates are vector work."""
    v = b.spec.vision
    if v is None or not count:
        return
    D, F, N = v.d_model, v.d_ff, v.n_heads
    _vec(b, "vision.norm_in", NORM_FLOPS["layer"] * D, count, lk)
    for w in ("q", "k", "v"):
        _mm(b, f"vision.{w}_proj", D, D, count, "BT", lk)
    for name, sig in (("vision.scores", "BTNH,BSNH->BNTS"), ("vision.context", "BNTS,BSNH->BTNH")):
        written = [(N, "E:full", "N")] if b.attention == "eager" else []  # flash keeps the T × T on chip
        b.add(name, "vision", "matmul", sig, dict(N=N, H=D // N), count, (), lk,
              flops=[(2 * D, "E:full", "2·N·H")], act_out=written)  # fmt: skip
        if name == "vision.scores":
            b.add("vision.softmax", "vision", "vector", "BNTS->BNTS", dict(N=N), count, (), lk,
                  vflops=[(SOFTMAX_FLOPS * N, "E:full", "N")])  # fmt: skip
    _mm(b, "vision.o_proj", D, D, count, "BT", lk)
    _vec(b, "vision.norm_ffn", NORM_FLOPS["layer"] * D, count, lk)
    _mm(b, "vision.fc1", D, F, count, "BT", lk, bias=True)
    _vec(b, "vision.gelu", ACT_FLOPS * F, count, lk)
    _mm(b, "vision.fc2", F, D, count, "BT", lk, bias=True)


def vision_pass(b: Builder) -> None:
    """The encoder pass over B images and the projector to the language model's width."""
    s, v = b.spec, b.spec.vision
    if v is None:  # pragma: no cover - build_ops sends specs with a vision encoder only
        raise AssertionError(s.name)
    patch, patches = v.channels * v.patch**2, v.tiles * (v.tile_positions - 1)
    b.add(
        "vision.patch_embed", "vision", "matmul", "BPC,CD->BPD", dict(P=patches, C=patch, D=v.d_model), 1, (),
        flops=[(2 * patch * v.d_model * patches, "B", "2·P·C·D")], weight=[(patch * v.d_model, "1", "C·D")],
        act_in=[(patch * patches, "B", "P·C")], act_out=[(v.d_model, "BT", "D")],
    )  # fmt: skip
    _vec(b, "vision.norm_pre", NORM_FLOPS["layer"] * v.d_model, 1, "")
    # the T × T attention mask as the outer product of the tile mask with itself, a (T,1) @ (1,T) matmul
    # (``_prepare_aspect_ratio_attention_mask``)
    b.add("vision.mask", "vision", "matmul", "BT,BS->BTS", {}, 1, (), flops=[(2, "E:full", "2")])
    _layers(b, v.n_layers, "vision/local")
    _vec(b, "vision.norm_post", NORM_FLOPS["layer"] * v.d_model, 1, "")
    _layers(b, v.n_global_layers, "vision/global")
    tokens = v.tokens_per_image
    b.add(
        "vision.projector", "vision", "matmul", "BXE,ED->BXD", dict(X=tokens, E=v.output_dim, D=s.d_model), 1, (),
        flops=[(2 * v.output_dim * s.d_model * tokens, "B", "2·X·E·D")], vflops=[(s.d_model * tokens, "B", "X·D")],
        weight=[(v.output_dim * s.d_model + s.d_model, "1", "E·D")], act_in=[(v.output_dim * tokens, "B", "X·E")],
        act_out=[(s.d_model * tokens, "B", "X·D")],
    )  # fmt: skip
