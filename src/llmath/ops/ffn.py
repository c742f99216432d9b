"""Dense feed-forward blocks (MLP and gated) and residual adds."""

from __future__ import annotations

from llmath.ops.core import ACT_FLOPS, Builder


def ffn_block(
    b: Builder,
    width: int,
    count: int,
    lk: str,
    prefix: str,
    pkey: str,
    component: str,
    rows: str = "BT",
    bias: bool | None = None,
    weight_read=None,
    letter: str = "F",
    mult: int = 1,
):
    """A dense or gated FFN of hidden ``width``, run by ``mult`` × rows tokens (top-k for experts)."""
    s = b.spec
    D = s.d_model
    bias = s.ffn_bias if bias is None else bias
    sizes = {"D": D, letter: width}
    wr = None if weight_read is None else (lambda n: [(n, weight_read, f"{n}")])

    def lin(name, din, dout, sig, si, so, pk):
        params = [(f"{pkey}.{pk}.weight", din * dout)] + ([(f"{pkey}.{pk}.bias", dout)] if bias else [])
        nw = din * dout + (dout if bias else 0)
        b.add(
            f"{prefix}.{name}",
            component,
            "matmul",
            sig,
            sizes,
            count,
            params,
            lk,
            flops=[(2 * din * dout * mult, rows, f"{mult}·2·{si}·{so}" if mult > 1 else f"2·{si}·{so}")],
            vflops=[(dout * mult, rows, so)] if bias else [],
            weight=wr(nw) if wr else [(nw, "1", f"{si}·{so}")],
            act_in=[(din * mult, rows, si)],
            act_out=[(dout * mult, rows, so)],
        )

    if s.ffn == "gated":
        lin("gate", D, width, f"BTD,D{letter}->BT{letter}", "D", letter, "gate")
        lin("up", D, width, f"BTD,D{letter}->BT{letter}", "D", letter, "up")
        b.add(
            f"{prefix}.act",
            component,
            "vector",
            f"BT{letter}->BT{letter}",
            sizes,
            count,
            (),
            lk,
            vflops=[((ACT_FLOPS + 1) * width * mult, rows, f"5·{letter}")],
            act_in=[(2 * width * mult, rows, f"2·{letter}")],
            act_out=[(width * mult, rows, letter)],
        )
    else:
        lin("up", D, width, f"BTD,D{letter}->BT{letter}", "D", letter, "up")
        b.add(
            f"{prefix}.act",
            component,
            "vector",
            f"BT{letter}->BT{letter}",
            sizes,
            count,
            (),
            lk,
            vflops=[(ACT_FLOPS * width * mult, rows, f"4·{letter}")],
            act_in=[(width * mult, rows, letter)],
            act_out=[(width * mult, rows, letter)],
        )
    lin("down", width, D, f"BT{letter},{letter}D->BTD", letter, "D", "down")


def residual(b: Builder, name: str, count: int, lk: str, inputs: int = 2):
    D = b.spec.d_model
    b.add(
        name,
        "residual",
        "vector",
        "BTD,BTD->BTD",
        dict(D=D),
        count,
        (),
        lk,
        vflops=[((inputs - 1) * D, "BT", f"{inputs - 1}·D")],
        act_in=[(inputs * D, "BT", f"{inputs}·D")],
        act_out=[(D, "BT", "D")],
    )
