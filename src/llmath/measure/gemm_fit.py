"""The GEMM kernel model of :mod:`llmath.hardware.efficiency_fit`, fitted to a calibration's own GEMM timings.

``llmath calibrate`` (CPU, Apple and GPUs without published kernel tables) times square GEMMs and skinny weight
GEMMs (``F.linear`` of 1 … 256 rows against a few weight shapes). This module fits the nine coefficients
``[c, h1, p1, h2, p2, mem, hm, pm, t0]`` of the ``gemm`` class to those timings, the model form, features
(m, n·k, bytes), parameterisation, starting point and bounds that ``scripts/fit_efficiency.py`` uses for the
published GPU tables, so a calibrated device's weight GEMMs go through the same code path
(:attr:`llmath.hardware.efficiency.Efficiency.gemm_fit`, :func:`llmath.hardware.roofline.mm_factor`). The peak
and bandwidth the fractions refer to are the profile's own (its large-GEMM rate and reference bandwidth).

The fit needs SciPy (``least_squares``, soft-L1 loss in log time). Without it, or with fewer timings than
coefficients, :func:`fit_gemm` returns ``None`` and the profile keeps only its ``matmul_rows`` / ``skinny_rows``
curves (the previous form), which the report's rule says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from llmath.hardware import efficiency_fit as ef

# [c, log10 h1, p1, log10 h2, p2, mem, log10 hm, pm, t0 (µs)]: the starting point and bounds of
# scripts/fit_efficiency.py for the gemm class
INIT = [0.8, 1.8, 1.0, 6.0, 1.0, 0.85, 6.0, 1.0, 4.0]
LO = [0.01, -3, 0.2, -3, 0.2, 0.01, 0, 0.2, 0]
HI = [1.0, 14, 4, 14, 4, 1.0, 13, 4, 200]
N_COEF = len(INIT)
BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def to_coef(theta) -> list[float]:
    """Fit parameters → the stored coefficients (powers of ten for the knees, t0 in seconds)."""
    c, l1, p1, l2, p2, mem, lm, pm, t0 = theta
    return [float(v) for v in (c, 10**l1, p1, 10**l2, p2, mem, 10**lm, pm, t0 * 1e-6)]


def features(m, n, k, bytes_per_element: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x1 = m, x2 = n·k, xm = bytes, FLOPs, bytes) of (m×k)·(k×n) GEMMs: both operands read once in the
    format, the output written in it (a calibration times one format end to end)."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    by = bytes_per_element * (m * k + k * n + m * n)
    return m, n * k, by, 2 * m * n * k, by


def fit_gemm(samples: Iterable[Mapping[str, Any]], fmt: str, peak: float, bandwidth: float) -> list[float] | None:
    """Coefficients of the GEMM model for ``samples`` (each with ``m``, ``n``, ``k`` and ``seconds``) timed in
    ``fmt``, relative to ``peak`` FLOP/s and ``bandwidth`` bytes/s; ``None`` without SciPy or with fewer
    samples than coefficients."""
    rows = [(float(s["m"]), float(s["n"]), float(s["k"]), float(s["seconds"])) for s in samples]
    if len(rows) < N_COEF or fmt not in BYTES:
        return None
    try:
        from scipy.optimize import least_squares
    except ImportError:
        return None
    m, n, k, t = (np.array(col) for col in zip(*rows, strict=True))
    feats = features(m, n, k, BYTES[fmt])

    def resid(theta):
        return np.log(ef.model_time(to_coef(theta), *feats, peak, bandwidth) / t)

    r = least_squares(resid, INIT, bounds=(LO, HI), loss="soft_l1", f_scale=0.05, max_nfev=4000)
    return to_coef(r.x)


def samples_from_raw(raw: Mapping[str, Any], fmt: str) -> list[dict[str, float]]:
    """The GEMM timings of a calibration's ``raw`` block in ``fmt``: its square GEMMs and skinny weight
    GEMMs (every shape, not only the medians), as (m, n, k, seconds)."""
    gemms = [g for g in raw.get("gemm", []) if g["dtype"] == fmt]
    out = [{"m": g["m"], "n": g["n"], "k": g["k"], "seconds": g["median_s"]} for g in gemms]
    for s in raw.get("skinny", []):
        if s["dtype"] == fmt:
            out.append({"m": s["rows"], "n": s["n"], "k": s["k"], "seconds": s["median_s"]})
    return out


def gemm_fit_entry(raw: Mapping[str, Any], fmt: str, peak: float, bandwidth: float) -> list | None:
    """``[[fmt, coefficients]]`` for the profile's ``efficiency.gemm_fit``, or ``None`` (see :func:`fit_gemm`)."""
    coef = fit_gemm(samples_from_raw(raw, fmt), fmt, peak, bandwidth)
    return None if coef is None else [[fmt, coef]]
