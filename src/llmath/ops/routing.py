"""How an MoE layer's router spreads T tokens × top-k over E experts: the distinct experts hit (whose weights a
grouped kernel streams) and the busiest expert-parallel rank's share of the routed tokens (whose work the layer
waits for).

Routing conventions (``ROUTINGS``):

* ``uniform`` (the default, :data:`ROUTING`): each token picks its k experts uniformly at random:
  E·(1 − (1 − k/E)^T) experts hit, every rank the same load.
* ``power_law``: the skewed routing aiconfigurator models DeepSeek, MiniMax, Nemotron and Kimi MoE layers with
  (aiconfigurator-core 0.12.0 ``sdk/config.py`` ``workload_distribution = "power_law"``;
  ``sdk/models/deepseek.py`` ``_power_law_alpha = 1.01``) and times its ``power_law_1.01`` MoE kernel rows with
  (the collector's ``_generate_power_law_distribution``, github.com/ai-dynamo/aiconfigurator
  ``collector/helper.py``): each expert's load drawn from a power law of exponent α = 1.01 truncated to
  [1, 0.8·T] when T·k > E (else [0.01, 2]), scaled to the T·k routed tokens and rounded, the rounding's deficit
  added one token at a time to the most loaded experts; the busiest EP rank is swapped to rank 0, the one timed.
  Here the E loads are the power law's E mid-quantiles (its expected profile, deterministic). Measured against
  the serving runs and published results it is not the default (docs/efficiency.md, "MoE routing").
* ``balanced``: the T·k routed tokens spread evenly (aiconfigurator's ``balanced`` rows): min(E, T·k) hit.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

ROUTINGS = ("uniform", "power_law", "balanced")
ROUTING = "uniform"
POWER_LAW_ALPHA = 1.01  # aiconfigurator-core 0.12.0 sdk/models/deepseek.py: self._power_law_alpha = 1.01


def _quantiles(n: int, alpha: float, lo: float, hi: float) -> np.ndarray:
    """The power law x^-α truncated to [lo, hi] at its n mid-quantiles (i − ½)/n, ascending."""
    u = (np.arange(n) + 0.5) / n
    a = 1.0 - alpha
    return ((hi**a - lo**a) * u + lo**a) ** (1.0 / a)


@lru_cache(maxsize=4096)
def expert_loads(tokens: int, n_experts: int, top_k: int, alpha: float = POWER_LAW_ALPHA) -> np.ndarray:
    """Tokens each of the E experts receives under the power-law convention (descending, summing to T·k)."""
    routed = tokens * top_k
    lo, hi = (1.0, 0.8 * tokens) if routed > n_experts else (0.01, 2.0)
    x = _quantiles(n_experts, alpha, lo, max(hi, lo * (1 + 1e-9)))[::-1]
    n = np.round(x / x.sum() * routed).astype(np.int64)
    deficit = routed - int(n.sum())
    if deficit > 0:  # one token at a time to the most loaded experts, cycling
        n += deficit // n_experts + (np.arange(n_experts) < deficit % n_experts)
    elif deficit < 0:
        n[0] += deficit  # the excess taken off the most loaded expert
    n.setflags(write=False)
    return n


EXACT_TOKENS = 1024  # token counts evaluated one by one; above, log-spaced and interpolated (smooth there)
# the distinct counts, ascending (np.unique's values; np.unique would import numpy.ma, 10 ms a process)
GRID = np.array(
    sorted(set(np.concatenate([np.arange(EXACT_TOKENS + 1), np.geomspace(EXACT_TOKENS, 1e8, 160).round()]).tolist()))
)


@lru_cache(maxsize=256)
def _on_grid(fn, *args) -> np.ndarray:
    vals = np.array([fn(int(g), *args) for g in GRID], dtype=float)
    vals.setflags(write=False)
    return vals


def _per_count(fn, tokens, *args) -> np.ndarray:
    """``fn`` at ``tokens``: exact at the integer counts up to ``EXACT_TOKENS``, interpolated in log T above."""
    t = np.clip(np.asarray(tokens, dtype=float), 0.0, GRID[-1])
    vals = _on_grid(fn, *args)
    small = np.rint(np.minimum(t, EXACT_TOKENS)).astype(np.int64)
    big = np.interp(np.log(np.maximum(t, 1.0)), np.log(np.maximum(GRID, 1.0)), vals)
    return np.where(t <= EXACT_TOKENS, vals[small], big)


def _hit_power_law(tokens: int, n_experts: int, top_k: int) -> float:
    return float(np.count_nonzero(expert_loads(tokens, n_experts, top_k))) if tokens > 0 else 0.0


def experts_hit(tokens, n_experts: int, top_k: int, routing: str = ROUTING) -> np.ndarray:
    """Distinct experts among ``n_experts`` hit by ``tokens`` tokens routing top-k under ``routing``."""
    t = np.asarray(tokens, dtype=float)
    if routing == "uniform":
        return n_experts * (1.0 - (1.0 - top_k / n_experts) ** t)
    if routing == "balanced":
        return np.minimum(float(n_experts), t * top_k)
    if routing != "power_law":
        raise ValueError(f"routing {routing!r} is not one of {', '.join(ROUTINGS)}")
    return _per_count(_hit_power_law, t, n_experts, top_k)


@lru_cache(maxsize=64)
def _expected_max_normal(n: int) -> float:
    """Expected maximum of n standard normals (Blom's approximation Φ⁻¹((n − 0.375)/(n + 0.25)))."""
    from statistics import NormalDist  # with the random module it imports: MoE balance only

    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25)) if n > 1 else 0.0


def _busiest_power_law(tokens: int, n_experts: int, top_k: int, ranks: int) -> float:
    if tokens <= 0 or ranks <= 1:
        return 1.0
    n = expert_loads(tokens, n_experts, top_k).astype(float)
    g = n_experts // ranks  # experts per rank; the collector's experts land on ranks independently of load
    mean = g * n.mean()
    busiest = mean + _expected_max_normal(ranks) * np.sqrt(g) * n.std()
    return float(min(busiest, n[:g].sum()) / mean)  # never more than the g most loaded experts together


def busiest_rank_factor(tokens, n_experts: int, top_k: int, ranks: int, routing: str = ROUTING) -> np.ndarray:
    """Routed tokens on the busiest of ``ranks`` expert-parallel ranks over the mean rank's (1 at one rank).

    ``uniform``: each of the T·k picks lands on a rank with probability 1/ranks, a rank's load binomial (mean
    T·k/ranks, variance T·k/ranks·(1 − 1/ranks)); the busiest is the mean plus Blom's expected normal maximum ×
    the standard deviation: 1 + z·√((ranks − 1)/(T·k)), at most ``ranks`` (every pick on one rank).
    ``power_law``: each rank's load the sum of E/ranks independent expert loads, the same normal maximum, at most
    the load of the E/ranks most loaded experts together. ``balanced``: 1."""
    t = np.asarray(tokens, dtype=float)
    if ranks <= 1 or routing == "balanced":
        return np.ones_like(t)
    if routing == "uniform":
        spread = _expected_max_normal(ranks) * np.sqrt((ranks - 1) / np.maximum(t * top_k, 1.0))
        return np.where(t > 0, np.minimum(1.0 + spread, float(ranks)), 1.0)
    return _per_count(_busiest_power_law, t, n_experts, top_k, ranks)
