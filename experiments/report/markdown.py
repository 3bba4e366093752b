"""``render_report``: find the runs of a sweep, write the PNGs and ``report.md`` into it, and
return the same content as a :class:`Report` (``experiments/compare/job.py`` logs it to W&B).
:func:`build_report` measures, :func:`markdown_of` renders (a function per section)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from algos import metric_keys as mk
from experiments.report.conclusion import CONCLUSION_COLUMNS, Comparison, compare_at_matched_budgets
from experiments.report.families import family_columns, family_rows
from experiments.report.keys import CURVE_AXES, TABLE_COLUMNS
from experiments.report.load import Run, config_get, group_runs, load_runs
from experiments.report.pair import PAIR_METHODS, REFERENCE_NA, STOP_NA
from experiments.report.plots import plot_diagnostics, plot_stop_reasons, plot_success_curves
from experiments.report.references import REFERENCE_COLUMNS, ReferenceRow, reference_rows, start_model_rows
from experiments.report.stats import CONFIDENCE, fmt_seeds
from experiments.report.tables import (
    AGENT_COLUMNS,
    DIAG_COLUMNS,
    agent_table,
    diagnostics_table,
    fairness_warnings,
    final_table,
    ordered_reasons,
    stop_reason_totals,
)
from experiments.runfiles.transcripts import OUTCOMES, TABLE_COLUMNS as TRANSCRIPT_COLUMNS, load_transcripts, transcript_rows


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
    conclusion: list[Comparison] = field(default_factory=list)
    references: dict[str, list[ReferenceRow]] = field(default_factory=dict)
    # env -> method -> [one success record, one failure record] (experiments/runfiles/transcripts.py records)
    transcripts: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    # env -> method -> runs (the report's method order) and env -> its Conclusion rows
    groups: dict[str, dict[str, list[Run]]] = field(repr=False, default_factory=dict)
    comparisons: dict[str, list[Comparison]] = field(repr=False, default_factory=dict)


#: Longest transcript text the markdown shows (the rest is cut, with a note; the JSON keeps all).
MAX_TRANSCRIPT_CHARS = 4000


def pick_transcripts(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One success and one failure record of a method: the first found, runs in seed order
    (``run_dir/transcripts.json``, written by ``experiments.runfiles.transcripts.save_transcripts``)."""
    chosen: dict[str, dict[str, Any]] = {}
    for r in runs:
        for rec in load_transcripts(r.run_dir):
            if rec["outcome"] not in chosen:
                chosen[rec["outcome"]] = {**rec, "seed_of_run": r.seed}
    return [chosen[o] for o in OUTCOMES if o in chosen]


def _transcript_block(rec: dict[str, Any]) -> list[str]:
    text = rec["text"]
    if len(text) > MAX_TRANSCRIPT_CHARS:
        text = text[:MAX_TRANSCRIPT_CHARS] + f"\n... ({len(rec['text']) - MAX_TRANSCRIPT_CHARS} more characters in transcripts.json)\n"
    return [f"**{rec['outcome']}** (run seed {rec['seed_of_run']}):", "", "```text", text.rstrip("\n"), "```", ""]


def _conclusion_md(env: str, comparisons: Sequence[Comparison]) -> list[str]:
    if not comparisons:
        return [f"- {env}: only one method, nothing to compare.", ""]
    md = [_md_table(CONCLUSION_COLUMNS, [c.row() for c in comparisons]), ""]
    for second in dict.fromkeys(c.second for c in comparisons):  # one line per non-baseline method
        mine = [c for c in comparisons if c.second == second]
        words = "; ".join(f"{c.axis.split('/')[1]}: {c.verdict_line}" for c in mine)
        md += [f"Verdicts ({env}, {second.upper()} - {mine[0].first.upper()}): {words}.", ""]
    return md


def _reference_md(methods: Mapping[str, Sequence[Run]], refs: Sequence[ReferenceRow]) -> list[str]:
    rows = []
    for method, rs in methods.items():
        rows.append([f"method {method}", f"{len(rs)} seeds (final policy)", fmt_seeds([r.summary[mk.EVAL_SUCCESS] for r in rs]),
                     "t-interval over seeds (the ± above)", str(sum(int(config_get(r.config, "eval.tasks")) *
                                                                  int(config_get(r.config, "eval.samples_per_task"))
                                                                  for r in rs))])
    rows += [ref.cells() for ref in refs]
    return [_md_table(REFERENCE_COLUMNS, rows), ""]


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


def _baselines(groups: Mapping[str, Mapping[str, Sequence[Run]]]) -> str:
    """The baseline method (the first) of each env: ``"GRPO"``, or ``"bugfix: GRPO, long_horizon: PPO"``
    when the envs differ."""
    firsts = {env: next(iter(ms)).upper() for env, ms in groups.items() if ms}
    if len(set(firsts.values())) <= 1:
        return next(iter(firsts.values()), "none")
    return ", ".join(f"{env}: {m}" for env, m in firsts.items())


def render_report(sweep_dir: str | Path, title: str | None = None, references: bool = True,
                  methods: Sequence[str] | None = None) -> Report:
    """Find the runs under ``sweep_dir``, write ``report.md`` and the PNGs there, return them.

    ``references``: play the scripted floor / ceiling agents on the runs' task set (cached in
    ``sweep_dir/references.json``); ``False`` keeps only the start-model reference row.
    ``methods``: the method order (:func:`experiments.report.load.method_order`); the first present
    is the **baseline** every other method is compared against in the Conclusion (default: GRPO,
    then PPO, then the rest by name)."""
    report = build_report(Path(sweep_dir), references, methods)
    report.markdown = markdown_of(report, title)
    report.path.write_text(report.markdown)
    return report


def build_report(sweep_dir: Path, references: bool = True, methods: Sequence[str] | None = None) -> Report:
    """Everything the report shows, measured from the runs (the PNGs are written here; the
    markdown is left empty for :func:`markdown_of`)."""
    runs = load_runs(sweep_dir)
    groups = group_runs(runs, methods)
    comparisons = {env: compare_at_matched_budgets(env, ms) for env, ms in groups.items()}
    refs: dict[str, list[ReferenceRow]] = {}
    for env, ms in groups.items():
        everyone = [r for rs in ms.values() for r in rs]
        refs[env] = reference_rows(everyone, sweep_dir)[0] if references else start_model_rows(everyone)
        if references and any(m in PAIR_METHODS for m in ms):
            refs[env] += [ReferenceRow("program-blind floor", REFERENCE_NA, 0, 0),
                          ReferenceRow("oracle ceiling", REFERENCE_NA, 0, 0)]
    transcripts = {env: {m: pick_transcripts(rs) for m, rs in ms.items()} for env, ms in groups.items()}
    images: dict[str, Path] = {}
    stops: dict[str, dict[str, dict[str, float]]] = {}
    for env, ms in groups.items():
        images.update(plot_success_curves(env, ms, sweep_dir, refs[env]))
        images.update(plot_diagnostics(env, ms, sweep_dir))
        stops[env] = {m: stop_reason_totals(rs) for m, rs in ms.items()}
        images.update(plot_stop_reasons(env, stops[env], sweep_dir))
    return Report(markdown="", columns=list(TABLE_COLUMNS), rows=final_table(groups), images=images,
                  path=sweep_dir / "report.md", runs=list(runs), stop_reasons=stops, warnings=fairness_warnings(groups),
                  conclusion=[c for cs in comparisons.values() for c in cs], references=refs, transcripts=transcripts,
                  groups=groups, comparisons=comparisons)


def markdown_of(report: Report, title: str | None = None) -> str:
    """The report's markdown: header, Conclusion, protocol notes, final table, one section per env."""
    md = _header_md(report, title) + _conclusion_section_md(report) + _protocol_md(report) + _final_table_md(report)
    for env, methods in report.groups.items():
        md += _env_md(report, env, methods)
    return "\n".join(md)


def _header_md(report: Report, title: str | None) -> list[str]:
    names = list(dict.fromkeys(m for ms in report.groups.values() for m in ms))
    return [f"# {title or ' vs '.join(m.upper() for m in names) + ': compute-matched comparison'}", "",
            f"Sweep directory: `{report.path.parent}` — {len(report.runs)} runs.", ""]


def _conclusion_section_md(report: Report) -> list[str]:
    md = ["## Conclusion", "",
          "Per compute axis: held-out success of each method at the **matched budget** (the largest "
          "budget every run of the env reached on that axis = the smallest final counter), each run's "
          "eval curve interpolated linearly there (the curve starts at the start model's success at 0 "
          "compute); then the difference of every other method minus the **baseline** "
          f"({_baselines(report.groups)}: the first of `--methods`, GRPO by default), one row and one verdict "
          f"per (method, axis), with its {int(CONFIDENCE * 100)}% Welch interval across seeds (unequal variances, Welch-Satterthwaite "
          "df). Verdict: a method is *ahead* when the interval excludes 0, else *inconclusive*.", ""]
    for env, methods in report.groups.items():
        md += [f"### {env}", ""]
        md += _conclusion_md(env, report.comparisons[env])
        md += ["Final held-out success beside the references on the same task set (same env, "
               "difficulty, split, task indices and attempts per task as the runs' evaluation; "
               "scripted agents, see experiments/report/references.py):", ""]
        md += _reference_md(methods, report.references[env])
    if report.warnings:
        md += ["**Caution: the runs are not compute-matched or not protocol-matched** (see the list below); the "
               "verdicts compare unlike runs.", ""]
    return md


def _protocol_md(report: Report) -> list[str]:
    md = [f"All `a ± b` values are the mean over seeds ± the half-width of the two-sided "
          f"{int(CONFIDENCE * 100)}% Student-t interval (t_(0.975, n-1) · s / √n, s = sample std over "
          "seeds); `± n/a` means a single seed. Curves: each seed interpolated linearly onto a common "
          "grid over the x-range every seed covers; line = mean, band = the same t-interval.", ""]
    if report.warnings:
        md.append("**Not compute-matched or not protocol-matched:**")
        md += [f"- {w}" for w in report.warnings]
    else:
        md.append("Test budget, training budget, start model, loss aggregation, learning rate and seeds are identical "
                  "across methods in every env.")
    return md + [""]


def _final_table_md(report: Report) -> list[str]:
    return ["## Final table (summary.json of each run)", "",
            "Held-out success is verified success on unseen task templates at the test budget shown "
            "(attempts per task). Compute columns are training totals: complete rollouts, sampled "
            "tokens, tokens read from tools, simulated tool seconds, estimated training FLOPs, wall time.", "",
            _md_table(TABLE_COLUMNS, report.rows), ""]


def _env_md(report: Report, env: str, methods: Mapping[str, Sequence[Run]]) -> list[str]:
    md = [f"## {env}", ""]
    for method, rs in methods.items():
        md.append(f"- **{method}**: seeds {[r.seed for r in rs]}; budget: {_budget_line(rs)}; "
                  f"start model: {sorted({str(r.summary['start_model/path']) for r in rs})}")
    md += ["", "### Held-out success vs compute", "",
           "Reference lines: the start model (dashed), the program-blind floor (dotted) and the oracle "
           "ceiling (dash-dot) on the same task set.", ""]
    for axis in CURVE_AXES:
        image = report.images[f"{env}/success_vs_{axis.split('/')[1]}"]
        md.append(f"![success vs {axis}]({image.name})")
    md.append("")
    md += _families_md(methods)
    md += _diagnostics_md(report, env, methods)
    md += agent_table_md(env, methods)
    md += _stop_reasons_md(report, env, methods)
    md += _transcripts_md(report, env)
    return md


def _families_md(methods: Mapping[str, Sequence[Run]]) -> list[str]:
    rows = family_rows(methods)
    if not rows:
        return []
    return ["### Per task family", "",
            "Held-out success on each family of the task mixture (the evaluation's tasks of that family): "
            "the start model, and each method's final policy (mean ± t-interval over seeds).", "",
            _md_table(family_columns(methods), rows), ""]


def _diagnostics_md(report: Report, env: str, methods: Mapping[str, Sequence[Run]]) -> list[str]:
    return ["### Training diagnostics", "",
            "Mixed-group rate: fraction of groups with both a success and a failure (the only groups "
            "that give GRPO a task-reward gradient); dashed: P_mix = 1 - p^G - (1-p)^G at the measured "
            "success rate p of the same update. All-0/all-1: groups with no outcome contrast (group columns "
            "are n/a for G = 1: every group of one is all-0 or all-1 by definition). Critic "
            "explained variance is measured on complete returns the critic was not fitted on; per seed "
            "it is the mean over the second half of training (updates > U/2). Weight "
            "shift: how far token-mean aggregation moves per-task loss weights away from task-mean "
            "on the same batch. Signed advantage mass: sum w A / sum w |A| over the batch's action tokens "
            "with the loss's own aggregation weights w, the net direction the policy step pushes the "
            "batch's own tokens (0 for group advantages weighted per trajectory; negative when the "
            "failures are the longer trajectories and weigh more). Anchor hit rate (GiGPO): share of steps whose state "
            "(`info[\"state_key\"]`) recurs in its group, so its step group has >= 2 members.", "",
            _md_table(DIAG_COLUMNS, [r for r in diagnostics_table({env: methods})]), "",
            f"![diagnostics]({report.images[f'{env}/diagnostics'].name})", ""]


def _stop_reasons_md(report: Report, env: str, methods: Mapping[str, Sequence[Run]]) -> list[str]:
    stops = report.stop_reasons[env]
    reasons = ordered_reasons(stops)
    srows = []
    for method, t in stops.items():
        total = sum(t.values())
        srows.append([method]
                     + [f"{t.get(r, 0.0):g} ({100 * t.get(r, 0.0) / total:.1f}%)" if total else "0" for r in reasons]
                     + [f"{total:g}"])
    md = ["### Stop reasons (training episodes, summed over updates and seeds)", "",
          _md_table(["method", *reasons, "total"], srows), ""]
    if any(m in PAIR_METHODS for m in methods):
        md += [f"({STOP_NA}.)", ""]
    return md + [f"![stop reasons]({report.images[f'{env}/stop_reasons'].name})", ""]


def _transcripts_md(report: Report, env: str) -> list[str]:
    md = ["### What the agent did", "",
          "One success and one failure per method from the final evaluation (environment text "
          "plain, sampled text in «»; header: stop reason and verifier result).", ""]
    for method, recs in report.transcripts[env].items():
        md += [f"#### {method}", ""]
        if not recs:
            md += ["(no transcripts.json in this method's runs)", ""]
        for rec in recs:
            md += _transcript_block(rec)
    return md


def report_tables(report: Report) -> dict[str, tuple[list[str], list[list[Any]]]]:
    """The Conclusion, the reference rows and the transcripts as ``{name: (columns, rows)}`` for a
    logger's ``log_table`` (``experiments/compare/job.py``'s report run): ``report/conclusion``
    (:data:`CONCLUSION_COLUMNS`), ``report/references`` (``env`` + :data:`REFERENCE_COLUMNS`),
    ``report/transcripts`` (``env`` + ``experiments.runfiles.transcripts.TABLE_COLUMNS``), and for two-agent
    runs ``report/agents`` (``experiments.report.pair.AGENT_COLUMNS``)."""
    refs = [[env, *row.cells()] for env, rows in report.references.items() for row in rows]
    trans = [[env, *row] for env, ms in report.transcripts.items() for m, recs in ms.items()
             for row in transcript_rows(recs, m)]
    tables = {
        mk.REPORT_CONCLUSION: (list(CONCLUSION_COLUMNS), [c.row() for c in report.conclusion]),
        mk.REPORT_REFERENCES: (["env", *REFERENCE_COLUMNS], refs),
        mk.REPORT_TRANSCRIPTS: (["env", *TRANSCRIPT_COLUMNS], trans),
    }
    agents = agent_table(group_runs(report.runs))
    if agents:  # two-agent runs only
        tables[mk.REPORT_AGENTS] = (list(AGENT_COLUMNS), agents)
    return tables


def agent_table_md(env: str, methods: Mapping[str, Sequence[Any]]) -> list[str]:
    """The markdown of the per-agent section of ``env`` (empty when no method is a pair method)."""
    if not any(m in PAIR_METHODS for m in methods):
        return []
    return [
        "### Per agent (two-agent runs)",
        "",
        "Final held-out evaluation per agent (`agent_X/eval/...` of summary.json): the team's success on "
        "the held-out tasks whose bug is only in X's file (the start model's on the same tasks beside it), "
        "X's file computing its reference's outputs at the end, X's `send` actions and format-error rate "
        "per episode; X's critic explained variance on held-out complete returns (values before each "
        "update's fit; per seed the mean over the second half of training). ppo_ctde's critic reads the "
        "joint state (both contexts), ppo_independent's only X's own.",
        "",
        _md_table(AGENT_COLUMNS, agent_table({env: methods})),
        "",
    ]
