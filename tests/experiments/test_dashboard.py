"""``python -m experiments.dashboard``: the W&B workspace and report specs of a sweep, built
offline from fixture run directories (tests/report_fixtures.py); ``--apply`` without a login."""

from __future__ import annotations

import json

import pytest
import yaml

from experiments import dashboard as D
from experiments.dashboard import __main__ as cli
from experiments.report.load import load_runs
from experiments.runfiles.axes import COMPUTE_AXES
from report_fixtures import make_sweep

pytest.importorskip("wandb_workspaces")


def sweep_in(tmp_path):
    root = make_sweep(tmp_path / "s")
    for cfg in root.glob("bugfix/*/config.yaml"):  # the compare job's runs name their W&B group
        config = yaml.safe_load(cfg.read_text())
        config["logger"] = {"group": "s"}
        cfg.write_text(yaml.safe_dump(config))
    return root


def test_the_plan_plots_only_keys_the_runs_logged(tmp_path):
    runs = load_runs(sweep_in(tmp_path))
    sections = dict(D.plan(runs))
    # every fixture metrics line holds the six counters: six comparison panels; no KL or clip
    # fraction is logged, so that panel is gone
    assert [p.x for p in sections["Comparison"]] == list(COMPUTE_AXES)
    assert "KL and clip fraction" not in [p.title for p in sections["Training diagnostics"]]
    (stops,) = sections["Stop reasons"]
    assert stops.y == ("rollout/stop/max_turns", "rollout/stop/submitted_failed", "rollout/stop/submitted_resolved")
    keys = D.logged_keys(runs)
    D.check_keys(D.plan(runs), keys)
    bad = [("Comparison", [D.PanelPlan("made up", "compute/rollouts", ("eval/not_logged",))])]
    with pytest.raises(ValueError, match=r"panel 'made up' of section 'Comparison' plots 'eval/not_logged', which no run"):
        D.check_keys(bad, keys)


def test_specs_build_offline_and_round_trip(tmp_path):
    from wandb_workspaces.workspaces import Workspace, internal

    root = sweep_in(tmp_path)
    workspace, report = D.write_specs(root)
    loaded = Workspace._from_model(internal.View.model_validate_json(workspace.read_text()))
    assert [s.name for s in loaded.sections] == ["Comparison", "Training diagnostics", "Cost", "Stop reasons"]
    first = loaded.sections[0].panels[0]
    assert (first.title, first.x.name, [y.name for y in first.y]) == ("held-out success vs rollouts",
                                                                     "compute/rollouts", ["eval/success"])
    assert str(loaded.runset_settings.filters) == 'Metric("Group") == \'s\''
    plotted = set(_plotted(json.loads(workspace.read_text())))
    assert {"eval/success", "compute/rollouts", "rollout/mixed_group_rate"} <= plotted
    assert plotted <= D.logged_keys(load_runs(root)) | {"start_model/success"}  # the scalar: a summary key
    assert json.loads(report.read_text())["displayName"] == "s (s)"


def _plotted(node):
    """Every key a spec's panels plot: their ``xAxis`` (not W&B's own ``_step``) and ``metrics``."""
    if isinstance(node, dict):
        if isinstance(node.get("xAxis"), str) and node["xAxis"] != "_step":
            yield node["xAxis"]
        if isinstance(node.get("metrics"), list):
            yield from (m for m in node["metrics"] if isinstance(m, str))
        for v in node.values():
            yield from _plotted(v)
    elif isinstance(node, list):
        for v in node:
            yield from _plotted(v)


def test_apply_without_a_login_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    root = sweep_in(tmp_path)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setattr(cli, "logged_in", lambda: False)
    assert cli.main([str(root), "--apply", "--entity", "someone"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dashboard: --apply needs a W&B login")
    assert not (root / "dashboard").exists()  # refused before anything was written
    assert cli.main([str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.strip().startswith("dashboard: ")
