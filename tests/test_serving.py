"""Continuous batching: limits from arithmetic, the closed form against the iteration simulation, engine
presets with sources, memory admission, and the CLI's JSON keys."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from llmath import Workload
from llmath.analysis import analyze
from llmath.cli import main
from llmath.deploy import engines
from llmath.deploy.layout import ParallelConfig
from llmath.deploy.overheads import apply
from llmath.deploy.service import serve
from llmath.deploy.serving import Requests, steady_state
from llmath.deploy.serving_memory import memory
from llmath.deploy.simulate import simulate
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100 = get("h100-sxm")
GRAPHS = {"cuda_graph_max_tokens": 0, "cuda_graph_tokens_per_seq": 0}  # vLLM replaying graphs at every pass size


def _device(model="llama-3-8b", hw=H100):
    return Device(resolve(model), hw, Precision(), efficiency("expected", hw))


def test_sglang_takes_its_share_of_the_memory_the_driver_reports():
    # nvidia-smi reports 183,359 MiB on a B200 (Modal's GPU Glossary, "What is nvidia-smi?") = 183,359 × 2^20 =
    # 192,265,846,784 bytes, against NVIDIA's 180 GB label. SGLang sizes --mem-fraction-static from
    # torch.cuda.mem_get_info (model_runner_kv_cache_mixin.profile_max_num_token, sglang 0.5.9): its pool is
    # 0.9 × 192,265,846,784 − weights − activations; vLLM's stays 0.9 × 180e9 − the same.
    b200 = get("b200")
    dev, req = _device(hw=b200), Requests(1024, 256)
    weights = 8_030_261_248 * 2  # llama-3-8b parameters × bf16
    sgl = memory(dev, engines.preset("sglang", b200, gpu_memory_utilization=0.9), req)
    vll = memory(dev, engines.preset("vllm", b200, gpu_memory_utilization=0.9), req)
    assert sgl.kv_pool_bytes == pytest.approx(0.9 * 183_359 * 2**20 - weights - sgl.activation_bytes)
    assert vll.kv_pool_bytes == pytest.approx(0.9 * 180e9 - weights - vll.activation_bytes)
    # a device the registry gives no driver figure keeps its label for SGLang too
    assert memory(_device(), engines.preset("sglang", H100, gpu_memory_utilization=0.9), req).capacity_bytes == 80e9


def test_single_request_without_chunking_is_the_static_generation():
    # C = 1 and a budget above the prompt (no chunking): TTFT = the prefill of one prompt, TPOT = the mean
    # decode step at batch 1 over contexts P … P+G−2, e2e = TTFT + (G−1)·TPOT: the static batch-1 generation.
    # Under ``expected`` both carry vLLM's overhead terms the same way (deploy.overheads.apply on the static one).
    # (graphs at every size, cuda_graph_max_tokens 0: no pass takes the host floor of one above vLLM's capture size,
    # which the static generation does not model)
    r = serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=1024, gen=256, concurrency=1),
              max_num_batched_tokens=2048, **GRAPHS)  # fmt: skip
    a0 = analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=1, prompt=1024, gen=256))
    a = SimpleNamespace(generation=apply(a0.generation, engines.overheads("vllm"), 1, 256, prompt=1024))
    assert r.metrics["ttft_s"] == pytest.approx(a.generation["ttft_s"], rel=1e-9)
    # serving times the step at the mean context; the static generation sums the steps per context band. Exact
    # when a step is affine in the context (ideal), within the curvature of the fitted decode-attention fraction
    # (expected: attention is ~5% of this step, and its fraction varies by a few % over 1024 … 1279 positions)
    assert r.metrics["tpot_s"] == pytest.approx(a.generation["tpot_s"], rel=1e-3)
    assert r.metrics["e2e_s"] == pytest.approx(a.generation["ttft_s"] + 255 * a.generation["tpot_s"], rel=1e-3)
    ri = serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=1024, gen=256, concurrency=1),
               max_num_batched_tokens=2048, efficiency_mode="ideal", **GRAPHS)  # fmt: skip
    ai = analyze("llama-3-8b", "h100-sxm", workload=Workload(batch=1, prompt=1024, gen=256), efficiency_mode="ideal")
    assert ri.metrics["tpot_s"] == pytest.approx(ai.generation["tpot_s"], rel=1e-9)
    assert r.metrics["tok_s_per_user"] == pytest.approx(1 / r.metrics["tpot_s"])


def test_kv_pool_caps_the_running_requests():
    # llama-3-8b: 32 layers × 8 KV heads × 128 dims × (K and V) × 2 bytes = 131,072 bytes per position.
    # vLLM on an H100 (80 GB): 0.9 × 80e9 − weights − one 8192-token budget's activations = the KV pool.
    # vLLM allocates blocks on demand: a request holds on average 1024 + (256 − 1)/2 = 1151.5 positions;
    # TensorRT-LLM reserves the last position's KV: 1024 + 256 − 1 = 1279 positions.
    dev = _device()
    req = Requests(1024, 256)
    mem = memory(dev, engines.preset("vllm", H100), req)
    weights = 8_030_261_248 * 2  # parameters × bf16
    assert mem.kv_bytes_per_request == 131_072 * 1279
    assert mem.kv_pool_bytes == pytest.approx(0.9 * 80e9 - weights - mem.activation_bytes)
    assert mem.max_requests_by_kv == int(mem.kv_pool_bytes // (131_072 * 1151.5))
    trt = memory(dev, engines.preset("trtllm", H100), req)
    # free_gpu_memory_fraction: 0.9 of what the weights and activations leave
    assert trt.kv_pool_bytes == pytest.approx(0.9 * (80e9 - weights - trt.activation_bytes))
    assert trt.max_requests_by_kv == int(trt.kv_pool_bytes // (131_072 * 1279))
    eng = engines.preset("vllm", H100)
    ss = steady_state(dev, eng, req, [10_000], mem.max_resident)
    assert ss.resident[0] == mem.max_resident < 1024  # the pool, not max_num_seqs, caps it
    assert ss.ttft_s[0] > 10 * ss.tpot_s[0]  # the others queue


def test_max_num_seqs_caps_the_running_requests():
    r = serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=128, gen=128, concurrency=100), max_num_seqs=16)
    assert r.metrics["running_per_replica"] == 16
    assert r.metrics["queued_per_replica"] == 84


@pytest.mark.parametrize(
    "model,prompt,gen,conc,budget",
    [
        ("llama-3.2-1b", 1024, 128, 16, 8192),  # one prefill at a time, mostly decode iterations
        ("llama-3.2-1b", 2048, 64, 32, 2048),  # chunked prompts filling the budget
        ("qwen3-30b-a3b", 512, 64, 24, 2048),  # MoE: experts hit by the whole iteration's tokens
    ],
)
def test_closed_form_agrees_with_the_iteration_simulation(model, prompt, gen, conc, budget):
    # Bound stated in serving's docstring: TTFT, TPOT and throughput within 5% of the simulation.
    dev = _device(model)
    eng = engines.preset("vllm", H100, max_num_batched_tokens=budget)
    req = Requests(prompt, gen)
    mem = memory(dev, eng, req)
    ss = steady_state(dev, eng, req, [conc], mem.max_resident)
    sim = simulate(dev, eng, req, conc, mem.max_resident, iterations=1200)
    assert ss.ttft_s[0] == pytest.approx(sim.ttft_s, rel=0.05)
    assert ss.tpot_s[0] == pytest.approx(sim.tpot_s, rel=0.05)
    assert ss.throughput_tok_s[0] == pytest.approx(sim.throughput_tok_s, rel=0.05)


def test_throughput_grows_and_latency_worsens_with_concurrency():
    dev = _device()
    eng = engines.preset("vllm", H100)
    req = Requests(1024, 256)
    mem = memory(dev, eng, req)
    ss = steady_state(dev, eng, req, np.array([1, 4, 16, 64, 256]), mem.max_resident)
    assert np.all(np.diff(ss.throughput_tok_s) > 0)
    assert np.all(np.diff(ss.tpot_s) > 0)


def test_prefix_hits_shorten_the_prefill():
    a = serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=4096, gen=64, concurrency=1))
    b = serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=4096, gen=64, concurrency=1, prefix_hit=0.75))
    assert b.metrics["ttft_s"] < 0.5 * a.metrics["ttft_s"]


def test_open_loop_rate_is_sustained():
    r = serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=512, gen=128, rate=4.0))
    assert r.metrics["requests_s"] == pytest.approx(4.0, rel=0.02)
    with pytest.raises(WorkloadError, match="exceeds what this deployment sustains"):
        serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=512, gen=128, rate=1e6))


def test_data_parallel_gpus_split_the_requests():
    one = serve("llama-3-8b", "h100-sxm", workload=Workload(prompt=512, gen=128, concurrency=32))
    two = serve(
        "llama-3-8b",
        "h100-sxm",
        workload=Workload(prompt=512, gen=128, concurrency=64),
        parallel=ParallelConfig(gpus=2, dp=2),
    )
    assert two.metrics["throughput_tok_s"] == pytest.approx(2 * one.metrics["throughput_tok_s"])
    assert two.metrics["throughput_tok_s_per_gpu"] == pytest.approx(one.metrics["throughput_tok_s_per_gpu"])


def test_does_not_fit_says_so_first():
    # llama-3-70b in bf16 is ~141 GB of weights: more than one 80 GB H100
    with pytest.raises(WorkloadError, match="does not fit"):
        serve("llama-3-70b", "h100-sxm", workload=Workload(prompt=1024, gen=128, concurrency=8))


def test_engine_presets_carry_sources_and_the_engines_rules():
    for name in engines.names():
        info = engines.info(name)
        assert info["version"]
        for key, s in info["settings"].items():
            assert s.get("source"), f"{name}.{key} has no source"
    # vllm/engine/arg_utils.py: 8192 tokens and 1024 sequences on >= 70 GiB non-A100 devices, else 2048 / 256
    assert engines.preset("vllm", H100).max_num_batched_tokens == 8192
    assert engines.preset("vllm", H100).max_num_seqs == 1024
    a100 = engines.preset("vllm", get("a100-sxm-80gb"))
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    # TensorRT-LLM BuildConfig: max_num_tokens 8192, max_batch_size 2048; llama.cpp: 1 slot, n_ctx 4096
    assert engines.preset("trtllm", H100).max_num_seqs == 2048
    assert engines.preset("llama.cpp", H100).kv_pool_tokens == 4096
    assert engines.preset("vllm", H100, max_num_seqs=8).max_num_seqs == 8  # flags override
    # and the override's source says it was given, not the preset's citation
    assert engines.preset("vllm", H100, max_num_seqs=8).sources["max_num_seqs"].startswith("given (8)")
    assert (
        engines.preset("vllm", H100, max_num_seqs=1024).sources["max_num_seqs"]
        == engines.preset("vllm", H100).sources["max_num_seqs"]
    )  # the preset's own value keeps its source
    with pytest.raises(WorkloadError, match="not a known engine"):
        engines.preset("tgi")


def test_cli_concurrency_json_keys(capsys):
    code = 0
    try:
        main(
            ["analyze", "llama-3-8b", "-H", "h100-sxm", "--concurrency", "32", "--prompt", "512", "--gen", "64"]
            + ["--engine", "sglang", "--json"]
        )
    except SystemExit as e:
        code = e.code or 0
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    for k in ("ttft_s", "tpot_s", "e2e_s", "throughput_tok_s", "throughput_tok_s_per_gpu", "tok_s_per_user"):
        assert isinstance(d[k], float) and d[k] > 0
    assert d["engine"]["name"] == "sglang"


def test_every_serving_row_of_the_published_results_is_computed_or_skipped_with_a_reason():
    from llmath.measure.published import _published_rows
    from llmath.measure.serving_validation import _setup, validate_serving

    wanted = {r["id"] for r in _published_rows(None) if _setup(r) is not None}
    rep = validate_serving()
    seen = {r["id"] for r in rep["rows"]} | {s["id"] for s in rep["skipped"]}
    assert wanted == seen and rep["rows"]
    assert all(s["reason"] for s in rep["skipped"])
    for r in rep["rows"]:
        assert r["error"] == pytest.approx((r["predicted"] - r["measured"]) / r["measured"])


def test_a_layout_replica_times_what_the_parallel_module_times():
    # one iteration of pure decode (or of one whole prompt) on a TP=2 layout is exactly the per-GPU pass
    # of llmath.deploy.per_gpu_stage: sharded operator tables + the all-reduces on the topology
    from llmath.deploy import make_layout, per_gpu_stage
    from llmath.ops import Scenario

    spec = resolve("llama-3-70b")
    p = Precision("fp8", "fp8", "fp8")
    eff = efficiency("expected", H100)
    for lay in (make_layout(spec, ParallelConfig(tp=2)), make_layout(spec, ParallelConfig(tp=2, pp=2))):
        dev = Device(spec, H100, p, eff, layout=lay)
        ref = per_gpu_stage(spec, lay, "decode", Scenario(16, 1, 1000), H100, p, eff).time_s
        assert float(dev.iteration(16, 1000).time_s) == pytest.approx(ref, rel=1e-9)
        ref = per_gpu_stage(spec, lay, "prefill", Scenario(1, 2048, 0), H100, p, eff).time_s
        assert float(dev.iteration(0, 0, 1, 2048, 0).time_s) == pytest.approx(ref, rel=1e-9)


def test_tensor_parallel_serving_fits_a_model_one_gpu_cannot_hold():
    # llama-3-70b bf16: 70.6e9 parameters × 2 bytes = 141 GB; TP=2 holds about half of it per H100
    r = serve(
        "llama-3-70b",
        "h100-sxm",
        workload=Workload(prompt=1024, gen=128, concurrency=16),
        parallel=ParallelConfig(tp=2),
    )
    assert r.memory.weights_bytes < 0.52 * 141.1e9
    assert r.gpus == 2
    assert r.metrics["throughput_tok_s_per_gpu"] == pytest.approx(r.metrics["throughput_tok_s"] / 2)


def test_speculation_with_nothing_accepted_costs_more_and_good_acceptance_pays():
    from llmath.deploy.speculative import Speculation

    base = serve("llama-3.1-8b", "h100-sxm", workload=Workload(prompt=1024, gen=256, concurrency=4)).metrics["tpot_s"]
    # acceptance 1: every round yields one token but pays a draft step and a verify of width 2 (≥ a decode step)
    none = serve(
        "llama-3.1-8b",
        "h100-sxm",
        workload=Workload(prompt=1024, gen=256, concurrency=4),
        speculation=Speculation("eagle", 1, 1.0),
    )
    assert none.metrics["tpot_s"] > base
    # at batch 4 the verify of width 4 is weight-bound like a decode step: 2.6 tokens per round pay off
    good = serve(
        "llama-3.1-8b",
        "h100-sxm",
        workload=Workload(prompt=1024, gen=256, concurrency=4),
        speculation=Speculation("eagle", 3, 2.6),
    )
    assert good.metrics["tpot_s"] < 0.6 * base


def test_mla_model_serves_with_its_absorbed_decode():
    # deepseek-v2-lite: MLA decode runs absorbed (a different operator list from its prefill): a pure decode
    # iteration is the decode table's step, one prompt is the prefill table's pass, a mix costs their sum
    from llmath.hardware.roofline import stage_times
    from llmath.ops import Scenario, table

    spec = resolve("deepseek-v2-lite")
    dev = _device("deepseek-v2-lite")
    p, eff = dev.precision, dev.eff
    dec = stage_times(table(spec, "decode"), Scenario(8, 1, 500), H100, p, eff, True)[0].sum()
    pre = stage_times(table(spec, "prefill"), Scenario(1, 512, 0), H100, p, eff, False)[0].sum()
    assert float(dev.iteration(8, 500).time_s) == pytest.approx(dec, rel=1e-9)
    assert float(dev.iteration(0, 0, 1, 512, 0).time_s) == pytest.approx(pre, rel=1e-9)
    assert float(dev.iteration(8, 500, 1, 512, 0).time_s) == pytest.approx(dec + pre, rel=1e-9)
    r = serve("deepseek-v2-lite", "h100-sxm", workload=Workload(prompt=512, gen=128, concurrency=16))
    assert r.metrics["ttft_s"] > 0 and r.metrics["tpot_s"] > 0


def test_serving_flags_without_a_concurrency_say_so(capsys):
    code = 0
    try:
        # (--engine alone is valid for a static batch: it picks the kernels a declared quantised format runs in)
        main(["analyze", "llama-3-8b", "-H", "h100-sxm", "--max-num-seqs", "4"])
    except SystemExit as e:
        code = e.code or 0
    err = capsys.readouterr().err
    assert code == 2 and "add --concurrency" in err and err.count("\n") == 1


def test_disaggregated_pools_are_rate_matched():
    # x prefill workers finish x·r_p requests/s; y = ⌈x·r_p / r_d⌉ decode workers at r_d = B / ((G − 1)·τ_d)
    from llmath.deploy.disagg import disagg_grid, prefill_worker

    dev = _device()
    req = Requests(1024, 128)
    w = prefill_worker(dev, engines.preset("vllm", H100), req)
    g = disagg_grid(w, dev, req, 64, 8, 1, 1, 131_072 * 1024 / 450e9, batches=np.array([16.0, 64.0]))
    tau = dev.iteration(np.array([16.0, 64.0]), 1024 + 63).time_s
    r_d = np.array([16.0, 64.0]) / (127 * tau)
    for i in range(2):
        for j, x in enumerate(g.prefill_workers[i]):
            assert g.decode_workers[i, j] == np.ceil(x * w.requests_s / r_d[i])
            assert g.throughput_tok_s[i, j] == pytest.approx(x * w.requests_s * 128)
    # TTFT = the prefill worker's iteration + the prompt's KV (131,072 B × 1024) over 450 GB/s
    assert g.ttft_s[0, 0] == pytest.approx(w.ttft_s + 131_072 * 1024 / 450e9)


def test_enforce_eager_charges_eager_launches_in_decode(capsys):
    # without CUDA graphs every decode kernel pays the eager launch overhead: TPOT grows
    def tpot(*extra):
        main(
            ["analyze", "llama-3.2-1b", "-H", "h100-sxm", "-c", "4", "--prompt", "256", "--gen", "64", "--json", *extra]
        )
        return json.loads(capsys.readouterr().out)["tpot_s"]

    assert tpot("--enforce-eager") > tpot()


def test_output_length_mixture_moments():
    # half 64 and half 512 tokens after a 1024-token prompt:
    # E[G] = (64 + 512)/2 = 288; E[G − 1] = 287; decoding context = 1024 + (63·31 + 511·255)/(63 + 511)
    r = Requests(1024, 1, gen_dist=((64, 0.5), (512, 0.5)))
    assert r.mean_gen == 288 and r.decode_steps == 287 and r.max_gen == 512
    assert r.decode_context == pytest.approx(1024 + (63 * 31 + 511 * 255) / (63 + 511))
    # KV counted per resident request, weighted by lifetime ∝ G: reserve (64·1087 + 512·1535)/576
    assert r.kv_positions(True) == pytest.approx((64 * 1087 + 512 * 1535) / 576)
    # a one-point distribution is the fixed length
    one, fixed = Requests(1024, 1, gen_dist=((256, 1.0),)), Requests(1024, 256)
    dev, eng = _device(), engines.preset("vllm", H100)
    a = steady_state(dev, eng, one, [1, 64], 300)
    b = steady_state(dev, eng, fixed, [1, 64], 300)
    assert np.allclose(a.tpot_s, b.tpot_s) and np.allclose(a.ttft_s, b.ttft_s)
    with pytest.raises(WorkloadError, match="gen_dist"):
        Requests(1024, 1, gen_dist=((0, 1.0),))


def test_output_length_mixture_agrees_with_the_simulation():
    # bound: TTFT, TPOT, e2e and throughput within 5% (the simulation draws the lengths in an evenly mixed order)
    dev = _device()
    eng = engines.preset("vllm", H100)
    req = Requests(1024, 1, gen_dist=((64, 0.5), (512, 0.5)))
    mem = memory(dev, eng, req)
    ss = steady_state(dev, eng, req, [32], mem.max_resident)
    sim = simulate(dev, eng, req, 32, mem.max_resident, iterations=2000)
    for k in ("ttft_s", "tpot_s", "e2e_s", "throughput_tok_s"):
        assert getattr(ss, k)[0] == pytest.approx(getattr(sim, k), rel=0.05), k


@pytest.mark.parametrize("model", ["llama-3.2-1b", "llama-3-8b"])
def test_a_mixed_iteration_never_gets_cheaper_for_one_more_decoder(model):
    # a decoder adds one token to every GEMM and its own KV read to attention: the work only grows, and the
    # two kinds of attention (the chunk's over its prefix, the decoders' over their caches) are timed apart
    dev = Device(resolve(model), H100, Precision(), efficiency("expected", H100))
    for prefix in (0, 4096):
        t = [float(dev.iteration(d, 8700, 1, 2048, prefix).time_s) for d in (0, 1, 2, 8, 64, 256)]
        assert all(b >= a for a, b in zip(t, t[1:], strict=False)), t
        # and one mixed pass costs no more than the decode and prefill passes run one after the other
        assert t[-1] <= float(dev.iteration(256, 8700).time_s) + t[0]
