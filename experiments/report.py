"""Render the GRPO-vs-PPO report from any sweep directory.

    python -m experiments.report DIR

finds every run directory under ``DIR`` (recursively: a directory holding ``metrics.jsonl``,
``config.yaml`` and ``summary.json``, see docs/interfaces.md), groups the runs by environment and
method (``algo``), writes ``DIR/report.md`` and PNG plots into ``DIR``, and prints the markdown.
:func:`render_report` returns the same content (markdown, table rows, image paths) so
``experiments/compare.py`` can log it to W&B.

Confidence intervals
--------------------
Every "mean ± x" in the report is over **seeds** (one value per run): the mean and the half-width
of the two-sided 95% Student-t interval, ``t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample
standard deviation (``ddof=1``) of the ``n`` per-seed values. With a single seed there is no
interval ("± n/a"). Curves are interpolated (linearly) from each run's own x values onto a common
grid spanning the x-range that *all* seeds of that method cover (no extrapolation), and the same
interval is computed at each grid point (the shaded band).

What the runs must contain
--------------------------
``summary.json`` must hold every key of :data:`SUMMARY_KEYS`. ``metrics.jsonl`` lines are one
update each; every line must hold ``update``, ``algo`` and the :data:`CURVE_AXES` counters
(cumulative); the keys in :data:`METRIC_KEYS` must appear in at least one line (``eval/*`` is
only written on evaluation updates); :data:`CRITIC_KEYS` are required for methods with a critic
(``ppo``) and reported as "n/a (GRPO has no critic)" otherwise; the critic's held-out explained
variance itself exists only in updates with >= 2 held-out points (see :data:`CRITIC_EV_KEY`).
Stop reasons are the per-update episode counts ``rollout/stop/<reason>`` (reason = an
``envs.stop.StopReason`` value; the number of training episodes of that update that ended for
that reason, not cumulative); the report sums them over updates. ``config.yaml`` must hold
:data:`REQUIRED_CONFIG_KEYS` (the test budget is ``eval.tasks`` x ``eval.samples_per_task``).
A missing required key raises :class:`ReportError` naming the key and the run. ``null`` values
(train.py writes NaN as null, e.g. a recovery rate with no tool failures) are left out of means;
the table says "(k of n seeds)" when some seeds had no value.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: Keys ``experiments/train.py`` writes to ``summary.json`` (final eval + compute totals + start model).
SUMMARY_KEYS: dict[str, str] = {
    "eval/success": "verified success rate on held-out (unseen) task templates, final policy",
    "eval/recovery_rate": "among eval episodes hit by an injected tool failure (timeout/flaky/crash), the fraction that still succeeded",
    "eval/hack_rate": "fraction of eval episodes with any hack flag (edited tests, read protected answer, ...)",
    "eval/mean_turns": "mean number of turns (tool calls) per eval episode",
    "compute/rollouts": "complete training rollouts (episodes) generated",
    "compute/generated_tokens": "policy-sampled tokens during training rollouts",
    "compute/observation_tokens": "environment-written tokens the policy read during training rollouts",
    "compute/tool_seconds": "simulated tool seconds spent during training rollouts",
    "compute/train_flops": "estimated FLOPs of all training forward/backward passes (policy and critic)",
    "compute/wall_seconds": "wall-clock seconds of training updates (rollout collection + update; evaluation excluded)",
    "start_model/path": "checkpoint both methods started from (must be the same for a fair comparison)",
    "start_model/success": "held-out success of the start model at the same test budget",
}

#: Compute counters used as x-axes of the success curves (cumulative, in every metrics line).
CURVE_AXES: tuple[str, ...] = (
    "compute/rollouts",
    "compute/generated_tokens",
    "compute/tool_seconds",
    "compute/train_flops",
)

#: Metrics that must appear in at least one metrics.jsonl line of every run.
METRIC_KEYS: dict[str, str] = {
    "eval/success": "held-out success (evaluation updates only)",
    "rollout/success_rate": "verified success rate of this update's training rollouts (the p of P_mix)",
    "rollout/mixed_group_rate": "fraction of groups with both a success and a failure",
    "rollout/all_zero_rate": "fraction of groups where every member failed",
    "rollout/all_one_rate": "fraction of groups where every member succeeded",
    "train/agg_weight_shift": "total-variation distance between token-mean and task-mean per-task loss weights on this batch",
}

#: Method-specific metrics: required for methods with a critic, "n/a" otherwise.
CRITIC_KEYS: dict[str, str] = {
    "critic/heldout_points": "number of (action position, complete return) pairs the held-out explained variance used",
}
#: Critic explained variance on complete returns of episodes the critic was not fitted on
#: (values predicted before this update's fit). Absent in an update with fewer than 2 held-out
#: points (no episode *terminated*), null when the held-out returns have zero variance (e.g. all 0);
#: the key must be present in every update with >= 2 held-out points.
CRITIC_EV_KEY = "critic/explained_variance_heldout"
EV_NA = "n/a (undefined in every update: < 2 held-out complete returns, or they all were equal)"
METHODS_WITH_CRITIC: frozenset[str] = frozenset({"ppo"})

STOP_PREFIX = "rollout/stop/"

#: Keys of the resolved config.yaml the report reads.
REQUIRED_CONFIG_KEYS: tuple[str, ...] = (
    "seed",
    "env.name",
    "algo.name",
    "algo.group_size",  # G of P_mix (1 for PPO: P_mix = 0)
    "eval.tasks",  # held-out task instances evaluated
    "eval.samples_per_task",  # test-time sampling budget (attempts per task)
    "budget.kind",  # the compute axis the runs are matched on (rollouts, generated_tokens, ...)
    "budget.amount",
)

#: Columns of the final table (one row per env x method); values are "mean ± CI" strings.
TABLE_COLUMNS: tuple[str, ...] = (
    "env",
    "method",
    "seeds",
    "test budget",
    "held-out success",
    "start-model success",
    "rollouts",
    "generated tokens",
    "observation tokens",
    "tool seconds",
    "train FLOPs",
    "wall seconds",
    "recovery after tool failure",
    "hack rate",
    "mean turns",
)
_TABLE_SUMMARY_KEYS = (
    "eval/success",
    "start_model/success",
    "compute/rollouts",
    "compute/generated_tokens",
    "compute/observation_tokens",
    "compute/tool_seconds",
    "compute/train_flops",
    "compute/wall_seconds",
    "eval/recovery_rate",
    "eval/hack_rate",
    "eval/mean_turns",
)

GRID_POINTS = 50
CONFIDENCE = 0.95


class ReportError(ValueError):
    """A run directory does not follow the contract (names the key and the run)."""


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------
def t_cdf(x: float, df: float) -> float:
    """Student-t CDF: 1/2 + the integral of the density on [0, x] (composite Simpson, 4000 panels).

    density(u) = Gamma((df+1)/2) / (sqrt(df*pi) Gamma(df/2)) * (1 + u^2/df)^(-(df+1)/2)
    """
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    logc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    n = 4000
    u = np.linspace(0.0, abs(x), n + 1)
    pdf = np.exp(logc - (df + 1) / 2 * np.log1p(u * u / df))
    w = np.ones(n + 1)
    w[1:-1:2] = 4.0
    w[2:-1:2] = 2.0
    half = float(np.dot(w, pdf)) * (abs(x) / n) / 3
    return 0.5 + half if x >= 0 else 0.5 - half


def t_quantile(q: float, df: float) -> float:
    """Inverse of :func:`t_cdf` for ``0.5 < q < 1`` by bisection (to 1e-9)."""
    if not 0.5 < q < 1:
        raise ValueError(f"q must be in (0.5, 1), got {q}")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        hi *= 2
    while hi - lo > 1e-9:
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


_T_CACHE: dict[tuple[float, int], float] = {}


def t_critical(n: int, confidence: float = CONFIDENCE) -> float:
    """``t_{(1+confidence)/2, n-1}``: the multiplier of s/sqrt(n) for ``n`` seeds."""
    key = (confidence, n)
    if key not in _T_CACHE:
        _T_CACHE[key] = t_quantile((1 + confidence) / 2, n - 1)
    return _T_CACHE[key]


def _finite(values: Iterable[Any]) -> np.ndarray:
    """Values as floats, dropping ``None``/NaN (a metric undefined for that seed, e.g. the
    recovery rate of a run whose eval episodes never hit a tool failure)."""
    out = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return np.asarray(out, dtype=float)


def mean_ci(values: Iterable[Any], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """(mean, half-width) of the Student-t interval over seeds; ``None``/NaN values are left out.

    Half-width NaN for one value; both NaN for none.
    """
    v = _finite(values)
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
    n_ok = _finite(values).size
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
# ---------------------------------------------------------------------------------------------
RUN_FILES = ("metrics.jsonl", "config.yaml", "summary.json")


@dataclass
class Run:
    run_dir: Path
    algo: str
    env: str
    seed: int
    config: dict[str, Any]
    metrics: list[dict[str, Any]]
    summary: dict[str, Any]

    def series(self, key: str, x_key: str = "compute/rollouts") -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the lines holding ``key`` (x is the compute counter ``x_key``)."""
        rows = [r for r in self.metrics if r.get(key) is not None and math.isfinite(float(r[key]))]
        x = np.array([float(r[x_key]) for r in rows])
        y = np.array([float(r[key]) for r in rows])
        return x, y

    def has(self, key: str) -> bool:
        return any(key in r and r[key] is not None for r in self.metrics)


def _get(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _config_value(config: Mapping[str, Any], run_dir: Path, *candidates: str) -> Any:
    for dotted in candidates:
        try:
            return _get(config, dotted)
        except KeyError:
            continue
    raise ReportError(f"config.yaml of run {run_dir} has no {' / '.join(candidates)}")


def find_run_dirs(root: str | Path) -> list[Path]:
    """Directories under ``root`` (inclusive) holding metrics.jsonl, config.yaml and summary.json."""
    root = Path(root)
    found = []
    for metrics in sorted(root.rglob("metrics.jsonl")):
        d = metrics.parent
        if all((d / f).is_file() for f in RUN_FILES):
            found.append(d)
    return found


def load_run(run_dir: str | Path) -> Run:
    from omegaconf import OmegaConf

    run_dir = Path(run_dir)
    config = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    assert isinstance(config, dict)
    summary = json.loads((run_dir / "summary.json").read_text())
    metrics = []
    for i, line in enumerate((run_dir / "metrics.jsonl").read_text().splitlines(), start=1):
        if line.strip():
            try:
                metrics.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ReportError(f"{run_dir}/metrics.jsonl line {i} is not JSON: {e}") from None
    if not metrics:
        raise ReportError(f"{run_dir}/metrics.jsonl has no updates")
    algo = str(_config_value(config, run_dir, "algo.name"))
    env = str(_config_value(config, run_dir, "env.name"))
    seed = int(_config_value(config, run_dir, "seed"))
    run = Run(run_dir, algo, env, seed, config, metrics, summary)
    validate_run(run)
    return run


def validate_run(run: Run) -> None:
    """Raise :class:`ReportError` naming the first missing required key and the run dir."""
    where = run.run_dir
    for key in SUMMARY_KEYS:
        if key not in run.summary:
            raise ReportError(f"summary.json of run {where} is missing required key {key!r}")
    for i, row in enumerate(run.metrics, start=1):
        for key in ("update", "algo", *CURVE_AXES):
            if key not in row:
                raise ReportError(f"metrics.jsonl line {i} of run {where} is missing required key {key!r}")
        if row["algo"] != run.algo:
            raise ReportError(
                f"metrics.jsonl line {i} of run {where} has algo={row['algo']!r} "
                f"but config.yaml says algo.name={run.algo!r}"
            )
    required = dict(METRIC_KEYS)
    if run.algo in METHODS_WITH_CRITIC:
        required.update(CRITIC_KEYS)
    for key in required:
        if not run.has(key):
            raise ReportError(f"metrics.jsonl of run {where} never has required key {key!r}")
    if run.algo in METHODS_WITH_CRITIC:
        for i, row in enumerate(run.metrics, start=1):
            if (row.get("critic/heldout_points") or 0) >= 2 and CRITIC_EV_KEY not in row:
                raise ReportError(
                    f"metrics.jsonl line {i} of run {where} has critic/heldout_points="
                    f"{row['critic/heldout_points']} but no {CRITIC_EV_KEY!r}"
                )
    if not any(k.startswith(STOP_PREFIX) for r in run.metrics for k in r):
        raise ReportError(f"metrics.jsonl of run {where} has no {STOP_PREFIX}<reason> counters")
    for key in REQUIRED_CONFIG_KEYS:
        _config_value(run.config, where, key)


def load_runs(root: str | Path) -> list[Run]:
    dirs = find_run_dirs(root)
    if not dirs:
        raise ReportError(f"no run directories (with {', '.join(RUN_FILES)}) under {root}")
    return [load_run(d) for d in dirs]


def _method_order(methods: Iterable[str]) -> list[str]:
    preferred = ["grpo", "ppo"]
    ms = set(methods)
    return [m for m in preferred if m in ms] + sorted(ms - set(preferred))


def group_runs(runs: Sequence[Run]) -> dict[str, dict[str, list[Run]]]:
    """``{env: {method: [runs sorted by seed]}}``."""
    out: dict[str, dict[str, list[Run]]] = {}
    for r in runs:
        out.setdefault(r.env, {}).setdefault(r.algo, []).append(r)
    for env in out:
        out[env] = {m: sorted(out[env][m], key=lambda r: r.seed) for m in _method_order(out[env])}
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------
def stop_reason_totals(runs: Sequence[Run]) -> dict[str, float]:
    """Sum of ``rollout/stop/<reason>`` over every update of every run (reason -> count)."""
    totals: dict[str, float] = {}
    for run in runs:
        for row in run.metrics:
            for k, v in row.items():
                if k.startswith(STOP_PREFIX) and v is not None:
                    reason = k[len(STOP_PREFIX):]
                    totals[reason] = totals.get(reason, 0.0) + float(v)
    return totals


def p_mix_series(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, measured mixed-group rate, P_mix(p_t, G)) over the updates that hold both
    ``rollout/mixed_group_rate`` and a finite ``rollout/success_rate`` p_t (an update whose
    episodes were all masked has no p); G = ``algo.group_size`` of the run's config."""
    from algos.metrics import mixed_group_probability

    g = int(_get(run.config, "algo.group_size"))
    xs, measured, predicted = [], [], []
    for row in run.metrics:
        p, m = row.get("rollout/success_rate"), row.get("rollout/mixed_group_rate")
        if p is None or m is None or not math.isfinite(float(p)) or not math.isfinite(float(m)):
            continue
        xs.append(float(row["compute/rollouts"]))
        measured.append(float(m))
        predicted.append(mixed_group_probability(float(p), g))
    return np.array(xs), np.array(measured), np.array(predicted)


@dataclass
class Report:
    """What :func:`render_report` produced (``compare.py`` logs it to W&B)."""

    markdown: str
    columns: list[str]
    rows: list[list[Any]]
    images: dict[str, Path]
    path: Path
    runs: list[Run] = field(repr=False, default_factory=list)
    stop_reasons: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def test_budget(run: Run) -> str:
    """``"<tasks> tasks x <k> samples"``: the held-out evaluation's test-time sampling budget."""
    return f"{_get(run.config, 'eval.tasks')} tasks x {_get(run.config, 'eval.samples_per_task')} samples"


def summary_values(runs: Sequence[Run], key: str) -> list[Any]:
    return [r.summary[key] for r in runs]


def final_table(groups: Mapping[str, Mapping[str, Sequence[Run]]]) -> list[list[Any]]:
    rows = []
    for env, methods in groups.items():
        for method, runs in methods.items():
            budgets = sorted({test_budget(r) for r in runs})
            row: list[Any] = [env, method, len(runs), ", ".join(budgets)]
            row += [fmt_seeds(summary_values(runs, k)) for k in _TABLE_SUMMARY_KEYS]
            rows.append(row)
    return rows


def fairness_warnings(groups: Mapping[str, Mapping[str, Sequence[Run]]]) -> list[str]:
    """What differs across runs that C19 says must be fixed: test budget, training budget (kind
    and amount), start model; and whether the methods ran the same seeds."""
    out = []
    for env, methods in groups.items():
        all_runs = [r for runs in methods.values() for r in runs]
        budgets = {test_budget(r) for r in all_runs}
        if len(budgets) > 1:
            out.append(f"{env}: test budgets differ across runs ({', '.join(sorted(budgets))})")
        budgets = {f"{_get(r.config, 'budget.kind')}={_get(r.config, 'budget.amount')}" for r in all_runs}
        if len(budgets) > 1:
            out.append(f"{env}: training budgets differ across runs ({', '.join(sorted(budgets))})")
        starts = {str(r.summary["start_model/path"]) for r in all_runs}
        if len(starts) > 1:
            out.append(f"{env}: start models differ across runs ({', '.join(sorted(starts))})")
        seeds = {m: tuple(r.seed for r in runs) for m, runs in methods.items()}
        if len(set(seeds.values())) > 1:
            out.append(f"{env}: methods ran different seeds ({seeds})")
    return out


# ---------------------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------------------
COLORS = {"grpo": "tab:blue", "ppo": "tab:orange"}


def _color(method: str, i: int) -> str:
    return COLORS.get(method, f"C{i + 2}")


def _plot_band(ax, runs: Sequence[Run], key: str, x_key: str, label: str, color: str, ls: str = "-") -> bool:
    """Mean line + CI band over seeds of ``key`` vs ``x_key``; falls back to raw points."""
    curves = []
    for r in runs:
        x, y = r.series(key, x_key)
        if x.size:
            order = np.argsort(x, kind="stable")
            curves.append((x[order], y[order]))
    if not curves:
        return False
    gridded = interpolate_to_grid(curves) if all(len(x) > 1 for x, _ in curves) else None
    if gridded is None:
        for j, (x, y) in enumerate(curves):
            ax.plot(x, y, "o", ls=ls, color=color, alpha=0.7, label=f"{label} (per seed)" if j == 0 else None)
        return True
    grid, ys = gridded
    m, h = mean_ci_columns(ys)
    ax.plot(grid, m, ls, color=color, label=f"{label} (n={len(curves)})")
    if len(curves) > 1:
        ax.fill_between(grid, m - h, m + h, color=color, alpha=0.2, linewidth=0)
    return True


def _new_fig(ncols: int = 1, nrows: int = 1, size=(6.0, 4.0)):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    return plt, fig, axes


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def plot_success_curves(env: str, methods: Mapping[str, Sequence[Run]], out_dir: Path) -> dict[str, Path]:
    images = {}
    for axis in CURVE_AXES:
        plt, fig, axes = _new_fig()
        ax = axes[0][0]
        for i, (method, runs) in enumerate(methods.items()):
            _plot_band(ax, runs, "eval/success", axis, method, _color(method, i))
        ax.set_xlabel(axis)
        ax.set_ylabel("eval/success (held-out templates)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{env}: held-out success vs {axis.split('/')[1]}")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        path = out_dir / f"success_vs_{axis.split('/')[1]}_{_safe(env)}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        images[f"{env}/success_vs_{axis.split('/')[1]}"] = path
    return images


def plot_diagnostics(env: str, methods: Mapping[str, Sequence[Run]], out_dir: Path) -> dict[str, Path]:
    plt, fig, axes = _new_fig(ncols=2, nrows=2)
    (a_mix, a_groups), (a_critic, a_shift) = axes
    x_key = "compute/rollouts"
    for i, (method, runs) in enumerate(methods.items()):
        c = _color(method, i)
        _plot_band(a_mix, runs, "rollout/mixed_group_rate", x_key, f"{method} measured", c)
        # P_mix of each update's measured success rate, averaged over seeds like the measured curve.
        pm_runs = [_SeriesRun(*p_mix_series(r)[::2]) for r in runs]
        _plot_band(a_mix, pm_runs, "y", x_key, f"{method} P_mix(p)", c, ls="--")
        _plot_band(a_groups, runs, "rollout/all_zero_rate", x_key, f"{method} all-0", c)
        _plot_band(a_groups, runs, "rollout/all_one_rate", x_key, f"{method} all-1", c, ls=":")
        if method in METHODS_WITH_CRITIC:
            if not _plot_band(a_critic, runs, CRITIC_EV_KEY, x_key, method, c):
                a_critic.plot([], [], color=c, label=f"{method}: {EV_NA}")
        else:
            a_critic.plot([], [], color=c, label=f"{method}: n/a ({method.upper()} has no critic)")
        _plot_band(a_shift, runs, "train/agg_weight_shift", x_key, method, c)
    a_mix.set_title("mixed-group rate vs P_mix = 1 - p^G - (1-p)^G")
    a_mix.set_ylim(-0.02, 1.02)
    a_groups.set_title("all-0 (solid) / all-1 (dotted) group fractions")
    a_groups.set_ylim(-0.02, 1.02)
    a_critic.set_title("critic explained variance on held-out returns")
    if not any(line.get_xdata().size for line in a_critic.get_lines()):
        a_critic.text(0.5, 0.5, "no defined values (see legend)", ha="center", va="center",
                      transform=a_critic.transAxes, color="gray")
    a_shift.set_title("loss-aggregation weight shift (token-mean vs task-mean)")
    for ax in (a_mix, a_groups, a_critic, a_shift):
        ax.set_xlabel(x_key)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=7)
    fig.suptitle(f"{env}: training diagnostics")
    fig.tight_layout()
    path = out_dir / f"diagnostics_{_safe(env)}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return {f"{env}/diagnostics": path}


@dataclass
class _SeriesRun:
    """Adapter so :func:`_plot_band` can average a derived series like a metric."""

    x: np.ndarray
    y: np.ndarray

    def series(self, key: str, x_key: str) -> tuple[np.ndarray, np.ndarray]:
        return self.x, self.y


def ordered_reasons(totals: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Reasons present in ``totals`` in ``envs.stop.StopReason`` order, unknown ones after (sorted)."""
    from envs.stop import StopReason

    present = {r for t in totals.values() for r in t}
    known = [r.value for r in StopReason if r.value in present]
    return known + sorted(present - set(known))


def plot_stop_reasons(env: str, totals: Mapping[str, Mapping[str, float]], out_dir: Path) -> dict[str, Path]:
    reasons = ordered_reasons(totals)
    methods = list(totals)
    plt, fig, axes = _new_fig(size=(max(4.0, 1.6 * len(methods) + 3), 4.5))
    ax = axes[0][0]
    bottom = np.zeros(len(methods))
    for j, reason in enumerate(reasons):
        fr = np.array(
            [totals[m].get(reason, 0.0) / max(sum(totals[m].values()), 1e-12) for m in methods]
        )
        ax.bar(methods, fr, bottom=bottom, label=reason, color=f"C{j % 10}")
        bottom += fr
    ax.set_ylabel("fraction of training episodes")
    ax.set_ylim(0, 1.0)
    ax.set_title(f"{env}: why episodes stopped")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    path = out_dir / f"stop_reasons_{_safe(env)}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return {f"{env}/stop_reasons": path}


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------
def _md_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _per_run_mean(run: Run, key: str) -> float:
    _, y = run.series(key)
    return float(np.mean(y)) if y.size else float("nan")


def _per_run_last(run: Run, key: str) -> float:
    _, y = run.series(key)
    return float(y[-1]) if y.size else float("nan")


def _pmix_gap(run: Run) -> float:
    """Mean over updates of |measured mixed-group rate - P_mix(measured success rate, G)|."""
    _, measured, predicted = p_mix_series(run)
    return float(np.mean(np.abs(measured - predicted))) if measured.size else float("nan")


DIAG_COLUMNS = (
    "env",
    "method",
    "G",
    "mixed-group rate (mean over updates)",
    "measured minus P_mix, abs (mean over updates)",
    "all-0 groups",
    "all-1 groups",
    "critic EV held-out (last)",
    "agg weight shift (mean)",
)


def diagnostics_table(groups: Mapping[str, Mapping[str, Sequence[Run]]]) -> list[list[Any]]:
    rows = []
    for env, methods in groups.items():
        for method, runs in methods.items():
            gs = sorted({int(_get(r.config, "algo.group_size")) for r in runs})
            if method in METHODS_WITH_CRITIC:
                ev = fmt_seeds([_per_run_last(r, CRITIC_EV_KEY) for r in runs])
                if ev == "n/a":
                    ev = EV_NA
            else:
                ev = f"n/a ({method.upper()} has no critic)"
            rows.append(
                [
                    env,
                    method,
                    ", ".join(map(str, gs)),
                    fmt_seeds([_per_run_mean(r, "rollout/mixed_group_rate") for r in runs]),
                    fmt_seeds([_pmix_gap(r) for r in runs]),
                    fmt_seeds([_per_run_mean(r, "rollout/all_zero_rate") for r in runs]),
                    fmt_seeds([_per_run_mean(r, "rollout/all_one_rate") for r in runs]),
                    ev,
                    fmt_seeds([_per_run_mean(r, "train/agg_weight_shift") for r in runs]),
                ]
            )
    return rows


def _budget_line(runs: Sequence[Run]) -> str:
    parts = set()
    for r in runs:
        try:
            b = _get(r.config, "budget")
            parts.add(", ".join(f"{k}={v}" for k, v in sorted(b.items())) if isinstance(b, Mapping) else str(b))
        except KeyError:
            parts.add("(no budget section in config)")
    return "; ".join(sorted(parts))


def render_report(sweep_dir: str | Path, title: str | None = None) -> Report:
    """Find the runs under ``sweep_dir``, write ``report.md`` and the PNGs there, return them."""
    sweep_dir = Path(sweep_dir)
    runs = load_runs(sweep_dir)
    groups = group_runs(runs)
    images: dict[str, Path] = {}
    stops: dict[str, dict[str, dict[str, float]]] = {}
    for env, methods in groups.items():
        images.update(plot_success_curves(env, methods, sweep_dir))
        images.update(plot_diagnostics(env, methods, sweep_dir))
        stops[env] = {m: stop_reason_totals(rs) for m, rs in methods.items()}
        images.update(plot_stop_reasons(env, stops[env], sweep_dir))

    rows = final_table(groups)
    warnings = fairness_warnings(groups)
    md = [f"# {title or 'GRPO vs PPO: compute-matched comparison'}", ""]
    md.append(f"Sweep directory: `{sweep_dir}` — {len(runs)} runs.")
    md.append("")
    md.append(
        f"All `a ± b` values are the mean over seeds ± the half-width of the two-sided "
        f"{int(CONFIDENCE * 100)}% Student-t interval (t_(0.975, n-1) · s / √n, s = sample std over "
        "seeds); `± n/a` means a single seed. Curves: each seed interpolated linearly onto a common "
        "grid over the x-range every seed covers; line = mean, band = the same t-interval."
    )
    md.append("")
    if warnings:
        md.append("**Not compute-matched:**")
        md += [f"- {w}" for w in warnings]
    else:
        md.append("Test budget, training budget, start model and seeds are identical across methods in every env.")
    md.append("")
    md.append("## Final table (summary.json of each run)")
    md.append("")
    md.append(
        "Held-out success is verified success on unseen task templates at the test budget shown "
        "(attempts per task). Compute columns are training totals: complete rollouts, sampled "
        "tokens, tokens read from tools, simulated tool seconds, estimated training FLOPs, wall time."
    )
    md.append("")
    md.append(_md_table(TABLE_COLUMNS, rows))
    md.append("")
    for env, methods in groups.items():
        md.append(f"## {env}")
        md.append("")
        for method, rs in methods.items():
            md.append(
                f"- **{method}**: seeds {[r.seed for r in rs]}; budget: {_budget_line(rs)}; "
                f"start model: {sorted({str(r.summary['start_model/path']) for r in rs})}"
            )
        md.append("")
        md.append("### Held-out success vs compute")
        md.append("")
        for axis in CURVE_AXES:
            p = images[f"{env}/success_vs_{axis.split('/')[1]}"]
            md.append(f"![success vs {axis}]({p.name})")
        md.append("")
        md.append("### Training diagnostics")
        md.append("")
        md.append(
            "Mixed-group rate: fraction of groups with both a success and a failure (the only groups "
            "that give GRPO a task-reward gradient); dashed: P_mix = 1 - p^G - (1-p)^G at the measured "
            "success rate p of the same update. All-0/all-1: groups with no outcome contrast. Critic "
            "explained variance is measured on complete returns the critic was not fitted on. Weight "
            "shift: how far token-mean aggregation moves per-task loss weights away from task-mean "
            "on the same batch."
        )
        md.append("")
        md.append(_md_table(DIAG_COLUMNS, [r for r in diagnostics_table({env: methods})]))
        md.append("")
        md.append(f"![diagnostics]({images[f'{env}/diagnostics'].name})")
        md.append("")
        md.append("### Stop reasons (training episodes, summed over updates and seeds)")
        md.append("")
        reasons = ordered_reasons(stops[env])
        srows = []
        for method, t in stops[env].items():
            total = sum(t.values())
            srows.append(
                [method]
                + [f"{t.get(r, 0.0):g} ({100 * t.get(r, 0.0) / total:.1f}%)" if total else "0" for r in reasons]
                + [f"{total:g}"]
            )
        md.append(_md_table(["method", *reasons, "total"], srows))
        md.append("")
        md.append(f"![stop reasons]({images[f'{env}/stop_reasons'].name})")
        md.append("")
    markdown = "\n".join(md)
    path = sweep_dir / "report.md"
    path.write_text(markdown)
    return Report(
        markdown=markdown,
        columns=list(TABLE_COLUMNS),
        rows=rows,
        images=images,
        path=path,
        runs=list(runs),
        stop_reasons=stops,
        warnings=warnings,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_dir", help="directory searched recursively for run directories")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    try:
        report = render_report(args.sweep_dir, title=args.title)
    except ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    print(report.markdown)
    print(f"\n[report written to {report.path}]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
