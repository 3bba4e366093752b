"""``render_report``: find the runs of a sweep, write the PNGs and ``report.md`` into it, and
return the same content as a :class:`Report` (``experiments/compare.py`` logs it to W&B)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.report.keys import CURVE_AXES, TABLE_COLUMNS
from experiments.report.load import Run, config_get, group_runs, load_runs
from experiments.report.plots import plot_diagnostics, plot_stop_reasons, plot_success_curves
from experiments.report.stats import CONFIDENCE
from experiments.report.tables import (
    DIAG_COLUMNS,
    diagnostics_table,
    fairness_warnings,
    final_table,
    ordered_reasons,
    stop_reason_totals,
)


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


def _md_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _budget_line(runs: Sequence[Run]) -> str:
    parts = set()
    for r in runs:
        try:
            b = config_get(r.config, "budget")
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
