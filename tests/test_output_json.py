"""The CLI's strict JSON: NaN and ±Infinity written as null wherever they sit, NumPy values as Python's."""

import json
import math

import numpy as np

from llmath.output import to_json


def test_non_finite_numbers_become_null_at_any_depth():
    obj = {
        "nan": math.nan,
        "inf": [1.5, math.inf, (-math.inf, 2)],
        3: {"f32": np.float32("nan"), "f64": np.float64(0.25), "arr": np.array([1.0, np.inf])},
        "text": "NaN",
    }
    expected = {"nan": None, "inf": [1.5, None, [None, 2]], "3": {"f32": None, "f64": 0.25, "arr": [1.0, None]}}
    expected["text"] = "NaN"  # a string that spells a constant stays a string
    assert to_json(obj) == json.dumps(expected, indent=2)
    assert to_json(obj, indent=None) == json.dumps(expected)


def test_finite_values_round_trip_exactly():
    xs = [0.1, 1 / 3, 1e-300, 2.5e300, -0.0, 123456789.123456789]
    assert json.loads(to_json(xs)) == xs
