"""Speculative decoding in disaggregated serving: the decode pool runs rounds (k draft steps + a verify pass of
width k + 1) that yield the stated acceptance length a tokens, the prefill pool also runs the draft's prefill,
the draft's KV of the prompt travels with the target's, and both pools hold the draft's weights and KV."""

import json

import numpy as np
import pytest
from helpers import run_cli

from llmath import Workload
from llmath.deploy import engines
from llmath.deploy.disagg import (
    disagg_grid,
    kv_transfer_s,
    pool_decoding,
    pool_memory,
    prefill_worker,
    serve_disaggregated,
)
from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.deploy.plan import plan
from llmath.deploy.serving import Decoding, Requests, active_overheads
from llmath.deploy.serving_memory import memory
from llmath.deploy.speculative import Speculation
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100 = get("h100-sxm")
BF16 = Precision("bf16", "bf16", "bf16")
EAGLE = Speculation("eagle", 3, 2.5)
# Llama-3-8B's KV per token: 32 layers × (K and V) × 8 KV heads × 128 × 2 bytes = 131,072 B; one layer 4,096 B
LLAMA_KV = 32 * 2 * 8 * 128 * 2
LAYER_KV = 2 * 8 * 128 * 2


def _device(mode="expected", tp=1):
    spec = resolve("llama-3-8b")
    lay = make_layout(spec, ParallelConfig(None, tp)) if tp > 1 else None
    return Device(spec, H100, BF16, efficiency(mode, H100), "flash", True, lay)


def test_a_speculating_decode_pool_yields_the_acceptance_length_per_round():
    # a round at batch B and mean context S: k = 3 draft steps at contexts S … S + 2 (their mean S + 1) and one
    # verify pass of width k + 1 = 4 (speculative.py); it yields a = 2.5 tokens per sequence, so
    # TPOT = round / a and the decode worker finishes r_d = B·a / ((G − 1)·round) requests/s
    dev = _device()
    dec = pool_decoding(dev, EAGLE)
    req = Requests(1024, 128)
    B = np.array([16.0, 64.0])
    S = 1024 + 63  # req.decode_context: the mean of positions P … P + G − 2
    rnd = 3 * dec.draft.iteration(B, S + 1).time_s + dev.verify(B, 4, S).time_s
    w = prefill_worker(dev, engines.preset("vllm", H100), req, dec.draft)
    kv_s = kv_transfer_s(dec, 1024, H100, dev)  # one GPU to one GPU, over one direction of NVLink
    g = disagg_grid(w, dec, req, 64, 8, 1, 1, kv_s, batches=B)
    r_d = B * 2.5 / (127 * rnd)
    for i in range(2):
        assert g.tpot_s[i, 0] == pytest.approx(rnd[i] / 2.5, rel=1e-12)
        for j, x in enumerate(g.prefill_workers[i]):
            assert g.decode_workers[i, j] == np.ceil(x * w.requests_s / r_d[i])
    # the KV transfer carries the EAGLE head's one layer beside the target's 32: (131,072 + 4,096) B × 1024 tokens
    # over 450 GB/s (one direction of the H100's 900 GB/s NVLink)
    assert kv_s == pytest.approx((LLAMA_KV + LAYER_KV) * 1024 / 450e9, rel=1e-9)
    assert g.kv_transfer_s == kv_s


def test_without_speculation_the_grid_is_the_one_token_per_step_grid():
    # Decoding(dev) steps one token per iteration: the same arrays as the device itself
    dev, req = _device(), Requests(1024, 128)
    w = prefill_worker(dev, engines.preset("vllm", H100), req)
    B = np.array([1.0, 16.0, 64.0])
    kv_s = kv_transfer_s(Decoding(dev), 1024, H100, dev)
    a = disagg_grid(w, dev, req, 64, 8, 1, 1, kv_s, batches=B)
    b = disagg_grid(w, Decoding(dev), req, 64, 8, 1, 1, kv_s, batches=B)
    for k in ("ttft_s", "tpot_s", "decode_workers", "throughput_tok_s"):
        assert np.array_equal(getattr(a, k), getattr(b, k))
    # TTFT = the prefill + the target's KV alone: 131,072 B × 1024 over 450 GB/s
    assert a.ttft_s[0, 0] == pytest.approx(w.ttft_s + LLAMA_KV * 1024 / 450e9)


def test_the_prefill_pool_runs_the_drafts_prefill_over_the_prompt():
    # TensorRT-LLM's context phase runs the MTP module over the prompt, SGLang's prefill server drafts too: a
    # prefill-only pass of n prompts costs the target's pass plus the draft's over the same tokens
    dev, req = _device(), Requests(1024, 128)
    eng = engines.preset("vllm", H100)
    draft = pool_decoding(dev, EAGLE).draft
    plain, spec = prefill_worker(dev, eng, req), prefill_worker(dev, eng, req, draft)
    n = plain.prompts_per_iteration  # whole prompts packed into the budget
    assert spec.prompts_per_iteration == n
    extra = float(draft.iteration(0, 0, n, 1024, 0).time_s)
    assert spec.ttft_s == pytest.approx(plain.ttft_s + extra, rel=1e-12)
    # one decoder layer of the target's 32 and the shared-shape LM head: more than nothing, less than the target
    assert 0 < extra < plain.ttft_s / 4


def test_the_drafts_weights_and_kv_are_held_in_the_pool():
    # the EAGLE head: one Llama-3-8B decoder layer, 218,120,192 parameters (test_plan_speculation's count), 2 bytes
    # each; its KV cache one layer of the target's 32, so each request counts 33/32 of the target's KV
    dev, req = _device(), Requests(1024, 128)
    eng = engines.preset("vllm", H100)
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    plain = memory(dev, eng, req)
    spec = pool_memory(dev, eng, req, pool_decoding(dev, EAGLE).draft, "eagle")
    assert spec.weights_bytes - plain.weights_bytes == pytest.approx(2 * layer, rel=1e-4)
    assert spec.kv_bytes_per_request == pytest.approx(plain.kv_bytes_per_request * 33 / 32, rel=1e-12)
    assert spec.kv_bytes_admitted == pytest.approx(plain.kv_bytes_admitted * 33 / 32, rel=1e-12)
    assert spec.max_requests_by_kv == int(spec.kv_pool_bytes // (plain.kv_bytes_admitted * 33 / 32))
    assert pool_memory(dev, eng, req) == plain  # no draft: serving_memory.memory unchanged


def test_serve_disaggregated_tpot_is_the_decode_round_over_the_acceptance_length():
    # ideal efficiency has no engine overheads: TPOT = the decode pool's round at its batch B / a exactly
    kw = {"workload": Workload(prompt=1024, gen=128, concurrency=32), "prefill": {"tp": 1}, "decode": {"tp": 2}}
    kw |= {"engine": "vllm", "precision": BF16, "efficiency_mode": "ideal"}
    r = serve_disaggregated("llama-3-8b", "h100-sxm", speculation=EAGLE, **kw)
    dev = _device("ideal", tp=2)
    dec = pool_decoding(dev, EAGLE)
    B, S = r["decode_batch"], 1024 + 63
    rnd = 3 * dec.draft.iteration(B, S + 1).time_s + dev.verify(B, 4, S).time_s
    assert r["tpot_s"] == pytest.approx(float(rnd) / 2.5, rel=1e-9)
    assert r["tokens_per_step"] == 2.5
    plain = serve_disaggregated("llama-3-8b", "h100-sxm", **kw)
    assert plain["tokens_per_step"] == 1.0
    assert plain["tpot_s"] == pytest.approx(float(dev.iteration(plain["decode_batch"], S).time_s), rel=1e-9)
    # the draft's KV travels too: (131,072 + 4,096) / 131,072 of the target's transfer
    assert r["kv_transfer_s"] / plain["kv_transfer_s"] == pytest.approx(33 / 32, rel=1e-12)


def test_mtp_in_both_pools_of_deepseek():
    # DeepSeek-R1's MTP module: one MLA layer of the target's shape beside its 61, so the KV the prefill pool sends
    # is 62/61 of the target's (each layer the same 512 + 64 latent and rope widths per token)
    kw = {"workload": Workload(prompt=1024, gen=256, concurrency=64), "prefill": {"tp": 8}, "decode": {"tp": 8}}
    plain = serve_disaggregated("deepseek-r1", "h200", **kw)
    mtp = serve_disaggregated("deepseek-r1", "h200", speculation=Speculation("mtp", 3, 2.5), **kw)
    assert mtp["kv_transfer_s"] / plain["kv_transfer_s"] == pytest.approx(62 / 61, rel=1e-12)
    assert mtp["prefill_pass_s"] > plain["prefill_pass_s"]  # the MTP module's prefill over the prompt
    assert mtp["tpot_s"] < plain["tpot_s"]  # 2.5 tokens a round on a memory-bound decode


def test_bad_speculation_is_refused_in_one_line():
    kw = {"workload": Workload(prompt=512, gen=64, concurrency=8), "prefill": {"tp": 1}, "decode": {"tp": 1}}
    with pytest.raises(WorkloadError, match="must be a llmath.Speculation"):
        serve_disaggregated("llama-3-8b", "h100-sxm", speculation="eagle", **kw)
    with pytest.raises(WorkloadError, match="no multi-token-prediction module"):
        serve_disaggregated("llama-3-8b", "h100-sxm", speculation=Speculation("mtp", 2, 2.0), **kw)


def test_plan_disagg_searches_speculating_pools():
    kw = {"workload": Workload(prompt=1024, gen=256), "gpus": 4, "tpot_ms": 10, "disagg": True}
    r = plan("llama-3-8b", "h100-sxm", speculation=EAGLE, **kw)
    rows = [r.best, *r.pareto]
    said = {"method": "eagle", "k": 3, "acceptance": 2.5, "draft_model": None}
    assert r.best["mode"] == "disaggregated" and r.best["speculation"] == said
    # the row is the pools' grid at its decode batch: TPOT = (the decode worker's round + vLLM's per-iteration
    # and per-token host terms, as serve_disaggregated counts them) / 2.5
    b = r.best
    dev = _device(tp=b["tp"]) if b["tp"] > 1 else _device()
    dec = pool_decoding(dev, EAGLE)
    S = 1024 + 127
    rnd = 3 * dec.draft.iteration(b["decode_batch"], S + 1).time_s + dev.verify(b["decode_batch"], 4, S).time_s
    ov = active_overheads(dev, engines.preset("vllm", H100))
    host = ov.per_iteration_s + b["decode_batch"] * ov.per_token_s
    assert b["tpot_s"] == pytest.approx((float(rnd) + host) / 2.5, rel=1e-9)
    assert all(x["speculation"] in (None, said) for x in rows)
    full = plan("llama-3-8b", "h100-sxm", speculation=EAGLE, exhaustive=True, **kw)
    assert r.best == full.best and r.pareto == full.pareto


def test_acceptance_one_leaves_the_disaggregated_plan_unchanged():
    # a round of 3 draft steps and a verify of width 4 yielding one token costs more than one decode step, and
    # the draft takes memory: the plan without speculation wins everywhere
    kw = {"workload": Workload(prompt=1024, gen=256), "gpus": 4, "tpot_ms": 20, "disagg": True}
    r = plan("llama-3-8b", "h100-sxm", speculation=Speculation("eagle", 3, 1.0), **kw)
    plain = plan("llama-3-8b", "h100-sxm", **kw)
    assert r.best == plain.best and r.pareto == plain.pareto


def test_cli_plan_disagg_with_speculation(capsys):
    args = ("plan", "llama-3-8b", "--gpus", "4", "--tpot-ms", "10", "--disagg", "--json")
    code, out, _ = run_cli(capsys, *args, "--spec-method", "eagle", "--spec-tokens", "3", "--acceptance", "2.5")
    d = json.loads(out)
    assert code == 0 and d["best"]["mode"] == "disaggregated"
    assert d["best"]["speculation"] == {"method": "eagle", "k": 3, "acceptance": 2.5, "draft_model": None}
    assert {"prefill_workers", "prefill_tp", "decode_workers", "decode_batch"} <= set(d["best"])
    code, out, _ = run_cli(capsys, *args[:-1], "--spec-method", "eagle", "--acceptance", "2.5")
    assert code == 0 and "disagg+sd" in out


@pytest.mark.parametrize(
    "pool,rule",
    [
        ({"workers": 0}, r"prefill\['workers'\]=0 must be an integer >= 1"),
        ({"tp": 2.5}, r"prefill\['tp'\]=2.5 must be an integer >= 1"),
        ({"tensor_parallel": 2}, r"prefill\['tensor_parallel'\]: not a pool key"),
        ([1, 2], r"prefill=\[1, 2\] must be a dict"),
    ],
)
def test_a_pool_that_breaks_its_rule_is_refused(pool, rule):
    from llmath.deploy.disagg import serve_disaggregated
    from llmath.errors import LayoutError

    with pytest.raises(LayoutError, match=rule):
        serve_disaggregated(
            "llama-3-8b", "h100-sxm", workload=Workload(prompt=64, gen=8, concurrency=4), prefill=pool, decode={}
        )


def test_an_mtp_module_runs_under_the_targets_attention_dp_and_expert_parallelism():
    # DeepSeek-V3 in bf16 on attention-DP 16 with EP 16: the MTP module is a decoder layer of the target's own model
    # (SGLang's DeepseekModelNextN builds a DeepseekV2DecoderLayer), so each GPU holds its whole MLA attention (DP
    # attention: TP 1), 256 / 16 = 16 routed experts, the shared expert and the router, and its norms, 2 bytes
    # each (config.json: hidden 7168, q_lora 1536, kv_lora 512, 128 heads of nope 128 + rope 64, v 128, experts of
    # width 2048); the embedding and LM head are the target's
    from llmath.deploy.serving_memory import draft_weight_bytes
    from llmath.deploy.speculative import draft_device

    D = 7168
    attn = D * 1536 + 1536 + 1536 * 128 * 192 + D * (512 + 64) + 512 + 512 * 128 * (128 + 128) + 128 * 128 * D
    per_gpu = attn + 16 * 3 * D * 2048 + 3 * D * 2048 + 256 * D + 3 * D
    spec, hw = resolve("deepseek-v3"), get("h200")
    layout = make_layout(spec, ParallelConfig(tp=1, dp=16, ep=16))
    dev = Device(spec, hw, BF16, efficiency("expected", hw), "flash", True, layout, 0)
    draft = draft_device(dev, Speculation("mtp", 2, 2.4))
    assert (draft.layout.tp, draft.layout.dp, draft.layout.ep) == (1, 16, 16)
    assert draft_weight_bytes(draft, "mtp") == 2 * per_gpu


def test_the_h100_dep16_mtp_decode_pool_that_ran_fits():
    # SemiAnalysis InferenceX ran DeepSeek-R1 FP8 on two H100 boxes with a decode worker of tp-size 16, dp-size 16,
    # ep-size 16, DP attention and EAGLE MTP of 2 steps at mem-fraction-static 0.85 (csahithi/srt-slurm at 31050f9a,
    # recipes/h100/1k1k/mtp/h100-fp8-1p1d-max-dep-mtp.yaml): each of its GPUs holds 1/16 of the MTP module's
    # experts, so the pool fits (with the module's 256 experts on every GPU it would not: about 11 GB more each)
    kw = {"workload": Workload(prompt=1024, gen=1024, concurrency=16), "prefill": {"tp": 16}}
    kw |= {"decode": {"tp": 1, "dp": 16, "ep": 16}, "engine": "sglang"}
    r = serve_disaggregated("deepseek-r1", "h100-sxm", speculation=Speculation("mtp", 2, 2.4), **kw)
    plain = serve_disaggregated("deepseek-r1", "h100-sxm", **kw)
    assert 0 < r["tpot_s"] < plain["tpot_s"]
