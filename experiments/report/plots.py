"""PNG plots of the report (matplotlib, Agg backend): held-out success vs each compute axis, the
training diagnostics (mixed-group rate vs P_mix, all-0 / all-1 groups, critic EV, weight shift)
and the stop-reason fractions; curves are the mean over seeds with the t-interval band.

A success-vs-compute curve of a run is :func:`experiments.report.conclusion.eval_curve`, the
series the Conclusion interpolates: it starts at the start model, ``(0, start_model/success)``,
and has a point at every update that evaluated."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from algos import metric_keys as mk
from algos.registry import load_builtin_trainers
from experiments.report.conclusion import eval_curve
from experiments.report.keys import CRITIC_EV_KEY, CURVE_AXES, EV_NA, METHODS_WITH_CRITIC
from experiments.report.pair import PAIR_AGENTS, PAIR_METHODS, agent_key, critic_ev_key
from experiments.report.load import Run, config_get
from experiments.report.references import ReferenceRow
from experiments.report.stats import interpolate_to_grid, mean_ci_columns
from experiments.report.tables import ordered_reasons, p_mix_series

def _color(method: str, i: int) -> str:
    """The line color of ``method`` (the ``i``-th of its plot): a registered trainer's is its place
    in the registry's order (``C0`` blue for GRPO, ``C1`` orange for PPO), the same in every plot;
    another name's is ``C{i + 2}``."""
    registered = list(load_builtin_trainers())
    return f"C{registered.index(method) % 10}" if method in registered else f"C{i + 2}"


Series = Callable[[Run], "tuple[np.ndarray, np.ndarray]"]


def _plot_band(ax, runs: Sequence[Run], key: str, x_key: str, label: str, color: str, ls: str = "-",
               series: Series | None = None) -> bool:
    """Mean line + CI band over seeds of ``key`` vs ``x_key`` (or of each run's ``series(run)``);
    falls back to raw points."""
    curves = []
    for r in runs:
        x, y = series(r) if series is not None else r.series(key, x_key)
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


#: how each reference row of the report is drawn on a success plot (role -> line style, color)
REFERENCE_STYLES = {"start model": ("--", "0.35"), "program-blind floor": (":", "C3"), "oracle ceiling": ("-.", "C2")}


def _plot_references(ax, references: Sequence[ReferenceRow]) -> None:
    """A horizontal line per reference with a finite success (start model, floor, ceiling)."""
    for ref in references:
        style = REFERENCE_STYLES.get(ref.role)
        if style is not None and math.isfinite(ref.success):
            ax.axhline(ref.success, ls=style[0], color=style[1], lw=1.2, label=f"{ref.role} {ref.success:.3f}")


def plot_success_curves(env: str, methods: Mapping[str, Sequence[Run]], out_dir: Path,
                        references: Sequence[ReferenceRow] = ()) -> dict[str, Path]:
    """``success_vs_<axis>_<env>.png`` per compute axis: each method's band over its runs'
    :func:`~experiments.report.conclusion.eval_curve` (from the start model at 0), and a line per
    reference row (start model, floor, ceiling: ``REFERENCE_STYLES``)."""
    images = {}
    for axis in CURVE_AXES:
        plt, fig, axes = _new_fig()
        ax = axes[0][0]
        _plot_references(ax, references)
        for i, (method, runs) in enumerate(methods.items()):
            _plot_band(ax, runs, mk.EVAL_SUCCESS, axis, method, _color(method, i),
                       series=lambda r, axis=axis: eval_curve(r, axis))
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
    x_key = mk.COMPUTE_ROLLOUTS
    for i, (method, runs) in enumerate(methods.items()):
        c = _color(method, i)
        # group diagnostics only for G > 1 (with G = 1 every group is all-0 or all-1 by definition)
        grouped = [r for r in runs if int(config_get(r.config, "algo.group_size")) > 1]
        if grouped:
            _plot_band(a_mix, grouped, mk.ROLLOUT_MIXED_GROUP_RATE, x_key, f"{method} measured", c)
            # P_mix of each update's measured success rate, averaged over seeds like the measured curve.
            pm_runs = [_SeriesRun(*p_mix_series(r)[::2]) for r in grouped]
            _plot_band(a_mix, pm_runs, "y", x_key, f"{method} P_mix(p)", c, ls="--")
            _plot_band(a_groups, grouped, mk.ROLLOUT_ALL_ZERO_RATE, x_key, f"{method} all-0", c)
            _plot_band(a_groups, grouped, mk.ROLLOUT_ALL_ONE_RATE, x_key, f"{method} all-1", c, ls=":")
        else:
            a_groups.plot([], [], color=c, label=f"{method}: n/a (G = 1)")
            if method in PAIR_METHODS:
                a_mix.plot([], [], color=c, label=f"{method}: n/a (G = 1)")
        if method in PAIR_METHODS:  # one band per agent's critic (a solid, b dashed)
            for a, ls in zip(PAIR_AGENTS, ("-", "--")):
                if not _plot_band(a_critic, runs, critic_ev_key(a), x_key, f"{method} agent {a}", c, ls=ls):
                    a_critic.plot([], [], color=c, ls=ls, label=f"{method} agent {a}: {EV_NA}")
        elif method in METHODS_WITH_CRITIC:
            if not _plot_band(a_critic, runs, CRITIC_EV_KEY, x_key, method, c):
                a_critic.plot([], [], color=c, label=f"{method}: {EV_NA}")
        else:
            a_critic.plot([], [], color=c, label=f"{method}: n/a ({method.upper()} has no critic)")
        if method in PAIR_METHODS:
            for a, ls in zip(PAIR_AGENTS, ("-", "--")):
                _plot_band(a_shift, runs, agent_key(a, mk.TRAIN_AGG_WEIGHT_SHIFT), x_key, f"{method} agent {a}", c, ls=ls)
        else:
            _plot_band(a_shift, runs, mk.TRAIN_AGG_WEIGHT_SHIFT, x_key, method, c)
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
    if reasons:  # two-agent runs log no stop reasons
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    path = out_dir / f"stop_reasons_{_safe(env)}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return {f"{env}/stop_reasons": path}


# ---------------------------------------------------------------------------------------------
