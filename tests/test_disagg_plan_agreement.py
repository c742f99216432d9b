"""The planner's disaggregated candidates and ``serve_disaggregated`` time one request's KV transfer, prefill pass,
decode step and first-token steps with the same functions; and the closed loop's queue nets out of a client's cycle
the transit (``transit_s``) that the TTFT's admission wait (``admission_wait_s``) starts with."""

import dataclasses

import numpy as np
import pytest

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.capped_loop import admission_wait_s, transit_s
from llmath.deploy.closed_loop import staggered_state
from llmath.deploy.disagg import serve_disaggregated
from llmath.deploy.plan import plan
from llmath.deploy.serving import Decoding, Requests, active_overheads
from llmath.deploy.step import Device
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

FP8 = Precision("fp8", "fp8", "fp8")


def test_the_planners_best_disaggregated_candidate_is_timed_as_serve_disaggregated_times_its_layout():
    r = plan("llama-3.1-70b", "h200", gpus=16, workload=Workload(prompt=1024, gen=1024), disagg=True,
             engine="trtllm", weights="fp8", tpot_ms=50)  # fmt: skip
    b = r.best
    assert b["mode"] == "disaggregated"
    s = serve_disaggregated(
        "llama-3.1-70b", "h200", workload=Workload(prompt=1024, gen=1024, concurrency=b["concurrency"]),
        prefill={"workers": b["prefill_workers"], "tp": b["prefill_tp"]},
        decode={"workers": b["decode_workers"], "tp": b["tp"], "pp": b["pp"], "ep": b["ep"], "dp": b["decode_dp"]},
        engine="trtllm", precision=FP8,
    )  # fmt: skip
    # the KV of a 1024-token prompt: 80 layers × 8 KV heads × 128 head dim × 2 (K and V) × 1 byte (an FP8 cache)
    # × 1024 tokens = 167,772,160 B. Each of the d = tp decode ranks holds 8 / d heads (a d-th), sent by the
    # p prefill ranks that hold the prompt: max(whole / p, whole / d) over one GPU's link, inside one 8-GPU box
    # one direction of NVLink 4's 900 GB/s (450 GB/s)
    whole = 80 * 8 * 128 * 2 * 1 * 1024
    assert whole == 167_772_160
    p, d = b["prefill_tp"], b["tp"]
    assert p + d <= 8 and b["decode_dp"] == 1
    assert b["kv_transfer_s"] == s["kv_transfer_s"]
    assert s["kv_transfer_s"] == pytest.approx(max(whole / p, whole / d) / 450e9, rel=1e-12)
    # TTFT = the prefill pass + the KV transfer + the decode server's 2.5 steps until it answers (TensorRT-LLM's
    # overlap executor, data/engines.json): the planner's pass is serve_disaggregated's (whole prompts filling the
    # 8192-token budget, 1024 | 8192), its answer 2.5 of its own TPOT
    pass_s = b["ttft_s"] - b["kv_transfer_s"] - 2.5 * b["tpot_s"]
    assert pass_s == pytest.approx(s["prefill_pass_s"], rel=1e-9)
    assert s["first_token_decode_s"] == pytest.approx(2.5 * s["tpot_s"], rel=1e-12)
    # TPOT: the planner's decode pool is y = ⌈x·r_p / r_d⌉ workers at batch B, over-provisioned, so the closed
    # loop of the row's concurrency fills it to less than B: its TPOT is at most the planner's (an upper bound),
    # and not below that of a batch (y − 1)/y of B's (the decode step grows with the batch)
    assert s["decode_batch"] <= b["decode_batch"]
    assert s["tpot_s"] <= b["tpot_s"]


def test_the_planners_mla_candidates_send_each_tensor_parallel_decode_rank_the_whole_latent_cache():
    # DeepSeek-V2-Lite (hub config.json: 27 layers, kv_lora_rank 512, qk_rope_head_dim 64) caches 512 + 64 = 576
    # values a token and layer, FP8 here: 27 × 576 × 1 byte × 8192 tokens = 127,401,984 B a prompt. Every one of
    # the d tensor-parallel ranks of the decode replica's attention-DP rank that serves the request holds all of
    # it, sent by the p prefill ranks: max(d·whole / p, whole) over 450 GB/s (one direction of the H100's NVLink,
    # the 4 GPUs in one box)
    r = plan("deepseek-v2-lite", "h100-sxm", gpus=4, workload=Workload(prompt=8192, gen=256), disagg=True,
             engine="trtllm", weights="fp8", tpot_ms=50)  # fmt: skip
    whole = 27 * 576 * 1 * 8192
    assert whole == 127_401_984
    rows = [x for x in [r.best, *r.pareto] if x["mode"] == "disaggregated"]
    assert {x["tp"] for x in rows} >= {1, 2}  # one and two receivers
    for x in rows:
        p, d = x["prefill_tp"], x["tp"]
        assert x["pp"] == 1
        assert x["kv_transfer_s"] == pytest.approx(max(d * whole / p, whole) / 450e9, rel=1e-12)
    b = rows[0]
    s = serve_disaggregated(
        "deepseek-v2-lite", "h100-sxm", workload=Workload(prompt=8192, gen=256, concurrency=b["concurrency"]),
        prefill={"workers": b["prefill_workers"], "tp": b["prefill_tp"]},
        decode={"workers": b["decode_workers"], "tp": b["tp"], "ep": b["ep"], "dp": b["decode_dp"]}, engine="trtllm",
        precision=FP8,
    )  # fmt: skip
    assert s["kv_transfer_s"] == b["kv_transfer_s"]


def test_serve_disaggregated_at_the_planners_decode_batch_has_the_planners_tpot():
    # one decode worker's closed loop whose clients fill it to the planner's batch: the slots cap it there
    # (decode_max_batch), so both time the same step with the same engine overheads
    r = plan("llama-3.1-70b", "h200", gpus=16, workload=Workload(prompt=1024, gen=1024), disagg=True,
             engine="trtllm", weights="fp8", tpot_ms=50)  # fmt: skip
    b = r.best
    B = int(b["decode_batch"])
    assert B == b["decode_batch"]
    s = serve_disaggregated(
        "llama-3.1-70b", "h200", workload=Workload(prompt=1024, gen=1024, concurrency=64 * B),
        prefill={"workers": 8, "tp": b["prefill_tp"]}, decode={"tp": b["tp"], "dp": b["decode_dp"]},
        engine="trtllm", precision=FP8, decode_max_batch=B,
    )  # fmt: skip
    assert s["decode_batch"] == B
    assert s["tpot_s"] == pytest.approx(b["tpot_s"], rel=1e-12)


def _state(engine: str, prompt: int, concurrency: float, **settings):
    hw = get("h100-sxm")
    dev = Device(resolve("llama-3-8b"), hw, Precision("bf16", "bf16", "bf16"), efficiency("expected", hw))
    eng = dataclasses.replace(engines.preset(engine, hw), **settings)
    req = Requests(prompt, 256)
    ss = staggered_state(Decoding(dev), eng, req, np.array([concurrency]), 64)
    ov = active_overheads(dev, eng)
    wait = float(admission_wait_s(Decoding(dev), eng, req, concurrency, ss)[0])
    return eng, ov.served_request_s(prompt), ss, float(transit_s(eng, ov, req, ss)[0]), wait


def test_the_queues_transit_is_the_admission_waits_on_an_engine_without_polls_or_holds():
    # vLLM, an 8192-token prompt: its front end o_req outlasts one decode step τ_d but not one mean iteration τ̄
    # (a mixed iteration carries prompt chunks); the passes it joins after are counted in τ̄, the passes that go
    # by: ⌈o_req / τ̄⌉ = 1 (vLLM's lag, one pass, counts from the send), not ⌈o_req / τ_d⌉ = 2. vLLM neither polls
    # nor holds and is never idle at 8 clients ((o_req / e2e)^7 < 1e-16): the TTFT's admission wait is that pass
    eng, o_req, ss, transit, wait = _state("vllm", 8192, 8.0)
    tau_d, tau = float(ss.step_decode_s[0]), float(ss.mean_iteration_s[0])
    assert eng.replacement_lag == 1 and tau_d < o_req < tau
    assert (o_req / float(ss.e2e_s[0])) ** 7 < 1e-16
    assert transit == pytest.approx(tau, rel=1e-12)
    assert wait == pytest.approx(transit, rel=1e-12)


def test_admission_adds_the_schedulers_poll_to_the_transit():
    # SGLang polling every 10 decode iterations (--scheduler-recv-interval 10), prefill-first: a follow-up sent at
    # the end of one of a window's decode iterations waits (10 − 1)/2 of them for the poll, after its lag of two
    # passes (which both terms count alike here: the front end is shorter than one pass)
    eng, o_req, ss, transit, wait = _state("sglang", 1024, 256.0, recv_interval=10)
    tau_d, tau = float(ss.step_decode_s[0]), float(ss.mean_iteration_s[0])
    assert eng.replacement_lag == 2 and o_req < tau_d
    assert transit == pytest.approx(2 * tau, rel=1e-12)
    assert wait == pytest.approx(2 * tau + 4.5 * tau_d, rel=1e-9)


def test_a_decode_worker_with_attention_dp_finishes_each_ranks_batch():
    # Qwen3-30B-A3B decoding on 2 attention-DP ranks (EP 2): B sequences on each rank, one token each per step
    # of τ(B) (the step as serve_disaggregated times a rank's batch), so the worker finishes 2·B / ((G − 1)·τ)
    # requests/s and x prefill workers of r_p requests/s need ⌈x·r_p·(G − 1)·τ / (2·B)⌉ of them
    from llmath.deploy.disagg import disagg_grid, prefill_worker
    from llmath.deploy.layout import ParallelConfig, make_layout

    hw = get("h100-sxm")
    spec = resolve("qwen3-30b-a3b")
    bf16, eff = Precision("bf16", "bf16", "bf16"), efficiency("expected", hw)
    dec = Device(spec, hw, bf16, eff, "flash", True, make_layout(spec, ParallelConfig(None, 1, 1, 2, 2)))
    assert dec.dp == 2 and dec.gpus == 2
    pre = Device(spec, hw, bf16, eff)
    req, B = Requests(1024, 256), np.array([8.0, 32.0])
    w = prefill_worker(pre, engines.preset("vllm", hw), req)
    g = disagg_grid(w, dec, req, 64, 16, 1, 2, 0.0, batches=B)
    tau = dec.iteration(B, 1024 + 127).time_s
    for i in range(2):
        for j, x in enumerate(g.prefill_workers[i]):
            assert g.decode_workers[i, j] == np.ceil(x * w.requests_s * 255 * tau[i] / (2 * B[i]))


def test_a_disaggregated_rows_layout_names_its_decode_replicas_attention_dp():
    # the row's dp counts its decode workers (3 here); the decode replica's own attention-DP ranks are decode_dp
    from llmath.output.serving import plan_layout

    row = {"mode": "disaggregated", "tp": 4, "pp": 1, "ep": 1, "dp": 3, "decode_workers": 3, "decode_dp": 1,
           "prefill_workers": 1, "prefill_tp": 2}  # fmt: skip
    assert plan_layout(row) == "P 1×tp2, D 3×tp4"
    assert plan_layout({**row, "ep": 8, "decode_dp": 2}) == "P 1×tp2, D 3×tp4 ep8 dp2"
    assert plan_layout({"mode": "aggregated", "tp": 8, "pp": 1, "ep": 1, "dp": 2}) == "tp8 dp2"
