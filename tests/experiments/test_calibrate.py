"""`python -m experiments.calibrate`: the floor / ceiling table, Wilson intervals, fixed-seed numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from algos.metrics import binomial_confidence_interval
from entry import run_entry
from experiments.calibrate.scripted import CEILING_TARGET, FLOOR_AGENTS, FLOOR_TARGET, calibrate, checks

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--episodes", "20", "--seed", "3", "--difficulties", "easy", "hard", "--mistake-rates", "0.03"]
ROW = re.compile(
    r"^(?P<env>\S+)\s+(?P<difficulty>\w+)\s+(?P<agent>\w+)\s+(?P<role>\w+)\s+(?P<faults>on|off)\s+"
    r"(?P<mistake>-|\d\.\d{3})\s+(?P<episodes>\d+)\s+(?P<masked>\d+)\s+(?P<successes>\d+)/(?P<scored>\d+)\s+"
    r"(?P<success>\d\.\d{3})\s+\[(?P<low>\d\.\d{3}), (?P<high>\d\.\d{3})\]\s+(?P<reward>\d\.\d{3})\s+(?P<hack>\d\.\d{3})\s+"
    r"(?P<flagged>\d\.\d{3})\s+(?P<turns>\d+\.\d{2})\s+(?P<tool_s>\d+\.\d)$"
)


@pytest.mark.slow
def test_calibrate_cli_prints_floor_ceiling_and_checks_with_fixed_seed_numbers():
    done = run_entry("experiments.calibrate", ARGS, cwd=ROOT)  # `python -m`, in this process (tests/entry.py)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    lines = out.strip().split("\n")
    assert lines[0].startswith("calibration: 20 episodes per row, seed 3, split heldout")
    # 2 difficulties x (oracle + 1 noisy + the floor agents) + 3 LongHorizon rows
    rows = [ROW.match(line) for line in lines[3:3 + 2 * (2 + len(FLOOR_AGENTS)) + 3]]
    assert all(rows), lines
    got = {(m["difficulty"], m["agent"]): m for m in rows}
    for m in rows:
        k, n = int(m["successes"]), int(m["scored"])
        assert int(m["episodes"]) == 20 and n == 20 - int(m["masked"])
        assert float(m["success"]) == round(k / n, 3)
        low, high = binomial_confidence_interval(k, n, 0.95)
        assert (float(m["low"]), float(m["high"])) == (round(low, 3), round(high, 3))
    assert got[("easy", "oracle")]["role"] == "ceiling" and got[("easy", "oracle")]["faults"] == "off"
    assert got[("easy", "noisy_oracle")]["mistake"] == "0.030" and got[("easy", "noisy_oracle")]["faults"] == "on"
    assert {a for (d, a), m in got.items() if m["role"] == "floor" and d == "easy"} == set(FLOOR_AGENTS)
    # fixed seed -> fixed numbers (regression anchors)
    assert [got[(d, "oracle")]["successes"] for d in ("easy", "hard")] == ["20", "20"]
    assert got[("easy", "noisy_oracle")]["successes"] == "17" and got[("hard", "noisy_oracle")]["successes"] == "2"
    assert all(int(got[("easy", a)]["successes"]) <= 1 for a in FLOOR_AGENTS)
    assert got[("default", "oracle")]["successes"] == "20" and got[("default", "random")]["successes"] == "0"
    assert got[("default", "forgetful")]["successes"] == "15"  # forgets what it tried: runs out of turns
    assert all(got[(d, "fit_visible")]["reward"] == "0.000" for d in ("easy", "hard"))  # fitting earns no reward
    assert lines[-2] == ("check easy: ceiling 1.000 >= 0.95 ok | floor max 0.050 (blind_enumerate) <= 0.10 ok | "
                         "fitting reward 0.000 <= 0.01 ok")
    assert lines[-1].startswith("check hard: ceiling 1.000 >= 0.95 ok | floor max 0.000")


def test_checks_flag_a_weak_ceiling_or_a_strong_floor():
    rows = calibrate(["easy"], episodes=10, seed=0, mistake_rates=(), long_horizon=False)
    assert [r.role for r in rows] == ["ceiling"] + ["floor"] * len(FLOOR_AGENTS)
    assert checks(rows)[0].endswith("ok") and "FAIL" not in checks(rows)[0]
    from dataclasses import replace

    weak = [replace(rows[0], successes=9)] + rows[1:]  # 9/10 < 0.95
    strong = rows[:1] + [replace(rows[1], successes=2)] + rows[2:]  # 2/10 > 0.10
    assert f"ceiling 0.900 >= {CEILING_TARGET:.2f} FAIL" in checks(weak)[0]
    assert f"<= {FLOOR_TARGET:.2f} FAIL" in checks(strong)[0]
    fit = next(i for i, r in enumerate(rows) if r.agent == "fit_visible")
    paid = rows[:fit] + [replace(rows[fit], rewarded=1)] + rows[fit + 1:]  # 1/10 = 0.1 > 0.01
    assert "fitting reward 0.100 <= 0.01 FAIL" in checks(paid)[0] and "fitting reward 0.000 <= 0.01 ok" in checks(rows)[0]
