"""The planner runs each layout as the engine does on the device, as `llmath analyze` does: the engine's kernel for a
declared weight format (NVFP4 as W4A4 on Blackwell, data/format_kernels.json), its GEMMs' accumulate rate (llama.cpp's
FP16 accumulation on GeForce), its memory share and token budget at the pool's TP degree, its eager prefill passes.

The independent reference is the public serving functions: ``serve`` (``llmath analyze --concurrency``) and
``serve_disaggregated`` (``llmath analyze --disagg``) on the row's layout, with the weights declared as ``--weights``
declares them (the engine picks the GEMM input format); the planner's rows must be theirs to 1e-9 relative."""

import pytest

from llmath import Workload, serve
from llmath.deploy.disagg import first_token_decode_steps, serve_disaggregated
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.plan import plan
from llmath.deploy.plan_search import decode_batches
from llmath.model.dtypes import Precision


def _declared(fmt: str) -> Precision:
    """``fmt`` as `--weights fmt` declares it over a bf16 checkpoint: 16/8-bit formats with their own activations
    (the planner's candidates), others bf16 activations, the GEMM input format left to the engine."""
    own = fmt in ("bf16", "fp16", "fp8")
    act = fmt if own else "bf16"
    return Precision(fmt, act, act, sources={"weights": "flag", **({"activations": "flag"} if own else {})})


AGGREGATED = [
    # a DeepSeek-V3-shaped MoE (the registry's hub config.json) with expert parallelism (DEP 8), NVFP4 on B200
    # under SGLang: W4A4 on the FP4 tensor cores, not W4A16
    ("deepseek-v3", "b200", 8, {"tp": 1, "dp": 8, "ep": 8}, "sglang", "nvfp4", dict(prompt=1024, gen=256)),
    # a dense model, NVFP4 on B200 under vLLM (quantised: W4A4)
    ("llama-3.1-70b", "b200", 4, {"tp": 4}, "vllm", "nvfp4", dict(prompt=1024, gen=256)),
    # a dense model in FP16 under llama.cpp on a GeForce card: its FP16-accumulate tensor rate (twice the
    # FP32-accumulate rate the registry lists, Ada whitepaper appendix, data/format_kernels.json)
    ("llama-3.2-1b", "rtx-4090", 1, {"tp": 1}, "llama.cpp", "fp16", dict(prompt=512, gen=128)),
]


@pytest.mark.parametrize(("model", "hw", "gpus", "pins", "engine", "fmt", "work"), AGGREGATED, ids=lambda v: str(v))
def test_the_planners_aggregated_rows_carry_the_engines_hardware_and_precision_terms(
    model, hw, gpus, pins, engine, fmt, work
):
    # one instance on all the GPUs: each row (best and front, a spread of them) is serve on its layout at its
    # concurrency, and no row holds more requests than serve's KV pools admit (the replicas' max_resident)
    pinned = ParallelConfig(**pins)
    r = plan(model, hw, gpus=gpus, workload=Workload(**work), engine=engine, weights=fmt, parallel=pinned)
    rows = [x for x in [r.best, *r.pareto] if x["mode"] == "aggregated"]
    assert rows
    layout = ParallelConfig(None, pins.get("tp"), None, pins.get("ep"), pins.get("dp"))
    for x in rows[:: max(1, len(rows) // 4)] + [r.best]:
        assert x["gpus_used"] == gpus and x["weights"] == fmt
        rep = serve(model, hw, workload=Workload(**work, concurrency=x["concurrency"]), engine=engine,
                    precision=_declared(fmt), parallel=layout)  # fmt: skip
        for k in ("ttft_s", "tpot_s", "throughput_tok_s_per_gpu"):
            assert x[k] == pytest.approx(rep.metrics[k], rel=1e-9), (x["concurrency"], k)
    top = max(x["concurrency"] for x in [r.best, *r.pareto])
    rep = serve(model, hw, workload=Workload(**work, concurrency=top), engine=engine, precision=_declared(fmt),
                parallel=layout)  # fmt: skip
    assert top <= rep.memory.max_resident * rep.replicas


def test_serve_disaggregated_runs_a_declared_format_in_the_engines_kernel_as_serve_does():
    # NVFP4 weights declared on B200: the pools' GEMMs run W4A4 (FP4 tensor cores, data/format_kernels.json), the
    # same as a precision that states the FP4 activations itself, and faster to the first token than W4A16
    pools = dict(prefill={"workers": 1, "tp": 4}, decode={"workers": 1, "tp": 4})
    work = Workload(prompt=4096, gen=256, concurrency=16)
    got = serve_disaggregated("llama-3.1-70b", "b200", workload=work, **pools, precision=_declared("nvfp4"))
    w4a4 = Precision("nvfp4", "bf16", "bf16", act_quant="nvfp4")
    want = serve_disaggregated("llama-3.1-70b", "b200", workload=work, **pools, precision=w4a4)
    w4a16 = serve_disaggregated("llama-3.1-70b", "b200", workload=work, **pools, precision=Precision("nvfp4"))
    for k in ("ttft_s", "tpot_s", "prefill_pass_s", "throughput_tok_s"):
        assert got[k] == pytest.approx(want[k], rel=1e-12), k
    assert got["prefill_pass_s"] < w4a16["prefill_pass_s"]


@pytest.mark.parametrize(("engine", "fmt", "hw"), [("sglang", "fp8", "h200"), ("trtllm", "nvfp4", "b200")])
def test_the_planners_disaggregated_grid_times_its_pools_as_serve_disaggregated(engine, fmt, hw):
    # the grid's numbers of every disaggregated row the planner returns (8192-token prompts, TPOT ≤ 50 ms, where
    # pools win): its decode TPOT at its batch B is serve_disaggregated's with the decode ranks capped at B and
    # enough clients to fill them; its TTFT less the KV transfer and the decode server's answer steps is
    # serve_disaggregated's prefill pass (whole prompts filling the budget, 8192 | the budget); its KV transfer is
    # serve_disaggregated's; and B is one of the batches up to what serve_disaggregated's decode pool admits (its
    # engine's memory share at its own TP degree: SGLang's gpu_memory_utilization falls with TP); the row itself is
    # serve_disaggregated's at its concurrency
    work = dict(prompt=8192, gen=1024)
    r = plan("llama-3.1-70b", hw, gpus=16, workload=Workload(**work), disagg=True, engine=engine, weights=fmt,
             tpot_ms=50)  # fmt: skip
    rows = [x for x in [r.best, *r.pareto] if x["mode"] == "disaggregated"]
    assert rows
    for b in rows[:4]:
        g = b["grid"]
        B = int(g["decode_batch"])
        pools = dict(prefill={"workers": 64, "tp": b["prefill_tp"]},
                     decode={"tp": b["tp"], "ep": b["ep"], "dp": b["decode_dp"]})  # fmt: skip
        run = dict(engine=engine, precision=_declared(fmt), **pools)
        s = serve_disaggregated("llama-3.1-70b", hw, workload=Workload(**work, concurrency=10**5), **run,
                                decode_max_batch=B)  # fmt: skip
        assert s["decode_batch"] == B
        assert g["tpot_s"] == pytest.approx(s["tpot_s"], rel=1e-9)
        pass_s = g["ttft_s"] - b["kv_transfer_s"] - first_token_decode_steps(engine) * g["tpot_s"]
        assert pass_s == pytest.approx(s["prefill_pass_s"], rel=1e-9)
        assert b["kv_transfer_s"] == pytest.approx(s["kv_transfer_s"], rel=1e-12)
        full = serve_disaggregated("llama-3.1-70b", hw, workload=Workload(**work, concurrency=10**7), **run)
        assert B in decode_batches(int(full["decode_batch"]))  # the batch grid up to what the decode pool admits
        # the finalist itself: serve_disaggregated on its pools at its concurrency
        decode = {"workers": b["decode_workers"], "tp": b["tp"], "ep": b["ep"], "dp": b["decode_dp"]}
        pools = dict(prefill={"workers": b["prefill_workers"], "tp": b["prefill_tp"]}, decode=decode)
        at = serve_disaggregated("llama-3.1-70b", hw, workload=Workload(**work, concurrency=int(b["concurrency"])),
                                 engine=engine, precision=_declared(fmt), **pools)  # fmt: skip
        for k in ("ttft_s", "tpot_s", "throughput_tok_s_per_gpu"):
            assert b[k] == pytest.approx(at[k], rel=1e-9), k
