"""The report's Conclusion (Welch interval at the matched budget, verdicts), its reference rows and
the G = 1 / second-half-critic diagnostics, on fixture run directories (tests/report_fixtures.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

import envs
from experiments.calibrate.scripted import measure
from experiments.report import conclusion as C
from experiments.report import diagnostics_table, group_runs, load_run, load_runs, render_report
from experiments.report import references as REF
from experiments.report.stats import verdict, welch_interval
from report_fixtures import FINAL_SUCCESS, SEEDS, make_sweep, write_run

GRPO, PPO = FINAL_SUCCESS["grpo"], FINAL_SUCCESS["ppo"]


def test_welch_interval_hand_arithmetic_and_scipy():
    # PPO [0.4, 0.4, 0.7] - GRPO [0.5, 0.6, 0.7]: d = 0.5 - 0.6 = -0.1.
    # v_grpo = s^2/n = 0.01/3 = 0.0033333, v_ppo = 0.03/3 = 0.01; se^2 = 0.0133333, se = 0.1154701.
    # df = se^4 / (v_grpo^2/2 + v_ppo^2/2) = 1.77778e-4 / (5.5556e-6 + 5e-5) = 3.2 exactly.
    # t_{0.975, 3.2} = 3.072829 -> half = 3.072829 * 0.1154701 = 0.354820 -> [-0.454820, 0.254820].
    d, lo, hi, df = welch_interval(GRPO, PPO)
    assert d == pytest.approx(-0.1)
    assert df == pytest.approx(3.2)
    assert lo == pytest.approx(-0.454820, abs=1e-6) and hi == pytest.approx(0.254820, abs=1e-6)
    ref = stats.ttest_ind(PPO, GRPO, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert (lo, hi, df) == pytest.approx((ci.low, ci.high, ref.df))
    assert verdict(lo, hi, "grpo", "ppo") == "inconclusive"
    # GRPO [0.30, 0.31, 0.32], PPO [0.50, 0.51, 0.52]: d = 0.2, v = 0.0001/3 each, se = 0.0081650,
    # df = (2v)^2 / (2 v^2 / 2) = 4, t_{0.975, 4} = 2.776445 -> half 0.022670 -> [0.17733, 0.22267].
    d, lo, hi, df = welch_interval([0.30, 0.31, 0.32], [0.50, 0.51, 0.52])
    assert (d, df) == pytest.approx((0.2, 4.0))
    assert (lo, hi) == pytest.approx((0.2 - 0.022670, 0.2 + 0.022670), abs=1e-6)
    assert verdict(lo, hi, "grpo", "ppo") == "PPO ahead"
    assert verdict(-hi, -lo, "grpo", "ppo") == "GRPO ahead"


def test_welch_degenerate_cases():
    # One seed on a side: a difference, no interval -> inconclusive.
    d, lo, hi, df = welch_interval([0.5], [0.7, 0.8])
    assert d == pytest.approx(0.25) and math.isnan(lo) and math.isnan(hi) and math.isnan(df)
    assert verdict(lo, hi, "grpo", "ppo") == "inconclusive"
    # Zero variance on both sides: the interval is the point; None/NaN seeds are left out.
    assert welch_interval([0.5, 0.5, None], [0.7, 0.7, float("nan")]) == pytest.approx((0.2, 0.2, 0.2, math.inf))
    with pytest.raises(ValueError, match="confidence"):
        welch_interval([0.1, 0.2], [0.3, 0.4], confidence=1.5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=7), st.lists(st.floats(0, 1), min_size=2, max_size=7))
def test_welch_matches_scipy(a, b):
    assume(np.var(a) > 1e-6 and np.var(b) > 1e-6)  # scipy's df is 0/0 there; ours is the point interval
    d, lo, hi, df = welch_interval(a, b)
    ref = stats.ttest_ind(b, a, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert d == pytest.approx(np.mean(b) - np.mean(a), abs=1e-9)
    assert (lo, hi, df) == pytest.approx((ci.low, ci.high, ref.df), rel=1e-6, abs=1e-9)


def test_success_at_interpolates_from_the_start_model(tmp_path):
    run = load_run(write_run(tmp_path / "r", "grpo", "bugfix", 0))
    # eval curve on rollouts: (0, start 0.2), (16, 0.25), (32, 0.5).
    x, y = C.eval_curve(run, "compute/rollouts")
    assert x.tolist() == [0.0, 16.0, 32.0] and y.tolist() == pytest.approx([0.2, 0.25, 0.5])
    assert C.success_at(run, "compute/rollouts", 8) == pytest.approx(0.225)  # 0.2 + 0.05 * 8/16
    assert C.success_at(run, "compute/rollouts", 24) == pytest.approx(0.375)  # 0.25 + 0.25 * 8/16
    assert math.isnan(C.success_at(run, "compute/rollouts", 40))  # beyond the run: no value
    assert C.final_counter(run, "compute/wall_seconds") == 2.0


def test_conclusion_matched_budget_per_axis(tmp_path):
    sweep = make_sweep(tmp_path / "s")
    # PPO seed 0 ran at half the wall time per update: wall 0.25 u, final 1.0 (others: 0.5 u, 2.0).
    ppo0 = next(d for d in (sweep / "bugfix").iterdir() if load_run(d).algo == "ppo" and load_run(d).seed == 0)
    lines = [json.loads(x) for x in (ppo0 / "metrics.jsonl").read_text().splitlines()]
    for line in lines:
        line["compute/wall_seconds"] = 0.25 * line["update"]
    (ppo0 / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rep = render_report(sweep, references=False)
    by_axis = {c.axis: c for c in rep.conclusion}
    assert list(by_axis) == list(C.CONCLUSION_AXES)
    rollouts = by_axis["compute/rollouts"]
    # Every run reached 32 rollouts: the final evals, PPO - GRPO = -0.1 with the interval above.
    assert rollouts.budget == 32 and rollouts.first == "grpo" and rollouts.second == "ppo"
    assert rollouts.first_values == pytest.approx(tuple(GRPO)) and rollouts.second_values == pytest.approx(tuple(PPO))
    assert (rollouts.low, rollouts.high) == pytest.approx((-0.454820, 0.254820), abs=1e-6)
    assert rollouts.verdict == "inconclusive"
    # what the design can see: half-width (0.254820 + 0.454820) / 2 = 0.354820; the interval leaves
    # open differences up to max(|-0.454820|, |0.254820|) = 0.454820
    assert rollouts.resolution == pytest.approx(0.354820, abs=1e-6)
    assert rollouts.ruled_out == pytest.approx(0.454820, abs=1e-6)
    assert rollouts.verdict_line == "inconclusive (no difference larger than 0.455; calls ±0.355)"
    assert rollouts.row()[-1] == "±0.355"
    wall = by_axis["compute/wall_seconds"]
    # Matched wall budget = min final wall = 1.0. Runs at 0.5 u reach 1.0 at update 2 (eval final/2);
    # PPO seed 0 reaches it at update 4 (its final eval).
    assert wall.budget == 1.0
    assert wall.first_values == pytest.approx((0.25, 0.3, 0.35))
    assert wall.second_values == pytest.approx((0.4, 0.2, 0.35))
    # d = 0.316667 - 0.3 = 0.016667
    assert wall.difference == pytest.approx(0.95 / 3 - 0.3)
    md = rep.markdown
    assert md.index("## Conclusion") < md.index("## Final table")
    assert "| bugfix | wall seconds | 1.000 | PPO - GRPO |" in md
    assert ("Verdicts (bugfix, PPO - GRPO): rollouts: inconclusive (no difference larger than 0.455; "
            "calls ±0.355); generated_tokens: inconclusive") in md


def test_conclusion_names_the_method_ahead(tmp_path):
    for seed, (g, p) in enumerate(zip([0.30, 0.31, 0.32], [0.50, 0.51, 0.52])):
        write_run(tmp_path / f"g{seed}", "grpo", "bugfix", seed, final=g)
        write_run(tmp_path / f"p{seed}", "ppo", "bugfix", seed, final=p)
    comparisons = C.compare_at_matched_budgets("bugfix", group_runs(load_runs(tmp_path))["bugfix"])
    rollouts = next(c for c in comparisons if c.axis == "compute/rollouts")
    # Hand numbers of test_welch_interval_hand_arithmetic_and_scipy: [0.17733, 0.22267], df 4.
    assert rollouts.row()[6:] == ["+0.200", "[+0.177, +0.223]", "4.0", "**PPO ahead**", "±0.023"]
    assert rollouts.verdict_line == "PPO ahead"
    assert {c.verdict for c in comparisons} == {"PPO ahead"}


def test_diagnostics_drop_group_fractions_for_g1_and_average_second_half_ev(tmp_path):
    for seed in SEEDS:
        write_run(tmp_path / f"g{seed}", "grpo", "bugfix", seed)
        write_run(tmp_path / f"p{seed}", "ppo", "bugfix", seed, group_size=1)
    rows = {r[1]: r for r in diagnostics_table(group_runs(load_runs(tmp_path)))}
    assert rows["ppo"][3:7] == ["n/a (G = 1)"] * 4
    assert rows["grpo"][3] == "0.500 ± 0.000"  # GRPO (G = 4) keeps its group columns
    # EV 0.2 u over updates 3, 4 (second half of 4): 0.7 per seed.
    assert rows["ppo"][7:9] == ["0.700 ± 0.000", "0.700, 0.700, 0.700"]


def test_reference_rows_replay_the_eval_task_set_and_are_cached(tmp_path, monkeypatch):
    run_dir = write_run(tmp_path / "r", "grpo", "bugfix", 0, eval_tasks=3)
    run = load_run(run_dir)
    spec = REF.task_set_spec(run)
    assert spec.env_id == envs.BUGFIX_ID and spec.difficulty == "easy" and spec.split == "heldout"
    assert (spec.tasks, spec.samples_per_task, spec.env_kwargs) == (3, 2, {})
    assert REF.reference_rows([run], None)[1] == spec
    rows = REF.reference_rows([run], tmp_path)[0]
    assert [r.role for r in rows] == ["start model", "program-blind floor", "oracle ceiling"]
    # Start model: p = 0.2 of 3 x 2 = 6 attempts -> Wilson on round(1.2) = 1 of 6.
    assert rows[0].success == 0.2 and (rows[0].successes, rows[0].scored) == (1, 6)
    # Independent replay: attempt j of task i has env seed j * 3 + i (REFERENCE_SEED 0).
    direct = [measure(envs.BUGFIX_ID, "easy", "oracle", "x", 3, j * 3, "heldout", True) for j in range(2)]
    assert (rows[2].successes, rows[2].scored) == (sum(r.successes for r in direct), sum(r.scored for r in direct))
    floors = {a: sum(measure(envs.BUGFIX_ID, "easy", a, "x", 3, j * 3, "heldout", True).successes for j in range(2))
              for a in ("blind_enumerate", "fit_visible", "delete_lines", "random")}
    assert rows[1].successes == max(floors.values()) and rows[1].agent.split(" ")[0] in floors
    # Cached: a second call does not replay.
    assert (tmp_path / REF.CACHE_FILE).is_file()
    monkeypatch.setattr(REF, "play", lambda spec, agent: pytest.fail("replayed a cached reference"))
    assert REF.reference_rows([run], tmp_path)[0] == rows
    md = render_report(tmp_path).markdown
    assert "| oracle ceiling | oracle |" in md and "| program-blind floor |" in md and "| start model |" in md


def test_reference_spec_uses_the_eval_env_kwargs(tmp_path):
    import yaml

    run_dir = write_run(tmp_path / "r", "grpo", "bugfix", 0)
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    cfg["env"]["kwargs"] = {"difficulty": "medium", "program_lines": [2, 7], "time_limit": "termination"}
    cfg["eval"]["env_kwargs"] = {"program_lines": [2, 3]}
    cfg["eval"]["split"] = "train"
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    spec = REF.task_set_spec(load_run(run_dir))
    assert spec.difficulty == "medium" and spec.split == "train"
    assert spec.env_kwargs == {"program_lines": [2, 3], "time_limit": "termination"}
    # The cache key: the JSON object of the spec, keys sorted.
    assert json.loads(spec.cache_key()) == {
        "difficulty": "medium", "env_id": envs.BUGFIX_ID,
        "env_kwargs": {"program_lines": [2, 3], "time_limit": "termination"},
        "samples_per_task": 2, "seed": REF.REFERENCE_SEED, "split": "train", "tasks": 16, "version": REF.CACHE_VERSION}
    assert list(json.loads(spec.cache_key())) == sorted(json.loads(spec.cache_key()))
    # measure forwards env_kwargs to the env (a bad knob is rejected by the env, so it got there)
    with pytest.raises(ValueError, match="program_lines"):
        measure(envs.BUGFIX_ID, "easy", "oracle", "x", 1, 0, "heldout", True, env_kwargs={"program_lines": [9, 2]})


def test_every_success_curve_starts_at_the_start_model_at_compute_zero(tmp_path, monkeypatch):
    """Each method's plotted curve on every compute axis begins at x = 0 at the start model's
    success and follows the Conclusion's series (``conclusion.eval_curve``): with one run per
    method the plotted line is that run's curve (0, 0.2), (x_2, final / 2), (x_4, final) on a grid."""
    import matplotlib.figure

    from experiments.report.keys import CURVE_AXES
    from experiments.report.plots import plot_success_curves

    runs = {algo: [load_run(write_run(tmp_path / algo, algo, "bugfix", 0))] for algo in ("grpo", "ppo")}
    saved = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, path, **kw: saved.append(fig))
    plot_success_curves("bugfix", runs, tmp_path)
    assert len(saved) == len(CURVE_AXES)
    for fig, axis in zip(saved, CURVE_AXES):
        lines = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata())]
        assert len(lines) == 2
        for line, (algo, (run,)) in zip(lines, runs.items()):
            x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
            assert (x[0], y[0]) == (0.0, run.summary["start_model/success"]) == (0.0, 0.2), (axis, algo)
            cx, cy = C.eval_curve(run, axis)
            assert np.allclose(y, np.interp(x, cx, cy)), (axis, algo)


def test_per_family_table_by_hand(tmp_path):
    from experiments.report.families import family_columns, family_rows

    # family "a": GRPO seeds 0.5, 0.6, 0.7 -> 0.600 ± t_(0.975,2) * 0.1 / sqrt(3) = 4.302653 * 0.057735
    # = 0.248; PPO 0.4, 0.4, 0.7 -> 0.500 ± 4.302653 * 0.173205 / sqrt(3) = 0.430; start 0.25 on every run
    for seed in SEEDS:
        for algo in ("grpo", "ppo"):
            run = write_run(tmp_path / f"{algo}{seed}", algo, "bugfix", seed)
            summary = json.loads((run / "summary.json").read_text())
            summary["eval/family_success/a"] = FINAL_SUCCESS[algo][seed]
            summary["start_model/family_success/a"] = 0.25
            (run / "summary.json").write_text(json.dumps(summary))
    methods = group_runs(load_runs(tmp_path))["bugfix"]
    assert family_columns(methods) == ["family", "start model", "grpo final", "ppo final"]
    assert family_rows(methods) == [["a", "0.250", "0.600 ± 0.248", "0.500 ± 0.430"]]
    md = render_report(tmp_path, references=False).markdown
    assert "### Per task family" in md and "| a | 0.250 | 0.600 ± 0.248 | 0.500 ± 0.430 |" in md


def test_no_family_table_for_a_single_family(tmp_path):
    from experiments.report.families import family_rows

    md = render_report(make_sweep(tmp_path / "s"), references=False).markdown
    assert "### Per task family" not in md
    assert family_rows(group_runs(load_runs(tmp_path / "s"))["bugfix"]) == []
