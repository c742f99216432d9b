"""HRM-Text's hierarchical recurrence (:attr:`ModelSpec.recurrence` = (H, L); transformers 5.23
modeling_hrm_text.py ``HrmTextModel.forward``): two stacks of M identical decoder layers, L (low level) and
H (high level). A forward runs H cycles; each runs the L stack L times on (its state + the high-level
state) and then the H stack once on (the high-level state + the low-level one); every stack run ends with a
weightless RMSNorm. That is R = H·(L+1) stack runs, each with its own KV cache slots (transformers'
``num_hidden_layers`` = M·R), so the spec's n_layers = M·R decoder layers are layer *runs*: the operator
list counts every run's FLOPs, weight reads and K/V (what eager executes, and what a server executing the
recurrence must). The weights exist once per distinct layer, 2·M: :func:`recurrence_weights` moves the
layers' parameters onto holder operators counted 2·M times, as Zamba's shared block is counted
(:mod:`llmath.ops.shared_block`); plus the low-level state's initial vector ``z_L_init`` (D, a parameter
that never trains).
"""

from __future__ import annotations

from dataclasses import replace

from llmath.ops.core import NORM_FLOPS, Builder, Op
from llmath.ops.split import Split


def recurrence_weights(b: Builder, first: int) -> None:
    """Move the parameters of the decoder-layer operators from ``b.ops[first:]`` onto one holder operator per
    component counted once per distinct layer (2·M), then the per-run adds and stack-final norms."""
    s = b.spec
    if s.recurrence is None:
        return
    H, L = s.recurrence
    runs = H * (L + 1)
    held: dict[str, list[tuple[str, int]]] = {}
    lk = ""
    for i in range(first, len(b.ops)):
        op = b.ops[i]
        if op.params and op.layer_kind:
            held.setdefault(op.component, []).extend(op.params)
            lk = op.layer_kind
            b.ops[i] = replace(op, params=())
    for component, params in held.items():
        b.ops.append(Op(f"recurrence.{component}.weights", component, "memory", "", (), 2 * s.n_layers // runs,
                        tuple(params), layer_kind=f"{lk} (weights of the two stacks)", window=b.window,
                        split=Split.HELD))  # fmt: skip
    D = s.d_model
    b.add("recurrence.z_init", "recurrence", "memory", "D", dict(D=D), 1, [("recurrence.z_init", D)],
          weight=[(D, "1", "D")], split=Split.REPLICATED)  # fmt: skip
    b.add("recurrence.add", "recurrence", "vector", "BTD,BTD->BTD", dict(D=D), runs, (),
          vflops=[(D, "BT", "D")], act_in=[(2 * D, "BT", "2·D")], act_out=[(D, "BT", "D")],
          split=Split.REPLICATED)  # fmt: skip
    b.add("recurrence.stack_norm", "norm", "vector", "BTD->BTD", dict(D=D), runs, (),
          vflops=[(NORM_FLOPS["rms_noparam"] * D, "BT", f"{NORM_FLOPS['rms_noparam']}·D")],
          act_in=[(D, "BT", "D")], act_out=[(D, "BT", "D")])  # fmt: skip
