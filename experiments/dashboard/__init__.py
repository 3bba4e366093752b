"""``python -m experiments.dashboard SWEEP_DIR``: the W&B workspace and report of a compare sweep,
as code (``wandb-workspaces``, the optional ``dashboard`` extra), built offline.

    python -m experiments.dashboard runs/compare/<sweep>            # writes <sweep>/dashboard/*.json
    python -m experiments.dashboard runs/compare/<sweep> --apply    # saves both to W&B (after wandb sync)

The workspace, filtered to the sweep's W&B group (``logger.group``), has one section per
question, each panel a line per method (runs grouped by ``algo.name``, seeds averaged, the band
their standard error) and only keys some run of the sweep logged (:data:`SECTIONS`):

- **Comparison**: held-out success (``eval/success``) against each compute counter the runs log
  (``COMPUTE_AXES``: rollouts, generated and observation tokens, tool seconds, train FLOPs, wall
  seconds), and the start model's success as a scalar beside them;
- **Training diagnostics**: the mixed-group rate, all-0 / all-1 groups, the critic's held-out
  explained variance, the loss-weight shift, KL and the clip fraction, against rollouts;
- **Cost**: generated and observation tokens, tool seconds, train FLOPs and wall seconds against
  rollouts;
- **Stop reasons**: ``rollout/stop/<reason>`` per update;
- **Transcripts**: the ``eval/transcripts`` table of the final evaluation.

The report holds the sweep's ``report.md`` (the Conclusion, per-axis verdicts and tables, the
same content the compare job prints) and the Comparison section's panels.

Offline (no server, no login): both are built and their specs written as JSON beside the sweep
(``dashboard/workspace.json``, ``dashboard/report.json``: the pydantic models ``_to_model()``
gives, which load back with ``_from_model``). ``--apply`` saves the workspace as a named view of
the project and the report, which needs the runs synced (``wandb sync``) and a W&B login; without
a login it says so in one line and exits 2. Every compute counter is in every metrics line, so any
counter can be a panel's x-axis (W&B samples a non-``Step`` x-axis only from the same ``log()``
call as the plotted key).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from algos import metric_keys as mk
from experiments.report.keys import STOP_PREFIX
from experiments.report.load import Run, config_get, load_runs
from experiments.runfiles.axes import COMPUTE_AXES
from experiments.runtime.loggers import WANDB_PROJECT as DEFAULT_PROJECT

#: the entity of an offline spec (the project is the runs' own, ``experiments.runtime.loggers``)
OFFLINE_ENTITY = "offline"
SPEC_DIR = "dashboard"
TRANSCRIPTS_KEY = mk.EVAL_TRANSCRIPTS


@dataclass(frozen=True)
class PanelPlan:
    """One line plot: ``y`` keys against ``x``, a line per method."""

    title: str
    x: str
    y: tuple[str, ...]


#: (section, panels): the keys each section plots; a panel keeps only the keys some run logged
SECTIONS: tuple[tuple[str, tuple[PanelPlan, ...]], ...] = (
    ("Comparison", tuple(PanelPlan(f"held-out success vs {x.split('/')[1]}", x, (mk.EVAL_SUCCESS,)) for x in COMPUTE_AXES)),
    ("Training diagnostics", (
        PanelPlan("mixed-group rate", mk.COMPUTE_ROLLOUTS, (mk.ROLLOUT_MIXED_GROUP_RATE,)),
        PanelPlan("groups without contrast", mk.COMPUTE_ROLLOUTS, (mk.ROLLOUT_ALL_ZERO_RATE, mk.ROLLOUT_ALL_ONE_RATE)),
        PanelPlan("training success", mk.COMPUTE_ROLLOUTS, (mk.ROLLOUT_SUCCESS_RATE,)),
        PanelPlan("critic explained variance (held-out)", mk.COMPUTE_ROLLOUTS, (mk.CRITIC_EXPLAINED_VARIANCE_HELDOUT,)),
        PanelPlan("loss-weight shift", mk.COMPUTE_ROLLOUTS, (mk.TRAIN_AGG_WEIGHT_SHIFT,)),
        PanelPlan("KL and clip fraction", mk.COMPUTE_ROLLOUTS, (mk.TRAIN_APPROX_KL, mk.TRAIN_KL_REF, mk.TRAIN_CLIP_FRAC)),
    )),
    ("Cost", (
        PanelPlan("tokens", mk.COMPUTE_ROLLOUTS, (mk.COMPUTE_GENERATED_TOKENS, mk.COMPUTE_OBSERVATION_TOKENS)),
        PanelPlan("tool seconds", mk.COMPUTE_ROLLOUTS, (mk.COMPUTE_TOOL_SECONDS,)),
        PanelPlan("train FLOPs", mk.COMPUTE_ROLLOUTS, (mk.COMPUTE_TRAIN_FLOPS,)),
        PanelPlan("wall seconds", mk.COMPUTE_ROLLOUTS, (mk.COMPUTE_WALL_SECONDS,)),
    )),
)


def logged_keys(runs: Sequence[Run]) -> set[str]:
    """Every key of every metrics line of ``runs``."""
    return {k for r in runs for row in r.metrics for k in row}


def plan(runs: Sequence[Run]) -> list[tuple[str, list[PanelPlan]]]:
    """:data:`SECTIONS` with each panel's keys cut to those some run logged (a panel with none,
    or whose x-axis no run logged, is left out) and a Stop reasons section of the logged
    ``rollout/stop/<reason>`` keys."""
    keys = logged_keys(runs)
    out = []
    for name, panels in SECTIONS:
        kept = [PanelPlan(p.title, p.x, tuple(k for k in p.y if k in keys)) for p in panels if p.x in keys]
        out.append((name, [p for p in kept if p.y]))
    stops = tuple(sorted(k for k in keys if k.startswith(STOP_PREFIX)))
    stop_panel = PanelPlan("training episodes per stop reason", mk.COMPUTE_ROLLOUTS, stops)
    out.append(("Stop reasons", [stop_panel] if stops else []))
    return out


def check_keys(panels: Sequence[tuple[str, Sequence[PanelPlan]]], keys: set[str]) -> None:
    """``ValueError`` naming the first plotted key (or x-axis) that no run logged."""
    for section, plots in panels:
        for p in plots:
            for k in (p.x, *p.y):
                if k not in keys:
                    raise ValueError(f"panel {p.title!r} of section {section!r} plots {k!r}, which no run of the sweep "
                                     f"logged; allowed: keys of the runs' metrics.jsonl")


def sweep_group(runs: Sequence[Run]) -> str:
    """The sweep's W&B group (``logger.group`` of its runs); ``ValueError`` when runs differ."""
    try:
        groups = {str(config_get(r.config, "logger.group")) for r in runs}
    except KeyError as e:
        raise ValueError(f"a run of the sweep has no logger.group in its config.yaml ({e}); allowed: runs of a compare "
                         "sweep") from None
    if len(groups) != 1:
        raise ValueError(f"the sweep's runs name {len(groups)} W&B groups ({', '.join(sorted(groups))}); allowed: one")
    return groups.pop()


def line_plot(p: PanelPlan):
    import wandb_workspaces.reports.v2 as wr

    return wr.LinePlot(title=p.title, x=p.x, y=list(p.y), groupby=wr.Config("algo.name"), groupby_aggfunc="mean",
                       groupby_rangefunc="stderr")


def build_workspace(runs: Sequence[Run], entity: str, project: str, name: str):
    """The sweep's workspace (module docstring): sections of :func:`plan`, runs filtered to the
    sweep's group and grouped by method."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces import expr

    sections = [ws.Section(name=section, panels=[line_plot(p) for p in plots], is_open=True)
                for section, plots in plan(runs)]
    sections[0].panels.append(wr.ScalarChart(title="start model held-out success", metric=mk.START_MODEL_SUCCESS,
                                             groupby_aggfunc="mean"))
    if any((r.run_dir / "transcripts.json").is_file() for r in runs):
        table = wr.WeavePanelSummaryTable(table_name=TRANSCRIPTS_KEY)
        sections.append(ws.Section(name="Transcripts", panels=[table], is_open=True))
    return ws.Workspace(entity=entity, project=project, name=name, sections=sections,
                        runset_settings=ws.RunsetSettings(filters=[expr.Metric("Group") == sweep_group(runs)],
                                                          groupby=[expr.Config("algo.name")]))


def build_report(runs: Sequence[Run], sweep_dir: Path, entity: str, project: str, name: str, bind: bool = False):
    """The sweep's report: its ``report.md`` (Conclusion, verdicts, tables) and the Comparison
    panels over the sweep's runs. ``bind``: the run set names the entity and project (saving looks
    the project up on the server); offline it names neither."""
    import wandb_workspaces.reports.v2 as wr
    from wandb_workspaces import expr

    text = (sweep_dir / "report.md").read_text() if (sweep_dir / "report.md").is_file() else ""
    comparison = next(plots for section, plots in plan(runs) if section == "Comparison")
    runset = wr.Runset(entity=entity if bind else "", project=project if bind else "", name=name,
                       filters=[expr.Metric("Group") == sweep_group(runs)], groupby=["algo.name"])
    blocks = [wr.MarkdownBlock(text=text)] if text else []
    blocks.append(wr.PanelGrid(runsets=[runset], panels=[line_plot(p) for p in comparison]))
    return wr.Report(project=project, entity=entity, title=name, description="compute-matched comparison", blocks=blocks)


def write_specs(sweep_dir: str | Path, entity: str = OFFLINE_ENTITY, project: str = DEFAULT_PROJECT) -> tuple[Path, Path]:
    """Build the workspace and report of ``sweep_dir`` and write their specs as JSON under
    ``<sweep>/dashboard/``; returns the two paths."""
    sweep = Path(sweep_dir)
    runs = load_runs(sweep)
    if not runs:
        raise ValueError(f"{sweep} holds no runs (summary.json, metrics.jsonl, config.yaml); allowed: a compare sweep")
    check_keys(plan(runs), logged_keys(runs))
    name = f"{sweep.name} ({sweep_group(runs)})"
    out = sweep / SPEC_DIR
    out.mkdir(exist_ok=True)
    workspace = out / "workspace.json"
    report = out / "report.json"
    workspace.write_text(build_workspace(runs, entity, project, name)._to_model().model_dump_json(by_alias=True, indent=1))
    report.write_text(build_report(runs, sweep, entity, project, name)._to_model().model_dump_json(by_alias=True, indent=1))
    return workspace, report


def specs_after_sweep(sweep_dir: str | Path) -> str:
    """The compare job's last step: the workspace and report specs of ``sweep_dir`` written
    offline (:func:`write_specs`); the line it prints (what was written, or why nothing was)."""
    try:
        import wandb_workspaces  # noqa: F401
    except ImportError:
        return "W&B dashboard specs: not written (pip install -e '.[dashboard]' for wandb-workspaces)"
    workspace, report = write_specs(sweep_dir)
    return (f"W&B dashboard specs: {workspace} and {report}; after `wandb sync`, "
            f"`python -m experiments.dashboard {sweep_dir} --apply` saves them")


def logged_in() -> bool:
    """Whether a W&B API key is configured (``WANDB_API_KEY`` or ``wandb login``), without prompting."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        from wandb.apis import InternalApi

        return bool(InternalApi().api_key)
    except Exception:  # noqa: BLE001 - no usable wandb settings: not logged in
        return False
