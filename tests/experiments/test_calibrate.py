"""`python -m experiments.calibrate`: table format, Wilson intervals, fixed-seed numbers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from algos.metrics import binomial_confidence_interval
from experiments.calibrate import calibrate, format_levels

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--episodes", "20", "--seed", "3", "--difficulties", "easy", "hard",
        "--agents", "oracle", "noisy_oracle", "empty_submit"]
ROW = re.compile(
    r"^(?P<difficulty>\w+)\s+(?P<agent>\w+)\s+(?P<mistake>-|\d\.\d{3})\s+(?P<episodes>\d+)\s+(?P<masked>\d+)\s+"
    r"(?P<successes>\d+)/(?P<scored>\d+)\s+(?P<success>\d\.\d{3})\s+\[(?P<low>\d\.\d{3}), (?P<high>\d\.\d{3})\]\s+"
    r"(?P<hacked>\d\.\d{2})\s+(?P<turns>\d+\.\d{2})\s+(?P<tool_s>\d+\.\d)$"
)


@pytest.mark.slow
def test_calibrate_cli_prints_the_table_with_fixed_seed_numbers():
    out = subprocess.run([sys.executable, "-m", "experiments.calibrate", *ARGS], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.strip().split("\n")
    assert lines[0].startswith("BugFix calibration: 20 episodes per row, seed 3, split train")
    assert lines[1].split()[:3] == ["difficulty", "agent", "mistake"] and "95% CI" in lines[1]
    rows = [ROW.match(line) for line in lines[3:9]]
    assert all(rows), lines[3:9]
    got = {(m["difficulty"], m["agent"]): m for m in rows}
    assert set(got) == {(d, a) for d in ("easy", "hard") for a in ("oracle", "noisy_oracle", "empty_submit")}
    for m in rows:
        k, n = int(m["successes"]), int(m["scored"])
        assert int(m["episodes"]) == 20 and n == 20 - int(m["masked"])
        assert float(m["success"]) == round(k / n, 3)
        low, high = binomial_confidence_interval(k, n, 0.95)
        assert (float(m["low"]), float(m["high"])) == (round(low, 3), round(high, 3))
    assert got[("easy", "noisy_oracle")]["mistake"] == "0.030" and got[("easy", "oracle")]["mistake"] == "-"
    # fixed seed -> fixed numbers (regression anchors)
    assert f'{got[("easy", "oracle")]["successes"]}/{got[("easy", "oracle")]["scored"]}' == "20/20"
    assert f'{got[("hard", "oracle")]["successes"]}/{got[("hard", "oracle")]["scored"]}' == "17/20"
    assert f'{got[("hard", "noisy_oracle")]["successes"]}/{got[("hard", "noisy_oracle")]["scored"]}' == "4/19"
    assert got[("hard", "empty_submit")]["successes"] == "0"
    assert lines[9].startswith("levels (noisy_oracle): ~0.98: easy 1.000")


def test_calibrate_function_matches_and_names_the_levels():
    rows = calibrate(["easy", "hard"], ["noisy_oracle"], episodes=20, seed=3)
    assert [(r.difficulty, r.successes, r.scored) for r in rows] == [("easy", 20, 20), ("hard", 4, 19)]
    levels = format_levels(rows)
    assert "~0.98: easy" in levels and "~0.20: hard" in levels
