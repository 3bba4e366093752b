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
from experiments.compare.job import TINY_OVERRIDES
from experiments.probes.band import START_AGENT, band_checks, start_model_overrides
from experiments.probes.calibrate import Row

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
    overrides = [*TINY_OVERRIDES, f"warmstart.cache_dir={tmp_path}"]
    done = run_entry("experiments.calibrate", ["--episodes", "4", "--difficulties", "easy", "--mistake-rates", "0.1",
                                               "--horizons", "4", "--start-model", "--", *overrides], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().split("\n")
    (start,) = [line.split() for line in lines if line.startswith("LongHorizon-v3") and f" {START_AGENT} " in line]
    (info,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/warmstart.json")]
    ev = info["start_eval"]
    k, n = round(ev["eval/success"] * ev["eval/episodes"]), ev["eval/episodes"]
    assert n == 4  # TINY_OVERRIDES: warmstart.eval_tasks 2 x eval.samples_per_task 2
    assert start[:3] == ["LongHorizon-v3", "stages=4", START_AGENT] and start[8] == f"{k}/{n}"
    low, high = binomial_confidence_interval(k, n, 0.95)
    assert " ".join(start[10:12]) == f"[{low:.3f}, {high:.3f}]"
    assert lines[-1].startswith(f"check band LongHorizon-v3 stages=4: start model {k / n:.3f} [{low:.3f}, {high:.3f}]")


def test_calibrate_refuses_overrides_without_start_model_and_bad_overrides_before_playing():
    done = run_entry("experiments.calibrate", ["--horizons", "8", "--", "eval.tasks=2"], cwd=ROOT)
    assert done.returncode == 2 and "without --start-model" in done.stderr.strip().splitlines()[-1]
    done = run_entry("experiments.calibrate", ["--horizons", "8", "--start-model", "--", "eval.tasks=zero"], cwd=ROOT)
    assert done.returncode == 2 and "--start-model config:" in done.stderr.strip().splitlines()[-1]
    assert done.stdout == ""  # refused before any episode: no table
