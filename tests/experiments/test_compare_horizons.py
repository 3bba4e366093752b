"""The horizon sweep (``python -m experiments.compare --preset horizon --horizons ...``) and its
report (``python -m experiments.report.horizons``): differences to the baseline against the horizon."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from entry import run_entry
from experiments.compare.horizons import HorizonError, check_prob_of, horizon_overrides, parse_horizons
from experiments.report import ReportError
from experiments.report.horizons import detail_rows, render_horizon_report
from report_fixtures import SEEDS, write_run

ROOT = Path(__file__).resolve().parents[2]


def horizon_sweep(root: Path, n_stages: int, finals: dict[str, list[float]]) -> Path:
    """A fixture sweep of LongHorizon-v3 runs at ``n_stages`` decisions with the given final
    held-out success per method and seed (report_fixtures' contract runs)."""
    for algo, values in finals.items():
        for seed, final in zip(SEEDS, values):
            run = write_run(root / f"{algo}-s{seed}", algo, "long_horizon_v3", seed, final=final)
            config = yaml.safe_load((run / "config.yaml").read_text())
            config["env"]["kwargs"] = {"n_stages": n_stages}
            (run / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def test_differences_per_horizon_and_axis(tmp_path):
    short = horizon_sweep(tmp_path / "n8", 8, {"grpo": [0.5, 0.6, 0.7], "ppo": [0.4, 0.4, 0.7]})
    long = horizon_sweep(tmp_path / "n32", 32, {"grpo": [0.8, 0.8, 0.9], "ppo": [0.4, 0.5, 0.6]})
    markdown, png, results = render_horizon_report([long, short], tmp_path)
    assert [r.horizon for r in sorted(results, key=lambda r: r.horizon)] == [8, 32]
    differences = markdown.split("## Each horizon's runs")[0]
    rows = [line.split(" | ") for line in differences.splitlines() if line.startswith(("| 8 ", "| 32 "))]
    assert len(rows) == 2 * 4  # 2 horizons x 4 compute axes x 1 comparison (PPO - GRPO)
    by = {(r[0].strip("| "), r[2]): r for r in rows}
    # every run reaches the same budgets, so each axis compares the final evaluations:
    # 8: mean(0.4, 0.4, 0.7) - mean(0.5, 0.6, 0.7) = 0.5 - 0.6 = -0.100
    # 32: mean(0.4, 0.5, 0.6) - mean(0.8, 0.8, 0.9) = 0.5 - 0.8333 = -0.333
    assert by[("8", "complete rollouts")][4] == "-0.100" and by[("8", "complete rollouts")][6].startswith("inconclusive")
    # Welch at 32: se = sqrt(0.01 / 3 + 0.00333 / 3) = 0.0667, df = 3.2, t = 3.1: [-0.54, -0.13]
    assert by[("32", "complete rollouts")][4] == "-0.333" and by[("32", "complete rollouts")][6].startswith("GRPO ahead")
    assert rows[0][1] == "0.200"  # report_fixtures' start model
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (tmp_path / "horizons.md").read_text() == markdown


def test_each_horizons_runs_table_from_the_runs_metrics(tmp_path):
    short = horizon_sweep(tmp_path / "n8", 8, {"grpo": [0.5, 0.6, 0.7], "ppo": [0.4, 0.4, 0.7]})
    markdown, _, results = render_horizon_report([short], tmp_path)
    assert "## Each horizon's runs" in markdown
    rows = {r[1]: r for r in detail_rows(results)}
    grpo, ppo = rows["grpo"], rows["ppo"]
    # final success mean(0.5, 0.6, 0.7) = 0.6, t(2) = 4.303 x sd 0.1 / sqrt(3) = 0.248
    assert grpo[:4] == ["8", "grpo", "0.600 ± 0.248", "0.200"]  # report_fixtures' start model
    assert grpo[4:6] == ["n/a", "n/a"]  # the fixture env id has no scripted agents: no floor / ceiling
    assert grpo[6:8] == ["n/a", "n/a"]  # segments and turns not logged by the fixture runs
    # mixed-group rate 0.5 in every update; P_mix(p, 4) = 1 - p^4 - (1-p)^4 per update, seed-dependent
    assert grpo[8] == "0.500 ± 0.000" and ppo[8] == "0.500 ± 0.000"  # both fixture methods log G = 4
    # PPO's held-out EV: second half of updates 1..4 = updates 3, 4: mean(0.6, 0.8) = 0.7 on every seed
    assert ppo[10].startswith("0.700") and grpo[10] == "n/a (no critic)" and grpo[11] == "n/a"
    # stop shares per update 2 / 5 / 0 / 0 of 8 (1 of 8 is max_turns, not a listed share)
    assert grpo[12] == "0.250 / 0.625 / 0.000 / 0.000"


def test_a_horizon_twice_or_mixed_horizons_are_errors(tmp_path):
    a = horizon_sweep(tmp_path / "a", 8, {"grpo": [0.5, 0.6, 0.7], "ppo": [0.4, 0.4, 0.7]})
    b = horizon_sweep(tmp_path / "b", 8, {"grpo": [0.5, 0.6, 0.7], "ppo": [0.4, 0.4, 0.7]})
    with pytest.raises(ReportError, match="two sweeps at 8 decisions"):
        render_horizon_report([a, b], tmp_path)
    horizon_sweep(tmp_path / "b" / "more", 32, {"grpo": [0.5], "ppo": [0.4]})
    with pytest.raises(ReportError, match=r"a horizon sweep holds one env.kwargs.n_stages; found \[8, 32\]"):
        render_horizon_report([b], tmp_path)


def test_horizons_argument_and_the_warm_start_it_scales():
    assert parse_horizons("8,32,128", "horizon") == (8, 32, 128)
    for text, message in (("8,8", "distinct"), ("2,8", "ints >= 4"), ("x", "comma-separated ints")):
        with pytest.raises(HorizonError, match=message):
            parse_horizons(text, "horizon")
    with pytest.raises(HorizonError, match="--horizons needs --preset horizon"):
        parse_horizons("8", "small")
    # 32000 decisions of demos: 4000 demos at 8 decisions, 1000 at 32, 250 at 128
    # above 64 decisions the compaction cap follows the horizon: 128 // 4 = 32 (128 needs about 21)
    assert horizon_overrides(128, [], tiny=False) == ["env.kwargs.n_stages=128", "warmstart.demos=250",
                                                      "compression.max_compactions=32"]
    assert horizon_overrides(64, [], tiny=False) == ["env.kwargs.n_stages=64", "warmstart.demos=500"]  # default cap 8
    # with check lines (check_prob > 0, the last override of it) the cap follows the horizon above 32
    checked = ["env.kwargs.n_stages=64", "warmstart.demos=500", "compression.max_compactions=16"]
    assert horizon_overrides(64, ["++env.kwargs.check_prob=0.5"], tiny=False) == checked
    assert horizon_overrides(64, ["env.kwargs.check_prob=1", "+env.kwargs.check_prob=0"], tiny=False) == checked[:2]
    assert horizon_overrides(32, ["++env.kwargs.check_prob=1"], tiny=False) == ["env.kwargs.n_stages=32",
                                                                                 "warmstart.demos=1000"]
    assert check_prob_of(["++env.kwargs.check_prob=0.5", "algo=grpo"]) == 0.5 and check_prob_of([]) == 0.0
    assert horizon_overrides(128, ["compression.max_compactions=20"], tiny=True) == ["env.kwargs.n_stages=128"]
    assert horizon_overrides(32, ["warmstart.demos=64"], tiny=False) == ["env.kwargs.n_stages=32"]
    assert horizon_overrides(32, [], tiny=True) == ["env.kwargs.n_stages=32"]
    # the tiny preset sets warmstart.demos (16) too: calibrate's start model at --tiny's scale
    for tiny in ("+experiment@_global_=tiny", "experiment=tiny"):
        assert horizon_overrides(32, [tiny], tiny=False) == ["env.kwargs.n_stages=32"]
    assert horizon_overrides(32, ["experiment=tiny_other"], tiny=False)[-1] == "warmstart.demos=1000"


def test_report_horizons_cli_renders_and_rejects(tmp_path):
    short = horizon_sweep(tmp_path / "n8", 8, {"grpo": [0.5, 0.6, 0.7], "ppo": [0.4, 0.4, 0.7]})
    done = run_entry("experiments.report.horizons", [str(short), "--out", str(tmp_path / "out")], cwd=ROOT)
    assert done.returncode == 0 and (tmp_path / "out" / "horizons.png").is_file(), done.stderr
    bad = run_entry("experiments.report.horizons", [str(tmp_path / "none")], cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("report: no run directories")


@pytest.mark.slow
def test_compare_runs_one_sweep_per_horizon_then_the_horizon_report(tmp_path):
    done = run_entry("experiments.compare", ["--preset", "horizon", "--horizons", "4,6", "--methods", "grpo,ppo",
                                             "--tiny", "--logger", "none", "--sweep-dir", str(tmp_path / "sweep")],
                     cwd=ROOT, sweeps_in_process=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for h in (4, 6):
        assert (tmp_path / "sweep" / f"n{h}" / "report.md").is_file()
    text = (tmp_path / "sweep" / "horizons.md").read_text()
    assert "| 4 |" in text and "| 6 |" in text and (tmp_path / "sweep" / "horizons.png").is_file()


def test_the_compaction_cap_of_a_checked_64_decision_cell_lets_its_demonstrations_finish():
    """Why :data:`COMPACTION_CAP_HORIZON_CHECKED`: at 64 decisions with check lines, the default cap
    of 8 compactions leaves the rest of an episode in one growing segment that reaches the policy's
    512-id window before the 64 stages end (every demonstration stops at ``token_budget``); with the
    cap :func:`horizon_overrides` sets (16) each demonstration ends by its submit."""
    from experiments.runtime.config import compose_config, validate
    from experiments.runtime.warmstart import demonstrations

    def stops(*extra):
        over = ["experiment=compare_horizon", "++env.kwargs.check_prob=1", "logger.group=t", "run_dir=unused", *extra]
        c = validate(compose_config([*over, *horizon_overrides(64, over, tiny=False), "warmstart.demos=2"]))
        return [(t.stop_reason, len(t.segments)) for t in demonstrations(c)]

    # 64 fixes, a check line after each: 16 segments within the window (one per ~4 decisions)
    assert stops() == [("submitted_failed", 16)] * 2
    assert stops("compression.max_compactions=8") == [("token_budget", 9)] * 2
