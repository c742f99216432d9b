"""The longest context memory allows (``memory.max_context``) and whether memory bounds it at all
(``memory.max_context_bounded``): a model whose per-sequence state does not grow with the context (RWKV's fixed
recurrent state) is not bounded by memory, and says so instead of printing the search's upper end."""

from __future__ import annotations

import pytest
from helpers import run_cli

from llmath.analysis import analyze, kv_cache_bytes
from llmath.model import registry
from llmath.model.dtypes import Precision
from llmath.ops.state import MAX_CONTEXT_SEARCH


def test_a_fixed_state_is_not_bounded_by_memory(capsys):
    spec = registry.spec("rwkv-4-14b-pile")
    # RWKV keeps the same state whatever the context: 1 token and a million tokens hold the same bytes
    assert kv_cache_bytes(spec, 1, 1, Precision()) == kv_cache_bytes(spec, 1, 1_000_000, Precision())
    m = analyze("rwkv-4-14b-pile", "h100-sxm").memory
    assert m.max_context_bounded is False and m.max_context == MAX_CONTEXT_SEARCH
    code, out, _ = run_cli(capsys, "analyze", "rwkv-4-14b-pile", "-H", "h100-sxm")
    assert code == 0 and "longest context not bounded by memory" in out


def test_a_growing_cache_bounds_the_context():
    # Llama-3-8B: 32 layers x K and V x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token, on 80 GB
    m = analyze("llama-3-8b", "h100-sxm").memory
    assert m.max_context_bounded is True and 0 < m.max_context < MAX_CONTEXT_SEARCH
    free = m.capacity_bytes - m.weights_bytes - m.reserve_bytes
    assert (m.max_context + 1) * 131_072 > free - m.activation_bytes


def test_blt_reruns_every_byte_so_its_activations_bound_it(tmp_path):
    """BLT keeps no cache (ops/blt.py): each decode step runs the whole forward again, so the activations of a
    forward over the whole context bound it (the search's upper end did before)."""
    pytest.importorskip("transformers")
    from causal_lm_types import default_config

    from llmath.model.hf import spec_from_config

    spec = spec_from_config(default_config("blt", str(tmp_path)), "blt")
    m = analyze(spec, "h100-sxm").memory
    assert m.kv_cache_bytes == 0
    assert m.max_context_bounded is True and m.max_context < MAX_CONTEXT_SEARCH
