"""Disaggregated runs as their benchmark configurations ran them: the recipe's pools, decode slots and MTP, and
the closed loop's wait for a decode slot."""

import pytest
from test_serving_runs import HEADER, _csv

from llmath import Workload
from llmath.deploy.bench_client import INFERENCEX, INFERENCEX_MTP, SA_BENCH
from llmath.deploy.disagg import decode_slot_wait, first_token_decode_s, serve_disaggregated
from llmath.errors import LayoutError, WorkloadError
from llmath.measure.disagg_recipes import (
    COLUMNS,
    CONCURRENCY_OPEN,
    POOLS,
    POOLS_MTP,
    POOLS_OPEN,
    SPEC_OPEN,
    mtp_speculation,
    recipe_for,
    timed_copies,
)
from llmath.measure.run_record import Layout
from llmath.measure.serving_runs import to_run, validate_runs

# A row as serving_runs.csv stores SemiAnalysis InferenceX's TensorRT-LLM DeepSeek-R1 run on H100 at 6 clients
H100_NOTES = (
    "model=DeepSeek-R1; silicon_concurrency=6; measured=2026-02-08T01:24:15Z; wip=False; "
    "image=nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post3"
)


def _h100_row(**kw) -> dict:
    r = dict.fromkeys(HEADER, "")
    r.update(id="h100", backend="trtllm", backend_version="0.8.1.post3", model_path="deepseek-ai/DeepSeek-R1",
             system="h100_sxm", precision="fp8", mode="disagg", isl="1024", osl="1024", gemm_quant_mode="fp8",
             moe_quant_mode="fp8", prefill_tp_size="16", prefill_pp_size="1", prefill_attention_dp_size="1",
             prefill_moe_tp_size="1", prefill_moe_ep_size="16", decode_tp_size="16", decode_pp_size="1",
             decode_attention_dp_size="1", decode_moe_tp_size="1", decode_moe_ep_size="16",
             silicon_ttft_ms="12345", silicon_tpot_ms="14", source_notes=H100_NOTES)  # fmt: skip
    r.update({k: str(v) for k, v in kw.items()})
    return r


def _inferencex(concurrency: int, measured: str, image: str, **kw) -> dict:
    """An InferenceX row's provenance as serving_runs.csv stores it, on the H100 row's columns unless given."""
    notes = f"model=DeepSeek-R1; silicon_concurrency={concurrency}; measured={measured}; wip=False; image={image}"
    return _h100_row(source_notes=notes, **kw)


def test_slot_wait_is_littles_law_on_the_decode_slots():
    # 6 clients, 3 slots each held 7 s: the pool finishes 3 / 7 requests/s, a client's cycle is 6 / (3 / 7) = 14 s,
    # of which 7 s decode: 7 s before the first token
    assert decode_slot_wait(6, 3, 7.0) == pytest.approx(7.0)
    # 924 clients on 768 slots held 55.8 s: (924 / 768 − 1) · 55.8 = 0.203125 · 55.8 = 11.334 s
    assert decode_slot_wait(924, 768, 55.8) == pytest.approx(11.334375)
    assert decode_slot_wait(64, 64, 9.0) == 0.0  # every request has a slot
    assert decode_slot_wait(8, 64, 9.0) == 0.0


def test_decode_max_batch_makes_the_extra_clients_wait_for_a_slot():
    w = Workload(prompt=1024, gen=1024, concurrency=6)
    pools = dict(prefill={"tp": 8}, decode={"tp": 8, "workers": 3})
    free = serve_disaggregated("llama-3.1-8b", "h100-sxm", workload=w, engine="trtllm", **pools)
    capped = serve_disaggregated("llama-3.1-8b", "h100-sxm", workload=w, engine="trtllm", decode_max_batch=1, **pools)
    # 3 workers of one slot each: the 6 clients decode 3 at a time, so each waits (6 / 3 − 1) = 1 whole decode
    # of its 1023 steps before its first token (the decode batch is 1 either way: 6 / 3 workers = 2 > 1 slot), and
    # then TensorRT-LLM's generation server answers after 2.5 more steps (half a step to its next fetch, the step
    # that starts the KV receive, the first generation step: PyExecutor's loop)
    assert capped["decode_batch"] == 1
    assert capped["ttft_s"] == pytest.approx((1023 + 2.5) * capped["tpot_s"], rel=1e-9)
    assert free["ttft_s"] < 0.1 * capped["ttft_s"]
    with pytest.raises(LayoutError, match="decode_max_batch=0"):
        serve_disaggregated("llama-3.1-8b", "h100-sxm", workload=w, decode_max_batch=0, **pools)


def test_mtp_acceptance_is_the_chain_of_per_token_acceptances():
    # TensorRT-LLM tech blog 1, table "Autoregressive MTP Layers" (DeepSeek-R1, 8 B200, strict acceptance):
    # 1 draft -> 1.92 tokens per round, 3 drafts -> 2.82. The chain 1 + p·(1 + q + … + q^(k−1)) with p = 0.92
    # and q = 0.608: 1 + 0.92 = 1.92; 1 + 0.92 · (1 + 0.608 + 0.369664) = 1 + 0.92 · 1.977664 = 2.819451
    spec = mtp_speculation(3)
    assert (spec.method, spec.k, spec.acceptance) == ("mtp", 3, pytest.approx(2.82, abs=0.001))
    assert mtp_speculation(1).acceptance == pytest.approx(1.92)
    # the DeepSeek-V3 report's 85–90% second-token acceptance holds p = 0.92 to within 2–8%; the nebius model
    # card's 3.20 for 7 drafts: 1 + 0.92 · (1 − 0.608^7) / (1 − 0.608) = 1 + 0.92 · 2.4763 = 3.278, within 3%
    assert mtp_speculation(7).acceptance == pytest.approx(3.20, rel=0.03)


def test_the_h100_run_at_six_clients_finds_its_configuration():
    # InferenceX .github/configs/nvidia-master.yaml at 66d6a351 (2026-02-07 20:24 -05:00, the last version before
    # the row's 2026-02-08T01:24:15Z), dsr1-fp8-h100-dynamo-trt, 1024/1024, conc 6: an "mtp" entry (recipe
    # ctx1_gen3_tep16_batch1_eplb0_mtp3) and an stp one (ctx1_gen3_tep16_batch1_eplb0_mtp0), both 1 prefill worker
    # TP 16 EP 16 with attention-DP and 3 decode workers TP 16 EP 16 without, decode batch 1
    found = recipe_for(_h100_row(), 6)
    assert (found.prefill, found.decode, found.decode_max_batch) == ((1, 16, 16, True), (3, 16, 16, False), 1)
    assert (found.group, found.draft_tokens) == (SPEC_OPEN, None)  # with and without MTP: left open
    run = to_run(_h100_row())
    assert run.prefill == Layout(1, 1, 16, 16, 1)  # attention-DP over the 16 GPUs
    assert run.decode == Layout(16, 1, 1, 16, 3)
    assert dict(run.engine_settings) == {"eager_prefill": True, "decode_max_batch": 1}
    assert to_run(_h100_row(), recipe=False).decode == Layout(16, 1, 1, 16, 1)  # the columns: one worker


def test_rows_without_a_configuration_keep_their_columns():
    assert recipe_for(_h100_row(source_notes="silicon_concurrency=6"), 6).group == COLUMNS  # no date, no image
    assert recipe_for(_h100_row(), 7).group == COLUMNS  # no entry at 7 clients
    # aiconfigurator's own runs: benchmarked at several concurrencies, the row records none
    own = _h100_row(source_notes="gtl_job_id=1; measured=2026-01-23; image=nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0")
    assert recipe_for(own, 6).group == CONCURRENCY_OPEN


def test_validation_groups_disaggregated_rows_by_what_their_recipe_settles(tmp_path):
    f = _csv(tmp_path, [_h100_row(), _h100_row(id="bare", source_notes="silicon_concurrency=6")])
    rep = validate_runs(f, by=("engine",))
    assert {r["id"]: r["recipe"] for r in rep["rows"]} == {"h100": SPEC_OPEN, "bare": COLUMNS}
    groups = rep["summary"]["disagg"]["groups"]["recipe"]
    assert (groups[SPEC_OPEN]["n"], groups[COLUMNS]["n"]) == (1, 1)
    # the recipe's 3 single-slot decode workers make 3 of the 6 clients wait a whole decode (1023 steps)
    h100 = next(r for r in rep["rows"] if r["id"] == "h100")
    assert h100["predicted_ttft_s"] >= 1023 * h100["predicted_tpot_s"]


def test_an_h200_recipe_runs_its_clients_per_decode_worker():
    # InferenceX nvidia-master.yaml at f316a0ef (2026-03-23 13:00:03Z), dsr1-fp8-h200-dynamo-trt 1024/1024: the
    # "mtp" entry with conc-list [128] names recipes/trtllm/h200/1k1k/mtp/c128_ctx1_gen7_dep8_batch128_eplb0_mtp3,
    # whose benchmark runs 128 · 7 = 896 clients (srt-slurm 4893f83e: concurrencies "896"); prefill 1 worker TP 8
    # EP 8 with attention-DP, decode 7 workers TP 8 EP 8 with attention-DP, batch 128, 3 MTP drafts
    row = _inferencex(896, "2026-03-23T13:00:07Z", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post1",
                      system="h200_sxm", backend_version="0.8.1.post1", prefill_tp_size=8, prefill_moe_ep_size=8,
                      decode_tp_size=8, decode_moe_ep_size=8)  # fmt: skip
    found = recipe_for(row, 896)
    assert (found.group, found.draft_tokens, found.decode_max_batch) == (POOLS_MTP, 3, 128)
    assert (found.prefill, found.decode) == ((1, 8, 8, True), (7, 8, 8, True))
    # 7 workers × 8 attention-DP ranks × 128 = 7168 slots ≥ 896 clients: no slot wait; MTP with 3 drafts decodes
    run = to_run(row)
    assert dict(run.engine_settings) == {"eager_prefill": True, "decode_max_batch": 128, "draft_tokens": 3}
    assert run.decode == Layout(1, 1, 8, 8, 7)


def test_the_columns_pick_among_configurations_with_different_pools():
    # InferenceX nvidia-master.yaml at 0aae52d4 (2026-02-06 09:21 -08:00), dsr1-fp8-h200-dynamo-sglang 1024/1024
    # lists 128 clients in three searches without MTP: 1 prefill + 1 decode worker of TP 8 (EP 1), 1 + 9 of TP 8
    # (EP 1), and 1 + 6 with TP 8, EP 8 and attention-DP; a row stating EP 8 in both pools is the third
    row = _inferencex(128, "2026-02-07T00:00:00.000Z", "lmsysorg/sglang:v0.5.8.post1-cu130", backend="sglang",
                      system="h200_sxm", prefill_tp_size=8, prefill_moe_ep_size=8, decode_tp_size=8,
                      decode_moe_ep_size=8)  # fmt: skip
    found = recipe_for(row, 128)
    assert (found.group, found.draft_tokens) == (POOLS, 0)
    assert (found.prefill, found.decode) == ((1, 8, 8, True), (6, 8, 8, True))
    # stating EP 1 leaves two (1 or 9 decode workers): not settled
    assert recipe_for({**row, "prefill_moe_ep_size": "1", "decode_moe_ep_size": "1"}, 128).group == POOLS_OPEN


def test_a_run_before_its_entry_was_merged_takes_the_entry_as_merged(tmp_path):
    # InferenceX efe2f531 (2026-01-29 15:52:13Z, "DSR1 FP4 B200 Dynamo TRT (#588)") adds dsr1-fp4-b200-dynamo-trt;
    # 1024/1024 at 1214 clients: MTP (recipe ctx1_gen2_dep8_batch64_eplb0_mtp2), 1 prefill worker TP 4 EP 4 with
    # attention-DP, 2 decode workers TP 8 EP 8 with attention-DP, batch 64. A row stamped 2026-01-29T00:00Z
    # predates it: no version before lists the entry, so the merged one is the run's
    row = _inferencex(1214, "2026-01-29T00:00:00.000Z", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post1",
                      system="b200_sxm", precision="fp4", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4",
                      backend_version="0.8.1.post1")  # fmt: skip
    found = recipe_for(row, 1214)
    assert (found.group, found.draft_tokens, found.decode_max_batch) == (POOLS_MTP, 2, 64)
    assert (found.prefill, found.decode) == ((1, 4, 4, True), (2, 8, 8, True))
    # 2 workers × 8 ranks × 64 = 1024 slots for 1214 clients: (1214 / 1024 − 1) = 18.6% of a decode is waited
    pred = validate_runs(_csv(tmp_path, [row]), by=("engine",))["rows"][0]
    assert pred["predicted_ttft_s"] >= (1214 / 1024 - 1) * 1023 * pred["predicted_tpot_s"]


def test_the_decode_server_answers_after_its_first_steps():
    # a step of a speculative round yields its acceptance length: 1.5 steps of 4 ms TPOT at 2.5 tokens a round are
    # 1.5 · 4 · 2.5 = 15 ms; one token a step: 2.5 steps of 10 ms = 25 ms
    assert first_token_decode_s(1.5, 0.004, 2.5) == pytest.approx(0.015)
    assert first_token_decode_s(2.5, 0.010, 1.0) == pytest.approx(0.025)
    w = Workload(prompt=1024, gen=256, concurrency=4)
    pools = dict(prefill={"tp": 8}, decode={"tp": 8})
    for engine, steps in (("trtllm", 2.5), ("sglang", 1.5)):  # their decode loops (data/engines.json)
        r = serve_disaggregated("llama-3.1-8b", "h100-sxm", workload=w, engine=engine, **pools)
        assert r["first_token_decode_s"] == pytest.approx(steps * r["tpot_s"], rel=1e-12)
    vllm = serve_disaggregated("llama-3.1-8b", "h100-sxm", workload=w, engine="vllm", **pools)
    assert vllm["first_token_decode_s"] == 0.0  # no decode-loop count stated for vLLM


def test_sglang_mtp_entries_draft_as_their_recipes():
    # InferenceX dsr1-fp8-b200-dynamo-sglang-mtp 1024/1024 lists 8 clients only under MTP (1 prefill + 3 decode
    # workers of TP 8, EP 8), naming recipes/b200-fp8/1k1k/mtp/low-latency-tep8-1p3d.yaml, which decodes with
    # EAGLE, speculative-num-steps 2, topk 1, num-draft-tokens 3: a chain of 2 drafts
    row = _inferencex(8, "2026-03-18T21:01:05Z", "lmsysorg/sglang:v0.5.8.post1-cu130-amd64", backend="sglang",
                      system="b200_sxm", prefill_tp_size=8, prefill_moe_ep_size=8, decode_tp_size=8,
                      decode_moe_ep_size=8)  # fmt: skip
    found = recipe_for(row, 8)
    assert (found.group, found.draft_tokens) == (POOLS_MTP, 2)
    assert (found.prefill, found.decode) == ((1, 8, 8, False), (3, 8, 8, False))


def test_a_recipe_file_overrides_its_names_batch():
    # ishandhanani/srt-slurm recipes/trtllm/b200-fp8/1k1k/stp/ctx1_gen3_tp8_batch1024_eplb0_mtp0_4.yaml (its copy at
    # qiching/srt-slurm 5063eb43) sets trtllm_config.decode.max_batch_size: 1 despite "batch1024" in its name: 3
    # decode workers of one slot for 4 clients, so a client waits (4 / 3 − 1) = 1/3 of a 1023-step decode
    row = _inferencex(4, "2026-03-18T00:00:00.000Z", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2",
                      system="b200_sxm", backend_version="0.8.1.post2", prefill_tp_size=8, prefill_moe_ep_size=8,
                      decode_tp_size=8, decode_moe_ep_size=8)  # fmt: skip
    found = recipe_for(row, 4)
    assert (found.group, found.decode_max_batch, found.decode) == (POOLS, 1, (3, 8, 1, False))


def test_a_prefill_server_launched_eagerly_takes_its_kernels_host_time():
    # an eager DeepSeek-V3 extend of a few new tokens is the host's launches (the GPU work of 16 tokens is a
    # fraction of it): the 1,260 kernels SGLang launches for it × SGLang's host time per launch on H200
    # (aiconfigurator's eager timing of SGLang's DeepSeek-V3 attention module on H200, 0.609 ms over its 8
    # launches) = 95.9 ms;
    # SGLang's prefill server runs its extend passes without a graph (its preset's eager_prefill)
    w = Workload(prompt=16, gen=64, concurrency=1)
    pools = dict(prefill={"tp": 8}, decode={"tp": 8})
    sglang = serve_disaggregated("deepseek-v3", "h200", workload=w, engine="sglang", **pools)
    assert sglang["prefill_pass_s"] == pytest.approx(1260 * 0.609e-3 / 8, rel=0.01)
    graphed = serve_disaggregated("deepseek-v3", "h200", workload=w, engine="sglang", eager_prefill=False, **pools)
    assert graphed["prefill_pass_s"] < 0.5 * sglang["prefill_pass_s"]
    assert graphed["ttft_s"] < sglang["ttft_s"]
    # Llama-3-8B's prefill lists 32 layers × 14 operators; the module code launches 9 of them per layer (norm, one
    # QKV GEMM, rotary, attention, o, norm, one gate-up GEMM, activation, down: the residual adds run inside the
    # RMSNorms) + embedding, final norm and LM head = 291, at TensorRT-LLM's 65.6 us each (data/engines.json) =
    # 19.09 ms; its preset (the TensorRT engine backend) has no such floor
    small = dict(prefill={"tp": 1}, decode={"tp": 1})
    eager = serve_disaggregated("llama-3-8b", "h100-sxm", workload=w, engine="trtllm", eager_prefill=True, **small)
    assert eager["prefill_pass_s"] == pytest.approx((32 * 9 + 3) * 65.6e-6, rel=1e-6)
    preset = serve_disaggregated("llama-3-8b", "h100-sxm", workload=w, engine="trtllm", **small)
    assert preset["prefill_pass_s"] < 0.5 * eager["prefill_pass_s"]
    with pytest.raises(LayoutError, match="eager_prefill='yes' must be True, False or None"):
        serve_disaggregated("llama-3-8b", "h100-sxm", workload=w, engine="trtllm", eager_prefill="yes", **small)


def test_the_dynamo_context_servers_of_tensorrt_llm_rows_run_eagerly():
    # Dynamo's TensorRT-LLM workers run the PyTorch backend, their context servers with cuda_graph_config: null
    # (ishandhanani/srt-slurm recipes/trtllm/*/ctx*.yaml at fe2cd905): a TensorRT-LLM row's prefill pool is eager
    assert dict(to_run(_h100_row(), recipe=False).engine_settings) == {"eager_prefill": True}
    sglang = to_run(_h100_row(backend="sglang", backend_version="0.5.8"), recipe=False)
    assert "eager_prefill" not in dict(sglang.engine_settings)  # SGLang's preset already runs its prefill eagerly


def test_entries_that_differ_settle_the_layout_they_agree_on():
    # InferenceX nvidia-master.yaml at 593fb431 (2026-03-18 21:01:02Z, the last version before the row's
    # 21:01:05Z), DeepSeek-R1 FP8 B200 Dynamo-SGLang 1024/1024 at 1024 clients: 1 prefill + 5 decode workers
    # (max-tpt-dep8-1p5d), with MTP 2 + 5 (max-tpt-dep8-2p5d) and 1 + 2 (max-tpt-dep8-1p2d); every pool TP 8, EP 8
    # with attention-DP. The worker counts differ (the fewest: 1 prefill, 2 decode), the layouts do not
    row = _inferencex(1024, "2026-03-18T21:01:05Z", "lmsysorg/sglang:v0.5.8.post1-cu130-amd64", backend="sglang",
                      system="b200_sxm", prefill_tp_size=8, prefill_moe_ep_size=8, decode_tp_size=8,
                      decode_moe_ep_size=8)  # fmt: skip
    found = recipe_for(row, 1024)
    assert (found.group, found.prefill, found.decode) == (POOLS_OPEN, (1, 8, 8, True), (2, 8, 8, True))
    assert (found.decode_max_batch, found.draft_tokens) == (None, None)  # no agreed slots, no speculation
    run = to_run(row)
    assert (run.prefill, run.decode) == (Layout(1, 1, 8, 8, 1), Layout(1, 1, 8, 8, 2))  # attention-DP over 8 GPUs
    assert to_run(row, recipe=False).decode == Layout(8, 1, 1, 8, 1)  # the columns: one TP 8 pool


def test_mtp_acceptance_follows_the_prompts_the_client_sends():
    # srt-slurm's sa-bench (ishandhanani/srt-slurm 2ef1b6db, scripts/sa-bench/bench.sh) passes --use-chat-template,
    # so its random tokens accept as real prompts do (InferenceX pull request #649: about 2.50 tokens a round on
    # chat-templated random tokens and on MT-Bench alike): TensorRT-LLM's published 2.82 with 3 drafts
    assert mtp_speculation(3, SA_BENCH).acceptance == pytest.approx(2.82, abs=0.001)
    assert mtp_speculation(3, INFERENCEX_MTP).acceptance == pytest.approx(2.82, abs=0.001)
    # InferenceX's plain launch scripts send raw random tokens, which a draft accepts more of (about 3.55 in #649)
    # at no published value per draft count: refused, naming the rule and what to pass instead
    with pytest.raises(WorkloadError, match="raw random tokens.*chat_template=True"):
        mtp_speculation(3, INFERENCEX)


def test_a_disaggregated_mtp_row_carries_its_speculation():
    # the SGLang B200 row at 8 clients (an MTP-only entry, 2 drafts): the run decodes speculatively at the chain's
    # 1 + 0.92 · (1 + 0.608) = 2.479 tokens a round, and validation reports it per row
    row = _inferencex(8, "2026-03-18T21:01:05Z", "lmsysorg/sglang:v0.5.8.post1-cu130-amd64", backend="sglang",
                      system="b200_sxm", prefill_tp_size=8, prefill_moe_ep_size=8, decode_tp_size=8,
                      decode_moe_ep_size=8)  # fmt: skip
    run = to_run(row)
    assert (run.speculation.method, run.speculation.k) == ("mtp", 2)
    assert run.speculation.acceptance == pytest.approx(1 + 0.92 * 1.608)
    assert to_run(_h100_row()).speculation is None  # with and without MTP listed: left open


def test_the_disaggregated_client_is_sa_bench_as_srt_slurm_runs_it():
    # bench.sh at 2ef1b6db: --random-range-ratio 0.8 (lengths uniform integers in [⌊0.8·L⌋, L]: 819…1024 for
    # 1024), --num-warmups 2·C awaited before the run, one semaphore of C over the requests, --use-chat-template
    lengths = SA_BENCH.lengths(1024)
    assert (lengths[0][0], lengths[-1][0], len(lengths)) == (819, 1024, 206)
    assert (SA_BENCH.warmups_per_slot, SA_BENCH.shared_list, SA_BENCH.chat_template) == (2.0, True, True)
    assert not INFERENCEX.chat_template  # the plain InferenceX launch scripts send the raw tokens


def _sglang_h100_c1(measured: str, ttft: str = "211.09139260370284") -> dict:
    # serving_runs.csv's SGLang H100 run at one client (1024/1024): TP 16 prefill and decode pools
    image = "lmsysorg/sglang:v0.5.8-cu130"
    notes = f"model=DeepSeek-R1; silicon_concurrency=1; measured={measured}; wip=False; image={image}"
    return _h100_row(backend="sglang", backend_version="0.5.8", moe_quant_mode="fp8_block", prefill_moe_ep_size=1,
                     decode_moe_ep_size=1, prefill_moe_tp_size=16, decode_moe_tp_size=16, silicon_ttft_ms=ttft,
                     silicon_tpot_ms="9.13351670107167", source_notes=notes)  # fmt: skip


def test_a_run_stamped_with_its_day_takes_its_timed_copys_time():
    timed = _sglang_h100_c1("2026-02-13T03:10:06Z")
    day = _sglang_h100_c1("2026-02-13T00:00:00.000Z")
    other = _sglang_h100_c1("2026-02-13T00:00:00.000Z", ttft="405.2")  # another run the same day: no timed copy
    elsewhere = _sglang_h100_c1("2026-02-14T00:00:00.000Z")  # the same values a day later: not that run's copy
    out = timed_copies([timed, day, other, elsewhere])
    assert "measured=2026-02-13T03:10:06Z;" in out[1]["source_notes"]
    assert [o["source_notes"] for o in (out[0], out[2], out[3])] == [
        r["source_notes"] for r in (timed, other, elsewhere)
    ]
    # InferenceX's master file changed at 2026-02-12 22:10 −05:00 (03:10 UTC on the 13th): the version before lists
    # the plain SGLang H100 configurations at one client, that one only their MTP ones (2 drafts). The day alone
    # read the plain one; with its copy's time both copies read the same run
    assert recipe_for(day, 1).group == POOLS
    assert (recipe_for(out[1], 1).group, recipe_for(out[1], 1).draft_tokens) == (POOLS_MTP, 2)
    assert recipe_for(timed, 1).group == POOLS_MTP


def _sglang_b200_fp4(concurrency: int, **kw) -> dict:
    """InferenceX's SGLang DeepSeek-R1 FP4 B200 8192/1024 run at ``concurrency`` clients (the non-MTP image, 2026-02-11
    01:17:02Z, when nvidia-master.yaml 46e0b5ff was merged) on the columns serving_runs.csv states for it unless given:
    prefill TP 4, attention-DP 1, EP 4; decode TP 8, attention-DP 1, moe-TP 2 × EP 4."""
    return _inferencex(concurrency, "2026-02-11T01:17:02Z", "lmsysorg/sglang:v0.5.8.post1-cu130-runtime",
                       **{"backend": "sglang", "backend_version": "0.5.8.post1", "system": "b200_sxm",
                          "precision": "fp4", "isl": 8192, "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4",
                          "prefill_tp_size": 4, "prefill_moe_ep_size": 4, "decode_tp_size": 8,
                          "decode_moe_tp_size": 2, "decode_moe_ep_size": 4, **kw})  # fmt: skip


def test_columns_that_misstate_the_expert_split_still_pick_their_configuration():
    # InferenceX nvidia-master.yaml at 46e0b5ff, dsr1-fp4-b200-dynamo-sglang 8192/1024 lists 4 clients twice:
    # CONFIG_FILE=recipes/b200-fp4/8k1k/stp/low-latency-dep4-2p-tep8-5d.yaml (prefill num-worker 2, tp 4, ep 4,
    # dp-attn true; decode num-worker 5, tp 8, ep 8, dp-attn false) and low-latency-tp4-1p-tp8-1d.yaml (1 + 1, tp 4 /
    # tp 8, ep 1). The first file (NVIDIA/srt-slurm 5063eb43) runs prefill tensor-parallel-size 4, data-parallel-size
    # 4, expert-parallel-size 4, enable-dp-attention true and decode tensor-parallel-size 8, expert-parallel-size 8,
    # max-running-requests 512. The row states the decode's EP as moe-TP 2 × EP 4, so no entry's EP matches exactly;
    # its pools' GPUs and their split experts (EP > 1 in both) are the first configuration's
    found = recipe_for(_sglang_b200_fp4(4), 4)
    assert (found.group, found.draft_tokens, found.decode_max_batch) == (POOLS, 0, 512)
    assert (found.prefill, found.decode) == ((2, 4, 4, True), (5, 8, 8, False))
    assert to_run(_sglang_b200_fp4(4)).prefill == Layout(1, 1, 4, 4, 2)  # 4 attention-DP ranks, EP 4, 2 workers
    # columns stating EP 1 in both pools (moe-TP 8 on the decode) are the tensor-parallel configuration
    tp = recipe_for(_sglang_b200_fp4(4, prefill_moe_ep_size=1, decode_moe_tp_size=8, decode_moe_ep_size=1), 4)
    assert (tp.group, tp.prefill, tp.decode) == (POOLS, (1, 4, 1, False), (1, 8, 1, False))


def test_an_sglang_recipe_file_sets_the_requests_a_decode_rank_admits():
    # NVIDIA/srt-slurm 5063eb43 recipes/h200/1k1k/bs256-1p6d-dep.yaml: decode tp-size 8, dp-size 8, ep-size 8,
    # enable-dp-attention true, max-running-requests 512, which SGLang's schedulers split over the 8 attention-DP
    # ranks: 512 // 8 = 64 a rank (InferenceX nvidia-master.yaml names it for dsr1-fp8-h200-dynamo-sglang 1024/1024
    # at 128-2048 clients: 1 prefill + 6 decode workers, TP 8, EP 8, attention-DP)
    row = _inferencex(2048, "2026-02-07T00:00:00.000Z", "lmsysorg/sglang:v0.5.8.post1-cu130", backend="sglang",
                      system="h200_sxm", prefill_tp_size=8, prefill_moe_ep_size=8, decode_tp_size=8,
                      decode_moe_ep_size=8)  # fmt: skip
    found = recipe_for(row, 2048)
    assert (found.group, found.decode, found.decode_max_batch) == (POOLS, (6, 8, 8, True), 64)
    # recipes/h200/8k1k/bs128-1p1d-dep-mtp.yaml: max-running-requests 192 over dp-size 8 = 24 a rank, EAGLE with
    # speculative-num-steps 2 (topk 1): 2 drafts
    later = _inferencex(512, "2026-02-07T22:52:25Z", "lmsysorg/sglang:v0.5.8.post1-cu130", backend="sglang",
                        system="h200_sxm", isl=8192, prefill_tp_size=8, decode_tp_size=8)  # fmt: skip
    mtp = recipe_for(later, 512)
    assert (mtp.group, mtp.decode, mtp.decode_max_batch, mtp.draft_tokens) == (POOLS_MTP, (1, 8, 8, True), 24, 2)


def test_an_sglang_recipe_drafting_one_token_is_read_so():
    # NVIDIA/srt-slurm 5063eb43 recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p2d.yaml decodes with speculative-num-steps
    # 1, speculative-num-draft-tokens 2 (the other SGLang MTP recipes 2 and 3), max-running-requests 512 over dp-size 8
    from llmath.measure.disagg_recipes import _table

    found = {(e["draft_tokens"], e["decode_max_batch"]) for e in _table()["entries"]
             if (e["framework"], e["system"], e["precision"], e["isl"], e["speculation"], e["decode"])
             == ("dynamo-sglang", "b200", "fp8", 1024, "mtp", [2, 8, 8, True])}  # fmt: skip
    assert found == {(1, 64)}
