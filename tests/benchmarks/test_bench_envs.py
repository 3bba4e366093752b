"""`python -m benchmarks envs`: steps/s next to FrozenLake-v1 and the ratio."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import envs
from benchmarks import cli
from benchmarks import envs as bench

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_envs_cli_prints_the_ratio_within_target():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "envs", "--steps", "3000", "--repeats", "3",
         "--env", envs.BUGFIX_ID],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    lines = out.strip().split("\n")
    assert "FrozenLake-v1" in lines[0] and "median over repeats" in lines[0]
    assert lines[1].split()[:3] == ["env", "driver", "steps/s"] and "ratio" in lines[1]
    m = re.match(r"^agentrl/BugFix-v2\s+noisy_oracle_driver\s+(\d+)\s+(\d+)\s+(\d+\.\d+)x\s+<= 8x (ok|OVER)$", lines[3])
    assert m, lines[3]
    env_rate, base_rate, ratio = int(m[1]), int(m[2]), float(m[3])
    assert env_rate > 0 and base_rate > 0 and ratio > 0
    # the verdict names the target (a BugFix step costs at most 5 FrozenLake steps); whether this
    # machine meets it right now is the benchmark's output, not a test (the ratio is the median of
    # per-repeat ratios, so it moves with whatever else runs on the cores)
    assert m[4] == ("ok" if ratio <= 5.0 else "OVER")


@pytest.mark.skipif(importlib.util.find_spec("envs.long_horizon") is None,
                    reason="envs/long_horizon.py not written yet: bench every id once it exists")
def test_bench_covers_every_registered_env_id():
    results = bench.bench_envs(envs.ENV_IDS, n_steps=300, repeats=1)
    assert [r.env_id for r in results] == list(envs.ENV_IDS)
    assert all(r.steps_per_second > 0 and r.ratio > 0 for r in results)
    # an env whose spec has scripted agents replays its noisy oracle; the others random words
    drivers = {s.id: "noisy_oracle_driver" if s.scripted_agents else "random_words_driver"
               for s in envs.SPECS if s.agents == 1}
    assert {r.env_id: r.driver for r in results} == drivers


def test_a_broken_env_is_an_error_not_a_skip(monkeypatch):
    def broken(env_id, **kwargs):
        raise ModuleNotFoundError("No module named 'envs.nothing'")

    monkeypatch.setattr(bench.envs, "make", broken)
    with pytest.raises(ModuleNotFoundError):
        bench.bench_envs([envs.BUGFIX_ID], n_steps=10, repeats=1)


def test_drivers_record_replayable_episodes():
    env = envs.make(envs.BUGFIX_ID)
    episodes = bench.noisy_oracle_driver(env, 200, seed=5)
    assert sum(len(a) for _, _, a in episodes) >= 200
    steps, seconds = bench.time_env(env, episodes, 200)
    assert 200 <= steps < 200 + max(len(a) for _, _, a in episodes) and seconds > 0  # whole episodes
    words = bench.random_words_driver(env, 100, seed=0)
    assert words and all(isinstance(a, str) for _, _, acts in words for a in acts)


def test_bench_envs_does_not_import_the_training_stack():
    code = ("import sys; from benchmarks import cli; "
            "cli.main(['envs', '--steps', '50', '--repeats', '1', '--env', 'agentrl/BugFix-v2']); "
            "assert 'torch' not in sys.modules and 'benchmarks.train' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)


def test_subcommands_are_a_registry(monkeypatch, capsys):
    assert list(cli.SUBCOMMANDS)[:2] == ["envs", "train"]
    calls = []

    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--n", type=int, default=1)

    def run(args: argparse.Namespace) -> int:
        calls.append(args.n)
        return 0

    monkeypatch.setitem(cli.SUBCOMMANDS, "later", cli.Subcommand("a later benchmark", add, run))
    assert cli.main(["later", "--n", "3"]) == 0 and calls == [3]
    with pytest.raises(SystemExit):
        cli.main(["nope"])
