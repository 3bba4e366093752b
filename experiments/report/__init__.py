"""Render the compute-matched comparison report (GRPO vs PPO by default) from any sweep directory.

    python -m experiments.report DIR [--methods A,B,...]    # the first method is the baseline

finds every run directory under ``DIR`` (recursively: a directory holding ``metrics.jsonl``,
``config.yaml`` and ``summary.json``, see docs/interfaces.md), groups the runs by environment and
method (``algo``), writes ``DIR/report.md`` and PNG plots into ``DIR``, and prints the markdown.
:func:`render_report` returns the same content (markdown, table rows, image paths) so
``experiments/compare/job.py`` can log it to W&B.

Modules: ``keys`` (the contract below), ``stats`` (Student-t and Welch intervals, verdicts,
formatting), ``load`` (run directories), ``conclusion`` (per compute axis: the difference in held-out
success at the matched budget, Welch interval, verdict), ``references`` (start model, program-blind
floor and oracle ceiling on the runs' task set, cached in ``<sweep>/references.json``), ``tables``
(the numbers), ``plots`` (PNGs), ``markdown`` (``render_report``), ``__main__`` (the command line).
The report opens with the Conclusion and ends each env with "What the agent did": one success and
one failure per method from the runs' optional ``transcripts.json`` (``experiments/runfiles/transcripts.py``).

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
update each; every line must hold ``update``, ``algo`` and the :data:`CURVE_AXES` and
:data:`CONCLUSION_AXES` counters (cumulative); the keys in :data:`METRIC_KEYS` must appear in at least one line (``eval/*`` is
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

Two-agent runs (``algo=ppo_ctde | ppo_independent``, PairFix-v2) follow the smaller contract of
``experiments/report/pair.py`` (no recovery / hack / turn columns, groups, stop reasons or team
critic; per-agent ``agent_X/...`` keys instead) and get a per-agent table; without ``--methods``
``ppo_independent`` is their baseline.
"""

from experiments.report.keys import (
    CRITIC_EV_KEY,
    CRITIC_KEYS,
    CURVE_AXES,
    EV_NA,
    METHODS_WITH_CRITIC,
    METRIC_KEYS,
    REQUIRED_CONFIG_KEYS,
    RUN_FILES,
    STOP_PREFIX,
    SUMMARY_KEYS,
    TABLE_COLUMNS,
    ReportError,
)
from experiments.report.conclusion import (
    CONCLUSION_AXES,
    CONCLUSION_COLUMNS,
    Comparison,
    compare_at_matched_budgets,
    eval_curve,
    matched_budget,
    success_at,
)
from experiments.report.load import (
    Run,
    config_get,
    find_run_dirs,
    group_runs,
    load_run,
    load_runs,
    method_order,
    validate_run,
)
from experiments.report.markdown import Report, render_report, report_tables
from experiments.report.pair import PAIR_METHODS
from experiments.report.references import REFERENCE_COLUMNS, ReferenceRow, TaskSetSpec, reference_rows, task_set_spec
from experiments.report.stats import (
    CONFIDENCE,
    GRID_POINTS,
    fmt,
    fmt_seeds,
    interpolate_to_grid,
    mean_ci,
    mean_ci_columns,
    t_critical,
    verdict,
    welch_interval,
)
from experiments.report.tables import (
    AGENT_COLUMNS,
    DIAG_COLUMNS,
    agent_table,
    diagnostics_table,
    fairness_warnings,
    final_table,
    ordered_reasons,
    p_mix_series,
    stop_reason_totals,
)

__all__ = [
    "CONFIDENCE", "CRITIC_EV_KEY", "CRITIC_KEYS", "CURVE_AXES", "DIAG_COLUMNS", "EV_NA", "GRID_POINTS",
    "METHODS_WITH_CRITIC", "METRIC_KEYS", "REQUIRED_CONFIG_KEYS", "RUN_FILES", "STOP_PREFIX", "SUMMARY_KEYS",
    "TABLE_COLUMNS", "Report", "ReportError", "Run", "config_get", "diagnostics_table", "fairness_warnings",
    "final_table", "find_run_dirs", "fmt", "fmt_seeds", "group_runs", "interpolate_to_grid", "load_run",
    "load_runs", "mean_ci", "mean_ci_columns", "ordered_reasons", "p_mix_series", "render_report",
    "stop_reason_totals", "t_critical", "validate_run",
    "CONCLUSION_AXES", "CONCLUSION_COLUMNS", "Comparison", "REFERENCE_COLUMNS", "ReferenceRow", "TaskSetSpec",
    "compare_at_matched_budgets", "eval_curve", "matched_budget", "reference_rows", "success_at", "task_set_spec",
    "report_tables", "verdict", "welch_interval", "method_order", "AGENT_COLUMNS", "PAIR_METHODS", "agent_table",
]
