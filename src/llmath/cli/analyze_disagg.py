"""``llmath analyze --disagg``: disaggregated prefill/decode serving, each pool's replica layout given by flags.

The library call is :func:`llmath.deploy.disagg.serve_disaggregated`; its result is the ``--json`` output.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Annotated

import typer

from llmath import output as out
from llmath.cli import options as o
from llmath.errors import WorkloadError

POOLS = ("prefill", "decode")
POOL_KEYS = ("workers", "tp", "pp", "ep", "dp")
POOL_HELP = {
    "workers": "replicas of the {pool} pool (default 1)",
    "tp": "tensor-parallel degree of each {pool} replica",
    "pp": "pipeline-parallel stages of each {pool} replica",
    "ep": "expert-parallel degree of each {pool} replica (MoE)",
    "dp": "attention-DP ranks of each {pool} replica",
}
DisaggOpt = Annotated[
    bool,
    typer.Option(
        "--disagg",
        help="Serve --concurrency C disaggregated: a prefill pool and a decode pool (--prefill-*/--decode-* "
        "layouts), the KV cache sent between them (default engine trtllm).",
    ),
]


def _pool_option(pool: str, key: str):
    return Annotated[
        int | None,
        typer.Option(f"--{pool}-{key}", help=f"--disagg: {POOL_HELP[key].format(pool=pool)}.", callback=o.DEGREE),
    ]


DISAGG_OPTIONS = o.option_group(
    {"disagg": False},
    disagg=DisaggOpt,
    **{f"{pool}_{key}": _pool_option(pool, key) for pool in POOLS for key in POOL_KEYS},
)
POOL_FLAGS = " ".join(f"--{pool}-{key}" for pool in POOLS for key in POOL_KEYS)
# What a disaggregated deployment does not take: the aggregated layout, an open loop, and the engine settings
# serve_disaggregated keeps at the engine's preset (--arrival is closed, --attention flash).
NOT_DISAGG = (
    "--gpus --tp --pp --ep --dp --overlap --rate --arrival --prefix-hit --max-num-batched-tokens --max-num-seqs "
    "--gpu-memory-utilization --gen-dist --enforce-eager --mixed-prefill --calibration --attention --reserve-gb"
)
NOT_DISAGG_HINT = {
    "--gpus --tp --pp --ep --dp": "give each pool's layout with --prefill-*/--decode-* (workers, tp, pp, ep, dp)",
    "--rate --arrival": "the disaggregated loop is closed: --concurrency C",
}


def refuse_unused(a: SimpleNamespace, given) -> None:
    """Pool flags without --disagg, and with it a flag it does not take, are usage errors (one line)."""
    if not a.disagg:
        pools = given(a, POOL_FLAGS)
        if pools:
            raise WorkloadError(f"{', '.join(pools)}: disaggregated serving only; add --disagg --concurrency C")
        return
    if a.concurrency is None:
        raise WorkloadError("--disagg serves a closed loop: add --concurrency C (requests in flight)")
    if a.engine_args or a.emit:
        raise WorkloadError("--disagg does not take --engine-args/--emit; give the pools with --prefill-*/--decode-*")
    unused = given(a, NOT_DISAGG)
    if unused:
        hint = next((h for flags, h in NOT_DISAGG_HINT.items() if unused[0] in flags.split()), "drop it")
        raise WorkloadError(f"{', '.join(unused)}: not applied with --disagg; {hint}")


def serve_disagg(a: SimpleNamespace, p) -> None:
    """``serve_disaggregated`` with the flags' pools, printed as a table or (``--json``) its result."""
    from llmath.deploy.disagg import serve_disaggregated

    res = serve_disaggregated(
        **o.served_request(a, p),
        prefill=pool(a, "prefill"),
        decode=pool(a, "decode"),
        efficiency_mode=a.efficiency.value,
        **({"engine": a.engine} if a.engine else {}),
    )
    if a.json_:
        out.emit_json(res)
        return
    from llmath.output.serving import disagg_human

    disagg_human(res, a.model, a.hardware, a.engine or "trtllm", pool(a, "prefill"), pool(a, "decode"))


def pool(a: SimpleNamespace, name: str) -> dict:
    """One pool's layout as serve_disaggregated takes it: ``workers``, ``tp``, ``pp``, ``ep``, ``dp`` (given ones)."""
    return {k: v for k in POOL_KEYS if (v := getattr(a, f"{name}_{k}")) is not None}
