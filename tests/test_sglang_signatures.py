"""scripts/sglang_signatures.py: the measured rows' own signatures (decode steps to the first token, the replica's
output rate, the first token's share of a lifetime), checked against arithmetic written out here."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import script_module

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return script_module("sglang_signatures")


def test_signature_by_hand():
    # 512 clients, TTFT 3.2 s, TPOT 25 ms, 1000 output tokens:
    # steps 3.2 / 0.025 = 128; rate 512 / 0.025 = 20,480 tokens/s; lifetime 3.2 + 999 · 0.025 = 28.175 s,
    # share 3.2 / 28.175 = 0.11357
    sig = _script().signature(3.2, 0.025, 512, 1000)
    assert sig["steps"] == pytest.approx(128.0)
    assert sig["tok_s"] == pytest.approx(20480.0)
    assert sig["life"] == pytest.approx(3.2 / 28.175)


def test_one_token_outputs_are_all_first_token():
    # G = 1: no decode after the first token, so the first token is the whole lifetime
    assert _script().signature(0.4, 0.02, 4, 1)["life"] == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [(0.0, 0.02, 4, 10), (0.1, 0.0, 4, 10), (0.1, 0.02, 0, 10), (0.1, 0.02, 4, 0)])
def test_non_positive_inputs_are_refused(bad):
    with pytest.raises(ValueError, match="must be positive"):
        _script().signature(*bad)


@pytest.mark.parametrize(("clients", "band"), [(1, "≤ 8"), (8, "≤ 8"), (9, "≤ 32"), (128, "≤ 128"), (129, "> 128")])
def test_client_bands(clients, band):
    assert _script().client_bin(clients) == band
