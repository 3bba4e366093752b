"""The horizon report: how each method's difference to the baseline changes with the number of
decisions, from one comparison sweep per horizon.

    python -m experiments.report.horizons SWEEP_DIR [SWEEP_DIR ...] [--out DIR] [--methods A,B,...]

Each sweep directory holds the runs of one horizon (``env.kwargs.n_stages``, read from the runs'
configs; a sweep whose runs disagree is an error). Per horizon, the Conclusion of
:func:`experiments.report.conclusion.compare_at_matched_budgets` (``method - baseline`` at the
matched budget of each compute axis, Welch 95 % interval over seeds, verdict) and the start model's
success. Written to ``--out`` (default: the first sweep's parent): ``horizons.md`` (one row per
horizon, axis and comparison) and ``horizons.png`` (one panel per compute axis: each difference
with its interval against the number of decisions, log2 x-axis, 0 dashed).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from algos import metric_keys as mk
from experiments.report.conclusion import Comparison, compare_at_matched_budgets
from experiments.report.keys import CONCLUSION_AXES, CRITIC_EV_KEY, METHODS_WITH_CRITIC, ReportError
from experiments.report.load import config_get, group_runs, load_runs
from experiments.report.references import reference_rows
from experiments.report.stats import fmt_seeds, mean_ci
from experiments.report.tables import ANCHOR_KEY, per_run_mean, pmix_gap, second_half_mean, stop_reason_totals

HORIZON_KEY = "env.kwargs.n_stages"


@dataclass(frozen=True)
class HorizonResult:
    """One sweep: its horizon, directory, the start model's mean success and its comparisons."""

    horizon: int
    sweep_dir: Path
    start_success: float
    comparisons: tuple[Comparison, ...]
    by_method: dict = field(default_factory=dict)  # method -> its runs
    references: tuple = ()  # the sweep's start-model / floor / ceiling ReferenceRows


def horizon_of(runs) -> int:
    """The one ``env.kwargs.n_stages`` of a sweep's runs (``ReportError`` when absent or mixed)."""
    values = set()
    for r in runs:
        try:
            values.add(int(config_get(r.config, HORIZON_KEY)))
        except KeyError:
            raise ReportError(f"run {r.run_dir} has no {HORIZON_KEY} in its config") from None
    if len(values) != 1:
        raise ReportError(f"a horizon sweep holds one {HORIZON_KEY}; found {sorted(values)}")
    return values.pop()


def load_horizon(sweep_dir: str | Path, methods: Sequence[str] | None = None) -> HorizonResult:
    runs = load_runs(sweep_dir)
    if not runs:
        raise ReportError(f"no run directories under {sweep_dir}")
    groups = group_runs(runs, methods)
    if len(groups) != 1:
        raise ReportError(f"a horizon sweep holds one env; {sweep_dir} holds {sorted(groups)}")
    (env, by_method), = groups.items()
    start = mean_ci([r.summary.get(mk.START_MODEL_SUCCESS, float("nan")) for r in runs])[0]
    references, _ = reference_rows(runs, Path(sweep_dir))
    return HorizonResult(horizon_of(runs), Path(sweep_dir), start, tuple(compare_at_matched_budgets(env, by_method)),
                         dict(by_method), tuple(references))


def horizon_rows(results: Sequence[HorizonResult]) -> list[list[str]]:
    """``horizons.md``'s rows: horizon, start model, axis, comparison, difference, interval, verdict."""
    rows = []
    for res in sorted(results, key=lambda r: r.horizon):
        for c in res.comparisons:
            interval = "n/a (< 2 seeds)" if not math.isfinite(c.low) else f"[{c.low:+.3f}, {c.high:+.3f}]"
            rows.append([str(res.horizon), f"{res.start_success:.3f}", CONCLUSION_AXES.get(c.axis, c.axis),
                         f"{c.second.upper()} - {c.first.upper()}", f"{c.difference:+.3f}", interval, c.verdict])
    return rows


HORIZON_COLUMNS = ("decisions", "start model", "axis", "comparison", "difference", "95% Welch interval", "verdict")


DETAIL_COLUMNS = ("decisions", "method", "held-out success (final)", "start model", "floor", "ceiling",
                  "segments per trajectory", "turns", "mixed-group rate", "minus P_mix, abs", "critic EV held-out",
                  "anchor hit rate", "stop: resolved / failed / turn limit / format errors")
STOP_SHARES = ("submitted_resolved", "submitted_failed", "turn_limit", "format_errors")


def _reference(res: HorizonResult, role: str) -> str:
    """The best row of ``role`` among the sweep's references, ``rate (agent)``."""
    rows = [r for r in res.references if r.role == role and r.scored]
    if not rows:
        return "n/a"
    best = max(rows, key=lambda r: r.success)
    return f"{best.success:.3f}, {best.agent}" if role != "start model" else f"{best.success:.3f}"


def detail_rows(results: Sequence[HorizonResult]) -> list[list[str]]:
    """``horizons.md``'s per-horizon table, one row per (horizon, method): final held-out success,
    the sweep's start model / best floor agent / oracle, the training episodes' segments per
    trajectory and turns, the mixed-group rate and its distance to P_mix (G > 1), the critic's
    held-out explained variance (second-half mean), GiGPO's anchor hit rate and the stop-reason
    shares of the training episodes; each a mean ± t-interval over seeds (mean over updates per seed)."""
    rows = []
    for res in sorted(results, key=lambda r: r.horizon):
        for method, runs in res.by_method.items():
            grouped = [r for r in runs if int(config_get(r.config, "algo.group_size")) > 1]
            totals = stop_reason_totals(runs)
            n = sum(totals.values()) or float("nan")
            critic = (fmt_seeds([second_half_mean(r, CRITIC_EV_KEY) for r in runs]) if method in METHODS_WITH_CRITIC
                      else "n/a (no critic)")
            anchors = (fmt_seeds([per_run_mean(r, ANCHOR_KEY) for r in runs]) if any(r.has(ANCHOR_KEY) for r in runs)
                       else "n/a")
            rows.append([
                str(res.horizon), method, fmt_seeds([r.summary.get(mk.EVAL_SUCCESS) for r in runs]),
                _reference(res, "start model"), _reference(res, "program-blind floor"), _reference(res, "oracle ceiling"),
                fmt_seeds([per_run_mean(r, mk.ROLLOUT_MEAN_SEGMENTS) for r in runs]),
                fmt_seeds([per_run_mean(r, mk.ROLLOUT_MEAN_TURNS) for r in runs]),
                fmt_seeds([per_run_mean(r, mk.ROLLOUT_MIXED_GROUP_RATE) for r in grouped]) if grouped else "n/a (G = 1)",
                fmt_seeds([pmix_gap(r) for r in grouped]) if grouped else "n/a (G = 1)",
                critic, anchors, " / ".join(f"{totals.get(k, 0.0) / n:.3f}" for k in STOP_SHARES),
            ])
    return rows


def plot_horizons(results: Sequence[HorizonResult], path: Path) -> Path:
    """One panel per compute axis: every ``second - first`` difference with its interval against
    the horizon (markers offset slightly per comparison so the bars do not overlap)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = sorted(results, key=lambda r: r.horizon)
    axes = list(CONCLUSION_AXES)
    pairs = list(dict.fromkeys((c.first, c.second) for r in results for c in r.comparisons))
    fig, panels = plt.subplots(1, len(axes), figsize=(4.2 * len(axes), 3.8), sharey=True, squeeze=False)
    for ax, axis in zip(panels[0], axes):
        for j, (first, second) in enumerate(pairs):
            xs, ys, lo, hi = [], [], [], []
            for r in results:
                for c in r.comparisons:
                    if c.axis == axis and (c.first, c.second) == (first, second) and math.isfinite(c.difference):
                        xs.append(r.horizon * 2 ** (0.06 * (j - (len(pairs) - 1) / 2)))
                        ys.append(c.difference)
                        lo.append(c.difference - c.low if math.isfinite(c.low) else 0.0)
                        hi.append(c.high - c.difference if math.isfinite(c.high) else 0.0)
            if xs:
                ax.errorbar(xs, ys, yerr=np.array([lo, hi]), fmt="o-", capsize=3, color=f"C{j + 1}",
                            label=f"{second.upper()} - {first.upper()}")
        ax.axhline(0.0, color="grey", ls="--", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks([r.horizon for r in results], [str(r.horizon) for r in results])
        ax.set_title(f"matched {CONCLUSION_AXES[axis]}")
        ax.set_xlabel("decisions per episode")
    panels[0][0].set_ylabel("held-out success difference (95% Welch)")
    panels[0][0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render_horizon_report(sweep_dirs: Sequence[str | Path], out_dir: str | Path | None = None,
                          methods: Sequence[str] | None = None) -> tuple[str, Path, list[HorizonResult]]:
    """``(markdown, png path, results)``; writes ``horizons.md`` and ``horizons.png`` to ``out_dir``."""
    if not sweep_dirs:
        raise ReportError("no sweep directories given; allowed: one or more directories of horizon sweeps")
    results = [load_horizon(d, methods) for d in sweep_dirs]
    seen: dict[int, Path] = {}
    for r in results:
        if r.horizon in seen:
            raise ReportError(f"two sweeps at {r.horizon} decisions: {seen[r.horizon]} and {r.sweep_dir}")
        seen[r.horizon] = r.sweep_dir
    out = Path(out_dir) if out_dir is not None else Path(sweep_dirs[0]).resolve().parent
    png = plot_horizons(results, out / "horizons.png")
    lines = ["# Method differences against the horizon", "",
             "Per horizon: `method - baseline` in held-out success at the matched budget of each compute axis "
             "(95 % Welch interval over seeds), from the sweeps:", ""]
    lines += [f"- {r.horizon} decisions: `{r.sweep_dir}`" for r in sorted(results, key=lambda r: r.horizon)]
    lines += ["", "| " + " | ".join(HORIZON_COLUMNS) + " |", "|" + "---|" * len(HORIZON_COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in horizon_rows(results)]
    lines += ["", f"![differences against the horizon]({png.name})", "",
              "## Each horizon's runs", "",
              "Start model, best program-blind floor agent and oracle on each sweep's held-out protocol; the training "
              "episodes' segments per trajectory, turns, mixed-group rate (and its distance to P_mix(p, G)), the "
              "critic's held-out explained variance, GiGPO's anchor hit rate (mean over updates, then mean ± 95 % "
              "t-interval over seeds) and the stop-reason shares of all training episodes. Learning curves and "
              "transcripts: each sweep's `report.md`.", ""]
    lines += ["| " + " | ".join(DETAIL_COLUMNS) + " |", "|" + "---|" * len(DETAIL_COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in detail_rows(results)]
    lines += [""]
    markdown = "\n".join(lines)
    (out / "horizons.md").write_text(markdown)
    return markdown, png, results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.report.horizons", description=__doc__.splitlines()[0])
    p.add_argument("sweep_dirs", nargs="+", help="one sweep directory per horizon")
    p.add_argument("--out", default=None, help="where horizons.md / horizons.png go (default: the first sweep's parent)")
    p.add_argument("--methods", default=None, help="comma-separated method order; the first is the baseline")
    a = p.parse_args(argv)
    try:
        methods = [m.strip() for m in a.methods.split(",")] if a.methods else None
        markdown, png, _ = render_horizon_report(a.sweep_dirs, a.out, methods)
    except ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    print(markdown)
    print(f"[horizon report written next to {png}]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
