"""The off-policy map: what sampling with a stale or a bfloat16 policy costs, and which correction
pays it back, from one comparison sweep per setting.

    python -m experiments.report.offpolicy DIR [DIR ...] [--out DIR] [--methods A,B,...]

A setting (:class:`Setting`) is ``rollout.staleness=k`` x ``rollout.sampler_dtype`` x
``algo.off_policy_correction``, read from the runs' configs (each key required); a cell
is one comparison sweep of LongHorizon-v3 at one horizon (``env.kwargs.n_stages``) and one setting:
a directory that directly holds run directories (the compare job's
``<sweep-dir>/offpolicy/n<h>/<setting name>/<env>-<algo>-s<seed>/``; a cell whose runs disagree is
an error). The baseline of a horizon is its synchronous float32 cell without correction
(:data:`BASELINE`, ``k0-float32-none``). Per horizon, method and setting: the cell's final held-out
success minus the baseline cell's (the same method, the seeds both ran) at the matched budget of
each compute axis (:func:`experiments.report.conclusion.compare_at_matched_budgets`: Welch 95 %
interval over seeds, verdict), and the cell's mismatch (``off_policy/*``, mean over updates per
seed) and asynchronous waits (``async/*``). Every setting of the map's grid (:func:`grid_settings`
of the defaults) has a row; one no cell ran reads "not run".

Written to ``--out`` (default: the one root given, else the cells' common parent):
``offpolicy.md`` and ``offpolicy_n<h>.png`` per horizon (held-out success against wall seconds,
mean over seeds; one panel per method and correction, one colour per staleness, float32 solid and
bfloat16 dashed).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from algos import metric_keys as mk
from experiments.report import grid
from experiments.report.conclusion import Comparison, compare_at_matched_budgets, eval_curve
from experiments.report.grid import one_config_value
from experiments.report.horizons import horizon_of
from experiments.report.keys import CONCLUSION_AXES, ReportError
from experiments.report.load import Run, group_runs, load_runs, method_order
from experiments.report.stats import fmt_seeds, interpolate_to_grid
from experiments.report.tables import per_run_mean

STALENESS_KEY, MODE_KEY, DTYPE_KEY = "rollout.staleness", "rollout.mode", "rollout.sampler_dtype"
CORRECTION_KEY = "algo.off_policy_correction"
#: the map's grid: staleness, sampler dtypes, corrections (none, token TIS, token mask)
STALENESS: tuple[int, ...] = (0, 1, 2, 4)
DTYPES: tuple[str, ...] = ("float32", "bfloat16")
CORRECTIONS: tuple[str, ...] = ("none", "decoupled", "token-mask")
NOT_RUN = "not run"
#: the labels of a comparison: ``off-policy - baseline``
FIRST, SECOND = "baseline", "off-policy"
#: the cell's mismatch and waits: metric key -> column
MISMATCH_COLUMNS: dict[str, str] = {
    mk.OFF_POLICY_PROB_RATIO_ERROR: "prob_ratio_error", mk.OFF_POLICY_BEHAVIOR_KL_K1: "behavior_kl_k1",
    mk.OFF_POLICY_BAND_DROP_SHARE: "band_drop_share", mk.OFF_POLICY_STALENESS_MEAN: "staleness (mean)",
    mk.ASYNC_TRAINER_WAIT_SECONDS: "trainer wait s", mk.ASYNC_SAMPLER_WAIT_SECONDS: "sampler wait s",
}
TABLE_COLUMNS = ("setting", "mode", "seeds", "held-out success (final)",
                 *(f"- baseline, {name}" for name in CONCLUSION_AXES.values()), *MISMATCH_COLUMNS.values())


@dataclass(frozen=True)
class Setting:
    """One cell's off-policy knobs; :attr:`mode` async from staleness 1 on (a sampler process
    beside the trainer: the same numbers as the synchronous run with the same lag, its own wall time)."""

    staleness: int
    sampler_dtype: str
    correction: str

    @property
    def name(self) -> str:
        return f"k{self.staleness}-{self.sampler_dtype}-{self.correction}"

    @property
    def mode(self) -> str:
        return "async" if self.staleness >= 1 else "sync"

    def overrides(self) -> list[str]:
        return [f"{STALENESS_KEY}={self.staleness}", f"{MODE_KEY}={self.mode}", f"{DTYPE_KEY}={self.sampler_dtype}",
                f"{CORRECTION_KEY}={self.correction}"]


#: the synchronous float32 run without correction every cell is compared with
BASELINE = Setting(0, "float32", "none")


def grid_settings(staleness: Sequence[int] = STALENESS, dtypes: Sequence[str] = DTYPES,
                  corrections: Sequence[str] = CORRECTIONS) -> list[Setting]:
    """:data:`BASELINE` first, then staleness ascending x ``dtypes`` x ``corrections`` (their order),
    without the staleness-0 float32 settings: there the sampler is the old policy (rho = 1 up to
    float rounding, and every correction weighs a token 1 at rho = 1), so each is the baseline."""
    rest = [Setting(k, d, c) for k in sorted(staleness) for d in dtypes for c in corrections
            if not (k == 0 and d == BASELINE.sampler_dtype)]
    return [BASELINE, *rest]


@dataclass(frozen=True)
class OffPolicyCell:
    """One comparison sweep: its horizon, setting, mode, directory and runs per method (by seed)."""

    horizon: int
    setting: Setting
    mode: str
    cell_dir: Path
    by_method: dict[str, list[Run]]


def load_cell(cell_dir: Path, methods: Sequence[str] | None = None) -> OffPolicyCell:
    runs = load_runs(cell_dir)
    groups = group_runs(runs, methods)
    if len(groups) != 1:
        raise ReportError(f"an off-policy cell holds one env; {cell_dir} holds {sorted(groups)}")
    (_, by_method), = groups.items()
    def one(key: str, cast):
        return one_config_value(runs, key, cast, "an off-policy cell", cell_dir)

    setting = Setting(one(STALENESS_KEY, int), one(DTYPE_KEY, str), one(CORRECTION_KEY, str))
    by_method = {m: rs for m, rs in by_method.items() if methods is None or m in methods}
    return OffPolicyCell(horizon_of(runs), setting, one(MODE_KEY, str), Path(cell_dir), by_method)


#: what the off-policy map's cells are called in errors, and an example cell path
CELL_KIND, CELL_EXAMPLE = "off-policy", "<sweep-dir>/offpolicy/n8/k1-float32-none"


def find_cells(root: str | Path) -> list[Path]:
    """``root`` when it is a cell, else every cell below it (sorted); ``ReportError`` when none."""
    return grid.find_cells(root, CELL_KIND, CELL_EXAMPLE)


def load_offpolicy(dirs: Sequence[str | Path], methods: Sequence[str] | None = None) -> list[OffPolicyCell]:
    """Every cell of ``dirs``, by horizon, then in the map's grid order (:func:`grid_settings`: the
    baseline first), other settings last; two cells at one (horizon, setting) are an error."""
    cells = grid.load_cells(dirs, CELL_KIND, CELL_EXAMPLE, lambda d: load_cell(d, methods),
                            lambda c: ((c.horizon, c.setting), f"{c.horizon} decisions, {c.setting.name}"))
    order = grid_settings()
    return sorted(cells, key=lambda c: (c.horizon, order.index(c.setting) if c.setting in order else len(order),
                                        c.setting.staleness, c.setting.name))


def against_baseline(cell: OffPolicyCell, base: OffPolicyCell, method: str) -> list[Comparison]:
    """``cell - baseline`` of ``method`` on every compute axis, over the seeds both ran."""
    seeds = {r.seed for r in cell.by_method.get(method, [])} & {r.seed for r in base.by_method.get(method, [])}
    if not seeds:
        return []
    groups = {FIRST: [r for r in base.by_method[method] if r.seed in seeds],
              SECOND: [r for r in cell.by_method[method] if r.seed in seeds]}
    return compare_at_matched_budgets(f"{cell.horizon} decisions", groups)


def comparison_text(c: Comparison) -> str:
    if not math.isfinite(c.difference):
        return "n/a (no seed reached the matched budget)"
    interval = f"[{c.low:+.3f}, {c.high:+.3f}]" if math.isfinite(c.low) else "(no interval: < 2 seeds)"
    return f"{c.difference:+.3f} {interval} {c.verdict}"


def _mismatch(runs: Sequence[Run]) -> list[str]:
    return [fmt_seeds([per_run_mean(r, key) for r in runs]) if any(r.has(key) for r in runs) else "n/a (not logged)"
            for key in MISMATCH_COLUMNS]


def table_rows(cells: Sequence[OffPolicyCell], horizon: int, method: str) -> list[list[str]]:
    """One row of :data:`TABLE_COLUMNS` per setting of the default grid (then any other setting a
    cell of ``horizon`` ran): "not run" where no cell ran ``method`` at it."""
    at = {c.setting: c for c in cells if c.horizon == horizon}
    base = at.get(BASELINE)
    rows = []
    for s in dict.fromkeys([*grid_settings(), *sorted(at, key=lambda s: (s.staleness, s.sampler_dtype, s.correction))]):
        runs = at[s].by_method.get(method, []) if s in at else []
        if not runs:
            rows.append([s.name, s.mode, "0", NOT_RUN, *[NOT_RUN] * (len(TABLE_COLUMNS) - 4)])
            continue
        if s == BASELINE:
            diffs = ["baseline"] * len(CONCLUSION_AXES)
        elif base is None or not (found := against_baseline(at[s], base, method)):
            diffs = [f"n/a (baseline {BASELINE.name} not run)"] * len(CONCLUSION_AXES)
        else:
            diffs = [comparison_text(c) for c in found]
        rows.append([s.name, at[s].mode, str(len(runs)), fmt_seeds([r.summary.get(mk.EVAL_SUCCESS) for r in runs]),
                     *diffs, *_mismatch(runs)])
    return rows


def _mean_curve(runs: Sequence[Run]) -> tuple[np.ndarray, np.ndarray] | None:
    """Held-out success against wall seconds, the mean over seeds on the range every seed covers."""
    curves = interpolate_to_grid([eval_curve(r, mk.COMPUTE_WALL_SECONDS) for r in runs])
    return None if curves is None else (curves[0], curves[1].mean(axis=0))


def plot_horizon(cells: Sequence[OffPolicyCell], horizon: int, methods: Sequence[str], path: Path) -> Path:
    """:func:`horizon_figure` written to ``path`` (PNG)."""
    fig = horizon_figure(cells, horizon, methods)
    import matplotlib.pyplot as plt  # after horizon_figure has picked the Agg backend

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def horizon_figure(cells: Sequence[OffPolicyCell], horizon: int, methods: Sequence[str]):
    """One panel per (method: rows, correction: columns); per staleness a colour, float32 solid and
    bfloat16 dashed; the baseline (staleness 0, float32) drawn in every panel of its method. One
    legend for the figure, below the panels, so that no line is hidden under it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    here = [c for c in cells if c.horizon == horizon]
    corrections = list(dict.fromkeys([*CORRECTIONS, *(c.setting.correction for c in here)]))
    ks = sorted({*STALENESS, *(c.setting.staleness for c in here)})
    handles = {}  # legend label -> (staleness, bfloat16?), its first line
    fig, panels = plt.subplots(len(methods), len(corrections), squeeze=False, sharex=True, sharey=True,
                               figsize=(4.2 * len(corrections), 3.2 * len(methods) + 0.6), layout="constrained")
    for i, method in enumerate(methods):
        for j, corr in enumerate(corrections):
            ax = panels[i][j]
            for c in sorted(here, key=lambda c: (c.setting.staleness, c.setting.sampler_dtype != "float32")):
                s = c.setting
                if (s.correction != corr and s != BASELINE) or not c.by_method.get(method):
                    continue
                curve = _mean_curve(c.by_method[method])
                if curve is not None:
                    label = f"k={s.staleness} {s.sampler_dtype}" + (" (baseline)" if s == BASELINE else "")
                    line, = ax.plot(*curve, color=f"C{ks.index(s.staleness)}", lw=1.6,
                                    ls="-" if s.sampler_dtype == "float32" else "--")
                    handles.setdefault(label, ((s.staleness, s.sampler_dtype != "float32"), line))
            ax.set_title(f"{method}, correction {corr}", fontsize=10)
            ax.grid(alpha=0.3)
            if i == len(methods) - 1:
                ax.set_xlabel("wall seconds")
            if j == 0:
                ax.set_ylabel("held-out success")
    if handles:
        order = sorted(handles, key=lambda label: handles[label][0])
        fig.legend([handles[label][1] for label in order], order, loc="outside lower center",
                   ncols=min(len(order), 4), fontsize=8)
    fig.suptitle(f"{horizon} decisions: held-out success against wall time (mean over seeds)\n"
                 f"colour: staleness k; solid: float32 sampler, dashed: bfloat16; baseline: k=0 float32, no correction")
    return fig


def _markdown(cells: Sequence[OffPolicyCell], methods: Sequence[str], pngs: dict[int, Path]) -> str:
    lines = ["# The off-policy map: staleness x sampler dtype x correction", "",
             f"Per horizon and method: each setting's held-out success minus the baseline's ({BASELINE.name}: "
             "synchronous, float32 sampler, no correction; the same method and seeds) at the matched budget of each "
             "compute axis (95 % Welch interval over seeds, verdict); the setting's mismatch between sampler and "
             "trainer (`off_policy/*`) and the asynchronous waits (`async/*`), mean over updates per seed, then mean "
             "± 95 % t-interval over seeds. The cells:", ""]
    lines += [f"- {c.horizon} decisions, {c.setting.name} ({c.mode}): `{c.cell_dir}`" for c in cells]
    for h in sorted({c.horizon for c in cells}):
        lines += ["", f"## {h} decisions", "", f"![{h} decisions: success against wall time]({pngs[h].name})"]
        for method in methods:
            lines += ["", f"### {method}", "", "| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
            lines += ["| " + " | ".join(row) + " |" for row in table_rows(cells, h, method)]
    return "\n".join(lines) + "\n"


def render_offpolicy_report(dirs: Sequence[str | Path], out_dir: str | Path | None = None,
                            methods: Sequence[str] | None = None) -> tuple[str, list[Path], list[OffPolicyCell]]:
    """``(markdown, png paths, cells)``; writes ``offpolicy.md`` and ``offpolicy_n<h>.png``."""
    cells = load_offpolicy(dirs, methods)
    ran = {m for c in cells for m in c.by_method}
    missing = [m for m in methods or () if m not in ran]
    if missing:
        raise ReportError(f"--methods names {', '.join(missing)}, which no cell ran; the cells ran {', '.join(sorted(ran))}")
    ordered = list(methods) if methods else method_order(ran)
    out = Path(out_dir) if out_dir is not None else grid.default_out(dirs, [c.cell_dir for c in cells])
    out.mkdir(parents=True, exist_ok=True)
    pngs = {h: plot_horizon(cells, h, ordered, out / f"offpolicy_n{h}.png") for h in sorted({c.horizon for c in cells})}
    markdown = _markdown(cells, ordered, pngs)
    (out / "offpolicy.md").write_text(markdown)
    return markdown, list(pngs.values()), cells


def parse_methods(text: str | None) -> list[str] | None:
    """``--methods``: distinct comma-separated names (each compared with its own baseline cell)."""
    return grid.parse_methods(text, 1, "distinct comma-separated methods, e.g. grpo,ppo_long")


CLI = grid.GridCli(prog="python -m experiments.report.offpolicy", description=__doc__.splitlines()[0],
                   title="off-policy map", cell_kind="off-policy", report_file="offpolicy.md", figures="figures",
                   methods_help="comma-separated methods (default: every method of the cells)",
                   parse_methods=parse_methods, render=render_offpolicy_report)


def main(argv: Sequence[str] | None = None) -> int:
    return grid.run_cli(CLI, argv)


if __name__ == "__main__":
    sys.exit(main())
