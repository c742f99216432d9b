"""A class matrix that selects one or two classes (``ops/table.py`` takes the coefficients' slice, or the sum of
two) equals numpy's general contraction of the classes with the weights, element by element and in sign."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from llmath.model.registry import resolve
from llmath.ops import table
from llmath.ops.core import CLASSES
from llmath.ops.table import _class_rhs

MODELS = ["llama-3-8b", "deepseek-v3", "qwen3-30b-a3b", "gpt-oss-20b", "bart-large", "t5-base"]


def _contraction(t, weights: tuple[float, ...]) -> np.ndarray:
    return np.einsum("c,ocm->om", np.asarray(weights, dtype=float), t.coef).T


def _selections():
    for k in (1, 2):
        for picked in itertools.combinations(range(len(CLASSES)), k):
            yield tuple(1.0 if c in picked else 0.0 for c in range(len(CLASSES)))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("stage", ["prefill", "decode"])
def test_selected_classes_equal_the_contraction(name, stage):
    t = table(resolve(name), stage)
    for w in _selections():
        fast, general = _class_rhs(t, w), _contraction(t, w)
        assert fast.shape == general.shape
        assert np.array_equal(fast, general)
        assert np.array_equal(np.signbit(fast), np.signbit(general))


def test_other_weights_and_non_finite_coefficients_take_the_contraction():
    t = table(resolve("llama-3-8b"), "decode")
    bytes_ = (2.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0)  # not a selection: weighted bytes
    assert np.array_equal(_class_rhs(t, bytes_), _contraction(t, bytes_))
    coef = t.coef.copy()
    coef[0, 1, 0] = np.inf  # 0 · inf is NaN in the contraction; a slice would keep the finite value
    inf = replace(t, coef=coef)
    w = tuple(1.0 if c == 0 else 0.0 for c in range(len(CLASSES)))
    assert np.isnan(_contraction(inf, w)[0, 0])
    assert np.array_equal(_class_rhs(inf, w), _contraction(inf, w), equal_nan=True)
