"""experiments.value_ceiling: the branch bookkeeping on real rollouts, the CLI on a real PPO run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from entry import run_entry
from experiments.probes.critic_probe import PointData
from experiments.probes.value_ceiling import (bootstrap, branch, forced_prefix, load_run, measure_points, sampled_tokens, turn_of,
                                       turn_rewards)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory, shared_warmstart_cache):
    """A learn_tiny PPO run of 2 updates (tutorial tasks, the BC start model writes real tool calls)."""
    d = tmp_path_factory.mktemp("vc")
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    proc = run_entry("experiments.train", ["experiment=learn_tiny", "algo=ppo", "budget.amount=16", "eval.tasks=2",
                                           f"run_dir={d / 'run'}", f"warmstart.cache_dir={shared_warmstart_cache}"], cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return d / "run"


def test_points_prefixes_and_branch_returns(ppo_run):
    torch.set_num_threads(1)
    c, policy, critic = load_run(ppo_run)
    trajs, points, ev_all = measure_points(c, policy, critic, rollouts=8, seed=0)
    data = PointData(trajs, c.algo.value_level, c.algo.gamma)
    assert len(points) == int((data.layout.mask & torch.tensor([t.terminated for t in trajs])[:, None]).sum())
    for p in points:
        t = trajs[p.traj]
        # gamma 1: a point's Monte Carlo return is the sum of its turn's and the later turns' rewards
        assert p.ret == pytest.approx(sum(turn_rewards(t)[p.turn:]))
        prefix = forced_prefix(t, p.segment, p.col)
        assert list(prefix) == sampled_tokens(t)[:len(prefix)]
        seg = t.segments[p.segment]
        assert seg.action_mask[p.col] == 1 and len(prefix) == sum(seg.action_mask[:p.col])
        assert turn_of(t, p.segment, p.col) == p.turn
    # the first point of every trajectory is its first sampled token: nothing forced, turn 0
    firsts = [p for p in points if p.col == min(q.col for q in points if q.traj == p.traj)]
    assert all(forced_prefix(trajs[p.traj], p.segment, p.col) == () and p.turn == 0 for p in firsts)
    # branching the LAST point of a trajectory from every sampled token but its final one
    last = max((p for p in points if p.traj == points[0].traj), key=lambda p: p.col)
    returns, valid = branch(c, policy, trajs, [last], branches=3, seed=0)
    # (branch raises unless every branch replayed the trajectory token by token up to the point)
    assert returns.shape == (1, 3) and valid.dtype == torch.bool


def test_cli_prints_and_writes_the_ceiling(ppo_run, tmp_path):
    out = tmp_path / "vc.json"
    proc = run_entry("experiments.value_ceiling", [str(ppo_run), "--rollouts", "16", "--points", "40", "--branches", "3",
                                                  "--boot", "50", "--out", str(out)], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "EV* (true value, ceiling)" in proc.stdout and "critic EV / EV*" in proc.stdout
    r = json.loads(out.read_text())
    assert r["branches"] == 3 and r["rollouts"] == 16 and 2 <= r["points"] <= 40
    assert r["ceiling"] <= 1.0 and r["points_all"] >= r["points"]


def test_the_bootstrap_resamples_whole_trajectories():
    seen = []
    lo, hi = bootstrap(lambda i: seen.append(i.tolist()) or float(len(i)), [[0, 1, 2], [3]], 200, seed=0)
    # two clusters drawn with replacement: {A, A} -> 6 indices, {A, B} -> 4, {B, B} -> 2
    assert {len(x) for x in seen} == {2, 4, 6} and (lo, hi) == (2.0, 6.0)
    assert all(x.count(0) == x.count(1) == x.count(2) for x in seen)  # a trajectory's points go together


@pytest.mark.parametrize("argv, message", [
    (["--branches", "1"], "--branches=1 invalid; allowed: an int >= 2"),
    (["--points", "0"], "--points=0 invalid; allowed: an int >= 2"),
])
def test_bad_arguments_are_one_line_errors(ppo_run, argv, message):
    proc = run_entry("experiments.value_ceiling", [str(ppo_run), *argv], cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr


def test_a_directory_without_a_run_is_an_error(tmp_path):
    proc = run_entry("experiments.value_ceiling", [str(tmp_path)], cwd=ROOT)
    assert proc.returncode == 2 and f"run_dir={tmp_path} has no config.yaml" in proc.stderr
