"""``llmath validate --runs``: how a measured-run row is read, and the command end to end on a small CSV."""

import csv
import json
from dataclasses import replace

import pytest
from helpers import SERVING_RUNS_HEADER, run_cli

from llmath import Workload
from llmath.measure.serving_runs import (
    harness_budget,
    harness_speculation,
    harness_warmed,
    precision,
    predict_run,
    to_run,
    validate_runs,
)
from llmath.measure.sglang_launchers import recv_interval as harness_recv_interval
from llmath.model import registry

HEADER = SERVING_RUNS_HEADER.split(",")


def _row(**kw) -> dict:
    r = dict.fromkeys(HEADER, "")
    r.update(id="r", backend="trtllm", model_path="deepseek-ai/DeepSeek-R1", system="b200_sxm", precision="fp4",
             mode="agg", isl="1024", osl="1024", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4", batch_size="8",
             tp_size="8", pp_size="1", attention_dp_size="1", moe_tp_size="1", moe_ep_size="8",
             silicon_ttft_ms="100", silicon_tpot_ms="10", source_notes="silicon_concurrency=8")  # fmt: skip
    r.update({k: str(v) for k, v in kw.items()})
    return r


def _csv(tmp_path, rows: list[dict]):
    f = tmp_path / "runs.csv"
    with f.open("w", newline="") as fh:
        w = csv.DictWriter(fh, HEADER)
        w.writeheader()
        w.writerows(rows)
    return f


LLAMA_8B_H100 = dict(model_path="meta-llama/Llama-3.1-8B-Instruct", system="h100_sxm", precision="",
                     gemm_quant_mode="", moe_quant_mode="", tp_size=1, moe_ep_size=1)  # fmt: skip


def test_mis_encoded_layout_is_divided_by_ep():
    # the validation README: tp_size 64 = moe_tp 8 × moe_ep 8 on one 8-GPU node reads as 64 / 8 = 8 GPUs, EP 8
    run = to_run(_row(tp_size=64, moe_tp_size=8, moe_ep_size=8))
    assert (run.layout.tp, run.layout.dp, run.layout.ep, run.layout.gpus) == (8, 1, 8, 8)
    assert run.assumed
    run = to_run(_row(tp_size=1, attention_dp_size=16, moe_tp_size=4, moe_ep_size=4))  # 16 / 4 = 4 DP ranks
    assert (run.layout.tp, run.layout.dp, run.layout.ep) == (1, 4, 4)
    run = to_run(_row(tp_size=4, attention_dp_size=4, moe_tp_size=1, moe_ep_size=16))  # consistent: 16 GPUs
    assert (run.layout.gpus, run.layout.ep, run.assumed) == (16, 16, ())


def test_concurrency_from_notes_else_batch_times_dp():
    assert to_run(_row(batch_size=64, attention_dp_size=4, source_notes="silicon_concurrency=256")).concurrency == 256
    assert to_run(_row(batch_size=64, tp_size=1, attention_dp_size=4, source_notes="")).concurrency == 64 * 4


def test_unstated_attention_dp_is_read_from_the_concurrency():
    # aiconfigurator's sdk: concurrency = batch_size x pp_size x attention_dp_size; its generator runs MoE
    # TensorRT-LLM workers attention-DP over the whole tp_size = moe_tp x moe_ep world. 224 = 56 x 4 ranks on tp 4:
    # TP 4 / 4 = 1, DP 4, EP 4 (4 GPUs)
    gtl = "gtl_job_id=1; silicon_concurrency={c}; image=nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.9.0"
    run = to_run(_row(tp_size=4, attention_dp_size="", moe_ep_size=4, batch_size=56, source_notes=gtl.format(c=224)))
    assert (run.layout.tp, run.layout.dp, run.layout.ep, run.layout.gpus, run.concurrency) == (1, 4, 4, 4, 224)
    assert any(a.startswith("attention-DP 4") for a in run.assumed)
    # 320 = 80 x 4 ranks on tp 4 = moe_tp 2 x moe_ep 2: four ranks need four GPUs, so not the 2-GPU mis-encoding
    oss = dict(model_path="openai/gpt-oss-120b", system="h100_sxm", precision="fp8", gemm_quant_mode="fp8",
               moe_quant_mode="fp8", tp_size=4, attention_dp_size="", moe_tp_size=2, moe_ep_size=2)  # fmt: skip
    run = to_run(_row(batch_size=80, source_notes=gtl.format(c=320), **oss))
    assert (run.layout.tp, run.layout.dp, run.layout.ep, run.layout.gpus) == (1, 4, 2, 4)
    assert not any(a.startswith("tp_size") for a in run.assumed)
    # concurrency = batch size: one rank (TP 4); 30 = 10 x 3 ranks does not divide tp 4: the columns as they are
    assert (to_run(_row(tp_size=4, moe_ep_size=4, batch_size=56, source_notes="silicon_concurrency=56")).layout.dp) == 1
    odd = to_run(_row(tp_size=4, attention_dp_size="", moe_ep_size=4, batch_size=10, source_notes=gtl.format(c=30)))
    assert (odd.layout.tp, odd.layout.dp) == (4, 1)


def test_unstated_attention_dp_is_read_from_the_moe_width():
    # aiconfigurator's sdk (config.py, resolve_moe_parallelism): tp_size x attention_dp_size = moe_tp x moe_ep for
    # MoE models. tp 1 with moe_tp 2 (attention_dp_size empty): 2 / 1 = 2 ranks of TP 1 on 2 GPUs; tp 2 with
    # moe_tp 4: 4 / 2 = 2 ranks of TP 2 on 4 GPUs
    qwen = dict(backend="vllm", model_path="Qwen/Qwen3-235B-A22B-FP8", system="h200_sxm", precision="fp8",
                gemm_quant_mode="fp8", moe_quant_mode="fp8", attention_dp_size="", moe_ep_size=1, batch_size=9,
                source_notes="silicon_concurrency=9")  # fmt: skip
    run = to_run(_row(tp_size=1, moe_tp_size=2, **qwen))
    assert (run.layout.tp, run.layout.dp, run.layout.ep, run.layout.gpus, run.concurrency) == (1, 2, 1, 2, 9)
    assert any(a.startswith("attention-DP 2: moe_tp_size") for a in run.assumed)
    run = to_run(_row(tp_size=2, moe_tp_size=4, **qwen))
    assert (run.layout.tp, run.layout.dp, run.layout.gpus) == (2, 2, 4)
    # the width matched by tp_size alone (moe_tp 2 on tp 2): one rank
    assert to_run(_row(tp_size=2, moe_tp_size=2, **qwen)).layout.dp == 1
    # tp_size 64 = moe_tp 8 x moe_ep 8, read as 8 GPUs with EP 8: not 8 more DP ranks
    assert to_run(_row(tp_size=64, moe_tp_size=8, moe_ep_size=8)).layout.dp == 1


def test_inferencex_rows_draw_their_lengths_as_its_client_does():
    # InferenceX's benchmark_serving.py (--random-range-ratio 0.8): np.random.randint(int(0.8·L), L + 1);
    # 0.8 · 1024 = 819.2 -> 819; every integer 819 … 1024 (206 of them), mean (819 + 1024) / 2 = 921.5
    run = to_run(_row(source_notes="model=DeepSeek-R1; silicon_concurrency=8; wip=False"))
    assert run.range_ratio == 0.8
    drawn = run.drawn(1024)
    assert (drawn[0], drawn[-1], len(drawn)) == (819, 1024, 206)
    assert sum(drawn) / len(drawn) == 921.5
    assert to_run(_row(source_notes="db-dump/2026-04-27; config_id=7; workflow_run_id=9")).range_ratio == 0.8
    fixed = to_run(_row())  # no InferenceX provenance: the fixed lengths the columns state
    assert (fixed.range_ratio, fixed.drawn(1024)) == (1.0, (1024,))


def _budget(run):
    return dict(run.engine_settings).get("max_num_batched_tokens")


def test_inferencex_trtllm_deepseek_rows_run_the_budget_its_launch_script_sets():
    # InferenceX benchmarks/dsr1_*_trt_slurm.sh: --max_num_tokens = (CONC + ISL + 64 + 63) / 64 * 64, floored at
    # 8192 from 64af5a77 (2026-01-21) on. CONC 8, ISL 1024: 8 + 1024 + 64 = 1096 -> 18 · 64 = 1152
    notes = "model=DeepSeek-R1; silicon_concurrency=8; measured={}T00:00:00.000Z; wip=False"
    assert _budget(to_run(_row(source_notes=notes.format("2025-12-01")))) == 1152
    assert _budget(to_run(_row(source_notes=notes.format("2026-02-01")))) == 8192
    # ISL 8192, CONC 64: 64 + 8192 + 64 = 8320 = 130 · 64, above the floor
    row = _row(isl=8192, source_notes=notes.format("2026-02-01").replace("=8;", "=64;"))
    assert _budget(to_run(row)) == 8320
    # other engines, models and collections keep the engine preset's budget
    assert _budget(to_run(_row(backend="vllm", source_notes=notes.format("2025-12-01")))) is None
    # a row without InferenceX provenance is not run by its scripts (the generator's budget applies instead)
    assert harness_budget(_row(source_notes="silicon_concurrency=8"), 8) is None
    # gpt-oss-120b's scripts pass a constant instead (gptoss_fp4_{b200,h200}_trt_slurm.sh: MAX_NUM_TOKENS=20000)
    other = _row(model_path="openai/gpt-oss-120b", source_notes=notes.format("2025-12-01"))
    assert _budget(to_run(other)) == 20000


def test_inferencex_trtllm_mtp_rows_speculate_as_their_launch_scripts_set():
    # SemiAnalysisAI/InferenceX .github/configs/nvidia-master.yaml at 5d517074c (FP8) and 0aae52d4c (FP4): the
    # dsr1-*-b200-trt-mtp configurations run image 1.2.0rc6.post3, plain dsr1-*-b200-trt 1.2.0rc6.post2; their
    # benchmarks/dsr1_fp{8,4}_b200_trt_mtp.sh set num_nextn_predict_layers MTP=3, MTP=1 when DP_ATTENTION=true.
    # Acceptance lengths: TensorRT-LLM tech blog 1, table "Autoregressive MTP Layers" (DeepSeek-R1, 8 B200,
    # strict acceptance): MTP 1 -> 1.92, MTP 3 -> 2.82 tokens per round (the chain in disagg_recipes to 0.001)
    notes = "model=DeepSeek-R1; silicon_concurrency=32; measured=2026-02-06T17:21:58Z; wip=False; image={}"
    post3, post2 = (
        "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3",
        "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post2",
    )
    tp8 = to_run(_row(batch_size=32, source_notes=notes.format(post3)))
    assert (tp8.speculation.method, tp8.speculation.k) == ("mtp", 3)
    assert tp8.speculation.acceptance == pytest.approx(2.82, abs=0.001)
    assert any("MTP k=3" in a for a in tp8.assumed)
    dep8 = to_run(_row(batch_size=4, tp_size=1, attention_dp_size=8, source_notes=notes.format(post3)))
    assert (dep8.speculation.k, dep8.speculation.acceptance) == (1, pytest.approx(1.92))
    assert to_run(_row(source_notes=notes.format(post2))).speculation is None  # the plain -trt configurations
    assert harness_speculation(_row(source_notes="silicon_concurrency=8; image=" + post3), None) is None  # no wip=
    assert to_run(_row(backend="sglang", source_notes=notes.format(post3))).speculation is None
    # wiring: the row is predicted as an explicit serve() call with the same Speculation, and differs from one
    # without (TPOT = round time / acceptance, docs/serving.md)
    from llmath.deploy.layout import ParallelConfig
    from llmath.deploy.service import serve

    run = replace(tp8, range_ratio=1.0)
    got = predict_run(run)
    work = Workload(prompt=1024, gen=1024, concurrency=32)
    rep = serve("deepseek-r1", "b200", workload=work, engine="trtllm", parallel=ParallelConfig(tp=8, ep=8),
                precision=precision(run), speculation=tp8.speculation, **dict(run.engine_settings))  # fmt: skip
    assert got["tpot_s"] == pytest.approx(rep.metrics["tpot_s"], rel=1e-9)
    assert got["ttft_s"] == pytest.approx(rep.metrics["ttft_s"], rel=1e-9)
    plain = predict_run(replace(run, speculation=None))
    assert got["tpot_s"] < plain["tpot_s"]


def test_inferencex_sglang_b200_deepseek_rows_poll_as_its_launch_scripts_set():
    # InferenceX benchmarks/single_node/dsr1_fp{8,4}_b200.sh: SCHEDULER_RECV_INTERVAL=30 if CONC >= 16 else 10;
    # dsr1_fp8_b200.sh's TP 4 case: 10; the H200 script passes no --scheduler-recv-interval (SGLang's default 1)
    notes = "model=DeepSeek-R1; silicon_concurrency={}; measured=2026-03-01T00:00:00.000Z; wip=False"

    def recv(c, **kw):
        row = _row(**{"backend": "sglang", "source_notes": notes.format(c), **kw})
        return dict(to_run(row).engine_settings).get("recv_interval")

    assert (recv(8), recv(16), recv(64)) == (10, 30, 30)
    assert recv(32, precision="fp8", tp_size=4) == 10  # the TP 4 case admits 32 (MAX_RUNNING_REQUESTS=32)
    assert recv(64, system="h200_sxm") is None
    assert recv(64, backend_version="0.5.9", source_notes="silicon_concurrency=64") is None  # not InferenceX
    assert harness_recv_interval(_row(source_notes=notes.format(64)), 64) is None  # TensorRT-LLM
    before = _row(backend="sglang", source_notes=notes.format(64).replace("2026-03-01", "2025-09-01"))
    assert harness_recv_interval(before, 64) is None  # before 6be2c699 (2025-09-23) the scripts set none


def test_inferencex_rows_before_the_clients_warm_up_say_so():
    # SemiAnalysisAI/InferenceX d053ae24e (2026-01-21 17:53 UTC) added --num-warmups $((2 * max_concurrency)) to
    # run_benchmark_serving; a run measured on 2025-11-02 had none, one measured on 2026-03-25 had 2·CONC
    notes = "model=DeepSeek-R1; silicon_concurrency=8; measured={}T00:00:00.000Z; wip=False"
    cold = to_run(_row(backend="sglang", source_notes=notes.format("2025-11-02")))
    warm = to_run(_row(backend="sglang", source_notes=notes.format("2026-03-25")))
    assert any("no warm-up" in a for a in cold.assumed)
    assert not any("no warm-up" in a for a in warm.assumed)
    assert not harness_warmed(_row(source_notes=notes.format("2026-01-21")))  # the commit came late that day
    assert harness_warmed(_row(source_notes=notes.format("2026-01-22")))
    own = to_run(_row(source_notes="silicon_concurrency=8; measured=2025-11-02T00:00:00.000Z"))  # not InferenceX
    assert not any("no warm-up" in a for a in own.assumed)
    assert cold.ttft_s == warm.ttft_s == 0.1  # a note, not a changed number: silicon_ttft_ms 100


def test_generator_launched_sglang_rows_mix_prompt_chunks_into_decoding():
    # aiconfigurator's generator turns on --enable-mixed-chunk for aggregated SGLang workers (its 0.5.6.post2
    # template passes it); SGLang's own default (0.5.1.post1 rows) runs prefill batches first
    kw = dict(backend="sglang", **LLAMA_8B_H100)
    gen = to_run(_row(backend_version="0.5.6.post2", **kw))
    assert dict(gen.engine_settings) == {"mixed_prefill": True, "max_num_seqs": 8}
    assert to_run(_row(backend_version="0.5.1.post1", **kw)).engine_settings == ()
    ix = to_run(_row(backend_version="0.5.6.post2", source_notes="model=x; wip=False", **kw))
    assert ix.engine_settings == ()  # InferenceX's own launch scripts, not the generator


@pytest.mark.parametrize("backend", ["trtllm", "vllm"])
def test_generator_launched_rows_take_its_token_budget(backend):
    # the generator's aggregated max_num_tokens = batch size + ISL + 1500: 8 + 1024 + 1500 = 2532 tokens
    run = to_run(_row(backend=backend, batch_size=8, isl=1024))
    assert dict(run.engine_settings)["max_num_batched_tokens"] == 2532
    # and a request cap of its batch size (max_batch_size / --max-num-seqs = bs = the row's 8 clients)
    assert dict(run.engine_settings)["max_num_seqs"] == 8
    # InferenceX rows run its own launch scripts, not the generator (a model its scripts set no budget for)
    ix = _row(backend=backend, model_path="openai/gpt-oss-120b", source_notes="workflow_run_id=9")
    assert "max_num_batched_tokens" not in dict(to_run(ix).engine_settings)
    assert to_run(_row(backend=backend, mode="disagg")).engine_settings == ()


def _kv_share(**kw):
    return dict(to_run(_row(**kw)).engine_settings).get("gpu_memory_utilization")


def test_trtllm_rows_take_the_kv_share_their_launcher_wrote():
    # aiconfigurator's generator templates: kv_cache_config.free_gpu_memory_fraction default(0.80)
    assert _kv_share(**LLAMA_8B_H100) == 0.80
    assert _kv_share(backend="vllm", **LLAMA_8B_H100) is None  # vLLM's own gpu_memory_utilization preset
    # InferenceX: gptoss_fp4_*_trt_slurm.sh 0.85; dsr1_fp8_h200_trt_slurm.sh 0.75; dsr1_fp*_b200_trt*.sh 0.8
    ix = "model=x; silicon_concurrency={c}; measured={d}T00:00:00.000Z; wip=False"
    early, late = ix.format(c=256, d="2026-01-10"), ix.format(c=256, d="2026-02-10")
    assert _kv_share(model_path="openai/gpt-oss-120b", system="h200_sxm", source_notes=early) == 0.85
    assert _kv_share(system="h200_sxm", precision="fp8", source_notes=early) == 0.75
    assert _kv_share(source_notes=early) == 0.8
    # dsr1_fp8_b200_trt.sh from ec7bafaae (2026-01-29): 0.7 at 1024/8192 from CONC 256, 0.75 at 8192/1024 on TP 4
    fp8 = dict(precision="fp8", gemm_quant_mode="fp8_block", moe_quant_mode="fp8_block")
    assert _kv_share(osl=8192, source_notes=late, **fp8) == 0.7
    assert _kv_share(osl=8192, source_notes=early, **fp8) == 0.8
    assert _kv_share(osl=8192, source_notes=late.replace("=256;", "=128;"), **fp8) == 0.8
    assert _kv_share(isl=8192, tp_size=4, source_notes=late, **fp8) == 0.75
    assert _kv_share(isl=8192, tp_size=8, source_notes=late, **fp8) == 0.8
    assert _kv_share(osl=8192, source_notes=late) == 0.8  # the FP4 script keeps 0.8


def test_llama_8b_generator_rows_are_not_kv_bound():
    # TensorRT-LLM reserves each request's prompt + output (GUARANTEED_NO_EVICT). Llama-3.1-8B bf16 KV per token:
    # 32 layers x (K, V) x 8 KV heads x 128 dims x 2 bytes = 131,072 B; the final KV of a 1024/512 request holds
    # 1024 + 512 - 1 tokens (the last token is never written). Pool at the generator's 0.80: at least
    # 0.8 x (80e9 - 16.1e9 weights - 1e9 buffers) = 50.3e9 B, so 50.3e9 / (131072 x 2559) = 150 requests of the
    # largest rows' 2048/512 fit, above their 128 clients: no Llama-8B row of the collection queues for KV.
    from llmath.deploy.service import serve

    run = to_run(_row(isl=2048, osl=512, batch_size=128, source_notes="silicon_concurrency=128", **LLAMA_8B_H100))
    rep = serve(run.model, run.system, workload=Workload(prompt=2048, gen=512, concurrency=128), engine="trtllm",
                **dict(run.engine_settings))  # fmt: skip
    assert rep.memory.kv_bytes_per_request == 131072 * (2048 + 512 - 1)
    assert rep.memory.max_requests_by_kv >= 150
    one = serve(run.model, run.system, workload=Workload(prompt=1024, gen=512, concurrency=8), engine="trtllm")
    assert one.memory.kv_bytes_per_request == 131072 * (1024 + 512 - 1)


def test_quant_modes_map_to_executed_formats():
    # fp8 = FP8 weights and activations; nvfp4 = W4A4; quantised runs hold an FP8 KV cache (collection's rule)
    p = precision(to_run(_row(model_path="meta-llama/Llama-3.1-70B", precision="fp8", gemm_quant_mode="fp8",
                              moe_quant_mode="fp8")))  # fmt: skip
    assert (p.weights, p.act_quant, p.kv) == ("fp8", "fp8", "fp8")
    p = precision(to_run(_row()))
    assert (p.weights, p.act_quant, p.kv) == ("nvfp4", "nvfp4", "fp8")
    # DeepSeek-R1's fp8 label over a block-scaled checkpoint (deepseek-ai/DeepSeek-R1 config.json:
    # quantization_config {quant_method: fp8, weight_block_size: [128, 128]}): block-scaled FP8 weights throughout
    p = precision(to_run(_row(precision="fp8", gemm_quant_mode="fp8", moe_quant_mode="fp8_block")))
    assert (p.weights, p.weight_format("experts"), p.act_quant) == ("fp8-block", "fp8-block", "fp8")
    # MiniMaxAI/MiniMax-M2.5 config.json: the same weight_block_size [128, 128]; lm_head in modules_to_not_convert
    p = precision(to_run(_row(model_path="MiniMaxAI/MiniMax-M2.5", backend="vllm", precision="fp8",
                              gemm_quant_mode="fp8", moe_quant_mode="fp8")))  # fmt: skip
    assert (p.weights, p.weight_format("experts"), p.weight_format("lm_head")) == ("fp8-block", "fp8-block", "bf16")
    # empty modes: the checkpoint's own formats (Llama-3.1-8B: bf16 throughout)
    p = precision(to_run(_row(model_path="meta-llama/Llama-3.1-8B-Instruct", precision="", gemm_quant_mode="",
                              moe_quant_mode="")))  # fmt: skip
    assert (p.weights, p.kv) == ("bf16", "bf16")


def test_quant_modes_leave_the_modules_the_checkpoint_keeps_unquantised():
    # openai/gpt-oss-120b config.json: quantization_config {quant_method: mxfp4, modules_to_not_convert:
    # ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}: the engines
    # load those in bf16 whatever the row's GEMM mode (vLLM's Mxfp4Config quantises only the MoE layers)
    for mode in ("nvfp4", "fp8"):
        p = precision(to_run(_row(model_path="openai/gpt-oss-120b", gemm_quant_mode=mode, moe_quant_mode=mode,
                                  moe_ep_size="1")))  # fmt: skip
        assert [p.weight_format(m) for m in ("attention", "router", "embedding", "lm_head")] == ["bf16"] * 4
        assert (p.weights, p.weight_format("experts")) == (mode, mode)
    # a checkpoint without such a list takes the row's mode everywhere (Llama-3.1-70B: attention in fp8)
    p = precision(to_run(_row(model_path="meta-llama/Llama-3.1-70B", gemm_quant_mode="fp8", moe_quant_mode="fp8")))
    assert p.weight_format("attention") == "fp8"


def test_fp4_rows_run_the_published_nvfp4_checkpoints_module_formats():
    # InferenceX's FP4 DeepSeek-R1 rows load nvidia/DeepSeek-R1-0528-FP4-V2, whose exclude list keeps the MLA
    # down/up projections (q_a, q_b, kv_a, kv_b) and lm_head bf16, o_proj NVFP4: per layer 69,664,768 parameters at 2
    # bytes and 117,440,512 at 9/16 byte = 205,389,824 bytes over 187,105,280 parameters
    from llmath.ops.params import weight_bytes_per_element

    run = to_run(_row())
    p = precision(run)
    assert (p.weights, p.act_quant, p.kv, p.weight_format("lm_head")) == ("nvfp4", "nvfp4", "fp8", "bf16")
    bpe = weight_bytes_per_element(registry.spec("deepseek-r1"), p)["attention"]
    assert bpe == pytest.approx(205_389_824 / 187_105_280, rel=1e-12)
    # Llama-3.1-70B's FP4 rows: no published checkpoint bundled, every linear module NVFP4
    p = precision(to_run(_row(model_path="meta-llama/Llama-3.1-70B", moe_ep_size="1")))
    assert not p.projections and p.weight_format("attention") == "nvfp4"


def test_unknown_system_is_refused_with_its_name(tmp_path):
    f = _csv(tmp_path, [_row(system="mi300x"), _row(id="ok", **LLAMA_8B_H100)])
    rep = validate_runs(f)
    assert [r["id"] for r in rep["rows"]] == ["ok"]
    assert "mi300x" in rep["refused"][0]["reason"]
    assert rep["summary"]["agg"]["computed"] == 1 and rep["summary"]["agg"]["refused"] == 1


def test_harness_lengths_predict_inferencex_rows_out_of_step(capsys, tmp_path):
    # an InferenceX row (its provenance in source_notes) at 16 clients: with the lengths its client draws the
    # follow-ups arrive out of step, so TTFT holds no group's prefills (below the lockstep loop), and it is
    # serve() with outputs 819 … 1024 (every integer, equally likely, as np.random.randint(819, 1025) draws them)
    # after the mean prompt, round((819 + 1024) / 2) = round(921.5) = 922
    from llmath.deploy.service import serve

    f = _csv(tmp_path, [_row(**LLAMA_8B_H100, source_notes="model=Llama; silicon_concurrency=16; wip=False")])
    fixed = validate_runs(f, harness_lengths=False)["rows"][0]["predicted_ttft_s"]
    drawn = validate_runs(f)["rows"][0]["predicted_ttft_s"]
    dist = tuple((g, 1.0) for g in range(819, 1025))
    ref = serve(
        "llama-3.1-8b",
        "h100-sxm",
        workload=Workload(prompt=922, gen=1024, gen_dist=dist, concurrency=16),
        engine="trtllm",
        eager_prefill=True,  # an InferenceX TensorRT-LLM row: trtllm-serve's PyTorch backend
        prompt_token_s=2.2e-6,  # which tokenizes the client's text prompts (Hugging Face tokenizers, 2.2 µs a token)
    )
    assert drawn == pytest.approx(ref.metrics["ttft_s"], rel=1e-9) and drawn < fixed
    code, out, _ = run_cli(capsys, "validate", "--runs", str(f), "--harness-lengths", "--json")
    assert code == 0 and json.loads(out)["rows"][0]["predicted_ttft_s"] == pytest.approx(drawn, rel=1e-9)
    code, out, _ = run_cli(capsys, "validate", "--runs", str(f), "--fixed-lengths", "--json")
    assert code == 0 and json.loads(out)["rows"][0]["predicted_ttft_s"] == pytest.approx(fixed, rel=1e-9)


def test_cli_json_and_usage_errors(capsys, tmp_path):
    f = _csv(tmp_path, [_row(**LLAMA_8B_H100)])
    code, out, _ = run_cli(capsys, "validate", "--runs", str(f), "--json")
    assert code == 0
    row = json.loads(out)["rows"][0]
    # error = (predicted − measured) / measured, measured 100 ms TTFT and 10 ms TPOT in the row
    assert row["ttft_error"] == pytest.approx(row["predicted_ttft_s"] / 0.1 - 1)
    assert row["tpot_error"] == pytest.approx(row["predicted_tpot_s"] / 0.01 - 1)
    code, _, err = run_cli(capsys, "validate", "--runs", str(f), "--by", "colour")
    assert code == 2 and "colour" in err
    code, _, err = run_cli(capsys, "validate", "--runs", str(tmp_path / "none.csv"))
    assert code == 2 and "none.csv" in err


def _disagg(concurrency: int, **kw) -> dict:
    cols = dict(mode="disagg", tp_size="", attention_dp_size="", moe_tp_size="", moe_ep_size="",
                prefill_tp_size=8, prefill_pp_size=1, prefill_attention_dp_size=1, prefill_moe_tp_size=1,
                prefill_moe_ep_size=8, decode_tp_size=8, decode_pp_size=1, decode_attention_dp_size=1,
                decode_moe_tp_size=1, decode_moe_ep_size=8,
                source_notes=f"silicon_concurrency={concurrency}")  # fmt: skip
    return _row(**(cols | kw))


def test_unstated_decode_attention_dp_follows_the_engines_recipe():
    # TensorRT-LLM's DeepSeek-R1 configuration database (data/engines.json, disaggregation): TP 8 with EP 8 runs
    # attention-DP from concurrency 128 on 8 GPUs (16 per GPU) and not at 64 (8 per GPU)
    dec = to_run(_disagg(128)).decode
    assert (dec.tp, dec.dp, dec.ep, dec.gpus) == (1, 8, 8, 8)
    assert to_run(_disagg(128)).assumed
    dec = to_run(_disagg(127)).decode  # 127 / 8 = 15.9 requests per GPU: below 16
    assert (dec.tp, dec.dp, dec.ep) == (8, 1, 8)
    # two stated decode workers halve the requests per GPU: 256 / (2 × 8) = 16 turns it on, 248 / 16 = 15.5 does not
    assert to_run(_disagg(256, decode_num_workers=2)).decode.dp == 8
    assert to_run(_disagg(248, decode_num_workers=2)).decode.dp == 1
    # the columns alone; a pool without expert parallelism; an engine whose preset states no such rule
    assert to_run(_disagg(1024), recipe=False).decode.dp == 1
    assert to_run(_disagg(1024, decode_moe_ep_size=1)).decode.dp == 1
    assert to_run(_disagg(1024, backend="sglang")).decode.dp == 1
    # an aggregated row is read as stated
    assert to_run(_row(source_notes="silicon_concurrency=1024")).layout.dp == 1


def test_recipe_default_changes_only_the_decode_pool_in_validation(tmp_path):
    f = tmp_path / "runs.csv"
    with f.open("w", newline="") as fh:
        w = csv.DictWriter(fh, HEADER)
        w.writeheader()
        w.writerow(_disagg(256, id="d"))
    on, off = validate_runs(f, recipe=True)["rows"][0], validate_runs(f, recipe=False)["rows"][0]
    assert on["assumed"] and not off["assumed"]
    assert on["predicted_tpot_s"] != off["predicted_tpot_s"]
