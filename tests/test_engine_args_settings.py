"""Engine settings beyond layout, formats and limits read from an engine's command line: CUDA-graph capture, request
polling, overlap scheduling, batch waiting, attention-DP balancing, chunked prefill. Each is read into the engine
object, written back by --emit, refused where llmath cannot model the value, and moves the prediction the way the
engine's mechanism does."""

from __future__ import annotations

import json

import pytest

from llmath.deploy.engine_args import Deployment, EngineArgsError, emit, yaml_subset
from llmath.deploy.engine_read import parse
from tests.helpers import run_cli

VLLM = "vllm serve meta-llama/Llama-3.1-8B"
SGLANG = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B"
TRTLLM = "trtllm-serve meta-llama/Llama-3.1-8B"


def test_vllm_compilation_config_levels_capture_sizes_and_async_scheduling():
    # docs.vllm.ai v0.13.0 vllm/config/compilation.py CUDAGraphMode: FULL_DECODE_ONLY = (FULL, NONE), graphs for
    # decode-only batches, none for batches that prefill; InferenceX's 70b_fp8_b200_docker.sh passes it with
    # "splitting_ops": [] (one flattened graph: the preset's flat_graph_host_factor stays)
    flat = parse(VLLM + ' --compilation-config \'{"cudagraph_mode": "FULL_DECODE_ONLY", "splitting_ops": []}\'')
    assert flat.deployment.engine_settings == {"eager_prefill": True}
    # without splitting_ops the compiled graph stays split at attention: host factor 1
    split = parse(VLLM + " -O.cudagraph_mode=FULL_DECODE_ONLY").deployment.engine_settings
    assert split == {"eager_prefill": True, "flat_graph_host_factor": 1.0}
    # docs/design/optimization_levels.md: -O0 sets cudagraph_mode NONE (no CUDA graphs), -O1 PIECEWISE, -O2/-O3
    # FULL_AND_PIECEWISE (vLLM's default); an explicit cudagraph_mode wins over the level
    assert parse(VLLM + " -O0").deployment.enforce_eager is True
    for level in ("-O1", "-O2", "-O 3"):
        read = parse(f"{VLLM} {level}").deployment
        assert (read.enforce_eager, read.engine_settings, parse(f"{VLLM} {level}").unknown) == (False, {}, [])
    assert parse(VLLM + " -O0 -O.cudagraph_mode=FULL_AND_PIECEWISE").deployment.enforce_eager is False
    # vllm/config/compilation.py: the largest capture size bounds the passes replayed from a graph;
    # the 2025 InferenceX gpt-oss scripts pass cuda-graph-sizes 2048, the 2026 ones max-cudagraph-capture-size 2048
    graph = {"cuda_graph_max_tokens": 2048, "cuda_graph_tokens_per_seq": 0}
    for flag in ("--max-cudagraph-capture-size 2048", "--cuda-graph-sizes 2048"):
        assert parse(f"{VLLM} {flag}").deployment.engine_settings == graph
    listed = parse(VLLM + " --compilation-config '{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16]}'").deployment
    assert listed.engine_settings == {"cuda_graph_max_tokens": 16, "cuda_graph_tokens_per_seq": 0}
    # vllm/v1/engine/core.py step_with_batch_queue: async scheduling keeps 2 steps in flight
    assert parse(VLLM + " --async-scheduling").deployment.engine_settings == {"replacement_lag": 2}
    assert parse(VLLM + " --no-async-scheduling").deployment.engine_settings == {"replacement_lag": 1}
    # arg_utils.py '--enable-chunked-prefill' (SchedulerConfig.enable_chunked_prefill): off, a prompt runs whole
    assert parse(VLLM + " --no-enable-chunked-prefill").deployment.engine_settings == {"chunked_prefill": False}


def test_sglang_polling_overlap_prefill_budget_and_graph_cap():
    # InferenceX dsr1_fp8_b200.sh: --scheduler-recv-interval 30, --chunked-prefill-size 32768 --max-prefill-tokens
    # 32768, --max-running-requests 128 --cuda-graph-max-bs 128
    read = parse(
        SGLANG + " --scheduler-recv-interval 30 --disable-overlap-schedule --max-running-requests 128"
        " --cuda-graph-max-bs 128 --chunked-prefill-size 32768 --max-prefill-tokens 8192"
    ).deployment
    assert read.engine_settings == {"recv_interval": 30, "replacement_lag": 1, "overlap_scheduler": False}
    # PrefillAdder stops at the smaller of the chunk and --max-prefill-tokens: min(32768, 8192)
    assert read.max_num_batched_tokens == 8192
    # SGLang's --max-prefill-tokens defaults to 16384 (server_arguments.md): a 32768 chunk alone takes 16384
    assert parse(SGLANG + " --chunked-prefill-size 32768").deployment.max_num_batched_tokens == 16384
    alone = parse(SGLANG + " --max-prefill-tokens 4096").deployment
    assert (alone.max_num_batched_tokens, alone.max_prefill_tokens) == (None, 4096)
    assert read.decode_graph_batch == 128
    # server_arguments.md: --chunked-prefill-size -1 disables chunked prefill
    assert parse(SGLANG + " --chunked-prefill-size -1").deployment.engine_settings == {"chunked_prefill": False}
    # Scheduler: min_new_token_ratio = min(min(0.7 * c, 1) * 0.14, 1): c = 2 gives 1.0 * 0.14 = 0.14, c = 0.5 0.049
    reserve = parse(SGLANG + " --schedule-conservativeness 2").deployment.engine_settings["new_token_reserve"]
    assert reserve == pytest.approx(0.14)
    half = parse(SGLANG + " --schedule-conservativeness 0.5").deployment.engine_settings["new_token_reserve"]
    assert half == pytest.approx(0.049)
    # server_arguments.md --enable-piecewise-cuda-graph: prefill passes up to --piecewise-cuda-graph-max-tokens
    # (8192 unless given, as SGLang's start-up log of ServerArgs prints it) replay piecewise graphs
    piecewise = parse(SGLANG + " --enable-piecewise-cuda-graph").deployment.engine_settings
    assert piecewise == {"eager_prefill": False, "cuda_graph_max_tokens": 8192, "cuda_graph_tokens_per_seq": 0}
    sized = parse(SGLANG + " --enable-piecewise-cuda-graph --piecewise-cuda-graph-max-tokens 4096").deployment
    assert sized.engine_settings["cuda_graph_max_tokens"] == 4096


def test_decode_graph_caps_the_load_can_exceed_run_those_batches_eagerly(capsys):
    # SGLang cuda_graph_runner.py CudaGraphRunner.can_run: a batch replays a graph only if its size <= max_bs, a
    # larger one runs eagerly; TensorRT-LLM llm_args.py CudaGraphConfig.max_batch_size (graphs for decode-only
    # batches up to it; None: none). 256 clients above a cap of 64: modelled (tests/test_decode_graph_cap.py gives
    # the floor's arithmetic), the decode steps slower than with every batch captured
    text = SGLANG + " --cuda-graph-max-bs 64"
    code, out, err = run_cli(capsys, "analyze", "-H", "h100-sxm", "-c", "256", "--json", "--engine-args", text)
    assert code == 0, err
    capped = json.loads(out)["tpot_s"]
    code, out, _ = run_cli(capsys, "analyze", "-H", "h100-sxm", "-c", "256", "--json", "--engine-args", SGLANG)
    assert code == 0 and capped > json.loads(out)["tpot_s"]
    graphs = parse(TRTLLM, yaml_subset("cuda_graph_config:\n  enable_padding: true\n  batch_sizes: [1, 2, 8, 32]\n"))
    assert (graphs.deployment.decode_graph_batch, graphs.deployment.enforce_eager) == (32, False)
    off = parse(TRTLLM, yaml_subset("cuda_graph_config: null\n")).deployment
    assert (off.decode_graph_batch, off.enforce_eager) == (None, True)


def test_trtllm_config_overlap_batch_waiting_balance_and_chunking():
    # InferenceX 70b_fp8_h200_trt_slurm.sh: batch_wait_max_tokens_ratio 0.9, batch_wait_timeout_iters 20;
    # dsr1_fp8_b200_trt.sh: attention_dp_config enable_balance true, timeout_iters 60, batching_wait_iters 0;
    # srt-slurm context servers: disable_overlap_scheduler true
    config = yaml_subset(
        "batch_wait_timeout_iters: 20\nbatch_wait_max_tokens_ratio: 0.9\ndisable_overlap_scheduler: true\n"
        "enable_chunked_prefill: true\nattention_dp_config:\n  enable_balance: true\n  timeout_iters: 60\n"
        "  batching_wait_iters: 0\n"
    )
    read = parse(TRTLLM, config)
    assert read.deployment.engine_settings == {
        "batch_wait_iters": 20,
        "batch_wait_tokens_ratio": 0.9,
        "overlap_scheduler": False,
        "replacement_lag": 1,
        "chunked_prefill": True,
        "adp_balance": True,
        "adp_timeout_iters": 60,
        "adp_batching_wait_iters": 0,
    }
    assert read.notes == []  # every key is one llmath reads
    assert parse(TRTLLM + " --enable_chunked_prefill").deployment.engine_settings == {"chunked_prefill": True}
    # InferenceX-style YAML: the serve flags' settings as LLM-API keys, and MAX_UTILIZATION admission
    yaml = yaml_subset(
        "max_batch_size: 256\nmax_num_tokens: 16384\nkv_cache_config:\n  free_gpu_memory_fraction: 0.85\n"
        "scheduler_config:\n  capacity_scheduler_policy: MAX_UTILIZATION\n"
    )
    dep = parse(TRTLLM + " --tp_size 8", yaml).deployment
    assert (dep.max_num_seqs, dep.max_num_batched_tokens, dep.gpu_memory_utilization) == (256, 16384, 0.85)
    assert dep.engine_settings == {"kv_admission": "on_demand"}


def test_trtllm_triton_moe_backend_is_the_triton_kernel_path():
    # InferenceX gptoss_fp4_h200_trt_slurm.sh writes moe_config: backend: TRITON (TensorRT-LLM's TritonFusedMoE);
    # the other backends' kernel depends on the checkpoint's format and is not set
    triton = parse(TRTLLM, yaml_subset("moe_config:\n  backend: TRITON\n")).deployment.engine_settings
    assert triton == {"moe_kernel": "trtllm_triton_mxfp4"}
    assert parse(TRTLLM, yaml_subset("moe_config:\n  backend: CUTLASS\n")).deployment.engine_settings == {}
    cmd = emit("trtllm", Deployment("m/n", engine_settings=triton), moe=True)
    assert cmd.config == {"moe_config": {"backend": "TRITON"}} and cmd.notes == []


SETTINGS = [
    ("vllm", Deployment("m/n", engine_settings={"eager_prefill": True, "replacement_lag": 2})),
    ("vllm", Deployment("m/n", engine_settings={"eager_prefill": True, "flat_graph_host_factor": 1.0})),
    ("vllm", Deployment("m/n", engine_settings={"cuda_graph_max_tokens": 2048, "cuda_graph_tokens_per_seq": 0})),
    ("sglang", Deployment("m/n", engine_settings={"recv_interval": 10})),
    ("sglang", Deployment("m/n", engine_settings={"replacement_lag": 1, "overlap_scheduler": False})),
    ("sglang", Deployment("m/n", max_num_batched_tokens=32768)),
    ("sglang", Deployment("m/n", max_prefill_tokens=4096)),
    ("sglang", Deployment("m/n", decode_graph_batch=256)),
    ("sglang", Deployment("m/n", engine_settings={"chunked_prefill": False, "new_token_reserve": 0.049})),
    ("vllm", Deployment("m/n", engine_settings={"chunked_prefill": False})),
    ("trtllm", Deployment("m/n", engine_settings={"kv_admission": "on_demand"})),
    (
        "sglang",
        Deployment(
            "m/n",
            engine_settings={"eager_prefill": False, "cuda_graph_max_tokens": 4096, "cuda_graph_tokens_per_seq": 0},
        ),
    ),
    ("trtllm", Deployment("m/n", decode_graph_batch=512)),
    ("trtllm", Deployment("m/n", enforce_eager=True)),
    (
        "trtllm",
        Deployment(
            "m/n",
            engine_settings={
                "batch_wait_iters": 40,
                "batch_wait_tokens_ratio": 0.8,
                "overlap_scheduler": True,
                "replacement_lag": 2,
                "adp_balance": True,
                "adp_timeout_iters": 60,
                "chunked_prefill": True,
            },
        ),
    ),
]


@pytest.mark.parametrize("engine,dep", SETTINGS, ids=lambda x: x if isinstance(x, str) else "")
def test_emitted_settings_read_back_the_same(engine, dep):
    cmd = emit(engine, dep, False)
    read = parse(cmd.shell(), yaml_subset(cmd.config_text()) if cmd.config else None)
    assert read.deployment == dep and read.unknown == [] and cmd.notes == []


def test_a_setting_the_target_engine_has_no_flag_for_is_a_note():
    cmd = emit("vllm", Deployment("m/n", engine_settings={"recv_interval": 30}), False)
    assert "recv_interval=30" in " ".join(cmd.notes) and "--scheduler-recv-interval" not in cmd.argv


@pytest.mark.parametrize(
    "text,config,needle",
    [
        (VLLM + ' --compilation-config \'{"cudagraph_mode": "FULL"}\'', None, "cudagraph_mode 'FULL'"),
        (VLLM + " -O7", None, "optimization level"),
        (VLLM + " --compilation-config '[1, 2]'", None, "JSON object"),
        (VLLM + " --compilation-config '{\"level\": 9}'", None, "optimization level"),
        (VLLM + ' --compilation-config \'{"cudagraph_capture_sizes": [1, "a"]}\'', None, "list of token counts"),
        (VLLM + ' --compilation-config \'{"max_cudagraph_capture_size": "512"}\'', None, "whole number"),
        (VLLM + " --max-cudagraph-capture-size 512 --cuda-graph-sizes 1024", None, "twice"),
        (VLLM + " --async-scheduling --no-async-scheduling", None, "conflict"),
        (SGLANG + " --scheduler-recv-interval 0", None, ">= 1"),
        (TRTLLM, {"batch_wait_timeout_ms": 5.0}, "iterations only"),
        (TRTLLM, {"batch_wait_max_tokens_ratio": 1.5}, r"\[0, 1\]"),
        (TRTLLM, {"attention_dp_config": {"timeout_iters": -1}}, "timeout_iters"),
        (TRTLLM, {"disable_overlap_scheduler": "yes"}, "true or false"),
        (TRTLLM, {"cuda_graph_config": {"max_batch_size": -4}}, "max_batch_size"),
        (TRTLLM, {"scheduler_config": {"capacity_scheduler_policy": "STATIC_BATCH"}}, "STATIC_BATCH"),
        (TRTLLM + " --max_batch_size 64", {"max_batch_size": 256}, "differ"),
        (SGLANG + " --schedule-conservativeness lots", None, "conservativeness"),
        (VLLM + " --enable-chunked-prefill --no-enable-chunked-prefill", None, "conflict"),
    ],
)
def test_unmodellable_settings_are_refused(text, config, needle):
    with pytest.raises(EngineArgsError, match=needle):
        parse(text, config)


def test_unmodellable_setting_exits_2_at_the_command_line(capsys, tmp_path):
    (tmp_path / "ms.yaml").write_text("batch_wait_timeout_ms: 5\n")
    for text, needle in (
        (VLLM + ' --compilation-config \'{"cudagraph_mode": "FULL"}\'', "cudagraph_mode 'FULL'"),
        (SGLANG + " --schedule-conservativeness lots", "--schedule-conservativeness 'lots'"),
        (f"{TRTLLM} --config {tmp_path / 'ms.yaml'}", "batch_wait_timeout_ms 5"),
    ):
        code, _, err = run_cli(capsys, "analyze", "-H", "h100-sxm", "-c", "4", "--engine-args", text)
        assert code == 2 and needle in err and "Traceback" not in err, err
        assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err


def _served(capsys, text: str, *extra: str) -> dict:
    code, out, err = run_cli(capsys, "analyze", "-H", "h100-sxm", "--engine-args", text, *extra, "--json")
    assert code == 0, err
    return json.loads(out)


def test_vllm_settings_move_the_prediction(capsys):
    load = ("-c", "4", "--prompt", "256", "--gen", "64")
    base = _served(capsys, VLLM, *load)
    # every pass that prefills launched from the host (flattened graph): the prompt's pass cannot be shorter
    flat = ' --compilation-config \'{"cudagraph_mode":"FULL_DECODE_ONLY","splitting_ops":[]}\''
    eager = _served(capsys, VLLM + flat, *load)
    assert eager["engine"]["eager_prefill"] is True and eager["ttft_s"] > base["ttft_s"]
    # -O0: no graphs at all, decode launched op by op too
    none = _served(capsys, VLLM + " -O0", *load)
    assert none["engine"]["cuda_graphs"] is False and none["tpot_s"] > base["tpot_s"]
    # async scheduling: a follow-up request joins one step later
    lag = _served(capsys, VLLM + " --async-scheduling", "-c", "32", "--prompt", "2048", "--gen", "128")
    sync = _served(capsys, VLLM, "-c", "32", "--prompt", "2048", "--gen", "128")
    assert lag["engine"]["replacement_lag"] == 2 and lag["ttft_s"] > sync["ttft_s"]


def test_sglang_and_trtllm_settings_move_the_prediction(capsys, tmp_path):
    load = ("-c", "32", "--prompt", "1024", "--gen", "128", "--arrival", "staggered")
    base = _served(capsys, SGLANG, *load)
    # a request that arrives while the others decode waits for the next poll: every 30 decode iterations
    polled = _served(capsys, SGLANG + " --scheduler-recv-interval 30", *load)
    assert polled["engine"]["recv_interval"] == 30 and polled["ttft_s"] > base["ttft_s"]
    # without the overlap scheduler a follow-up joins the next batch instead of the one after
    direct = _served(capsys, SGLANG + " --disable-overlap-schedule", *load)
    assert direct["engine"]["replacement_lag"] == 1 and direct["ttft_s"] < base["ttft_s"]
    # prefill passes replayed from piecewise graphs: no host launch floor, so no longer TTFT
    short = ("-c", "1", "--prompt", "64", "--gen", "64")
    piecewise = _served(capsys, SGLANG + " --enable-piecewise-cuda-graph", *short)
    assert piecewise["engine"]["eager_prefill"] is False
    assert piecewise["ttft_s"] < _served(capsys, SGLANG, *short)["ttft_s"]
    # --max-prefill-tokens alone: the smaller of it and the H100's chunk default, 8192 (data/engines.json)
    small = _served(capsys, SGLANG + " --max-prefill-tokens 2048", *load)
    assert small["engine"]["max_num_batched_tokens"] == 2048
    trt = _served(capsys, TRTLLM, *load)
    (tmp_path / "wait.yaml").write_text("batch_wait_timeout_iters: 20\nbatch_wait_max_tokens_ratio: 0.9\n")
    # prompts held back until the batch reaches 0.9 of the token budget or 20 iterations pass
    waited = _served(capsys, f"{TRTLLM} --config {tmp_path / 'wait.yaml'}", *load)
    assert waited["engine"]["batch_wait_iters"] == 20 and waited["ttft_s"] > trt["ttft_s"]
