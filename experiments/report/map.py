"""The map: does a critic pay on long tasks? Each method's difference to the baseline over a grid of
horizons and check probabilities, from one comparison sweep per cell.

    python -m experiments.report.map DIR [DIR ...] [--out DIR] [--methods A,B,...]

A cell is one comparison sweep of LongHorizon-v3: a directory that directly holds run directories
(the compare job's ``<MAP_ROOT>/p<check_prob>/n<horizon>/<env>-<algo>-s<seed>/``); its horizon is
the runs' ``env.kwargs.n_stages`` and its check probability their ``env.kwargs.check_prob`` (0 when
absent; a cell whose runs disagree is an error). A ``DIR`` that is not a cell is searched for cells
below it. Per cell, :func:`experiments.report.horizons.load_horizon`: ``method - baseline`` at the
matched budget of each compute axis (Welch 95 % interval over seeds, verdict; the baseline is the
first of ``--methods``, GRPO by default) and the start model's success; beside it the smallest
difference the cell calls (the interval's half-width), the critic's held-out explained variance,
the grouped estimator's held-out state-value explained variance (the same definition), the anchor
hit rate and the cell's value ceiling EV* when ``<cell>/value_ceiling.json`` exists (written by
``python -m experiments.value_ceiling RUN_DIR --out <cell>/value_ceiling.json``).

Written to ``--out`` (default: the one root given, else the common parent of the cells):
``map.md`` (the cells with their compaction caps; per method and compute axis a table, rows
horizon, columns check probability; then one
detail row per horizon, check probability and method) and ``map_<method>.png`` per compared method
(one heat-map panel per compute axis: colour the difference, text the difference, its interval and
the verdict's marker; grey where the cell has no such comparison).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from algos import metric_keys as mk
from experiments.report import grid
from experiments.report.conclusion import Comparison, compare_at_matched_budgets
from experiments.report.grid import config_values, one_config_value
from experiments.report.horizons import HorizonResult, load_horizon
from experiments.report.keys import CONCLUSION_AXES, CRITIC_EV_KEY, EV_NA, METHODS_WITH_CRITIC, ReportError
from experiments.report.load import method_order
from experiments.report.stats import fmt_seeds
from experiments.report.tables import ANCHOR_KEY, ANCHOR_NA, per_run_mean, second_half_mean

CHECK_PROB_KEY = "env.kwargs.check_prob"
CAP_KEY = "compression.max_compactions"
#: the grouped-value estimator's held-out state-value explained variance (algos/grouped_value.py),
#: the same definition as the critic's :data:`CRITIC_EV_KEY`
GROUPED_EV_KEY = mk.TRAIN_STATE_VALUE_EV_HELDOUT
CEILING_FILE = "value_ceiling.json"
NOT_RUN = "not run"
NOT_MEASURED = "not measured"
#: the heat map's marker of a verdict: the compared method ahead, the baseline ahead, inconclusive
MARKERS = {"second": "▲", "first": "▼", "inconclusive": "○"}


@dataclass(frozen=True)
class ValueCeiling:
    """A cell's EV* (``ceiling`` of ``value_ceiling.json``) and its 95 % bootstrap interval."""

    ev: float
    low: float
    high: float
    path: Path

    def text(self) -> str:
        return f"{self.ev:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class MapCell:
    """One comparison sweep: its grid position, its :class:`HorizonResult` and its EV* (None when
    not measured)."""

    horizon: int
    check_prob: float
    result: HorizonResult
    ceiling: ValueCeiling | None

    @property
    def cell_dir(self) -> Path:
        return self.result.sweep_dir

    def comparison(self, baseline: str, method: str, axis: str) -> Comparison | None:
        """``method - baseline`` on ``axis``; None when the cell did not run both."""
        return next((c for c in self.result.comparisons
                     if (c.first, c.second, c.axis) == (baseline, method, axis)), None)


def read_value_ceiling(cell_dir: Path) -> ValueCeiling | None:
    """``<cell_dir>/value_ceiling.json``'s EV* and interval (experiments/value_ceiling.py's
    ``CeilingResult``: ``ceiling``, ``ceiling_ci``); None when the file does not exist."""
    path = Path(cell_dir) / CEILING_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        low, high = (float(v) for v in data["ceiling_ci"])
        return ValueCeiling(float(data["ceiling"]), low, high, path)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ReportError(f"{path} is not a value ceiling ({type(e).__name__}: {e}); allowed: the --out JSON of "
                          "python -m experiments.value_ceiling (keys ceiling, ceiling_ci)") from None


def check_prob_of(result: HorizonResult) -> float:
    """The one ``env.kwargs.check_prob`` of a cell's runs (0.0 where absent; ``ReportError`` when mixed)."""
    return one_config_value(_runs(result), CHECK_PROB_KEY, float, "a map cell", result.sweep_dir, absent=0.0)


def _runs(result: HorizonResult) -> list:
    return [r for runs in result.by_method.values() for r in runs]


def cap_text(cell: "MapCell") -> str:
    """The cell's compaction cap(s) (``compression.max_compactions`` of its runs; the horizon job
    raises it on long cells: ``experiments.compare.horizons.horizon_overrides``), "not recorded"
    where a run's config lacks it."""
    return " / ".join(str(v) for v in config_values(_runs(cell.result), CAP_KEY, "not recorded"))


#: what the map's cells are called in errors, and an example cell path
CELL_KIND, CELL_EXAMPLE = "map", "<map>/p0.5/n32"


def find_cells(root: str | Path) -> list[Path]:
    """``root`` when it is a cell, else every cell below it (sorted); ``ReportError`` when none."""
    return grid.find_cells(root, CELL_KIND, CELL_EXAMPLE)


def load_cell(cell_dir: Path, methods: Sequence[str] | None = None) -> MapCell:
    """:func:`load_horizon` of one cell; with ``methods`` only those methods' runs, compared again
    at the budgets they matched."""
    res = load_horizon(cell_dir, methods)
    check_prob = check_prob_of(res)
    if methods is not None:
        by_method = {m: res.by_method[m] for m in methods if m in res.by_method}
        env = next(iter(res.by_method.values()))[0].env
        res = replace(res, by_method=by_method, comparisons=tuple(compare_at_matched_budgets(env, by_method)))
    return MapCell(res.horizon, check_prob, res, read_value_ceiling(cell_dir))


def load_map(dirs: Sequence[str | Path], methods: Sequence[str] | None = None) -> list[MapCell]:
    """Every cell of ``dirs`` (each a cell or a directory above cells), sorted by horizon then
    check probability; two cells at one grid position are an error."""
    cells = grid.load_cells(dirs, CELL_KIND, CELL_EXAMPLE, lambda d: load_cell(d, methods),
                            lambda c: ((c.horizon, c.check_prob), f"{c.horizon} decisions, check_prob {c.check_prob:g}"))
    return sorted(cells, key=lambda c: (c.horizon, c.check_prob))


def map_methods(cells: Sequence[MapCell], methods: Sequence[str] | None = None) -> list[str]:
    """The map's methods, baseline first: ``methods`` when given (each must have run in some
    cell), else every method of the cells in :func:`method_order`."""
    ran = {m for c in cells for m in c.result.by_method}
    if methods is None:
        return method_order(ran)
    missing = [m for m in methods if m not in ran]
    if missing:
        raise ReportError(f"--methods names {', '.join(missing)}, which no cell ran; "
                          f"the cells ran {', '.join(sorted(ran))}")
    return list(methods)


def comparison_text(c: Comparison | None) -> str:
    """A table cell: ``+0.023 [+0.002, +0.044] PPO_LONG ahead``, or why there is no number."""
    if c is None:
        return NOT_RUN
    if not math.isfinite(c.difference):
        return "n/a (no seed reached the matched budget)"
    interval = f"[{c.low:+.3f}, {c.high:+.3f}]" if math.isfinite(c.low) else "(no interval: < 2 seeds)"
    return f"{c.difference:+.3f} {interval} {c.verdict}"


def grid_of(cells: Sequence[MapCell]) -> tuple[list[int], list[float], dict[tuple[int, float], MapCell]]:
    """``(horizons ascending, check probabilities ascending, {(horizon, check_prob): cell})``."""
    by = {(c.horizon, c.check_prob): c for c in cells}
    return sorted({c.horizon for c in cells}), sorted({c.check_prob for c in cells}), by


def axis_table(cells: Sequence[MapCell], baseline: str, method: str, axis: str) -> list[str]:
    """Markdown lines of one method's table on one axis: rows horizon, columns check probability."""
    horizons, probs, by = grid_of(cells)
    lines = ["| decisions | " + " | ".join(f"check_prob {p:g}" for p in probs) + " |", "|---|" + "---|" * len(probs)]
    for h in horizons:
        texts = [comparison_text(by[(h, p)].comparison(baseline, method, axis)) if (h, p) in by else NOT_RUN
                 for p in probs]
        lines.append(f"| {h} | " + " | ".join(texts) + " |")
    return lines


DETAIL_COLUMNS = ("decisions", "check_prob", "method", "held-out success (final)", "start model",
                  *(f"smallest difference called, {name}" for name in CONCLUSION_AXES.values()),
                  "critic EV held-out", "grouped EV held-out", "EV* (value ceiling)", "anchor hit rate")


def _called(cell: MapCell, baseline: str, method: str, axis: str) -> str:
    if method == baseline:
        return "baseline"
    c = cell.comparison(baseline, method, axis)
    if c is None:
        return NOT_RUN
    return f"±{c.resolution:.3f}" if math.isfinite(c.resolution) else "n/a (< 2 seeds)"


def _value_cells(method: str, runs) -> list[str]:
    """Critic EV and grouped EV held-out (second-half mean per seed, mean ± interval over seeds),
    the anchor hit rate (mean over updates per seed)."""
    if method in METHODS_WITH_CRITIC:
        critic = fmt_seeds([second_half_mean(r, CRITIC_EV_KEY) for r in runs])
        critic = EV_NA if critic == "n/a" else critic
    else:
        critic = "n/a (no critic)"
    grouped = (fmt_seeds([second_half_mean(r, GROUPED_EV_KEY) for r in runs])
               if any(r.has(GROUPED_EV_KEY) for r in runs) else "n/a (not logged)")
    anchors = (fmt_seeds([per_run_mean(r, ANCHOR_KEY) for r in runs]) if any(r.has(ANCHOR_KEY) for r in runs)
               else ANCHOR_NA)
    return [critic, grouped, anchors]


def map_detail_rows(cells: Sequence[MapCell], methods: Sequence[str]) -> list[list[str]]:
    """One row of :data:`DETAIL_COLUMNS` per (horizon, check probability, method that ran there);
    ``methods[0]`` is the baseline."""
    rows = []
    for cell in cells:
        for method in methods:
            runs = cell.result.by_method.get(method)
            if not runs:
                continue
            critic, grouped, anchors = _value_cells(method, runs)
            rows.append([str(cell.horizon), f"{cell.check_prob:g}", method,
                         fmt_seeds([r.summary.get(mk.EVAL_SUCCESS) for r in runs]), f"{cell.result.start_success:.3f}",
                         *(_called(cell, methods[0], method, axis) for axis in CONCLUSION_AXES),
                         critic, grouped, cell.ceiling.text() if cell.ceiling else NOT_MEASURED, anchors])
    return rows


def _heat_text(c: Comparison | None) -> str:
    """A heat-map cell's text: the verdict's marker and the difference, the interval below."""
    if c is None:
        return NOT_RUN
    if not math.isfinite(c.difference):
        return "n/a"
    side = ("second" if c.verdict == f"{c.second.upper()} ahead" else
            "first" if c.verdict == f"{c.first.upper()} ahead" else "inconclusive")
    interval = f"[{c.low:+.3f}, {c.high:+.3f}]" if math.isfinite(c.low) else "(< 2 seeds)"
    return f"{MARKERS[side]} {c.difference:+.3f}\n{interval}"


def _panel(ax, cells: Sequence[MapCell], baseline: str, method: str, axis: str, vmax: float, cmap):
    """One axis' heat map; returns the image (for the colorbar)."""
    horizons, probs, by = grid_of(cells)
    values = np.full((len(horizons), len(probs)), np.nan)
    for i, h in enumerate(horizons):
        for j, p in enumerate(probs):
            c = by[(h, p)].comparison(baseline, method, axis) if (h, p) in by else None
            if c is not None and math.isfinite(c.difference):
                values[i, j] = c.difference
            dark = math.isfinite(values[i, j]) and abs(values[i, j]) > 0.6 * vmax
            ax.text(j, i, _heat_text(c), ha="center", va="center", fontsize=9, color="white" if dark else "black")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=-vmax, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(probs)), [f"{p:g}" for p in probs])
    ax.set_yticks(range(len(horizons)), [str(h) for h in horizons])
    ax.set_xticks(np.arange(len(probs) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(horizons) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=2)
    ax.tick_params(which="minor", length=0)
    ax.set_title(f"matched {CONCLUSION_AXES[axis]}")
    ax.set_xlabel("check_prob")
    ax.set_ylabel("decisions per episode")
    return image


def plot_map(cells: Sequence[MapCell], baseline: str, method: str, path: Path) -> Path:
    """``method - baseline`` as heat maps, one panel per compute axis (two columns), rows horizon
    (ascending downwards), columns check probability; a diverging colormap centred on 0 whose
    symmetric limits all panels share; grey where the cell has no number."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    horizons, probs, _ = grid_of(cells)
    diffs = [abs(c.difference) for cell in cells for axis in CONCLUSION_AXES
             if (c := cell.comparison(baseline, method, axis)) is not None and math.isfinite(c.difference)]
    vmax = max([*diffs, 0.01])
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="0.85")
    axes = list(CONCLUSION_AXES)
    ncols = min(2, len(axes))
    nrows = math.ceil(len(axes) / ncols)
    fig, panels = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                               figsize=(ncols * (1.6 * len(probs) + 1.4), nrows * (0.8 * len(horizons) + 1.2) + 0.7))
    for ax, axis in zip(panels.flat, axes):
        image = _panel(ax, cells, baseline, method, axis, vmax, cmap)
    for ax in list(panels.flat)[len(axes):]:
        ax.set_visible(False)
    m, b = method.upper(), baseline.upper()
    fig.colorbar(image, ax=panels, label=f"held-out success, {m} - {b}", shrink=0.9)
    fig.suptitle(f"{m} - {b}: held-out success difference at matched budgets (95 % Welch interval)\n"
                 f"{MARKERS['second']} {m} ahead   {MARKERS['first']} {b} ahead   "
                 f"{MARKERS['inconclusive']} inconclusive   grey: not run")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _markdown(cells: Sequence[MapCell], methods: Sequence[str], pngs: Sequence[Path]) -> str:
    baseline = methods[0]
    lines = ["# The map: method differences over horizon and check probability", "",
             f"Per cell (decisions per episode `env.kwargs.n_stages` x `env.kwargs.check_prob`): `method - "
             f"{baseline}` in held-out success at the matched budget of each compute axis (95 % Welch interval over "
             f"seeds, verdict); \"{NOT_RUN}\" where the cell did not run both methods. The cells:", ""]
    lines += [f"- {c.horizon} decisions, check_prob {c.check_prob:g}: `{c.cell_dir}` (compaction cap {cap_text(c)})"
              for c in cells]
    for method, png in zip(methods[1:], pngs):
        lines += ["", f"## {method.upper()} - {baseline.upper()}", "", f"![{method} - {baseline}]({png.name})"]
        for axis, name in CONCLUSION_AXES.items():
            lines += ["", f"### matched {name}", "", *axis_table(cells, baseline, method, axis)]
    lines += ["", "## Each cell's runs", "",
              "Final held-out success and the start model's; the smallest difference each axis' comparison calls "
              "(half-width of its interval); the critic's and the grouped estimator's held-out explained variance "
              "(mean over the second half of updates per seed); EV*, the cell's value ceiling "
              f"(`{CEILING_FILE}`, 95 % bootstrap interval); the anchor hit rate (mean over updates per seed). "
              "Every ± is a 95 % t-interval over seeds.", ""]
    lines += ["| " + " | ".join(DETAIL_COLUMNS) + " |", "|" + "---|" * len(DETAIL_COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in map_detail_rows(cells, methods)]
    return "\n".join(lines) + "\n"


def render_map_report(dirs: Sequence[str | Path], out_dir: str | Path | None = None,
                      methods: Sequence[str] | None = None) -> tuple[str, list[Path], list[MapCell]]:
    """``(markdown, png paths, cells)``; writes ``map.md`` and ``map_<method>.png`` (one per method
    after the baseline) to ``out_dir`` (default :func:`experiments.report.grid.default_out`)."""
    cells = load_map(dirs, methods)
    ordered = map_methods(cells, methods)
    out = Path(out_dir) if out_dir is not None else grid.default_out(dirs, [c.cell_dir for c in cells])
    out.mkdir(parents=True, exist_ok=True)
    pngs = [plot_map(cells, ordered[0], m, out / f"map_{m}.png") for m in ordered[1:]]
    markdown = _markdown(cells, ordered, pngs)
    (out / "map.md").write_text(markdown)
    return markdown, pngs, cells


def parse_methods(text: str | None) -> list[str] | None:
    """``--methods``: distinct comma-separated names, at least two (the baseline first)."""
    return grid.parse_methods(text, 2, "two or more distinct comma-separated methods, the baseline first "
                                       "(e.g. grpo,ppo_long,grouped_value)")


CLI = grid.GridCli(prog="python -m experiments.report.map", description=__doc__.splitlines()[0], title="map",
                   cell_kind="map", report_file="map.md", figures="heat maps",
                   methods_help="comma-separated methods; the first is the baseline", parse_methods=parse_methods,
                   render=render_map_report)


def main(argv: Sequence[str] | None = None) -> int:
    return grid.run_cli(CLI, argv)


if __name__ == "__main__":
    sys.exit(main())
