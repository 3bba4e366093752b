"""experiments/report/ (the package) on fixture run directories that follow docs/interfaces.md exactly.

The numbers are hand-chosen so the table values and the confidence-interval arithmetic can be
checked by hand (the arithmetic is in the comments).
"""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.metrics import mixed_group_probability
from entry import run_entry
from experiments import report as R

from report_fixtures import GROUP_SIZE, make_sweep, write_run  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_t_critical_matches_tables():
    # Two-sided 95% t quantiles from any t table: df=1 12.706, df=2 4.303, df=4 2.776, df=9 2.262.
    assert R.t_critical(2) == pytest.approx(12.706, abs=1e-3)
    assert R.t_critical(3) == pytest.approx(4.303, abs=1e-3)
    assert R.t_critical(5) == pytest.approx(2.776, abs=1e-3)
    assert R.t_critical(10) == pytest.approx(2.262, abs=1e-3)
    # Large df tends to the normal 1.95996.
    assert R.t_critical(10**6) == pytest.approx(1.95996, abs=1e-4)
    # 90%: df=4 2.132
    assert R.t_critical(5, confidence=0.9) == pytest.approx(2.132, abs=1e-3)
    with pytest.raises(ValueError, match="n >= 2"):
        R.t_critical(1)


def test_mean_ci_hand_arithmetic():
    # [0.5, 0.6, 0.7]: mean 0.6, s = sqrt(((-.1)^2 + 0 + .1^2)/2) = 0.1,
    # half = 4.3027 * 0.1 / sqrt(3) = 0.24842
    m, h = R.mean_ci([0.5, 0.6, 0.7])
    assert m == pytest.approx(0.6)
    assert h == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-5)
    # None / NaN (metric undefined for that seed) are left out; nothing left -> n/a.
    assert R.mean_ci([0.5, None, 0.7, float("nan")]) == pytest.approx(R.mean_ci([0.5, 0.7]))
    assert R.fmt_seeds([0.5, None, 0.7]) == R.fmt(*R.mean_ci([0.5, 0.7])) + " (2 of 3 seeds)"
    assert R.fmt_seeds([None, None]) == "n/a"
    # One seed: no interval.
    m1, h1 = R.mean_ci([0.3])
    assert m1 == 0.3 and math.isnan(h1)
    assert R.fmt(m1, h1) == "0.300 ± n/a"
    # Loop vs vectorized: the per-column version agrees with the scalar one.
    import numpy as np

    mat = np.array([[0.5, 1.0], [0.6, 1.0], [0.7, 4.0]])
    mc, hc = R.mean_ci_columns(mat)
    for j in range(2):
        mj, hj = R.mean_ci(mat[:, j])
        assert mc[j] == pytest.approx(mj) and hc[j] == pytest.approx(hj)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-100, 100), min_size=2, max_size=8), st.floats(-50, 50), st.floats(0.1, 10))
def test_mean_ci_is_affine_equivariant(values, shift, scale):
    """mean(a x + b) = a mean(x) + b and the half-width scales by a (t and n are unchanged)."""
    m, h = R.mean_ci(values)
    m2, h2 = R.mean_ci([scale * v + shift for v in values])
    assert m2 == pytest.approx(scale * m + shift, abs=1e-6)
    assert h2 == pytest.approx(scale * h, rel=1e-6, abs=1e-6)


def test_interpolate_to_grid_uses_common_range():
    import numpy as np

    a = (np.array([0.0, 10.0]), np.array([0.0, 1.0]))
    b = (np.array([2.0, 8.0, 12.0]), np.array([0.0, 0.6, 1.0]))
    grid, ys = R.interpolate_to_grid([a, b], points=3)
    # Common range [max(0,2), min(10,12)] = [2, 10]; a at 2,6,10 -> .2,.6,1.0;
    # b at 2 -> 0, at 6 -> 0.6*4/6 = 0.4, at 10 -> 0.6 + 0.4*2/4 = 0.8
    assert grid.tolist() == [2.0, 6.0, 10.0]
    assert ys[0].tolist() == pytest.approx([0.2, 0.6, 1.0])
    assert ys[1].tolist() == pytest.approx([0.0, 0.4, 0.8])
    assert R.interpolate_to_grid([(np.array([1.0]), np.array([0.5]))]) is None


def test_report_table_plots_and_stop_reasons(tmp_path):
    sweep = make_sweep(tmp_path / "sweep", envs=("bugfix", "long_horizon"))
    rep = R.render_report(sweep, references=False)

    assert len(rep.runs) == 12
    assert rep.path == sweep / "report.md" and rep.path.read_text() == rep.markdown
    assert rep.columns == list(R.TABLE_COLUMNS)
    rows = {(r[0], r[1]): dict(zip(rep.columns, r)) for r in rep.rows}
    assert set(rows) == {(e, m) for e in ("bugfix", "long_horizon") for m in ("grpo", "ppo")}
    grpo = rows[("bugfix", "grpo")]
    ppo = rows[("bugfix", "ppo")]
    assert grpo["seeds"] == 3 and grpo["test budget"] == "16 tasks x 2 samples"
    # GRPO success [0.5, 0.6, 0.7]: 0.600 ± 4.3027*0.1/sqrt(3) = 0.248
    assert grpo["held-out success"] == "0.600 ± 0.248"
    # PPO success [0.4, 0.4, 0.7]: mean 0.5; s = sqrt((.01+.01+.04)/2) = sqrt(.03) = 0.17321;
    # half = 4.3027 * 0.17321 / sqrt(3) = 0.43027
    assert ppo["held-out success"] == "0.500 ± 0.430"
    # Identical across seeds -> zero-width interval.
    assert grpo["rollouts"] == "32.0 ± 0.0"
    assert grpo["train FLOPs"] == "4.00e+09 ± 0.00e+00"
    assert grpo["start-model success"] == "0.200 ± 0.000"
    # Recovery [0.25, 0.5, 0.75]: mean 0.5, s 0.25, half = 4.3027*0.25/sqrt(3) = 0.621
    assert grpo["recovery after tool failure"] == "0.500 ± 0.621"
    # Turns [5, 6, 7]: mean 6, s 1, half = 4.3027/sqrt(3) = 2.484
    assert grpo["mean turns"] == "6.000 ± 2.484"
    assert grpo["hack rate"] == "0.000 ± 0.000"

    # Stop reasons: 4 updates x 3 seeds x {2, 5, 1} per update = {24, 60, 12}; total 96.
    assert rep.stop_reasons["bugfix"]["grpo"] == {
        "submitted_resolved": 24.0, "submitted_failed": 60.0, "max_turns": 12.0}
    # Columns in envs.stop.StopReason order.
    assert "| method | submitted_resolved | submitted_failed | max_turns | total |" in rep.markdown
    assert "| grpo | 24 (25.0%) | 60 (62.5%) | 12 (12.5%) | 96 |" in rep.markdown

    # Critic: n/a for GRPO; PPO's EV is 0.2 u, second half of 4 updates = updates 3, 4:
    # (0.6 + 0.8) / 2 = 0.7 in every seed.
    assert "n/a (GRPO has no critic)" in rep.markdown
    diag = {(r[0], r[1]): r for r in R.diagnostics_table(R.group_runs(rep.runs))}
    assert diag[("bugfix", "ppo")][7] == "0.700 ± 0.000"
    assert diag[("bugfix", "ppo")][8] == "0.700, 0.700, 0.700"
    # Weight shift mean over updates: (0.1+0.2+0.3+0.4)/4 = 0.25.
    assert diag[("bugfix", "grpo")][9] == "0.250 ± 0.000"
    # All-0 mean over updates: (.5+.5+0+0)/4 = 0.25.
    assert diag[("bugfix", "grpo")][5] == "0.250 ± 0.000"
    # Signed advantage mass -0.1 u - 0.1 seed: per seed -0.25, -0.35, -0.45; mean -0.35, sample sd
    # 0.1, half-width t(0.975, 2) 4.303 * 0.1 / sqrt(3) = 0.248.
    assert R.DIAG_COLUMNS[10] == "signed advantage mass (mean)"
    assert diag[("bugfix", "grpo")][10] == "-0.350 ± 0.248"

    # 4 success curves + diagnostics + stop bars per env, all valid PNGs inside the sweep dir.
    assert len(rep.images) == 2 * (len(R.CURVE_AXES) + 2)
    for name, path in rep.images.items():
        assert path.parent == sweep and path.read_bytes()[:8] == PNG_MAGIC, name
        assert f"]({path.name})" in rep.markdown
    assert not rep.warnings
    assert "Student-t" in rep.markdown


def test_pmix_overlay_uses_project_formula_and_group_size(tmp_path):
    run = R.load_run(write_run(tmp_path / "r", "grpo", "bugfix", seed=1))
    x, measured, predicted = R.p_mix_series(run)
    # update u has p = 0.25*u/4 + 0.1; G = 4 from algo.group_size.
    ps = [0.25 * u / 4 + 0.1 for u in range(1, 5)]
    assert x.tolist() == [8, 16, 24, 32]
    assert predicted.tolist() == pytest.approx([mixed_group_probability(p, GROUP_SIZE) for p in ps])
    # Hand check of one point: p = 0.1625, G = 4: 1 - p^4 - (1-p)^4 = 1 - 0.000697 - 0.491917
    assert predicted[0] == pytest.approx(1 - 0.1625**4 - 0.8375**4)
    assert measured.tolist() == [0.5] * 4


@pytest.mark.parametrize(
    "drop_metric, drop_summary, algo, key",
    [
        (None, "eval/recovery_rate", "grpo", "eval/recovery_rate"),
        ("compute/tool_seconds", None, "grpo", "compute/tool_seconds"),
        ("compute/wall_seconds", None, "grpo", "compute/wall_seconds"),
        ("rollout/mixed_group_rate", None, "grpo", "rollout/mixed_group_rate"),
        ("critic/explained_variance_heldout", None, "ppo", "critic/explained_variance_heldout"),
        ("critic/heldout_points", None, "ppo", "critic/heldout_points"),
    ],
)
def test_missing_required_key_names_key_and_run(tmp_path, drop_metric, drop_summary, algo, key):
    run_dir = write_run(tmp_path / "bad", algo, "bugfix", 0, drop_metric=drop_metric, drop_summary=drop_summary)
    with pytest.raises(R.ReportError) as err:
        R.render_report(tmp_path, references=False)
    assert key in str(err.value) and str(run_dir) in str(err.value)


def test_missing_config_key_names_key_and_run(tmp_path):
    run_dir = write_run(tmp_path / "r", "grpo", "bugfix", 0)
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    del cfg["algo"]["group_size"]
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(R.ReportError, match=f"config.yaml of run {run_dir} has no algo.group_size"):
        R.render_report(tmp_path, references=False)


def test_grpo_without_critic_keys_is_fine_and_unfair_sweeps_are_flagged(tmp_path):
    write_run(tmp_path / "0", "grpo", "bugfix", 0)  # has no critic/* keys at all
    write_run(tmp_path / "1", "ppo", "bugfix", 1)
    cfg = yaml.safe_load((tmp_path / "1" / "config.yaml").read_text())
    cfg["eval"]["samples_per_task"] = 4
    cfg["budget"]["amount"] = 64
    (tmp_path / "1" / "config.yaml").write_text(yaml.safe_dump(cfg))
    rep = R.render_report(tmp_path, references=False)
    assert any("test budgets differ" in w for w in rep.warnings)
    assert any("different seeds" in w for w in rep.warnings)
    assert "bugfix: training budgets differ across runs (rollouts=32, rollouts=64)" in rep.warnings
    assert "Not compute-matched" in rep.markdown
    assert "0.500 ± n/a" in rep.markdown  # one seed per method


def test_runs_without_the_signed_advantage_mass_read_not_logged(tmp_path):
    for seed in (0, 1):
        write_run(tmp_path / f"g{seed}", "grpo", "bugfix", seed, drop_metric="train/signed_adv_mass")
        write_run(tmp_path / f"p{seed}", "ppo", "bugfix", seed)
    rows = {r[1]: r for r in R.diagnostics_table(R.group_runs(R.load_runs(tmp_path)))}
    assert rows["grpo"][10] == "n/a (not logged)"
    assert rows["ppo"][10] == "-0.300 ± 0.635"  # seeds -0.25, -0.35: sd 0.0707, t(0.975, 1) 12.706 * 0.0707 / sqrt 2


def test_runs_with_different_loss_aggregation_or_lr_are_flagged(tmp_path):
    """Re-rendering a report over runs of two sweeps (README: ``experiments.report DIR``) must say
    when the methods weighed trajectories differently or stepped at different rates; a run
    without the key (an older config) is left out of that check, not guessed."""
    for i, (algo, seed, agg, lr) in enumerate([("grpo", 0, "task-mean", 3e-4), ("grpo", 1, "task-mean", 3e-4),
                                               ("ppo", 0, "token-mean", 3e-4), ("ppo", 1, None, 6e-4)]):
        run = write_run(tmp_path / str(i), algo, "bugfix", seed)
        cfg = yaml.safe_load((run / "config.yaml").read_text())
        cfg["algo"]["lr"] = lr
        if agg is not None:
            cfg["algo"]["loss_agg"] = agg
        (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    rep = R.render_report(tmp_path, references=False)
    assert "bugfix: loss aggregations differ across runs (task-mean: grpo; token-mean: ppo)" in rep.warnings
    assert "bugfix: learning rates differ across runs (0.0003: grpo, ppo; 0.0006: ppo)" in rep.warnings
    assert "Not compute-matched or not protocol-matched" in rep.markdown
    # the same knobs everywhere: no protocol line
    for i in range(4):
        cfg = yaml.safe_load((tmp_path / str(i) / "config.yaml").read_text())
        cfg["algo"].update(loss_agg="task-mean", lr=3e-4)
        (tmp_path / str(i) / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert R.render_report(tmp_path, references=False).warnings == []


def test_cli_prints_markdown_and_fails_cleanly(tmp_path):
    sweep = make_sweep(tmp_path / "s")
    out = run_entry("experiments.report", [str(sweep), "--no-references"])  # in this process (tests/entry.py)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# GRPO vs PPO") and (sweep / "report.md").is_file()
    assert "## Conclusion" in out.stdout and not (sweep / "references.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run_entry("experiments.report", [str(empty)])
    assert out.returncode == 2 and "no run directories" in out.stderr


def test_ppo_without_terminated_episodes_has_no_heldout_ev(tmp_path):
    run_dir = write_run(tmp_path / "ppo", "ppo", "bugfix", 0)
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for line in lines:  # nothing terminated: fewer than 2 held-out points, so no EV is defined
        line["critic/heldout_points"] = 0
        del line["critic/explained_variance_heldout"]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rep = R.render_report(tmp_path, references=False)
    assert R.EV_NA in rep.markdown
    # ... but an update with >= 2 held-out points and no EV breaks the contract.
    lines[1]["critic/heldout_points"] = 5
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(R.ReportError, match="line 2 .* no 'critic/explained_variance_heldout'"):
        R.render_report(tmp_path, references=False)
