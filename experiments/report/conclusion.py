"""The report's Conclusion: per compute axis, the held-out success difference between methods at
the matched budget, with a 95 % Welch interval across seeds and one verdict.

Matched budget of an axis (per env): ``B = min over every run of the env of its final value of the
counter`` (the largest budget every run reached). Each run's held-out success at ``B`` is its eval
curve (``eval/success`` against the counter, at the updates that evaluated) interpolated linearly
at ``B``; the curve starts at ``(0, start_model/success)`` (the policy before any training compute)
when the start model's success is known. A run whose curve does not cover ``B`` gives no value
(left out; the row says how many seeds had one).

Comparison: ``method - baseline`` for every method after the first of the env, the baseline
(method order of :func:`experiments.report.load.group_runs`: the first of ``--methods`` in
``experiments.compare``, GRPO by default, so the two-method case reads PPO - GRPO), one per
(method, axis), with the Welch interval of :func:`experiments.report.stats.welch_interval` and the verdict of
:func:`experiments.report.stats.verdict`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from algos import metric_keys as mk
from experiments.report.keys import CONCLUSION_AXES
from experiments.report.load import Run
from experiments.report.stats import CONFIDENCE, fmt, fmt_seeds, verdict, welch_interval

CONCLUSION_COLUMNS = ("env", "axis", "matched budget", "comparison", "first method", "second method",
                      "difference", "95% Welch interval", "df", "verdict", "smallest difference called")


def final_counter(run: Run, axis: str) -> float:
    """The counter ``axis`` at the run's last metrics line (its total training compute on that axis)."""
    return float(run.metrics[-1][axis])


def matched_budget(runs: Sequence[Run], axis: str) -> float:
    """The largest budget every run reached on ``axis``: the minimum of their final counters."""
    return min(final_counter(r, axis) for r in runs)


def eval_curve(run: Run, axis: str) -> tuple[np.ndarray, np.ndarray]:
    """(x, success) of the run's evaluations against ``axis`` (sorted by x), starting at
    ``(0, start_model/success)`` when that is finite and no evaluation sits at x <= 0."""
    x, y = run.series(mk.EVAL_SUCCESS, axis)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    start = run.summary.get(mk.START_MODEL_SUCCESS)
    if start is not None and math.isfinite(float(start)) and (x.size == 0 or x[0] > 0):
        x = np.concatenate([[0.0], x])
        y = np.concatenate([[float(start)], y])
    return x, y


def success_at(run: Run, axis: str, budget: float) -> float:
    """The run's eval curve interpolated linearly at ``budget``; NaN outside the curve's x-range."""
    x, y = eval_curve(run, axis)
    if x.size == 0 or budget < x[0] or budget > x[-1]:
        return float("nan")
    return float(np.interp(budget, x, y))


@dataclass(frozen=True)
class Comparison:
    """``second - first`` in held-out success on one axis at the matched budget."""

    env: str
    axis: str
    budget: float
    first: str
    second: str
    first_values: tuple[float, ...]  # per seed (seed order), NaN where the curve misses the budget
    second_values: tuple[float, ...]
    difference: float
    low: float
    high: float
    df: float

    @property
    def verdict(self) -> str:
        return verdict(self.low, self.high, self.first, self.second)

    @property
    def resolution(self) -> float:
        """The smallest difference this design calls at this budget: the interval's half-width
        ``(high - low) / 2`` (a true difference of that size puts the interval's edge at 0 on
        average); NaN without an interval."""
        return (self.high - self.low) / 2 if math.isfinite(self.low) else float("nan")

    @property
    def ruled_out(self) -> float:
        """The largest difference the interval leaves open: ``max(|low|, |high|)``; an inconclusive
        verdict rules out every difference larger than this (at the interval's confidence)."""
        return max(abs(self.low), abs(self.high)) if math.isfinite(self.low) else float("nan")

    @property
    def verdict_line(self) -> str:
        """The verdict with what it can see: an inconclusive one names the largest difference it
        leaves open and the smallest one the design calls."""
        if self.verdict != "inconclusive" or not math.isfinite(self.low):
            return self.verdict
        return f"inconclusive (no difference larger than {self.ruled_out:.3f}; calls ±{self.resolution:.3f})"

    def row(self) -> list[str]:
        interval = "n/a (< 2 seeds)" if not math.isfinite(self.low) else f"[{self.low:+.3f}, {self.high:+.3f}]"
        df = "n/a" if not math.isfinite(self.df) else f"{self.df:.1f}"
        called = "n/a" if not math.isfinite(self.resolution) else f"±{self.resolution:.3f}"
        return [
            self.env, CONCLUSION_AXES.get(self.axis, self.axis), fmt(self.budget, float("nan")).split(" ")[0],
            f"{self.second.upper()} - {self.first.upper()}", f"{self.first}: {fmt_seeds(list(self.first_values))}",
            f"{self.second}: {fmt_seeds(list(self.second_values))}", f"{self.difference:+.3f}", interval, df,
            f"**{self.verdict}**", called,
        ]


def compare_at_matched_budgets(env: str, methods: Mapping[str, Sequence[Run]],
                               confidence: float = CONFIDENCE) -> list[Comparison]:
    """One :class:`Comparison` per (axis, method after the first) of one env."""
    names = list(methods)
    if len(names) < 2:
        return []
    everyone = [r for rs in methods.values() for r in rs]
    out = []
    for axis in CONCLUSION_AXES:
        budget = matched_budget(everyone, axis)
        at = {m: tuple(success_at(r, axis, budget) for r in methods[m]) for m in names}
        for second in names[1:]:
            d, lo, hi, df = welch_interval(at[names[0]], at[second], confidence)
            out.append(Comparison(env, axis, budget, names[0], second, at[names[0]], at[second], d, lo, hi, df))
    return out
