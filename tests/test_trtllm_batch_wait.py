"""TensorRT-LLM's holds on new prompts in the staggered closed loop: batch waiting (``batch_wait_timeout_iters``,
``batch_wait_max_tokens_ratio``) and attention-DP balancing (``attention_dp_config``), and the InferenceX rows its
launch scripts turned them on for."""

from dataclasses import replace

import numpy as np
import pytest

from llmath.deploy import engines
from llmath.deploy.admission_holds import adp_balance_iterations, arrivals_to_cover_ranks, batch_wait_iterations
from llmath.deploy.closed_loop import lockstep_state, staggered_state
from llmath.deploy.serving import Requests
from llmath.deploy.serving_memory import memory
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.measure.serving_runs import to_run
from llmath.measure.trt_launchers import INFERENCEX_TRT_BATCH_WAIT, adp_balance, batch_wait, token_budget
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100 = get("h100-sxm")
WAIT = dict(batch_wait_iters=40, batch_wait_tokens_ratio=0.8, max_num_batched_tokens=8192)


def test_held_prompts_wait_for_the_token_threshold_or_the_timeout():
    eng = replace(engines.preset("trtllm", H100), **WAIT)
    req = Requests(1024, 1024)
    # threshold 0.8 x 8192 = 6553.6 tokens; 64 decoding tokens leave 6489.6: n* = ceil(6489.6 / 1024) = 7 prompts.
    # One arrival per 10 iterations: 6 more take 60 > 40 iterations, so the first waits 40, n = 1 + 0.1 x 40 = 5
    # held prompts, their mean wait 40 x (1 + 4/2) / 5 = 24 iterations.
    assert float(batch_wait_iterations(eng, req, 64, 0.1)) == pytest.approx(24.0)
    # one arrival per iteration: the 6 others arrive in 6 iterations, n = 7, mean 6 x (1 + 6/2) / 7 = 24/7
    assert float(batch_wait_iterations(eng, req, 64, 1.0)) == pytest.approx(24 / 7)
    # the decoding tokens alone reach the threshold: nobody waits; either setting at 0 turns it off
    assert float(batch_wait_iterations(eng, req, 7000, 0.1)) == 0.0
    assert batch_wait_iterations(replace(eng, batch_wait_iters=0), req, 64, 0.1) == 0.0
    assert batch_wait_iterations(replace(eng, batch_wait_tokens_ratio=0.0), req, 64, 0.1) == 0.0
    assert engines.preset("trtllm", H100).batch_wait_iters == 0  # TensorRT-LLM's default: off


def test_batch_waiting_delays_out_of_step_replacements_not_lockstep_waves():
    dev = Device(resolve("llama-3.2-1b"), H100, Precision(), efficiency("expected", H100))
    eng = engines.preset("trtllm", H100, max_num_batched_tokens=8192)
    req = Requests(1024, 1, gen_dist=((820, 1.0), (1024, 1.0)))
    bmax = memory(dev, eng, req).max_resident
    base = staggered_state(dev, eng, req, [32], bmax)
    held = staggered_state(dev, replace(eng, **WAIT), req, [32], bmax)
    # 32 clients, ~920-token lifetimes: about 32 / 920 = 0.035 arrivals per iteration, so the 40-iteration
    # timeout ends each wait (n* = ceil((6553.6 - 31) / 1024) = 7 needs 6 / 0.035 = 170 iterations): a group of
    # 1 + 0.035 x 40 = 2.4 prompts waits 40 x (1 + 1.4/2) / 2.4 = 28 iterations on average
    tau = float(base.step_decode_s[0])
    assert float(held.ttft_s[0] - base.ttft_s[0]) == pytest.approx(28 * tau, rel=0.15)
    assert float(held.tpot_s[0]) == pytest.approx(float(base.tpot_s[0]), rel=0.03)
    # a lockstep wave comes back into an idle engine (no generation requests): TensorRT-LLM does not hold it
    fixed = Requests(1024, 1024)
    same = lockstep_state(dev, replace(eng, **WAIT), fixed, [32], bmax)
    assert float(same.ttft_s[0]) == float(lockstep_state(dev, eng, fixed, [32], bmax).ttft_s[0])
    with pytest.raises(WorkloadError, match="batch_wait_tokens_ratio=1.5"):
        replace(eng, batch_wait_tokens_ratio=1.5)
    with pytest.raises(WorkloadError, match="batch_wait_iters=-1"):
        replace(eng, batch_wait_iters=-1)


def _row(**kw) -> dict:
    r = dict(id="r", backend="trtllm", backend_version="", model_path="deepseek-ai/DeepSeek-R1", system="b200_sxm",
             precision="fp8", mode="agg", isl="1024", osl="1024", gemm_quant_mode="fp8_block",
             moe_quant_mode="fp8_block", batch_size="64", tp_size="8", pp_size="1", attention_dp_size="",
             moe_tp_size="1", moe_ep_size="1", silicon_ttft_ms="500", silicon_tpot_ms="20",
             source_notes="model=x; silicon_concurrency=64; measured=2026-03-25T00:00:00.000Z; wip=False")  # fmt: skip
    r.update({k: str(v) for k, v in kw.items()})
    return r


def _dsr1(image: str = "1.2.0rc6.post2", measured: str = "2026-01-29", **kw) -> dict:
    notes = f"model=x; silicon_concurrency=64; measured={measured}T00:00:00Z; wip=False; image=nvcr.io/nvidia/"
    return _row(source_notes=notes + f"tensorrt-llm/release:{image}", **kw)


def test_inferencex_deepseek_fp8_b200_rows_wait_as_the_script_set():
    # benchmarks/dsr1_fp8_b200_trt.sh from ec7bafaae (2026-01-29): DELAY_BATCHING at 1024/1024 from CONC 64 writes
    # batch_wait_timeout_iters: 40, batch_wait_max_tokens_ratio: 0.8; that configuration's image is 1.2.0rc6.post2
    assert batch_wait(_dsr1(), 64, True) == {"batch_wait_iters": 40, "batch_wait_tokens_ratio": 0.8}
    assert dict(to_run(_dsr1()).engine_settings)["batch_wait_iters"] == 40
    assert batch_wait(_dsr1(), 32, True) == {}  # below 64 clients
    assert batch_wait(_dsr1(attention_dp_size=8), 64, True) == {}  # TensorRT-LLM skips it with attention-DP
    assert batch_wait(_dsr1(precision="fp4"), 64, True) == {}  # the FP4 script sets none
    assert batch_wait(_dsr1(osl=8192), 64, True) == {}
    assert batch_wait(_dsr1(measured="2026-01-20"), 64, True) == {}
    # the MTP configuration (image 1.2.0rc6.post3, dsr1_fp8_b200_trt_mtp.sh at 5d517074c) sets no batch waiting
    assert batch_wait(_dsr1(image="1.2.0rc6.post3", measured="2026-02-05"), 64, True) == {}
    assert "batch_wait_iters" not in dict(to_run(_row(source_notes="silicon_concurrency=64")).engine_settings)


def _llama(**kw) -> dict:
    notes = "model=Llama-3.1-70B; silicon_concurrency=4; measured=2025-10-29T00:00:00.000Z; wip=False"
    base = dict(model_path="meta-llama/Llama-3.1-70B", gemm_quant_mode="fp8", moe_quant_mode="", tp_size=2,
                moe_ep_size=1, batch_size=4, source_notes=notes)  # fmt: skip
    return _row(**{**base, **kw})


def test_inferencex_llama_70b_rows_wait_and_budget_as_the_scripts_set():
    # benchmarks/70b_{fp8,fp4}_b200_trt_slurm.sh, 70b_fp8_h200_trt_slurm.sh at 9596d23d: at ISL = OSL = 1024 with
    # TP < 8, batch_wait_max_tokens_ratio: 0.9, batch_wait_timeout_iters: 20; --max_num_tokens 16384 everywhere
    wait = {"batch_wait_iters": 20, "batch_wait_tokens_ratio": 0.9}
    for system, precision in (("b200_sxm", "fp8"), ("b200_sxm", "fp4"), ("h200_sxm", "fp8")):
        assert batch_wait(_llama(system=system, precision=precision), 4, True) == wait
    settings = dict(to_run(_llama()).engine_settings)
    assert settings["batch_wait_iters"] == 20 and settings["max_num_batched_tokens"] == 16384
    assert batch_wait(_llama(tp_size=8), 4, True) == {}  # TP 8: the scripts' other branch
    assert batch_wait(_llama(osl=8192), 4, True) == {}
    assert token_budget(_llama(osl=8192), 4, 1, True) == {"max_num_batched_tokens": 16384}
    assert token_budget(_llama(), 4, 1, False) == {}  # not an InferenceX row
    gpt = _row(model_path="openai/gpt-oss-120b", precision="fp4")  # MAX_NUM_TOKENS=20000 in both gpt-oss scripts
    assert token_budget(gpt, 64, 1, True) == {"max_num_batched_tokens": 20000}
    assert token_budget(_row(), 64, 1, True) == {}  # DeepSeek-R1: computed from CONC and ISL (INFERENCEX_TRT_BUDGET)
    for rule in INFERENCEX_TRT_BATCH_WAIT:  # every rule names the script it was read from
        assert rule["source"]["repo"] == "SemiAnalysisAI/InferenceX" and len(rule["source"]["commit"]) == 40


def test_inferencex_deepseek_mtp_rows_run_the_mtp_scripts_token_budget():
    # dsr1_fp8_b200_trt_mtp.sh (5d517074c), dsr1_fp4_b200_trt_mtp.sh (0aae52d4c): MAX_NUM_TOKENS =
    # ((MTP+1)*MAX_BATCH_SIZE+ISL+64+63)/64*64, MTP 3 and MAX_BATCH_SIZE = CONC without attention-DP:
    # 64 clients at 1k: (4 x 64 + 1024 + 127) // 64 = 1407 // 64 = 21 -> 1344 tokens (no 8192 floor)
    mtp = _dsr1(image="1.2.0rc6.post3", measured="2026-02-05")
    assert token_budget(mtp, 64, 1, True) == {"max_num_batched_tokens": 1344}
    assert dict(to_run(mtp).engine_settings)["max_num_batched_tokens"] == 1344
    # attention-DP: MTP 1, FP8 MAX_BATCH_SIZE = CONC / 8 = 32 at 256 clients: (2 x 32 + 1024 + 127) // 64 = 18 -> 1152
    adp = _dsr1(image="1.2.0rc6.post3", measured="2026-02-05", tp_size=1, attention_dp_size=8, moe_ep_size=8)
    assert token_budget(adp, 256, 8, True) == {"max_num_batched_tokens": 1152}
    # FP4 divides by 4: 64 at 256 clients, (2 x 64 + 1024 + 127) // 64 = 19 -> 1216
    assert token_budget({**adp, "precision": "fp4"}, 256, 8, True) == {"max_num_batched_tokens": 1216}
    # 8k prompts at 4 clients: (4 x 4 + 8192 + 127) // 64 = 130 -> 8320
    assert token_budget({**mtp, "isl": "8192"}, 4, 1, True) == {"max_num_batched_tokens": 8320}
    assert token_budget(_dsr1(), 64, 1, True) == {}  # non-MTP image: the CONC + ISL budget of serving_runs


def test_llama_batch_wait_holds_a_low_concurrency_prompt_about_twenty_iterations():
    eng = replace(engines.preset("trtllm", H100), batch_wait_iters=20, batch_wait_tokens_ratio=0.9,
                  max_num_batched_tokens=16384)  # fmt: skip
    # threshold 0.9 x 16384 = 14745.6 tokens; 4 decoding tokens leave 14741.6: n* = ceil(14741.6 / 1024) = 15.
    # 4 clients, ~1044-iteration lifetimes: X = 4 / 1044 arrivals per iteration; 14 more would take 3654 > 20
    # iterations, so the first waits 20, n = 1 + 20 X = 1.0766, mean 20 x (1 + 0.0766 / 2) / 1.0766 = 19.29
    X = 4 / 1044
    n = 1 + 20 * X
    assert float(batch_wait_iterations(eng, Requests(1024, 1024), 4, X)) == pytest.approx(20 * (1 + (n - 1) / 2) / n)
    assert float(batch_wait_iterations(eng, Requests(1024, 1024), 4, X)) == pytest.approx(19.29, abs=0.01)
    # InferenceX's Llama-3.1-70B rows: measured TTFT at 1k/1k minus 1k/8k (same prompts) over the measured TPOT,
    # TP 1, 2, 4 at 4 clients (serving_runs.csv, FP8 B200): (383.1 - 103.6) / 14.6 = 19.1,
    # (255.7 - 71.9) / 9.7 = 18.9, (192.2 - 57.9) / 6.6 = 20.3 iterations
    for excess in ((383.1 - 103.6) / 14.6, (255.7 - 71.9) / 9.7, (192.2 - 57.9) / 6.6):
        assert excess == pytest.approx(19.29, rel=0.1)


def test_attention_dp_balancing_holds_prompts_until_every_rank_has_one():
    eng = replace(engines.preset("trtllm", H100), adp_balance=True, adp_batching_wait_iters=0, adp_timeout_iters=60)
    # 8 ranks, 0.1 arrivals per rank and iteration: 0.8 over the ranks. Each arrival lands on the rank whose request
    # finished, a random one, so after the first the other 7 ranks fill as a coupon collector's: 8 x (1 + 1/2 + ... +
    # 1/7) = 8 x 363/140 = 20.742857 arrivals, 25.928571 iterations (< 60): the first waits that, n = 1 + 20.742857
    # = 21.742857, mean 25.928571 x (1 + 20.742857/2) / 21.742857 = 13.56054
    assert float(adp_balance_iterations(eng, 8, 0.1)) == pytest.approx(13.56054, rel=1e-5)
    # TensorRT-LLM's defaults (timeout 50, then 10 iterations of batching wait), 4 ranks at 0.05: X = 0.2, the
    # other 3 ranks fill after 4 x 11/6 = 7.3333 arrivals, 36.6667 iterations; n = 8.3333, the group's mean
    # 36.6667 x (1 + 7.3333/2) / 8.3333 = 20.5333; all of them wait 10 more and the 0.2 x 10 = 2 arriving during
    # those wait 5 on average: (8.3333 x 30.5333 + 2 x 5) / 10.3333 = 25.59140
    default = replace(engines.preset("trtllm", H100), adp_balance=True)
    assert float(adp_balance_iterations(default, 4, 0.05)) == pytest.approx(25.59140, rel=1e-5)
    # slow arrivals: the 60-iteration timeout ends the wait (20.74 arrivals would take 20.74 / 0.08 = 259)
    assert float(adp_balance_iterations(eng, 8, 0.01)) == pytest.approx(60 * (1 + 4.8 / 2) / 5.8)
    assert adp_balance_iterations(eng, 1, 0.035) == 0.0  # one rank: nothing to balance
    assert adp_balance_iterations(engines.preset("trtllm", H100), 8, 0.035) == 0.0  # TensorRT-LLM's default: off
    with pytest.raises(WorkloadError, match="adp_timeout_iters"):
        replace(eng, adp_timeout_iters=-1)


def test_inferencex_attention_dp_rows_balance_as_their_scripts_set():
    # gptoss_fp4_b200_trt_slurm.sh: attention_dp_config enable_balance: true (TensorRT-LLM's other defaults);
    # dsr1_*_trt_slurm.sh: batching_wait_iters: 0, enable_balance: true, timeout_iters: 60
    adp = _row(tp_size=1, attention_dp_size=8, moe_ep_size=8)
    assert dict(to_run(adp).engine_settings)["adp_timeout_iters"] == 60
    assert adp_balance(adp, to_run(adp).layout.dp, True) == {
        "adp_balance": True, "adp_batching_wait_iters": 0, "adp_timeout_iters": 60}  # fmt: skip
    gpt = _row(model_path="openai/gpt-oss-120b", precision="fp4", tp_size=1, attention_dp_size=4, moe_ep_size=4)
    assert adp_balance(gpt, to_run(gpt).layout.dp, True) == {"adp_balance": True}
    # gptoss_fp4_h200_trt_slurm.sh (f6a9d0b6) and gptoss_fp4_h200_trt.sh (d8cc8977) write no attention_dp_config
    assert adp_balance({**gpt, "system": "h200_sxm"}, to_run(gpt).layout.dp, True) == {}
    assert adp_balance(_row(), to_run(_row()).layout.dp, True) == {}  # TP 8, no attention-DP
    launcher = _row(tp_size=1, attention_dp_size=8, moe_ep_size=8, source_notes="silicon_concurrency=64")
    assert "adp_balance" not in dict(to_run(launcher).engine_settings)  # not InferenceX: its generator's settings


def test_inferencex_deepseek_rows_of_the_mtp_sweep_run_mtp():
    # SemiAnalysisAI/InferenceX bf3456727 (#392, merged 2026-01-14 22:26 UTC): its perf-changelog entry names only
    # dsr1-fp4-b200-trt-mtp, dsr1-fp8-b200-trt-mtp, dsr1-fp8-h200-trt-mtp (image 1.1.0rc2.post2), whose sweep the rows
    # measured that day are; dsr1_fp8_h200_trt_mtp_slurm.sh: MTP=3 (1 with DP_ATTENTION), MAX_BATCH_SIZE=CONC
    # (CONC/TP with it), MAX_NUM_TOKENS=((MTP+1)*MAX_BATCH_SIZE+ISL+64+63)/64*64
    notes = "model=DeepSeek-R1; silicon_concurrency={}; measured={}; wip=False; image=nvcr.io#nvidia/tensorrt-llm/"
    notes += "release:1.1.0rc2.post2"
    plain = _row(system="h200_sxm", batch_size=4, source_notes=notes.format(4, "2026-01-14T22:26:21Z"))
    run = to_run(plain)
    assert run.speculation is not None and run.speculation.k == 3
    # (4 x 4 + 1024 + 127) // 64 = 1167 // 64 = 18 -> 1152 tokens
    assert dict(run.engine_settings)["max_num_batched_tokens"] == 1152
    adp = _row(system="h200_sxm", tp_size=1, attention_dp_size=8, moe_ep_size=8, batch_size=16,
               source_notes=notes.format(128, "2026-01-14T00:00:00.000Z"))  # fmt: skip
    run = to_run(adp)
    assert run.speculation is not None and run.speculation.k == 1
    # CONC / TP = 128 / 8 = 16, MTP 1: (2 x 16 + 1024 + 127) // 64 = 1183 // 64 = 18 -> 1152 tokens
    assert dict(run.engine_settings)["max_num_batched_tokens"] == 1152
    # the full sweep of 2026-01-28 (e28c038f8) ran the plain configurations too: no MTP assumed
    later = _row(system="h200_sxm", batch_size=4, source_notes=notes.format(64, "2026-01-28T06:18:44Z"))
    assert to_run(later).speculation is None


def test_arrivals_until_every_attention_dp_rank_holds_a_prompt():
    # closed forms: 1 + D x (1 + 1/2 + ... + 1/(D - 1))
    assert arrivals_to_cover_ranks(2) == pytest.approx(3.0)
    assert arrivals_to_cover_ranks(4) == pytest.approx(1 + 4 * 11 / 6)
    # against drawing ranks at random until each of 8 has been hit
    rng = np.random.default_rng(0)
    counts = []
    for _ in range(20000):
        seen, k = set(), 0
        while len(seen) < 8:
            seen.add(int(rng.integers(8)))
            k += 1
        counts.append(k)
    assert arrivals_to_cover_ranks(8) == pytest.approx(float(np.mean(counts)), rel=0.01)
