"""`python -m experiments.calibrate --start-model`: the horizon preset's start model beside the
scripted floor and ceiling of each LongHorizon-v3 horizon, and the band check."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import envs
from algos.metrics import binomial_confidence_interval
from entry import run_entry
from experiments.calibrate import band as band_module
from experiments.calibrate.band import (START_AGENT, ZERO_SHOT_AGENT, band_checks, bugfix_band_checks,
                                        bugfix_start_model_config, start_model_overrides)
from experiments.calibrate.scripted import Row
from experiments.compare.job import TINY_PRESET

ROOT = Path(__file__).resolve().parents[2]


def v3_row(agent: str, role: str, successes: int, scored: int = 100) -> Row:
    return Row(envs.LONG_HORIZON_V3_ID, "stages=8", agent, role, True, None, scored, 0, successes, successes, 0, 0,
               10.0, 1.0)


def band(start: int, floor: int, oracle: int) -> list[str]:
    return band_checks([v3_row("oracle", "ceiling", oracle), v3_row("random", "floor", 0),
                        v3_row("forgetful", "floor", floor), v3_row(START_AGENT, "start", start)])


def test_band_check_asks_start_in_range_floor_gap_and_oracle():
    # start 40/100 in [0.15, 0.60]; floor 20/100 = 0.40 - 0.20 >= 0.10; oracle 96/100 >= 0.95
    (line,) = band(start=40, floor=20, oracle=96)
    low, high = binomial_confidence_interval(40, 100, 0.95)
    assert line == (f"check band LongHorizon-v3 stages=8: start model 0.400 [{low:.3f}, {high:.3f}] in [0.15, 0.60] ok | "
                    f"floor max 0.200 (forgetful) <= start - 0.10 ok | oracle 0.960 >= 0.95 ok")
    assert "0.10 ok" in band(start=40, floor=30, oracle=96)[0]  # gap exactly 0.10 passes
    assert "start - 0.10 FAIL" in band(start=40, floor=31, oracle=96)[0]  # gap 0.09
    assert "[0.15, 0.60] FAIL" in band(start=14, floor=0, oracle=96)[0]  # 0.14 < 0.15
    assert "[0.15, 0.60] FAIL" in band(start=61, floor=0, oracle=96)[0]  # 0.61 > 0.60
    assert "oracle 0.940 >= 0.95 FAIL" in band(start=40, floor=0, oracle=94)[0]
    assert band_checks([replace(v3_row("oracle", "ceiling", 100))]) == []  # no start row, no band line


def test_start_model_config_is_the_horizon_presets_with_scaled_demos():
    assert start_model_overrides(32)[-2:] == ["env.kwargs.n_stages=32", "warmstart.demos=1000"]  # 32000 / 32
    assert start_model_overrides(32, ["warmstart.demos=16"])[-1] == "env.kwargs.n_stages=32"  # the user's demos stay


@pytest.mark.slow
def test_calibrate_start_model_row_is_the_warm_starts_own_evaluation(tmp_path):
    overrides = [TINY_PRESET, f"warmstart.cache_dir={tmp_path}"]
    done = run_entry("experiments.calibrate", ["--episodes", "4", "--difficulties", "easy", "--mistake-rates", "0.1",
                                               "--horizons", "4", "--start-model", "--zero-shot", "--", *overrides],
                     cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().split("\n")
    v3 = [line.split() for line in lines if line.startswith("LongHorizon-v3")]
    (start,) = [row for row in v3 if row[2] == START_AGENT]
    # the zero-shot row comes right before: the same policy untrained (random init) on the same 4
    # attempts, which writes no valid 6-action episode
    assert v3[v3.index(start) - 1][2:3] + v3[v3.index(start) - 1][8:9] == [ZERO_SHOT_AGENT, "0/4"]
    (info,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/warmstart.json")]
    ev = info["start_eval"]
    k, n = round(ev["eval/success"] * ev["eval/episodes"]), ev["eval/episodes"]
    assert n == 4  # the tiny preset: warmstart.eval_tasks 2 x warmstart.eval_samples_per_task 2
    assert start[:3] == ["LongHorizon-v3", "stages=4", START_AGENT] and start[8] == f"{k}/{n}"
    low, high = binomial_confidence_interval(k, n, 0.95)
    assert " ".join(start[10:12]) == f"[{low:.3f}, {high:.3f}]"
    assert lines[-1].startswith(f"check band LongHorizon-v3 stages=4: start model {k / n:.3f} [{low:.3f}, {high:.3f}]")


def test_calibrate_refuses_overrides_without_start_model_and_bad_overrides_before_playing():
    done = run_entry("experiments.calibrate", ["--horizons", "8", "--", "eval.tasks=2"], cwd=ROOT)
    assert done.returncode == 2 and "without --start-model" in done.stderr.strip().splitlines()[-1]
    done = run_entry("experiments.calibrate", ["--horizons", "8", "--zero-shot"], cwd=ROOT)
    assert done.returncode == 2 and "--zero-shot given without --start-model" in done.stderr.strip().splitlines()[-1]
    done = run_entry("experiments.calibrate", ["--horizons", "8", "--start-model", "--", "eval.tasks=zero"], cwd=ROOT)
    assert done.returncode == 2 and "--start-model config:" in done.stderr.strip().splitlines()[-1]
    assert done.stdout == ""  # refused before any episode: no table


# ---- the BugFix reading band ----------------------------------------------------------------------
def bugfix_row(agent: str, role: str, successes: int, scored: int = 100) -> Row:
    return Row(envs.BUGFIX_ID, "reading", agent, role, False, None, scored, 0, successes, successes, 0, 0, 5.0, 1.0)


def reading_band(oracle: int, floor: int, start: int | None = None) -> list[Row]:
    rows = [bugfix_row("oracle", "ceiling", oracle), bugfix_row("blind_enumerate", "floor", 0),
            bugfix_row("blind_constants", "floor", floor)]
    return rows + ([bugfix_row(START_AGENT, "start", start)] if start is not None else [])


def test_reading_band_check_asks_floor_at_most_015_oracle_095_and_start_015_above_the_floor():
    (line,) = bugfix_band_checks(reading_band(oracle=100, floor=4, start=30))
    low, high = binomial_confidence_interval(4, 100, 0.95)
    assert line.startswith(f"check band reading: floor max 0.040 [{low:.3f}, {high:.3f}] (blind_constants) <= 0.15 ok")
    s_low, s_high = binomial_confidence_interval(30, 100, 0.95)
    assert line.endswith(f"start model 0.300 [{s_low:.3f}, {s_high:.3f}] >= floor + 0.15 ok") and "FAIL" not in line
    assert "start model" not in bugfix_band_checks(reading_band(oracle=100, floor=4))[0]  # no start row: no start part
    assert "(blind_constants) <= 0.15 FAIL" in bugfix_band_checks(reading_band(oracle=100, floor=16))[0]
    assert "oracle 0.940 [" in (weak := bugfix_band_checks(reading_band(oracle=94, floor=4))[0]) and weak.endswith("0.95 FAIL")
    assert bugfix_band_checks(reading_band(oracle=100, floor=4, start=18))[0].endswith(">= floor + 0.15 FAIL")
    assert bugfix_band_checks(reading_band(oracle=100, floor=4, start=19))[0].endswith(">= floor + 0.15 ok")  # lead 0.15
    assert bugfix_band_checks([replace(r, difficulty="easy") for r in reading_band(100, 50)]) == []  # not a band set


def test_calibrate_exits_non_zero_and_prints_fail_on_a_planted_broken_reading_band(monkeypatch, capsys):
    monkeypatch.setattr(band_module, "calibrate", lambda *a, **k: reading_band(oracle=100, floor=40))
    assert band_module.main(["--difficulties", "reading", "--no-long-horizon", "--episodes", "1"]) == 1
    assert capsys.readouterr().out.strip().split("\n")[-1].startswith("check band reading: floor max 0.400")
    monkeypatch.setattr(band_module, "calibrate", lambda *a, **k: reading_band(oracle=100, floor=4))
    assert band_module.main(["--difficulties", "reading", "--no-long-horizon", "--episodes", "1"]) == 0


def test_start_model_of_a_band_difficulty_is_the_main_jobs_preset_on_it():
    c = bugfix_start_model_config("reading", ["warmstart.demos=16"])
    assert c.env.kwargs["difficulty"] == "reading" and c.warmstart.demos == 16
    assert c.budget.amount == 1280 and c.eval.tasks == 210  # compare_small's


# ---- the main job's graded band (a task mixture: start model in the middle, on every warm-start seed)
def graded_rows(starts: list[int], unhinted_floor: int = 2) -> list[Row]:
    def row(label, agent, role, successes):
        return Row(envs.BUGFIX_ID, label, agent, role, False, None, 100, 0, successes, successes, 0, 0, 5.0, 1.0)

    rows = [row("graded", "oracle", "ceiling", 99), row("graded", "blind_constants", "floor", 6)]
    rows += [row("graded/reading", "oracle", "ceiling", 100), row("graded/reading", "blind_constants", "floor", 7),
             row("graded/reading_unhinted", "oracle", "ceiling", 98),
             row("graded/reading_unhinted", "blind_constants", "floor", unhinted_floor)]
    return rows + [row("graded", f"{START_AGENT}_s{k}", "start", s) for k, s in enumerate(starts)]


def test_graded_band_asks_every_family_floor_and_oracle_and_every_seeds_start_in_the_middle():
    (line,) = bugfix_band_checks(graded_rows([50, 56, 62]))
    assert line.startswith("check band graded: floor max 0.060 [")
    assert "| reading floor max 0.070 [" in line and "| reading_unhinted oracle 0.980 [" in line
    # three start models 0.50 / 0.56 / 0.62 in [0.35, 0.65]; spread 0.62 - 0.50 = 0.12 <= 0.15
    assert " in [0.35, 0.65] ok | start spread 0.120 over 3 warm-start seed(s) <= 0.15 ok" in line
    assert "FAIL" not in line
    assert "in [0.35, 0.65] FAIL" in bugfix_band_checks(graded_rows([50, 56, 66]))[0]  # 0.66 above the range
    assert "start spread 0.160 over 3 warm-start seed(s) <= 0.15 FAIL" in bugfix_band_checks(graded_rows([36, 45, 52]))[0]
    assert "reading_unhinted floor max 0.160 [" in (bad := bugfix_band_checks(graded_rows([50], unhinted_floor=16))[0])
    assert "(blind_constants) <= 0.15 FAIL" in bad


def test_a_mixture_prints_a_row_per_family_from_the_same_episodes():
    from experiments.calibrate.scripted import family_rows

    def info(family, verified, turn=4):
        return {"family": family, "masked": False, "verified": verified, "train_reward": float(verified),
                "hack_flags": {}, "turn": turn, "tool_seconds": 2.0}

    infos = [info("reading", 1), info("reading_unhinted", 0, 6), info("reading", 1), info("reading", 0)]
    mix, reading, unhinted = family_rows(envs.BUGFIX_ID, "graded", "oracle", "ceiling", False, None, infos)
    # 2 of 3 reading episodes, 0 of 1 unhinted, 2 of 4 in all; unhinted's mean turns 6
    assert (mix.difficulty, mix.successes, mix.scored) == ("graded", 2, 4)
    assert (reading.difficulty, reading.successes, reading.scored) == ("graded/reading", 2, 3)
    assert (unhinted.difficulty, unhinted.successes, unhinted.mean_turns) == ("graded/reading_unhinted", 0, 6.0)
    assert family_rows(envs.BUGFIX_ID, "reading", "oracle", "ceiling", False, None, infos[:1])[0].difficulty == "reading"


def test_warmstart_seeds_need_start_model(capsys):
    with pytest.raises(SystemExit) as e:
        band_module.main(["--difficulties", "graded", "--no-long-horizon", "--warmstart-seeds", "0", "1"])
    assert e.value.code == 2 and "--warmstart-seeds given without --start-model" in capsys.readouterr().err


def test_a_mixtures_start_model_gets_a_row_per_family_from_its_evaluation():
    from experiments.calibrate.band import family_start_rows

    ev = {"eval/success": 0.5, "eval/family_success/reading": 0.75, "eval/family_scored/reading": 8,
          "eval/family_success/reading_unhinted": 0.0, "eval/family_scored/reading_unhinted": 4}
    reading, unhinted = family_start_rows(envs.BUGFIX_ID, "graded", "start_model_s1", ev)
    # 0.75 of 8 scored episodes = 6 successes; 0 of 4
    assert (reading.difficulty, reading.agent, reading.successes, reading.scored) == ("graded/reading", "start_model_s1", 6, 8)
    assert (unhinted.difficulty, unhinted.successes, unhinted.scored) == ("graded/reading_unhinted", 0, 4)
    assert family_start_rows(envs.BUGFIX_ID, "reading", START_AGENT, {"eval/success": 0.5}) == []


@pytest.mark.slow
def test_the_graded_band_command_prints_family_rows_and_a_start_model_per_warm_start_seed(tmp_path):
    # docs/results.md's band command at tiny scale: 4 episodes per scripted row, two 16-demo warm starts
    overrides = [TINY_PRESET, f"warmstart.cache_dir={tmp_path}"]
    done = run_entry("experiments.calibrate", ["--episodes", "4", "--difficulties", "graded", "--mistake-rates", "0.2",
                                               "--no-long-horizon", "--start-model", "--warmstart-seeds", "0", "1",
                                               "--", *overrides], cwd=ROOT)
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("BugFix-v2")]
    labels = {(r[1], r[2]) for r in rows}
    for label in ("graded", "graded/reading", "graded/reading_unhinted"):
        assert {(label, "oracle"), (label, "start_model_s0"), (label, "start_model_s1")} <= labels
    # 4 episodes: tasks 0, 1, 2, 3 -> families reading, reading_unhinted, reading, reading
    assert [r[6] for r in rows if r[2] == "oracle"] == ["4", "3", "1"]
    (band,) = [line for line in done.stdout.splitlines() if line.startswith("check band graded:")]
    assert "over 2 warm-start seed(s)" in band and "| reading_unhinted oracle " in band
    assert done.returncode == (1 if "FAIL" in band else 0), done.stderr[-2000:]
    assert len(list(tmp_path.glob("*/warmstart.json"))) == 2  # one warm start per seed
