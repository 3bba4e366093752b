"""Seed statistics of the report: the two-sided Student-t interval over per-seed values, its
column-wise form for curves on a common grid, and the "mean ± half-width" formatting.

    half-width = t_{(1 + confidence) / 2, n - 1} * s / sqrt(n),   s = sample std (ddof 1) over n seeds

The t quantile comes from ``scipy.stats.t``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from scipy import stats as _scipy_stats

GRID_POINTS = 50
CONFIDENCE = 0.95


def t_critical(n: int, confidence: float = CONFIDENCE) -> float:
    """``t_{(1+confidence)/2, n-1}``: the multiplier of s/sqrt(n) for ``n >= 2`` seeds."""
    if n < 2 or not 0 < confidence < 1:
        raise ValueError(f"t_critical needs n >= 2 seeds and 0 < confidence < 1, got n={n}, confidence={confidence}")
    return float(_scipy_stats.t.ppf((1 + confidence) / 2, n - 1))


def finite_values(values: Iterable[Any]) -> np.ndarray:
    """Values as floats, dropping ``None``/NaN (a metric undefined for that seed, e.g. the
    recovery rate of a run whose eval episodes never hit a tool failure)."""
    out = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return np.asarray(out, dtype=float)


def mean_ci(values: Iterable[Any], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """(mean, half-width) of the Student-t interval over seeds; ``None``/NaN values are left out.

    Half-width NaN for one value; both NaN for none.
    """
    v = finite_values(values)
    if v.size == 0:
        return float("nan"), float("nan")
    m = float(v.mean())
    if v.size == 1:
        return m, float("nan")
    s = float(v.std(ddof=1))
    return m, t_critical(v.size, confidence) * s / math.sqrt(v.size)


def fmt_seeds(values: Sequence[Any]) -> str:
    """:func:`fmt` of :func:`mean_ci` over per-seed values; says how many seeds had a value
    when some did not (``0.500 ± 0.621 (2 of 3 seeds)``), ``n/a`` when none did."""
    n_ok = finite_values(values).size
    if n_ok == 0:
        return "n/a"
    text = fmt(*mean_ci(values))
    return text if n_ok == len(values) else f"{text} ({n_ok} of {len(values)} seeds)"


def mean_ci_columns(matrix: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Column-wise :func:`mean_ci` of a (seeds, points) array."""
    m = matrix.mean(axis=0)
    n = matrix.shape[0]
    if n == 1:
        return m, np.full_like(m, np.nan)
    return m, t_critical(n, confidence) * matrix.std(axis=0, ddof=1) / math.sqrt(n)


def interpolate_to_grid(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], points: int = GRID_POINTS
) -> tuple[np.ndarray, np.ndarray] | None:
    """Curves (x, y) -> (grid, (runs, points) array) over the x-range all curves cover.

    ``None`` when the curves share no range (e.g. a single eval point each).
    """
    if not curves:
        return None
    lo = max(float(x[0]) for x, _ in curves)
    hi = min(float(x[-1]) for x, _ in curves)
    if not hi > lo:
        return None
    grid = np.linspace(lo, hi, points)
    return grid, np.stack([np.interp(grid, x, y) for x, y in curves])


def fmt(mean: float, half: float, digits: int = 3) -> str:
    """``0.500 ± 0.123`` (``± n/a`` with one seed). The format follows the mean's magnitude and
    the half-width uses the same one: e-notation from 1e5 (and below 1e-3), integers from 100,
    one decimal from 10, else ``digits`` decimals."""
    a = abs(mean) if math.isfinite(mean) else 0.0
    if a >= 1e5 or 0 < a < 1e-3:
        spec = f".{digits - 1}e"
    elif a >= 100:
        spec = ".0f"
    elif a >= 10:
        spec = ".1f"
    else:
        spec = f".{digits}f"

    def one(v: float) -> str:
        return format(v, spec) if math.isfinite(v) else "n/a"

    return f"{one(mean)} ± {one(half)}"


# ---------------------------------------------------------------------------------------------
# Loading


def welch_interval(a: Iterable[Any], b: Iterable[Any], confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """Welch interval for the difference of means ``mean(b) - mean(a)`` of two independent samples
    (per-seed values of two methods; ``None``/NaN left out), unequal variances:

        d  = mean(b) - mean(a),   v_a = s_a^2 / n_a,   v_b = s_b^2 / n_b   (s: sample std, ddof 1)
        se = sqrt(v_a + v_b),     df = (v_a + v_b)^2 / (v_a^2 / (n_a - 1) + v_b^2 / (n_b - 1))   (Welch-Satterthwaite)
        interval = d -+ t_{(1+confidence)/2, df} * se

    Returns ``(d, low, high, df)``. Both samples identical within themselves (``se == 0``): the
    interval is ``[d, d]`` and ``df`` is ``inf``. Fewer than 2 values on either side: ``low``,
    ``high`` and ``df`` are NaN (no interval).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"welch_interval needs 0 < confidence < 1, got {confidence}")
    va_, vb_ = finite_values(a), finite_values(b)
    if va_.size == 0 or vb_.size == 0:
        return float("nan"), float("nan"), float("nan"), float("nan")
    d = float(vb_.mean() - va_.mean())
    if va_.size < 2 or vb_.size < 2:
        return d, float("nan"), float("nan"), float("nan")
    v_a = float(va_.var(ddof=1)) / va_.size
    v_b = float(vb_.var(ddof=1)) / vb_.size
    se2 = v_a + v_b
    if se2 == 0.0:
        return d, d, d, float("inf")
    df = se2**2 / (v_a**2 / (va_.size - 1) + v_b**2 / (vb_.size - 1))
    half = float(_scipy_stats.t.ppf((1 + confidence) / 2, df)) * math.sqrt(se2)
    return d, d - half, d + half, float(df)


def verdict(low: float, high: float, first: str, second: str) -> str:
    """One word for ``second - first`` with interval ``[low, high]``: ``"<SECOND> ahead"`` when the
    interval lies above 0, ``"<FIRST> ahead"`` when below 0, ``"inconclusive"`` when it contains 0
    (or is undefined: fewer than 2 seeds on a side)."""
    if math.isfinite(low) and low > 0:
        return f"{second.upper()} ahead"
    if math.isfinite(high) and high < 0:
        return f"{first.upper()} ahead"
    return "inconclusive"
