"""InferenceX's SGLang DeepSeek-R1 launch scripts read into a run's engine settings (measure.sglang_launchers)."""

import math

import pytest
from test_serving_runs import _row

from llmath.errors import LLMathError
from llmath.measure.serving_runs import predict_run, to_run
from llmath.measure.sglang_launchers import launcher_sglang_settings, runs_mtp, script_flags

NOTES = "model=DeepSeek-R1; silicon_concurrency={}; measured=2026-03-25T16:34:14Z; wip=False"


def _sglang(c: int, **kw) -> dict:
    return _row(**{"backend": "sglang", "source_notes": NOTES.format(c), "batch_size": str(c), **kw})


def test_fp8_b200_tp8_as_its_script_sets():
    # SemiAnalysisAI/InferenceX 12ba0ae07 benchmarks/single_node/dsr1_fp8_b200.sh, TP 8 case:
    # MAX_RUNNING_REQUESTS=128, MEM_FRAC_STATIC=0.82, CHUNKED_PREFILL_SIZE=MAX_PREFILL_TOKENS=32768,
    # SCHEDULER_RECV_INTERVAL=30 when CONC >= 16 else 10
    row = _sglang(64, precision="fp8", gemm_quant_mode="fp8_block", moe_quant_mode="fp8_block", moe_ep_size="1")
    assert launcher_sglang_settings(row, 64, True) == {
        "max_num_batched_tokens": 32768, "max_num_seqs": 128, "gpu_memory_utilization": 0.82, "recv_interval": 30,
    }  # fmt: skip
    assert launcher_sglang_settings(row, 8, True)["recv_interval"] == 10
    assert dict(to_run(row).engine_settings)["max_num_seqs"] == 128  # the hook in serving_runs.to_run


def test_fp8_b200_tp4_case():
    # the same script's TP 4 case (8192/1024 only): 32 requests, 0.95 of memory, 8192-token prefill, interval 10
    row = _sglang(8, precision="fp8", tp_size="4", isl="8192", moe_ep_size="1")
    assert launcher_sglang_settings(row, 8, True) == {
        "max_num_batched_tokens": 8192, "max_num_seqs": 32, "gpu_memory_utilization": 0.95, "recv_interval": 10,
    }  # fmt: skip


def test_fp4_b200_takes_sglang_default_max_prefill_tokens():
    # dsr1_fp4_b200.sh passes --chunked-prefill-size 16384 and no --max-prefill-tokens (SGLang 0.5.9's default
    # 16384): a prefill batch takes min(16384, 16384) new tokens; 256 requests, 0.85 of memory
    s = launcher_sglang_settings(_sglang(4), 4, True)
    assert (s["max_num_batched_tokens"], s["max_num_seqs"], s["gpu_memory_utilization"]) == (16384, 256, 0.85)
    assert s["recv_interval"] == 10


def test_h200_cap_by_lengths_and_polls_every_iteration():
    # dsr1_fp8_h200.sh: 512 requests at 1024/1024, 256 otherwise; 32768-token prefill, 0.82; no recv interval
    h200 = {"system": "h200_sxm", "precision": "fp8", "moe_ep_size": "1"}
    one_k = launcher_sglang_settings(_sglang(32, **h200), 32, True)
    eight_k = launcher_sglang_settings(_sglang(32, isl="8192", **h200), 32, True)
    assert one_k == {"max_num_batched_tokens": 32768, "max_num_seqs": 512, "gpu_memory_utilization": 0.82}
    assert eight_k["max_num_seqs"] == 256 and "recv_interval" not in eight_k


def test_rows_no_script_ran_get_nothing():
    fp8 = {"precision": "fp8", "moe_ep_size": "1"}
    assert launcher_sglang_settings(_sglang(256, **fp8), 256, True) == {}  # above the script's 128-request cap
    assert launcher_sglang_settings(_sglang(8), 8, False) == {}  # not an InferenceX row
    assert script_flags(_sglang(8, backend="trtllm"), 8) is None
    assert script_flags(_sglang(8, source_notes=NOTES.format(8).replace("2026-03-25", "2025-09-01")), 8) is None


def test_tp4_fp8_fits_only_with_its_memory_share():
    # DeepSeek-R1's 671e9 FP8 weights on 4 GPUs are >= 167.7 GB per GPU; SGLang takes its share of what a B200
    # reports (nvidia-smi: 183,359 MiB = 192.27 GB): its default share for TP 4 (0.85 · 192.27 = 163.4 GB) cannot
    # hold them, the script's 0.95 (182.7 GB) can, so the run is predicted with it and refused without it
    row = _sglang(8, precision="fp8", tp_size="4", isl="8192", gemm_quant_mode="fp8_block",
                  moe_quant_mode="fp8_block", moe_ep_size="1")  # fmt: skip
    run = to_run(row)
    assert math.isfinite(predict_run(run)["ttft_s"])
    bare = to_run(_row(**{**row, "source_notes": "silicon_concurrency=8"}))
    with pytest.raises(LLMathError, match="does not fit"):
        predict_run(bare)


MTP = NOTES + "; image=lmsysorg/sglang:v0.5.9-cu130"


def test_rows_of_the_mtp_configuration_run_its_script():
    # SemiAnalysisAI/InferenceX 12ba0ae07 .github/configs/nvidia-master.yaml: dsr1-fp8-b200-sglang runs TP 8 at
    # 4–64 clients for 1k/1k and 1k/8k and at 4 clients for 8k/1k (TP 4: 4–32); dsr1-fp8-b200-sglang-mtp, the same
    # image, TP 8 at 4–512 clients for all three. dsr1_fp8_b200_mtp.sh: 512 requests, 16384-token prefill, EAGLE
    # with 2 draft steps (--speculative-num-steps 2, --speculative-num-draft-tokens 3, top-k 1)
    fp8 = {"precision": "fp8", "gemm_quant_mode": "fp8_block", "moe_quant_mode": "fp8_block", "moe_ep_size": "1"}

    def row(c, **kw):
        return _sglang(c, **{"source_notes": MTP.format(c), **fp8, **kw})

    assert runs_mtp(row(256), 256) and runs_mtp(row(8, isl="8192"), 8)  # only the MTP configuration ran these
    assert not runs_mtp(row(64), 64) and not runs_mtp(row(4, isl="8192"), 4)  # both did: read as the plain run
    assert not runs_mtp(row(8, isl="8192", tp_size="4"), 8)  # TP 4: the plain configuration's only
    assert not runs_mtp(_sglang(256, **fp8), 256)  # no image in the notes: not told apart
    settings = launcher_sglang_settings(row(256), 256, True)
    assert (settings["max_num_seqs"], settings["max_num_batched_tokens"], settings["recv_interval"]) == (512, 16384, 30)
    assert launcher_sglang_settings(row(64), 64, True)["max_num_seqs"] == 128  # the plain script's cap


def test_every_flag_of_every_script_is_modelled_or_has_its_reason():
    # each flag the scripts pass is either one llmath models or one NOT_MODELLED says why it is not
    from llmath.measure.sglang_launchers import (
        INFERENCEX_SGLANG_MTP,
        INFERENCEX_SGLANG_SCRIPTS,
        MODELLED,
        NOT_MODELLED,
        SPECULATION_FLAGS,
    )

    known = set(MODELLED) | set(NOT_MODELLED) | set(SPECULATION_FLAGS)
    cases = [INFERENCEX_SGLANG_MTP["flags"]]
    for script in INFERENCEX_SGLANG_SCRIPTS.values():
        cases += [script["flags"], *script.get("tp", {}).values(), *script.get("lengths", {}).values()]
    for flags in cases:
        assert set(flags) <= known, set(flags) - known
    assert all(NOT_MODELLED[k].strip() for k in NOT_MODELLED)


COLD = NOTES.replace("2026-03-25", "2025-11-10")  # before the client's warm-ups (InferenceX d053ae24e, 2026-01-21)


@pytest.mark.parametrize(
    ("precision", "isl", "clients", "chunked"),
    [
        # FP4 script: --chunked-prefill-size 16384, SGLang's default --max-prefill-tokens 16384; the client draws
        # prompts uniformly in [⌊0.8·L⌋, L]: 1k prompts average (819 + 1024) / 2 = 921.5 tokens, 8k (6553 + 8192) / 2
        ("fp4", 1024, 16, False),  # 16 · 921.5 = 14,744 ≤ 16,384
        ("fp4", 1024, 32, True),  # 32 · 921.5 = 29,488 > 16,384
        ("fp4", 8192, 4, True),  # 4 · 7,372.5 = 29,490 > 16,384
        # FP8 script, TP 8: --chunked-prefill-size = --max-prefill-tokens = 32768
        ("fp8", 1024, 32, False),  # 29,488 ≤ 32,768
        ("fp8", 1024, 64, True),  # 58,976 > 32,768
        ("fp8", 8192, 4, False),  # 29,490 ≤ 32,768
        ("fp8", 8192, 8, True),  # 58,980 > 32,768
    ],
)
def test_first_wave_beyond_one_prefill_batch(precision, isl, clients, chunked):
    from llmath.measure.sglang_launchers import first_wave_chunked

    fp8 = {"gemm_quant_mode": "fp8_block", "moe_quant_mode": "fp8_block", "moe_ep_size": "1"}
    kw = {"precision": precision, "isl": str(isl), **(fp8 if precision == "fp8" else {})}
    mean = (int(0.8 * isl) + isl) / 2
    assert first_wave_chunked(_sglang(clients, **kw), clients, mean) is chunked
    cold = to_run(_sglang(clients, **{**kw, "source_notes": COLD.format(clients)}))
    warm = to_run(_sglang(clients, **kw))
    assert any("extend-with-prefix" in a for a in cold.assumed) is chunked
    assert not any("extend-with-prefix" in a for a in warm.assumed)  # the warm-up ran that path first


def test_first_wave_of_rows_no_script_ran():
    from llmath.measure.sglang_launchers import first_wave_chunked

    assert not first_wave_chunked(_sglang(64, backend="trtllm"), 64, 921.5)
    assert not first_wave_chunked(_sglang(64, system="h100_sxm"), 64, 921.5)
