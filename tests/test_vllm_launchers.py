"""vLLM settings of InferenceX's launch scripts, and the Marlin MXFP4 MoE kernel one of them picks.

Expected settings are read off the scripts (SemiAnalysisAI/InferenceX, commits named in
``llmath.measure.vllm_launchers``); measured kernel times are aiconfigurator-core 0.12.0 (Apache-2.0),
``<system>/moe/vllm/0.24.0/moe_perf.parquet``, ``distribution = balanced``, ``moe_ep_size = 1``: Marlin
(``kernel_source = vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu``) at Kimi-K3's expert
shape (hidden 3584, inter 3072, 896 experts, top-16) and FlashInfer's MXFP4 × MXFP8 MoE (``kernel_source =
vllm_mxfp4moe_flashinfer_trtllm_mxfp4_mxfp8_trtllmmxfp4expertsmodular``, ``moe_tp_size = 1``); vLLM 0.19.0's for
its Triton block-FP8 MoE; latency in ms (parquet row in brackets).
"""

from __future__ import annotations

import pytest
from test_serving_runs import _row

from llmath import hardware
from llmath.deploy import engines
from llmath.errors import WorkloadError
from llmath.hardware import efficiency_fit as ef
from llmath.hardware import fitted_columns as fc
from llmath.hardware import fitted_ops as fo
from llmath.hardware.kernels import engine_fp4_gemm, launcher_moe_kernel
from llmath.hardware.roofline import efficiency, op_times
from llmath.measure.serving_runs import precision, to_run
from llmath.measure.vllm_launchers import launcher_vllm_settings
from llmath.model import registry
from llmath.model.dtypes import Precision
from llmath.ops import Scenario, table

IX = "model=x; silicon_concurrency=4; measured={d}T00:00:00.000Z; wip=False"
GPT_OSS = dict(backend="vllm", model_path="openai/gpt-oss-120b", tp_size=1, moe_ep_size=1)
MINIMAX = dict(backend="vllm", model_path="MiniMaxAI/MiniMax-M2.5", precision="fp8", gemm_quant_mode="fp8",
               moe_quant_mode="fp8", tp_size=4, moe_ep_size=1)  # fmt: skip


def _settings(**kw) -> dict:
    return launcher_vllm_settings(_row(**kw), True)


def test_gpt_oss_hopper_launchers_pick_marlin_from_the_commit_that_exports_it():
    # gptoss_fp4_h{100,200}*.sh export VLLM_MXFP4_USE_MARLIN=1 from 4e52ed4c6 (2026-01-02) on; earlier: unset
    for system in ("h100_sxm", "h200_sxm"):
        assert _settings(system=system, source_notes=IX.format(d="2026-03-27"), **GPT_OSS)["moe_kernel"] == "marlin"
        assert "moe_kernel" not in _settings(system=system, source_notes=IX.format(d="2025-11-02"), **GPT_OSS)
    # the B200 launchers export VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (from 5e92867f4, 2025-09-24) instead
    for day in ("2025-11-02", "2026-02-25"):
        got = _settings(system="b200_sxm", source_notes=IX.format(d=day), **GPT_OSS)["moe_kernel"]
        assert got == "flashinfer_mxfp8"


def test_minimax_fp8_b200_launcher_leaves_the_triton_moe_until_its_upgrade():
    # minimaxm2.5_fp8_b200.sh from f342df18e (2026-03-11): VLLM_USE_FLASHINFER_MOE_FP8=0, VLLM_MOE_USE_DEEP_GEMM=0;
    # bddbf403 (2026-04-03) drops both; the NVFP4 launcher never set them
    assert _settings(system="b200_sxm", source_notes=IX.format(d="2026-03-11"), **MINIMAX)["moe_kernel"] == (
        "triton_fp8_block"
    )
    assert "moe_kernel" not in _settings(system="b200_sxm", source_notes=IX.format(d="2026-04-22"), **MINIMAX)
    nvfp4 = {**MINIMAX, "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}
    assert "moe_kernel" not in _settings(system="b200_sxm", source_notes=IX.format(d="2026-03-28"), **nvfp4)


def test_minimax_b200_launchers_pass_twice_the_prompt_as_budget():
    # minimaxm2.5_fp8_b200.sh from bddbf403 (2026-04-03): --max-num-batched-tokens "$((ISL * 2 ))"
    late = IX.format(d="2026-04-22")
    assert _settings(system="b200_sxm", isl=8192, source_notes=late, **MINIMAX)["max_num_batched_tokens"] == 16384
    assert _settings(system="b200_sxm", isl=1024, source_notes=late, **MINIMAX)["max_num_batched_tokens"] == 2048
    # the v0.17.0 rows before ran vLLM's default; the H200 launcher passes none
    assert "max_num_batched_tokens" not in _settings(system="b200_sxm", source_notes=IX.format(d="2026-03-11"),
                                                     **MINIMAX)  # fmt: skip
    assert "max_num_batched_tokens" not in _settings(system="h200_sxm", source_notes=late, **MINIMAX)


def test_minimax_nvfp4_rows_of_the_nightly_script_run_vllms_default_budget_and_capture_size():
    # minimaxm2.5_fp4_b200.sh at 08bcde8f1 (2026-04-02, the nightly image of the 2026-04-03 rows) passes neither
    # --max-num-batched-tokens nor --max-cudagraph-capture-size; a9c199207 (2026-04-07) adds $((ISL * 2)) and 2048
    nvfp4 = {**MINIMAX, "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}
    nightly = _settings(system="b200_sxm", isl=1024, source_notes=IX.format(d="2026-04-03"), **nvfp4)
    assert "max_num_batched_tokens" not in nightly and "cuda_graph_max_tokens" not in nightly
    later = _settings(system="b200_sxm", isl=1024, source_notes=IX.format(d="2026-04-08"), **nvfp4)
    assert later["max_num_batched_tokens"] == 2 * 1024 and later["cuda_graph_max_tokens"] == 2048


def test_running_sequence_caps_and_kv_caches_as_the_launchers_set_them():
    day = IX.format(d="2026-03-27")
    # --max-num-seqs 512 (gptoss_fp4_b200.sh), 256 (minimaxm2.5_fp8_h100.sh); $CONC elsewhere: no cap set
    assert _settings(system="b200_sxm", source_notes=day, **GPT_OSS)["max_num_seqs"] == 512
    assert _settings(system="h100_sxm", source_notes=day, **MINIMAX)["max_num_seqs"] == 256
    assert "max_num_seqs" not in _settings(system="h200_sxm", source_notes=day, **GPT_OSS)
    # no --kv-cache-dtype on Hopper (vLLM's auto: the model's bf16); gptoss_fp4_b200 passes fp8 from 25506e87c
    assert _settings(system="h200_sxm", source_notes=day, **GPT_OSS)["kv_cache_dtype"] == "auto"
    assert "kv_cache_dtype" not in _settings(system="b200_sxm", source_notes=day, **GPT_OSS)
    assert _settings(system="b200_sxm", source_notes=IX.format(d="2025-11-02"), **GPT_OSS)["kv_cache_dtype"] == "auto"
    # the Llama-3.1-70B launchers all pass kv-cache-dtype fp8
    llama = dict(backend="vllm", model_path="meta-llama/Llama-3.1-70B", precision="fp8", gemm_quant_mode="fp8",
                 moe_quant_mode="fp8", tp_size=2, moe_ep_size=1)  # fmt: skip
    # (their other settings: the capture size --max-num-seqs $CONC gives, min(2 × 4, 512) = 8 at 4 clients, and
    # async-scheduling: true, two steps in flight)
    got = _settings(system="h200_sxm", source_notes=IX.format(d="2025-10-29"), **llama)
    assert got == {"cuda_graph_max_tokens": 8, "cuda_graph_tokens_per_seq": 0, "replacement_lag": 2}


def test_only_inferencex_vllm_rows_take_the_settings():
    day = IX.format(d="2026-03-27")
    assert launcher_vllm_settings(_row(system="h200_sxm", source_notes=day, **GPT_OSS), False) == {}
    assert _settings(system="h200_sxm", source_notes=day, **{**GPT_OSS, "backend": "sglang"}) == {}


def test_a_launcher_left_kv_cache_runs_the_models_dtype_and_reaches_no_engine_setting():
    run = to_run(_row(system="h200_sxm", source_notes=IX.format(d="2026-03-27"), **GPT_OSS))
    assert dict(run.engine_settings)["kv_cache_dtype"] == "auto"
    assert precision(run).kv == "bf16"  # gpt-oss-120b's checkpoint (config.json torch_dtype bfloat16)
    fp8 = to_run(_row(system="b200_sxm", source_notes=IX.format(d="2026-02-25"), **GPT_OSS))
    assert precision(fp8).kv == "fp8"


# (device, kernel, format, MMA format, (hidden, inter, experts, top-k), tokens, moe-TP, measured ms)
KERNELS = [
    ("h200", "marlin", "w4a16_mxfp4", "bf16", (3584, 3072, 896, 16), 4096, 1, 28.540133),  # row 46853
    ("h200", "marlin", "w4a16_mxfp4", "bf16", (3584, 3072, 896, 16), 8192, 8, 7.159520),  # row 47224
    ("h100-sxm", "marlin", "w4a16_mxfp4", "bf16", (3584, 3072, 896, 16), 4096, 1, 28.942965),  # row 46807
    ("h100-sxm", "marlin", "w4a16_mxfp4", "bf16", (3584, 3072, 896, 16), 8192, 8, 7.279024),  # row 47138
    ("b200", "flashinfer_mxfp8", "w4a8_mxfp4_mxfp8", "fp8", (4096, 2048, 256, 6), 8192, 1, 1.530821),  # row 58477
    ("b200", "flashinfer_mxfp8", "w4a8_mxfp4_mxfp8", "fp8", (7168, 3072, 384, 6), 8192, 1, 4.288309),  # row 59624
    # vLLM 0.19.0's B200 table, kernel_source vllm_fused_moe, moe_dtype fp8_block, MiniMax-M2.5's expert shape
    ("b200", "triton_fp8_block", "fp8_block", "fp8", (3072, 1536, 256, 8), 8192, 1, 4.344272),  # row 3752
    ("b200", "triton_fp8_block", "fp8_block", "fp8", (3072, 1536, 256, 8), 8192, 4, 1.540000),  # row 22551
]


@pytest.mark.parametrize("device, kernel, key, runs, shape, tokens, tp, ms", KERNELS)
def test_launcher_kernel_fits_reproduce_their_tables(device, kernel, key, runs, shape, tokens, tp, ms):
    # the moe form at the peak of the MMA's format, MXFP4 bytes, moe-TP splitting each expert's width: within the
    # fit's reported held-out p90 of the measured time
    hw = hardware.get(device)
    entry = ef.data()["engine_moe_kernel"]["devices"][device][kernel][key]
    hidden, inter, experts, top_k = shape
    x = ef.moe_cost(tokens, hidden, inter / tp, top_k, experts, key, routing="balanced")
    t = ef.model_time(entry["coef"], *x, hw.peak(runs), hw.memory_bandwidth_bytes_per_s, ef.device_tile(device))
    assert ef.LAUNCHER_MOE_RUNS[key] == runs
    assert float(t) == pytest.approx(ms * 1e-3, rel=entry["held_out"]["p90_abs_err"])


def test_flashinfer_mxfp8_fit_at_gpt_oss_shape_against_the_same_kernel_in_sglangs_table():
    # SGLang 0.5.14's B200 table times the same FlashInfer kernel at gpt-oss's shape (b200_sxm/moe/sglang/0.5.14/
    # moe_perf.parquet, sglang_flashinfer_trtllm_moe, w4a8_mxfp4_mxfp8, 128 experts, top-4, balanced, EP 1):
    # 1,024 tokens 0.412081 ms (row 855), 8,192 tokens 0.800461 ms (row 859); the fit, from other shapes, is
    # within 40% of both (docs/efficiency.md reports the errors)
    hw = hardware.get("b200")
    c = ef.engine_moe_kernel("b200", "flashinfer_mxfp8", "w4a8_mxfp4_mxfp8")
    for tokens, ms in ((1024, 0.412081), (8192, 0.800461)):
        x = ef.moe_cost(tokens, 2880, 2880, 4, 128, "w4a8_mxfp4_mxfp8", routing="balanced")
        t = float(ef.model_time(c, *x, hw.peak("fp8"), hw.memory_bandwidth_bytes_per_s, 64))
        assert t == pytest.approx(ms * 1e-3, rel=0.4)


def test_marlin_applies_where_a_table_times_it_and_only_when_picked():
    h200, b200 = hardware.get("h200"), hardware.get("b200")
    base = engine_fp4_gemm(efficiency("expected", h200), h200, "vllm")
    got = launcher_moe_kernel(base, h200, "marlin")
    assert got.fit("moe_prefill", "w4a16_mxfp4") == tuple(ef.engine_moe_kernel("h200", "marlin", "w4a16_mxfp4"))
    assert got.fit("moe", "w4a16_mxfp4") is None  # decode keeps the GEMM models
    assert launcher_moe_kernel(base, h200, "") is base
    on_b200 = engine_fp4_gemm(efficiency("expected", b200), b200, "vllm")
    assert launcher_moe_kernel(on_b200, b200, "marlin") is on_b200  # no B200 Marlin table
    assert launcher_moe_kernel(base, h200, "flashinfer_mxfp8") is base  # no H200 table of the Blackwell kernel
    with pytest.raises(WorkloadError, match="moe_kernel='machete'"):
        engines.preset("vllm", h200, moe_kernel="machete")


def _routed_time(decode: bool, kernel: str) -> float:
    hw = hardware.get("h200")
    t = table(registry.spec("gpt-oss-120b"), "decode" if decode else "prefill")
    p = Precision.uniform("bf16").override(weights="mxfp4")
    e = launcher_moe_kernel(engine_fp4_gemm(efficiency("expected", hw), hw, "vllm"), hw, kernel)
    sc = Scenario(1, 1, 1024) if decode else Scenario(1, 1024, 0)
    tm, _, _, _ = op_times(t.values(sc), t, hw, p, e, 1, 1024 if not decode else 1, decode=decode)
    return float(tm[fc.columns(t).routed].sum())


def test_marlin_times_the_prefill_experts_and_leaves_decode():
    # a 1,024-token prefill of gpt-oss-120b on one H200: the routed GEMMs of its 36 layers at the Marlin fit,
    # 36 × that kernel at gpt-oss's shape (hidden 2880, inter 2880, 128 experts, top-4, balanced), its per-layer
    # time t0 included (the activation's vector work adds well under 2%)
    hw = hardware.get("h200")
    c = ef.engine_moe_kernel("h200", "marlin", "w4a16_mxfp4")
    x = ef.moe_cost(1024, 2880, 2880, 4, 128, "w4a16_mxfp4", routing="balanced")
    layer = float(ef.model_time(c, *x, hw.peak("bf16"), hw.memory_bandwidth_bytes_per_s, 64))
    assert _routed_time(False, "marlin") == pytest.approx(36 * layer, rel=0.02)
    assert _routed_time(False, "marlin") > _routed_time(False, "")
    assert _routed_time(True, "marlin") == _routed_time(True, "")


def test_flashinfer_mxfp8_prefill_experts_compute_at_the_fp8_peak():
    # gpt-oss-120b's 1,024-token prefill on one B200 with MXFP4 experts (17 bytes per 32 weights, as the fit counts
    # them): without a launcher kernel they run W4A4 at the fp4 peak; FlashInfer's MXFP8-activation kernel computes
    # at the fp8 peak (half of it, datasheet): its routed GEMMs take 36 × the fitted layer time at that peak, within
    # 3% (memory-bound here: llmath's operators count the routed activations' bytes their own way)
    hw = hardware.get("b200")
    assert hw.peak("fp4") == pytest.approx(2 * hw.peak("fp8"))
    t = table(registry.spec("gpt-oss-120b"), "prefill")
    p = Precision.uniform("bf16").override(weights="mxfp4", act_quant="nvfp4")
    e = launcher_moe_kernel(engine_fp4_gemm(efficiency("expected", hw), hw, "vllm"), hw, "flashinfer_mxfp8")
    tm, _, _, _ = op_times(t.values(Scenario(1, 1024, 0)), t, hw, p, e, 1, 1024, decode=False)
    c = ef.engine_moe_kernel("b200", "flashinfer_mxfp8", "w4a8_mxfp4_mxfp8")
    x = ef.moe_cost(1024, 2880, 2880, 4, 128, "w4a8_mxfp4_mxfp8", routing="balanced")
    layer = float(ef.model_time(c, *x, hw.peak("fp8"), hw.memory_bandwidth_bytes_per_s, 64))
    assert float(tm[fc.columns(t).routed].sum()) == pytest.approx(36 * layer, rel=0.03)


def test_triton_block_fp8_takes_fp8_experts_and_not_fp4_ones():
    # the kernel's fit keys the fp8 family's experts (MiniMax-M2.5's block-scaled FP8 checkpoint, read as fp8) and
    # leaves 4-bit experts to the kernels of their own family
    hw = hardware.get("b200")
    e = launcher_moe_kernel(engine_fp4_gemm(efficiency("expected", hw), hw, "vllm"), hw, "triton_fp8_block")
    t = table(registry.spec("gpt-oss-120b"), "prefill")
    cols = fc.columns(t)
    fp8 = Precision.uniform("bf16").override(weights="fp8", act_quant="fp8")
    fp4 = Precision.uniform("bf16").override(weights="mxfp4", act_quant="nvfp4")
    assert fo.launcher_moe(cols, e, fp8, False)[1] == "fp8_block"
    assert fo.launcher_moe(cols, e, fp8, True) is None  # decode keeps its model
    assert fo.launcher_moe(cols, e, fp4, False) is None


LLAMA_B200 = dict(backend="vllm", model_path="meta-llama/Llama-3.1-70B", system="b200_sxm", precision="fp8",
                  gemm_quant_mode="fp8", moe_quant_mode="fp8", tp_size=8, moe_ep_size=1)  # fmt: skip


def test_llama_b200_launchers_capture_decode_graphs_only():
    # 70b_fp8_b200_docker.sh (from 425f74d51, 2025-09-12) and 70b_fp4_b200_docker.sh: cudagraph_mode
    # FULL_DECODE_ONLY, splitting_ops [] -> every pass holding a prefill token runs without a graph
    assert _settings(source_notes=IX.format(d="2025-10-29"), **LLAMA_B200)["eager_prefill"] is True
    assert "eager_prefill" not in _settings(source_notes=IX.format(d="2025-09-01"), **LLAMA_B200)
    # the H200 launcher leaves vLLM's default (piecewise graphs), gpt-oss B200 sets FULL_AND_PIECEWISE / 2048
    h200 = {**LLAMA_B200, "system": "h200_sxm"}
    assert "eager_prefill" not in _settings(source_notes=IX.format(d="2025-10-29"), **h200)
    assert "eager_prefill" not in _settings(system="b200_sxm", source_notes=IX.format(d="2026-02-25"), **GPT_OSS)


def test_a_decode_only_graph_row_floors_its_prefill_at_the_host_launches():
    run = to_run(_row(source_notes=IX.format(d="2025-10-29"), **LLAMA_B200))
    assert dict(run.engine_settings)["eager_prefill"] is True
    # one 64-token request on Llama-3.1-70B (8 x B200, FP8): the GPU prefill is a few ms; the host floor is
    # 80 layers x 9 launches (norm, fused qkv, rotary, attention, o, norm, fused gate_up, act, down) + 3 = 723
    # launches x 65 us (vLLM's split compiled graph) x 2 (the flattened graph such a launcher runs,
    # vllm-project/vllm#20050: "about 2x slower on the cpu side") = 94.0 ms, and the request's TTFT is that one pass
    # (vLLM's per-request terms: 64 prompt tokens x 2.2 us tokenising, 0.62 ms for the eager iteration)
    from llmath import Workload
    from llmath.deploy.layout import ParallelConfig
    from llmath.deploy.service import serve

    kw = {"workload": Workload(prompt=64, gen=16, concurrency=1), "parallel": ParallelConfig(tp=8),
          "engine": "vllm", "precision": "fp8"}  # fmt: skip
    graph, eager = serve("llama-3.1-70b", "B200", **kw), serve("llama-3.1-70b", "B200", **kw, eager_prefill=True)
    per_request = 64 * 2.2e-6 + 0.62e-3
    assert graph.metrics["ttft_s"] < 0.03
    assert eager.metrics["ttft_s"] == pytest.approx(723 * 6.5e-5 * 2 + per_request, rel=1e-3)


def _layout(**kw) -> tuple[int, int, int, int]:
    L = to_run(_row(**kw)).layout
    return L.tp, L.dp, L.ep, L.gpus


def test_rows_stating_tp_squared_experts_run_the_entrys_gpus():
    # InferenceX's minimaxm2.5-fp8-h100-vllm entry { tp: 4, ep: 4 } (nvidia-master.yaml at 626932a1, 2026-03-28):
    # `vllm serve --tensor-parallel-size=4 --enable-expert-parallel`, 4 GPUs, EP 4; the file states it as
    # attention_dp_size 4, moe_ep_size 16
    h100 = dict(MINIMAX, system="h100_sxm", attention_dp_size=4, moe_ep_size=16, batch_size=32,
                source_notes=IX.format(d="2026-03-28").replace("=4;", "=32;"))  # fmt: skip
    assert _layout(**h100) == (4, 1, 4, 4)
    assert any("read as 4 GPUs: TP 4, EP 4" in a for a in to_run(_row(**h100)).assumed)
    # its twin, stated as the entry reads, is left as it is
    assert _layout(**dict(h100, attention_dp_size=1, moe_ep_size=4)) == (4, 1, 4, 4)


def test_the_fp4_b200_dp_attn_entry_runs_attention_data_parallel():
    # minimaxm2.5-fp4-b200-vllm from 13962fcfa (2026-04-21): { tp: 2, ep: 2, dp-attn: true } from 256 to 1024
    # clients at 1k/1k, `--tensor-parallel-size=1 --data-parallel-size=2 --enable-expert-parallel`: 2 GPUs;
    # { tp: 2, ep: 2 } at 128 clients; before it, dp-attn only at 512 clients
    fp4 = dict(MINIMAX, system="b200_sxm", precision="fp4", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4",
               tp_size=2, attention_dp_size=2, moe_ep_size=4, batch_size=128)  # fmt: skip
    notes = "db-dump/2026-04-27; silicon_concurrency={c}; measured={d}T00:00:00.000Z"
    assert _layout(**fp4, source_notes=notes.format(c=512, d="2026-04-22")) == (1, 2, 2, 2)
    assert _layout(**fp4, source_notes=notes.format(c=256, d="2026-04-22")) == (1, 2, 2, 2)
    assert _layout(**fp4, source_notes=notes.format(c=128, d="2026-04-22")) == (2, 1, 2, 2)
    assert _layout(**fp4, source_notes=notes.format(c=256, d="2026-04-08")) == (2, 1, 2, 2)
    assert _layout(**dict(fp4, isl=8192), source_notes=notes.format(c=256, d="2026-04-22")) == (2, 1, 2, 2)
    # another engine's row of the same shape keeps its columns
    assert _layout(**dict(fp4, backend="sglang"), source_notes=notes.format(c=512, d="2026-04-22"))[3] == 4
