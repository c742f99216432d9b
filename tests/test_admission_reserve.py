"""The KV a running request holds back from admission: SGLang's new-token reserve, from arithmetic."""

import pytest

from llmath.deploy import engines
from llmath.deploy.admission_reserve import admitted_positions, disaggregated, reserved_tokens
from llmath.deploy.serving import Requests
from llmath.deploy.serving_memory import memory
from llmath.deploy.step import Device
from llmath.errors import WorkloadError
from llmath.hardware import get
from llmath.hardware.roofline import efficiency
from llmath.model.dtypes import Precision
from llmath.model.registry import resolve

H100 = get("h100-sxm")


def test_reserve_is_the_clipped_remaining_output_times_the_ratio_over_a_lifetime():
    # G = 3,001 outputs: tokens left r = 3,000 … 1; with a clip of 1,000, Σ min(r, 1,000) = 1,000 · 1,001 / 2
    # + 2,000 · 1,000 = 2,500,500, over 3,000 steps 833.5 tokens, × ratio 0.1 = 83.35.
    # G = 801 (under the clip): Σ r for r = 1 … 800 = 320,400, / 800 = 400.5, × 0.1 = 40.05.
    # SGLang 0.5.9 at its floor (0.098, clip 4,096), G = 8,192: Σ = 4,096 · 4,097 / 2 + 4,095 · 4,096 = 25,163,776,
    # / 8,191 = 3,072.2, × 0.098 = 301.07 (docs/serving.md: 0.098 × (4,096 − 4,096² / (2 · 8,192)) ≈ 301).
    assert reserved_tokens([3001, 801], 0.1, 1000).tolist() == pytest.approx([83.35, 40.05])
    assert float(reserved_tokens([8192], 0.098, 4096)[0]) == pytest.approx(25_163_776 / 8191 * 0.098)
    assert float(reserved_tokens([1], 0.098, 4096)[0]) == 0.0  # no decode step: nothing left to reserve


def test_a_pool_admits_its_requests_at_their_kv_plus_the_reserve():
    # A fixed pool of 100,000 tokens (kv_pool_tokens; llama-3-8b's KV is the same bytes at every position).
    # P = 1,000, G = 3,001: on demand a request holds its mean KV P + (G − 1)/2 = 2,500 positions, so the pool
    # admits 100,000 / 2,500 = 40 requests. With a reserve of 0.1 × its clipped remaining output (clip 1,000:
    # 83.35 tokens above) it counts 2,583.35: ⌊100,000 / 2,583.35⌋ = 38 requests.
    dev = Device(resolve("llama-3-8b"), H100, Precision(), efficiency("expected", H100))
    req = Requests(1000, 3001)
    plain = engines.preset("vllm", H100, kv_pool_tokens=100_000, max_num_seqs=1024)
    held = engines.preset(
        "vllm", H100, kv_pool_tokens=100_000, max_num_seqs=1024, new_token_reserve=0.1, new_token_reserve_clip=1000
    )
    assert admitted_positions(plain, req) == 2500.0
    assert admitted_positions(held, req) == pytest.approx(2583.35)
    assert memory(dev, plain, req).max_resident == 40
    assert memory(dev, held, req).max_resident == 38


def test_sglang_preset_holds_back_its_floor_ratio_and_others_none():
    # sglang 0.5.9 environ.py: 0.7 × 0.14 = 0.098, clip 4,096; vLLM and TensorRT-LLM have no such reserve.
    assert (
        engines.preset("sglang", H100).new_token_reserve,
        engines.preset("sglang", H100).new_token_reserve_clip,
    ) == (pytest.approx(0.7 * 0.14), 4096)
    assert engines.preset("vllm", H100).new_token_reserve == 0.0
    assert engines.preset("trtllm", H100).new_token_reserve == 0.0


@pytest.mark.parametrize("ratio, clip", [(-0.1, 4096), (1.5, 4096), (0.1, -1), (float("nan"), 4096)])
def test_a_reserve_out_of_range_is_refused_in_one_line(ratio, clip):
    with pytest.raises(WorkloadError, match="new_token_reserve"):
        engines.preset("sglang", H100, new_token_reserve=ratio, new_token_reserve_clip=clip)


def test_a_disaggregated_pool_admits_without_the_reserve():
    # SGLang's decode server admits through DecodePreallocQueue (disaggregation/decode.py, sglang 0.5.9), not
    # PrefillAdder: its pool counts each request at its KV alone, P + (G − 1)/2 = 1,000 + 1,500 = 2,500 positions.
    sgl = engines.preset("sglang", H100)
    assert admitted_positions(disaggregated(sgl), Requests(1000, 3001)) == 2500.0
    assert admitted_positions(sgl, Requests(1000, 3001)) > 2500.0
