"""Aggregated serving with a speculative draft holds the draft's KV cache per request beside the target's, as
the disaggregated pools count it (llmath.deploy.disagg.pool_memory)."""

import pytest

from llmath import Workload
from llmath.deploy.service import serve
from llmath.deploy.speculative import Speculation
from llmath.model.dtypes import Precision

BF16 = Precision("bf16", "bf16", "bf16")
# Llama-3-8B's KV per position and layer: (K and V) × 8 KV heads × 128 × 2 bytes = 4,096 B; 32 layers, and an
# EAGLE head is one decoder layer of the same shape
LAYER_KV = 2 * 8 * 128 * 2


def _memory(speculation=None):
    kw = {"workload": Workload(prompt=64, gen=8, concurrency=4), "precision": BF16, "speculation": speculation}
    return serve("llama-3-8b", "h100-sxm", **kw).memory


def test_the_drafts_kv_is_counted_per_request():
    plain, spec = _memory(), _memory(Speculation("eagle", 3, 2.5))
    # a request reaches position 64 + 8 − 1 = 71: 71 × 32 layers × 4,096 B = 9,306,112 B for the target,
    # 71 × (32 + 1) × 4,096 B = 9,596,928 B with the EAGLE head's layer
    assert plain.kv_bytes_per_request == 71 * 32 * LAYER_KV == 9_306_112
    assert spec.kv_bytes_per_request == 71 * 33 * LAYER_KV == 9_596_928
    # what admission counts grows by the same 33/32, and the KV pool (smaller by the head's weights) admits
    # pool // that many requests
    assert spec.kv_bytes_admitted == pytest.approx(plain.kv_bytes_admitted * 33 / 32, rel=1e-12)
    assert spec.max_requests_by_kv == int(spec.kv_pool_bytes // (plain.kv_bytes_admitted * 33 / 32))
    assert spec.kv_pool_bytes == pytest.approx(plain.kv_pool_bytes - (spec.weights_bytes - plain.weights_bytes))
